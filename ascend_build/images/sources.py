"""Source builds: builder images (`invoke builder`), and torch_npu / Ascend apex wheels
compiled inside them with the upstream entry points, collected into a wheel cache
keyed by source revision, builder image and Python."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from .. import engine as eng
from ..engine import interrupts
from ..engine.network import check as check_network
from ..errors import BuildFailed, UserError
from ..matrix import BuilderCell, Matrix
from ..platforms import host as host_platform
from . import steps
from .baseimage import advice, debian_base, local_pattern
from .kinds import BUILDER, content_tag, readable_tag
from .options import Site
from .render import builder_dockerfile, net_setup


@dataclass(frozen=True)
class SourceKind:
    name: str
    entry: str          # the upstream build script, called with --python=X.Y
    dist: str           # where it leaves the wheel
    wheel_prefix: str


SOURCE_KINDS = {
    # torch_npu: `bash ci/build.sh --python=3.9` leaves dist/torch_npu-*.whl
    "torch_npu": SourceKind("torch_npu", "ci/build.sh", "dist", "torch_npu-"),
    # Ascend apex: `bash scripts/build.sh --python=3.9` leaves apex/dist/apex-*+ascend*.whl
    "apex": SourceKind("apex", "scripts/build.sh", "apex/dist", "apex-"),
}
IGNORED = {".git", "build", "dist", "__pycache__", ".eggs"}


# ---------------------------------------------------------------------------- builders

def builder_tag(repository: str, bcell: BuilderCell) -> str:
    return readable_tag(repository, bcell.name, bcell.target)


def build_builder(matrix: Matrix, bcell: BuilderCell, site: Site, engine: eng.Engine | None,
                  repository: str = BUILDER.repository) -> str:
    """Build, test and tag a builder image; returns its tag."""
    check_network(site.net)
    rendered = builder_dockerfile(matrix, bcell.stack, bcell.flavor)
    dockerfile = steps.current_dockerfile(rendered)
    wanted = bcell.flavor.image.replace("{arch}", bcell.arch)      # the matrix's base, for --base-image
    if site.debootstrap and wanted not in site.base_images:
        suite = matrix.debootstrap_suite(wanted)
        if not suite:
            raise UserError(f"--debootstrap makes Debian bases; builder {bcell.flavor.name} ({wanted}) is not one. "
                            + advice(matrix, wanted, bcell.stack, bcell.platform, task="builder"))
        site = replace(site, base_images={**site.base_images, wanted: local_pattern(suite)})
    build_args = {"BASE_IMAGE": site.base(wanted, bcell.target),
                  "PYTHONS": " ".join(bcell.pythons)}
    content = content_tag(rendered.text, build_args, {})
    # The venvs made on the build machine for the image's machine when cross-building
    # (as the runtime's pip steps): torch unpacked and byte-compiled without qemu.
    here = host_platform()
    host_args = site.pip_args(bcell.target, wanted, bcell.flavor.image.replace("{arch}", here.arch) if here else None)
    print("python packages: pip runs " + (f"on the build machine ({here}) for {bcell.arch}, no qemu"
                                          if host_args["PIP_ON"] == "native" else f"in the image ({bcell.platform})"))
    tags = BUILDER.tags(repository, bcell.name, content, bcell.target)
    work = site.work / f"builder-{bcell.name}-{bcell.target.suffix}"
    ctx = work / "context"
    ctx.mkdir(parents=True, exist_ok=True)
    shutil.copy2(Path(__file__).with_name("pip_for_target.py"), ctx / "pip_for_target.py")
    with steps.secrets(site.net) as secrets:
        req = eng.BuildRequest(dockerfile=dockerfile, context=ctx, platform=bcell.platform,
                               build_args={**build_args, **host_args}, secrets=secrets,
                               labels=BUILDER.labels(bcell, content, build_args["BASE_IMAGE"]),
                               iidfile=work / "image-id", network=site.network, no_cache=site.no_cache)
        if engine is None or site.dry:
            print(f"# builder {bcell.name}: build unless {tags.readable} exists")
            steps.show_dry(engine or eng.Engine("docker", "docker", "buildx", "?"), req, tags, BUILDER)
            return tags.readable
        what = f"builder {bcell.name} ({bcell.platform})"
        test = lambda image: steps.run_image_tests(image, matrix.path, engine, suite=BUILDER.suite)  # noqa: E731
        if not site.no_cache and steps.reuse(engine, tags, content, what, site.retest, test):
            return tags.readable
        suite = matrix.debootstrap_suite(wanted)
        make = (lambda ref, platform: debian_base(engine, suite, platform, ref)) if site.debootstrap and suite else None
        said = advice(matrix, wanted, bcell.stack, bcell.platform, task="builder")
        steps.check_base(engine, build_args["BASE_IMAGE"], bcell.platform, said, make)
        if host_args["PIP_ON"] == "native":
            steps.check_base(engine, host_args["BUILD_BASE_IMAGE"], str(here), said, make)
        steps.build_test_tag(engine, req, what, tags, work / "build.log", test, keep_failed=site.keep_failed)
        return tags.readable


def _image_id(engine: eng.Engine, ref: str) -> str | None:
    out = subprocess.run(engine.command("image", "inspect", "--format", "{{.Id}}", ref), capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


# ---------------------------------------------------------------------------- sources

@dataclass(frozen=True)
class Checkout:
    path: Path
    revision: str       # git commit, or a content hash of a plain tree
    origin: str


def parse_source(text: str) -> tuple[str, str | None]:
    """`PATH`, or `URL@REF` / `URL#REF` (the ref after the last slash)."""
    if Path(text).exists():
        return str(Path(text).resolve()), None
    head, sep, tail = text.rpartition("/")
    for mark in ("#", "@"):
        if mark in tail:
            name, ref = tail.split(mark, 1)
            return f"{head}{sep}{name}", ref
    return text, None


def default_source(matrix: Matrix, kind: str, stack_name: str) -> tuple[str, str]:
    src = matrix.sources[kind]
    if kind == "torch_npu":
        return src["repo"], matrix.stacks[stack_name].torch_npu_branch
    return src["repo"], src["ref"]


def tree_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part in IGNORED or part.endswith(".egg-info") for part in rel.parts) or not path.is_file():
            continue
        digest.update(str(rel).encode() + b"\0" + oct(path.stat().st_mode & 0o777).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return "tree-" + digest.hexdigest()[:24]


def checkout(location: str, ref: str | None, cache: Path) -> Checkout:
    path = Path(location)
    if path.is_dir() and ref is None:
        return Checkout(path.resolve(), tree_hash(path), str(path.resolve()))
    dest = cache / "sources" / hashlib.sha256(f"{location}@{ref}".encode()).hexdigest()[:16]
    if not (dest / ".git").is_dir():
        # Clone beside the destination (same file system), then rename into place.
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".clone-", dir=dest.parent))
        cmd = ["git", "clone", "--depth", "1"] + (["--branch", ref] if ref else []) + [location, str(tmp)]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0 and ref:
            # A commit, not a branch or tag: fetch it by id.
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            steps = [["git", "init", "-q", str(tmp)], ["git", "-C", str(tmp), "fetch", "--depth", "1", location, ref],
                     ["git", "-C", str(tmp), "checkout", "-q", "FETCH_HEAD"]]
            for step in steps:
                out = subprocess.run(step, capture_output=True, text=True)
                if out.returncode != 0:
                    break
        if out.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise UserError(f"cannot fetch {location}{'@' + ref if ref else ''}: {out.stderr.strip()[-300:]}\n"
                            f"Pass a local checkout instead (--torch-npu-src PATH / --apex-src PATH).")
        with interrupts.deferred():
            try:
                os.replace(tmp, dest)
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
                if not (dest / ".git").is_dir():      # not a concurrent run that got there first
                    raise
    rev = subprocess.run(["git", "-C", str(dest), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    return Checkout(dest, rev, f"{location}@{ref}" if ref else location)


# ---------------------------------------------------------------------------- wheels

@dataclass(frozen=True)
class WheelRequest:
    kind: str
    stack: str | None = None
    flavor: str | None = None
    python: str | None = None
    platform: str | None = None
    source: str | None = None      # PATH or URL@REF; default from the matrix


def wheel_cache(cache: Path, kind: str) -> Path:
    return cache / "wheels" / kind


def find_cached(cache: Path, kind: str, torch: str, python: str, arch: str) -> Path | None:
    """The newest cached wheel of `kind` built for this torch, Python and arch."""
    best: tuple[float, Path] | None = None
    for meta_path in wheel_cache(cache, kind).glob("*/meta.json"):
        if meta_path.parent.name.startswith("."):
            continue                    # a build's scratch folder, not a published entry
        meta = json.loads(meta_path.read_text())
        if (meta["torch"], meta["python"], meta["arch"]) == (torch, python, arch):
            wheel = meta_path.parent / meta["wheel"]
            if wheel.is_file() and (best is None or meta_path.stat().st_mtime > best[0]):
                best = (meta_path.stat().st_mtime, wheel)
    return best[1] if best else None


def build_wheel(matrix: Matrix, req: WheelRequest, site: Site, engine: eng.Engine | None,
                builder_repository: str = BUILDER.repository) -> Path:
    """A torch_npu or apex wheel compiled in the stack's builder, from the wheel cache
    when the same source, builder and Python made one before."""
    kind = SOURCE_KINDS[req.kind]
    check_network(site.net)
    bcell = _builder_cell(matrix, req)
    python = bcell.pythons[0]
    location, ref = parse_source(req.source) if req.source else default_source(matrix, req.kind, bcell.stack.name)
    if site.dry or engine is None:
        print(f"# {kind.name}: source {location}{'@' + ref if ref else ''}, builder {bcell.flavor.name}, "
              f"python {python}")
        build_builder(matrix, bcell, site, engine, builder_repository)
        print(f"# then: docker run <builder> bash {kind.entry} --python={python}; collect {kind.dist}/*.whl")
        return wheel_cache(site.cache_dir, req.kind) / "<key>" / f"{kind.wheel_prefix}*.whl"

    src = checkout(location, ref, site.cache_dir)
    tag = builder_tag(builder_repository, bcell)
    if _image_id(engine, tag) is None:
        print(f"{kind.name}: builder {tag} not present; building it first")
        build_builder(matrix, bcell, site, engine, builder_repository)
    builder_id = _image_id(engine, tag)
    if builder_id is None:
        raise BuildFailed(f"{kind.name}: builder {tag} is not in the engine's store after its build")
    key = hashlib.sha256(f"{kind.name}\0{src.revision}\0{builder_id}\0{python}".encode()).hexdigest()[:16]
    out_dir = wheel_cache(site.cache_dir, req.kind) / key
    cached = sorted(out_dir.glob(f"{kind.wheel_prefix}*.whl"))
    if cached:
        print(f"{kind.name}: reusing {cached[0]} (source {src.revision[:16]}, builder {builder_id[:19]}, "
              f"python {python})")
        return cached[0]
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=out_dir.parent))
    try:
        wheel = _compile(engine, kind, src, bcell, tag, tmp, site, site.work / f"{kind.name}-{key}.log")
        _publish(tmp, out_dir, kind, {"kind": kind.name, "wheel": wheel.name, "revision": src.revision,
                                      "source": src.origin, "builder": tag, "builder_id": builder_id,
                                      "python": python, "arch": bcell.arch, "torch": bcell.stack.torch,
                                      "gcc": bcell.gcc})
    finally:
        with interrupts.deferred():
            shutil.rmtree(tmp, ignore_errors=True)
    wheel = sorted(out_dir.glob(f"{kind.wheel_prefix}*.whl"))[0]
    print(f"{kind.name}: built {wheel}")
    return wheel


def _builder_cell(matrix: Matrix, req: WheelRequest) -> BuilderCell:
    """The builder for one wheel: the request's Python, else the stack's default where the
    builder has it, else the builder's first."""
    stack = req.stack or matrix.defaults["torch"]
    full = matrix.builder_cell(stack, req.flavor, None, req.platform)
    python = req.python or (full.stack.python_default if full.stack.python_default in full.pythons else full.pythons[0])
    if python in full.pythons:
        return replace(full, pythons=(python,))
    return matrix.builder_cell(stack, req.flavor, python, req.platform)        # raises with the choices


