"""`invoke build`: resolve a cell, find its packages, stage a build context, build a
candidate (untagged), run the image tests on it, and only then tag it."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .. import engine as eng
from ..engine import interrupts
from ..errors import BuildFailed, PackageError, TestsFailed, UserError
from ..matrix import Cell, Matrix
from ..engine.network import Network, check as check_network, describe as describe_network, secret_files
from .packages import Located as PkgLocated, PackageStore, default_cache, sha256_of, warn_unpinned
from .render import ROOT, runtime_dockerfile

LABEL_PREFIX = "io.ascend-build"


@dataclass
class BuildOptions:
    stack: str | None = None
    os: str | None = None
    python: str | None = None
    chip: str | None = None
    platform: str | None = None
    repository: str = "ascend-runtime"
    packages: list[Path] = field(default_factory=lambda: [Path("packages")])
    cache: Path | None = None
    offline: bool = False
    require_pins: bool = False
    base_images: dict[str, str] = field(default_factory=dict)   # matrix ref -> replacement ({arch} allowed)
    pip_index_url: str | None = None       # may carry credentials: goes in as a secret only
    ca_bundle: Path | None = None          # secret only
    proxy: dict[str, str] = field(default_factory=dict)   # http(s)_proxy, no_proxy: secret only
    network: str | None = None             # "host": RUN steps share the host's network
    wheelhouse: Path | None = None
    torch_npu_wheel: Path | None = None    # a source-built wheel (the builder's seam)
    apex_wheel: Path | None = None
    torch_npu_src: str | None = None       # PATH, URL@REF, or "upstream" (the matrix default)
    apex_src: str | None = None
    builder_flavor: str | None = None      # default: the stack's builder
    cache_registry: str | None = None      # registry repository for layer cache
    no_cache: bool = False                 # rebuild every step
    dry: bool = False
    work: Path = Path(".build")

    @property
    def net(self) -> Network:
        return Network(self.ca_bundle, self.pip_index_url, self.proxy, self.network)


@dataclass
class BuildResult:
    cell: Cell
    image_id: str | None
    tags: list[str]
    log: Path | None
    content_tag: str


def parse_base_images(items: list[str]) -> dict[str, str]:
    mapping = {}
    for item in items:
        if "=" not in item:
            raise UserError(f"--base-image takes FROM=TO (e.g. ubuntu:22.04=mirror.local/ubuntu:22.04), got {item!r}")
        src, dst = item.split("=", 1)
        mapping[src.strip()] = dst.strip()
    return mapping


def base_image(cell: Cell, mapping: dict[str, str]) -> str:
    short = {"aarch64": "arm64", "x86_64": "amd64"}[cell.arch]
    return mapping.get(cell.os.image, cell.os.image).replace("{arch}", short)


def arch_suffix(cell: Cell) -> str:
    return {"aarch64": "arm64", "x86_64": "amd64"}[cell.arch]


def _wheel_names(folder: Path | None) -> list[Path]:
    return sorted(folder.glob("*.whl")) if folder and folder.is_dir() else []


def _check_torch_npu_source(cell: Cell, opts: BuildOptions) -> None:
    if cell.stack.torch_npu_on_pypi or opts.torch_npu_wheel:
        return
    prefix = f"torch_npu-{cell.stack.torch_npu}-"
    if any(w.name.startswith(prefix) for w in _wheel_names(opts.wheelhouse)):
        return
    raise PackageError(f"torch_npu {cell.stack.torch_npu} has no wheel on PyPI (stacks.{cell.stack.name}."
                       f"torch_npu_on_pypi is false); put {prefix}cp{cell.python.replace('.', '')}-*.whl in a "
                       f"folder and pass --wheelhouse DIR, or pass --torch-npu-wheel FILE")


def _stage(cell: Cell, opts: BuildOptions, toolkit: Path, kernels: Path, ctx: Path) -> None:
    """The build context: installers in cann/{toolkit,kernels}, the wheelhouse in wheels/,
    a given torch_npu wheel in torch_npu/, an apex wheel in apex/.
    Hard links when possible: staging a multi-GB installer should not copy it."""
    if ctx.exists():
        shutil.rmtree(ctx)
    for sub, src in (("cann/toolkit", toolkit), ("cann/kernels", kernels)):
        (ctx / sub).mkdir(parents=True)
        _link_or_copy(src, ctx / sub / src.name)
    # One folder per consumer: each RUN mounts only what it installs, so a new torch_npu
    # or apex wheel does not change the cache key of the torch step.
    for folder, wheels in (("wheels", _wheel_names(opts.wheelhouse)), ("torch_npu", [opts.torch_npu_wheel]),
                           ("apex", [opts.apex_wheel])):
        (ctx / folder).mkdir()
        for wheel in filter(None, wheels):
            _link_or_copy(wheel, ctx / folder / wheel.name)


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def content_tag(dockerfile_text: str, build_args: dict[str, str], hashes: dict[str, str]) -> str:
    """An immutable tag from what goes into the image: the rendered Dockerfile, every
    build arg, and the sha256 of every staged file."""
    digest = hashlib.sha256()
    digest.update(dockerfile_text.encode())
    digest.update(json.dumps(build_args, sort_keys=True).encode())
    digest.update(json.dumps(hashes, sort_keys=True).encode())
    return "sha-" + digest.hexdigest()[:16]


def build(matrix: Matrix, opts: BuildOptions, engine_kind: str = "docker", client: str | None = None,
          run_tests=None) -> BuildResult:
    cell = matrix.cell(opts.stack, opts.os, opts.python, opts.chip, opts.platform)
    # The alias, where `images:` marks this very image with one.
    same = lambda c: (c.stack.name, c.os.name, c.python, c.chip, c.platform) == \
        (cell.stack.name, cell.os.name, cell.python, cell.chip, cell.platform)
    cell = dataclasses.replace(cell, alias=next((c.alias for c in matrix.image_cells() if same(c) and c.alias), None))
    rendered = runtime_dockerfile(matrix, cell.stack, cell.os)
    dockerfile = current_dockerfile(rendered)

    # Everything that can be refused is refused before the first docker command.
    _check_torch_npu_source(cell, opts)
    if opts.require_pins and cell.python_source and not cell.python_source.sha256:
        raise PackageError(f"CPython {cell.python_source.version} tarball has no sha256 (pythons."
                           f"\"{cell.python}\".sha256) and --require-pins is set")
    check_network(opts.net)
    for f in (opts.torch_npu_wheel, opts.apex_wheel):
        if f and not Path(f).is_file():
            raise UserError(f"{f}: no such file")
    if opts.wheelhouse and not opts.wheelhouse.is_dir():
        raise UserError(f"--wheelhouse {opts.wheelhouse}: no such folder")
    store = PackageStore(opts.packages, opts.cache or default_cache(), download=not opts.offline)
    located, errors = [], []
    for f in (cell.toolkit, cell.kernels):
        try:
            located.append(_locate(store, f, opts))
        except PackageError as exc:
            errors.append(str(exc))
    if errors:   # report every missing or bad package at once, not one per run
        raise PackageError("\n\n".join(errors))
    toolkit, kernels = located
    warn_unpinned([pkg.file.file for pkg in located if not pkg.pinned]
                  + [n for n in cell.unpinned() if n.startswith("CPython")])
    engine = eng.for_task(engine_kind, client, opts.dry)
    _source_built_wheels(matrix, cell, opts, None if opts.dry else engine)

    build_args = {"BASE_IMAGE": base_image(cell, opts.base_images),
                  "PYTHON_FROM": "source" if cell.python_source else "distro",
                  "ASCEND_CHIP": cell.chip}
    if cell.python_source:
        build_args.update(PYTHON_VERSION=cell.python_source.version, PYTHON_SHA256=cell.python_source.sha256 or "",
                          PYTHON_URLS=" ".join(cell.python_source.urls))
    if opts.torch_npu_wheel:
        build_args["TORCH_NPU_REQUIREMENT"] = f"/tmp/torch_npu/{opts.torch_npu_wheel.name}"
    if opts.apex_wheel:
        build_args["APEX_WHEEL"] = opts.apex_wheel.name
    hashes = {toolkit.path.name: toolkit.sha256, kernels.path.name: kernels.sha256}
    for wheel in _wheel_names(opts.wheelhouse) + [w for w in (opts.torch_npu_wheel, opts.apex_wheel) if w]:
        hashes[wheel.name] = sha256_of(wheel) if wheel.is_file() else "<built at run time>"
    ctag = content_tag(rendered.text, build_args, hashes)
    suffix = arch_suffix(cell)
    tags = [f"{opts.repository}:{cell.name}-{suffix}", f"{opts.repository}:{ctag}-{suffix}"]
    if cell.alias:
        tags.append(f"{opts.repository}:{cell.alias}-{suffix}")
    labels = {
        f"{LABEL_PREFIX}.python": cell.python,
        f"{LABEL_PREFIX}.chip": cell.chip,
        f"{LABEL_PREFIX}.platform": cell.platform,
        f"{LABEL_PREFIX}.content-tag": ctag,
        f"{LABEL_PREFIX}.apex": opts.apex_wheel.name if opts.apex_wheel else "absent",
        f"{LABEL_PREFIX}.cann-packages": f"{toolkit.path.name} {kernels.path.name}",
        "org.opencontainers.image.version": cell.name,
        "org.opencontainers.image.base.name": build_args["BASE_IMAGE"],
    }

    work = opts.work / f"{cell.name}-{suffix}"
    ctx, log, iidfile = work / "context", work / "build.log", work / "image-id"
    secrets_dir = Path(tempfile.mkdtemp(prefix="ascend-build-secrets-"))
    try:
        secrets = secret_files(opts.net, secrets_dir)
        for line in describe_network(opts.net):
            print(line)
        req = eng.BuildRequest(dockerfile=dockerfile, context=ctx, platform=cell.platform,
                               build_args=build_args, secrets=secrets, labels=labels, iidfile=iidfile,
                               cache_ref=cache_ref(engine, opts.cache_registry, f"{cell.name}-{suffix}"),
                               no_cache=opts.no_cache, network=opts.network)
        if opts.dry:
            cmd, env = engine.build_command(req)
            print(f"# stage {toolkit.path} -> {ctx}/cann/toolkit/, {kernels.path} -> {ctx}/cann/kernels/")
            print(eng.show(cmd, env))
            print("# then: pytest tests/image --image <built id>; on success:")
            for tag in tags:
                print(eng.show(engine.command("tag", "<built id>", tag)))
            return BuildResult(cell, None, tags, None, ctag)
        _stage(cell, opts, toolkit.path, kernels.path, ctx)
        image_id = build_test_tag(engine, req, f"{cell.name} ({cell.platform})", tags, log,
                                  lambda image: (run_tests or run_image_tests)(image, matrix.path, engine))
        _copy_manifest(engine, image_id, cell.platform, work / "manifest.txt")
        return BuildResult(cell, image_id, tags, log, ctag)
    finally:
        with interrupts.deferred():     # a second Ctrl-C does not leave secrets behind
            shutil.rmtree(secrets_dir, ignore_errors=True)
            if ctx.exists() and not opts.dry:
                shutil.rmtree(ctx, ignore_errors=True)


@dataclass(frozen=True)
class Outcome:
    image: str
    platform: str
    status: str            # tagged | failed
    detail: str
    log: Path | None


def build_many(matrix: Matrix, cells: list[Cell], base: BuildOptions, engine_kind: str = "docker",
               client: str | None = None) -> list[Outcome]:
    """Build every cell; one failing does not stop the others. Ctrl-C stops them all
    (nothing half-built is tagged) and names the ones not built."""
    outcomes = []
    for index, cell in enumerate(cells):
        opts = dataclasses.replace(base, stack=cell.stack.name, os=cell.os.name, python=cell.python, chip=cell.chip,
                                   platform=cell.platform)
        log = opts.work / f"{cell.name}-{arch_suffix(cell)}" / "build.log"
        log.unlink(missing_ok=True)
        try:
            result = build(matrix, opts, engine_kind, client)
            outcomes.append(Outcome(cell.name, cell.platform, "tagged", result.tags[0], result.log))
        except KeyboardInterrupt:
            if outcomes:
                print("\n" + summary(outcomes), file=sys.stderr)
            rest = [f"{c.name} ({c.platform})" for c in cells[index:]]
            raise interrupts.Interrupted("not built: " + ", ".join(rest)) from None
        except UserError as exc:
            print(f"error: {exc}", file=sys.stderr)
            outcomes.append(Outcome(cell.name, cell.platform, "failed", str(exc).splitlines()[0][:160],
                                    log if log.exists() else None))
    return outcomes


def summary(outcomes: list[Outcome]) -> str:
    from ..matrix.report import table
    return table([{"image": o.image, "platform": o.platform, "status": o.status,
                   "log": str(o.log) if o.log else "-", "detail": o.detail} for o in outcomes])


def cache_ref(engine: eng.Engine, registry: str | None, name: str) -> str | None:
    """Where layer cache lives: with buildx a separate cache tag; with a classic client
    the pushed image itself (inline cache), so the same tag `invoke push` writes."""
    if not registry:
        return None
    return f"{registry}:{name}" if engine.mode == "classic-buildkit" else f"{registry}:buildcache-{name}"


def _source_built_wheels(matrix: Matrix, cell: Cell, opts: BuildOptions, engine: eng.Engine | None) -> None:
    """Fill opts.torch_npu_wheel / opts.apex_wheel from source builds, or apex from the
    wheel cache, and say plainly when the image will have no apex."""
    from .sources import WheelRequest, build_wheel, find_cached
    for kind, src, attr in (("torch_npu", opts.torch_npu_src, "torch_npu_wheel"), ("apex", opts.apex_src, "apex_wheel")):
        if src:
            req = WheelRequest(kind, cell.stack.name, opts.builder_flavor, cell.python, cell.platform,
                               None if src == "upstream" else src)
            setattr(opts, attr, build_wheel(matrix, req, opts, engine))
    if opts.apex_wheel is None:
        cached = find_cached(opts.cache or default_cache(), "apex", cell.stack.torch, cell.python, cell.arch)
        if cached:
            print(f"apex: using the built wheel {cached}")
            opts.apex_wheel = cached
        else:
            print(f"apex: no Ascend apex wheel built for torch {cell.stack.torch} / python {cell.python} / "
                  f"{cell.arch}; the image will have NO apex. Build one with `invoke apex --torch "
                  f"{cell.stack.name} --python {cell.python}` (or pass --apex-src / --apex-wheel).")


def build_test_tag(engine: eng.Engine, req: eng.BuildRequest, what: str, tags: list[str], log: Path,
                   test: Callable[[str], int]) -> str:
    """Build an untagged candidate, test it, and tag it only when the tests pass."""
    assert req.iidfile is not None
    req.iidfile.unlink(missing_ok=True)
    cmd, env = engine.build_command(req)
    print(f"building {what}; log: {log}", flush=True)
    code = eng.run(cmd, env, log)
    if code != 0:
        raise BuildFailed(f"build of {what} failed (exit {code}); nothing was tagged. Log: {log}")
    image_id = req.iidfile.read_text().strip()
    if test(image_id) != 0:
        raise TestsFailed(f"image tests failed for {image_id} ({what}); nothing was tagged. "
                        f"Rerun them with `invoke test --image {image_id}`")
    interrupts.check()                  # one that came between the steps
    with interrupts.deferred():         # all tags or none: an interrupt waits for the last
        for tag in tags:
            if _quiet(engine.command("tag", image_id, tag)) != 0:
                raise UserError(f"could not tag {image_id} as {tag}")
        interrupts.record(f"tagged {tags[0]}")
    print(f"tested and tagged {image_id}:\n  " + "\n  ".join(tags))
    return image_id


MANIFEST = "/usr/local/share/ascend-build/manifest.txt"


def _copy_manifest(engine: eng.Engine, image: str, platform: str, dest: Path) -> None:
    """The image's package manifest, beside the build log."""
    out = subprocess.run(engine.command("run", "--rm", "--platform", platform, "--entrypoint", "cat", image, MANIFEST),
                         capture_output=True, text=True)
    if out.returncode == 0:
        dest.write_text(out.stdout)
        print(f"package manifest: {dest}")
    else:
        print(f"WARNING: could not read {MANIFEST} from {image}: {out.stderr.strip()[:200]}", file=sys.stderr)