def _compile(engine: eng.Engine, kind: SourceKind, src: Checkout, bcell: BuilderCell, tag: str, out: Path,
             site: Site, log: Path) -> Path:
    """Run the upstream entry point in a builder container; the one wheel it leaves."""
    python = bcell.pythons[0]
    log.parent.mkdir(parents=True, exist_ok=True)
    script = (f"{net_setup()} set -eu; cp -a /src/. /work/; cd /work; export PATH=/opt/venvs/py{python}/bin:$PATH; "
              f"echo \"compiler: $($CC --version | head -n1)\"; ccache --zero-stats >/dev/null; "
              f"bash {kind.entry} --python={python}; ccache --show-stats | grep -E 'cache (hit|miss)' || true; "
              f"cp {kind.dist}/{kind.wheel_prefix}*.whl /out/")
    network = ["--network", site.network] if site.network else []
    # The site's proxy, index and CA, as in image builds: read-only files for this run
    # only (a container of the builder, removed after; the wheel carries none of them).
    with steps.secrets(site.net) as secrets:
        mounts = [arg for sid, path in sorted(secrets.items()) for arg in ("-v", f"{path}:/run/secrets/{sid}:ro")]
        cmd = engine.command("run", "--rm", "--platform", bcell.platform, *network, *mounts,
                             "-v", f"{src.path}:/src:ro", "-v", f"{out}:/out", "-v", "ascend-build-ccache:/ccache",
                             tag, "bash", "-c", script)
        print(f"{kind.name}: building from {src.origin} ({src.revision[:16]}) in {tag}; log: {log}", flush=True)
        code = eng.run(cmd, None, log)
    wheels = sorted(out.glob(f"{kind.wheel_prefix}*.whl"))
    if code != 0 or len(wheels) != 1:
        raise BuildFailed(f"{kind.name} build failed (exit {code}, {len(wheels)} wheels); nothing was cached "
                          f"and nothing tagged. Log: {log}")
    return wheels[0]


def _publish(tmp: Path, out_dir: Path, kind: SourceKind, meta: dict) -> None:
    """Move a finished wheel into the cache: whole, or not at all."""
    with interrupts.deferred():
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        try:
            os.replace(tmp, out_dir)          # atomic: the cache never holds half a result
        except OSError:
            if not any(out_dir.glob(f"{kind.wheel_prefix}*.whl")):
                raise                         # not a concurrent build that published this key