def current_dockerfile(rendered) -> Path:
    """The committed Dockerfile, refused when it is not what the matrix renders to."""
    path = ROOT / rendered.path
    if not path.exists() or path.read_text() != rendered.text:
        raise UserError(f"{rendered.path} is missing or stale against the matrix; run `invoke render` first")
    return path


def _locate(store: PackageStore, f, opts: BuildOptions) -> PkgLocated:
    try:
        return store.locate(f, opts.require_pins)
    except PackageError as exc:
        if not opts.dry:
            raise
        # A dry run still shows the commands; the real run would stop here.
        print(f"# NOTE: a real build stops here: {exc}".replace("\n", "\n# "), file=sys.stderr)
        return PkgLocated(f, Path("<missing>") / f.file, "<unknown>", False)


def run_image_tests(image: str, matrix_path: Path, engine: eng.Engine, extra: list[str] | None = None,
                    suite: str | None = None) -> int:
    """The image suite for the image's kind (runtime or builder, from its label)."""
    if suite is None:
        kind = subprocess.run(engine.command("image", "inspect", "--format",
                                             '{{index .Config.Labels "' + LABEL_PREFIX + '.kind"}}', image),
                              capture_output=True, text=True).stdout.strip()
        suite = "builder_image" if kind == "builder" else "image"
    cmd = [sys.executable, "-m", "pytest", str(ROOT / "tests" / suite), "-p", "no:cacheprovider",
           "--image", image, "--matrix", str(matrix_path), "--engine-client", engine.client, "-v",
           *(extra or [])]
    print("$ " + eng.show(cmd), flush=True)
    # Through the engine runner: Ctrl-C reaches pytest, which removes its containers.
    return eng.run(cmd, cwd=ROOT)


def _quiet(cmd: list[str]) -> int:
    """A short engine command that is not interrupted half-way by Ctrl-C (its own
    process group): the caller decides when to stop."""
    return subprocess.run(cmd, start_new_session=True).returncode
