"""Source builds: builder images (`invoke builder`), and torch_npu / Ascend apex wheels
compiled inside them with the upstream entry points, collected into a wheel cache
keyed by source revision, builder image and Python."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from .. import console
from .. import engine as eng
from ..engine import credentials, interrupts
from ..engine.network import check as check_network
from ..errors import BuildFailed, UserError
from ..inputs.baseimage import advice, made_here, on_local_base, plan_line
from ..inputs.durations import takes_minutes
from ..inputs.options import Site, on_build_machine
from ..inputs.trees import ARCHIVES, Checkout, Expected, checkout, parse_source, repository_with
from ..locking import torch_index
from ..locking.torch_index import check_mirror
from ..matrix import BuilderCell, Matrix, Stack
from ..platforms import host as host_platform
from . import steps
from .kinds import BUILDER, BuilderFacts, content_tag, readable_tag
from .progress import Progress
from .render import Rendered, builder_dockerfile, net_setup

KIND = BUILDER      # this module is the builder kind (catalog.py)


def render(matrix: Matrix) -> list[Rendered]:
    """Every builder Dockerfile: each torch stack on each builder flavor that serves it."""
    return [builder_dockerfile(matrix, stack, stack.torch, b) for stack in matrix.stacks.values() if stack.torch
            for b in matrix.builders.values() if b.serves(stack)]


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


# ---------------------------------------------------------------------------- builders

CompileOn = Literal["native", "cross"]


def compile_on(bcell: BuilderCell, site: Site) -> CompileOn:
    """Where a builder's compilers run: "cross" (the flavor's cross compiler, on the build
    machine's arch) for an aarch64 builder made on another machine that has one, unless
    --emulated; else "native" (the image's own gcc: natively, or under qemu)."""
    here = host_platform()
    if bcell.arch != "aarch64" or here is None or here.arch == bcell.arch or site.emulated or not bcell.flavor.cross:
        return "native"
    return "cross"


def builder_tag(repository: str, bcell: BuilderCell, site: Site) -> str:
    return readable_tag(repository, _builder_name(bcell, compile_on(bcell, site)), bcell.target)


def _builder_name(bcell: BuilderCell, compiling: CompileOn) -> str:
    return bcell.name + ("-cross" if compiling == "cross" else "")


def build_builder(matrix: Matrix, bcell: BuilderCell, site: Site, engine: eng.Engine,
                  repository: str = BUILDER.repository) -> str:
    """Build, test and tag a builder image; returns its tag."""
    check_network(site.net)
    rendered = builder_dockerfile(matrix, bcell.stack, bcell.torch, bcell.flavor)
    dockerfile = steps.current_dockerfile(rendered)
    wanted = bcell.flavor.image.replace("{arch}", bcell.arch)      # the matrix's base, for --base-image
    site = _debootstrapped(matrix, bcell, site, wanted)
    cross = bcell.flavor.cross
    build_args = {"BASE_IMAGE": site.base(wanted, bcell.target),
                  "PYTHONS": " ".join(bcell.pythons)}
    # The site's mirror (--torch-index-url) of the index the stack names, per arch, as for runtimes.
    check_mirror(site.net.torch_index_url)
    for arch in ("x86_64", "aarch64"):
        src = torch_index.source(bcell.stack, arch, site.net.torch_index_url)
        if src.index and src.index != src.named:
            build_args[f"TORCH_INDEX_URL_{arch.upper()}"] = src.index
    here = host_platform()
    compiling = compile_on(bcell, site)
    if compiling == "cross" and here is not None:
        build_args |= {"COMPILE_ON": "cross", "CROSS_BASE_IMAGE": site.base(cross, here)}
        console.say(f"compilers: gcc-{bcell.gcc} for aarch64 on the build machine ({here}), from {cross}; "
                    f"Python, CMake and make run in the image (--emulated: everything under qemu)")
    elif bcell.target.emulated() and not cross and not site.emulated:
        fast = [n for n, b in matrix.builders.items() if b.cross and b.offers(bcell.gcc)]
        console.say(f"compilers: builder {bcell.flavor.name} has no cross compiler (builders.{bcell.flavor.name}.cross): "
                    f"compiling under qemu, about 6 times slower (hours for a real torch_npu tree on 2 cores)"
                    + (f"; --flavor {fast[0]} cross-compiles with gcc {bcell.gcc} on the build machine" if fast
                       else "; no builder flavor cross-compiles with its gcc"))
    content = content_tag(rendered.text, build_args, {})
    # The venvs made on the build machine for the image's machine when cross-building
    # (as the runtime's pip steps): torch unpacked and byte-compiled without qemu.
    host_args = site.pip_args(bcell.target, wanted, bcell.flavor.image.replace("{arch}", here.arch) if here else None)
    if "\nARG OS_ON=" not in rendered.text:
        host_args.pop("OS_ON")      # an OS step of its own, in the image (only the runtime's first stages have both)
    console.say("python packages: pip runs " + (f"on the build machine ({here}) for {bcell.arch}, no qemu"
                                          if host_args["PIP_ON"] == "native" else f"in the image ({bcell.platform})"))
    name = _builder_name(bcell, compiling)
    tags = BUILDER.tags(repository, name, content, bcell.target)
    work = site.work / f"builder-{name}-{bcell.target.suffix}"
    ctx = work / "context"
    ctx.mkdir(parents=True, exist_ok=True)
    shutil.copy2(Path(__file__).with_name("pip_for_target.py"), ctx / "pip_for_target.py")
    with steps.secrets(site.net) as secrets:
        req = eng.BuildRequest(dockerfile=dockerfile, context=ctx, platform=bcell.platform,
                               build_args={**build_args, **host_args}, secrets=secrets,
                               labels=BUILDER.labels(BuilderFacts(bcell, content, build_args["BASE_IMAGE"])),
                               iidfile=work / "image-id", network=site.net.mode, no_cache=site.no_cache)
        if site.dry:
            console.show(f"# builder {bcell.name}: build unless {tags.readable} exists")
            console.show("\n".join(_long_steps(matrix, bcell, site, {**build_args, **host_args}, wanted, tags.readable)))
            steps.show_dry(engine, req, tags, BUILDER)
            return tags.readable
        what = f"builder {bcell.name} ({bcell.platform})"
        test = lambda image: steps.run_image_tests(image, matrix.path, engine, kind=KIND)  # noqa: E731
        if not site.no_cache and steps.reuse(engine, tags, content, what, site.retest, test):
            return tags.readable
        _check_bases(matrix, bcell, site, engine, {**build_args, **host_args}, wanted)
        steps.build_test_tag(engine, req, what, tags, work / "build.log", test, keep_failed=site.keep_failed)
        return tags.readable


def _long_steps(matrix: Matrix, bcell: BuilderCell, site: Site, args: dict[str, str], wanted: str,
                tag: str) -> list[str]:
    """A dry plan's lines for the builder's steps that take minutes, each with its time here:
    the bases debootstrap would make (as _check_bases decides), then the builder itself."""
    here = str(host_platform())
    bases = [("BASE_IMAGE", bcell.platform, wanted)]
    bases += [("BUILD_BASE_IMAGE", here, wanted)] if on_build_machine(args) else []
    bases += [("CROSS_BASE_IMAGE", here, bcell.flavor.cross or "")] if args.get("COMPILE_ON") == "cross" else []
    made = {args[key]: (platform, image) for key, platform, image in bases
            if site.debootstrap and matrix.debootstrap_suite(image)}
    return ([plan_line(image, platform, ref) for ref, (platform, image) in made.items()]
            + [takes_minutes(f"the builder image {bcell.name}, cold", "builder", f"once: later builds reuse {tag}")])


def _compile_minutes(kind: SourceKind, bcell: BuilderCell, site: Site) -> str:
    """A dry plan's line for a wheel's compile, with its time here (qemu's where it runs under qemu)."""
    compiling = compile_on(bcell, site)
    qemu = compiling == "native" and bcell.target.emulated()
    how = "under qemu" if qemu else "with its cross compiler" if compiling == "cross" else "natively"
    return takes_minutes(f"compiling {kind.name} in builder {bcell.flavor.name} {how}",
                         kind.name + (" under qemu" if qemu else ""),
                         "once: the wheel cache keeps it for this source, builder and Python")


def _debootstrapped(matrix: Matrix, bcell: BuilderCell, site: Site, wanted: str) -> Site:
    """--debootstrap: the builder's Debian base (and its cross compiler's) made here,
    under local names, unless the site maps them."""
    if not site.debootstrap:
        return site
    if wanted not in site.base_images:
        suite = matrix.debootstrap_suite(wanted)
        if not suite:
            raise UserError(f"--debootstrap makes Debian bases; builder {bcell.flavor.name} ({wanted}) is not one. "
                            + advice(matrix, wanted, bcell.stack, bcell.platform, task="builder"))
        site = on_local_base(site, wanted, suite)
    cross = bcell.flavor.cross
    cross_suite = matrix.debootstrap_suite(cross) if cross else None
    if cross and cross_suite:
        site = on_local_base(site, cross, cross_suite)
    return site


def _check_bases(matrix: Matrix, bcell: BuilderCell, site: Site, engine: eng.Engine, args: dict[str, str],
                 wanted: str) -> None:
    """Every base the build needs is here or can be had (pulled, or made by debootstrap)."""
    def maker(image: str):
        return made_here(engine, site, matrix.debootstrap_suite(image) if image else None)
    said = advice(matrix, wanted, bcell.stack, bcell.platform, task="builder")
    here = str(host_platform())
    steps.check_base(engine, args["BASE_IMAGE"], bcell.platform, said, maker(wanted))
    if on_build_machine(args):
        steps.check_base(engine, args["BUILD_BASE_IMAGE"], here, said, maker(wanted))
    if args.get("COMPILE_ON") == "cross":
        steps.check_base(engine, args["CROSS_BASE_IMAGE"], here, said, maker(bcell.flavor.cross))


# ---------------------------------------------------------------------------- sources

def default_source(matrix: Matrix, kind: str, st: Stack) -> tuple[str, str]:
    """The upstream repository and the ref a release builds from: torch_npu's release tag
    (torch_npu_tags; never its branch, which moves on), apex's pinned commit."""
    src = matrix.sources[kind]
    if kind == "torch_npu":
        tag = matrix.torch_npu_tags.get(st.package)
        if not tag:
            raise UserError(_no_tag(matrix, st.package))
        return src.repo, tag.tag
    return src.repo, src.ref


def check_source(option: str, text: str | None, submodules: tuple[str, ...] | list[str] = ()) -> None:
    """A wheel's source as given (--src, --torch-npu-src, --apex-src; None or `upstream`: the
    matrix's) and its --submodule-src, refused as the real run would refuse them, but before
    anything is planned: a dry run ends as the real one would. Only what the value itself
    shows; the tree's commit and version, and a URL that does not answer, are the real run's."""
    if text is not None and text != "upstream":
        location, ref = parse_source(text)
        path = Path(location)
        shown = f"{option} {credentials.redact(text)!r}"      # a URL may carry a token
        if path.is_file() and not path.name.endswith(ARCHIVES + (".bundle",)):
            raise UserError(f"{shown}: a source is a folder (a checkout or a plain tree), a git bundle (.bundle) "
                            f"or a tarball ({', '.join(ARCHIVES)})")
        if not path.exists():
            # What git would be asked to clone: it would read a value that begins with - as an
            # option of its own (--upload-pack=... runs a command), and an empty ref as HEAD.
            for value, what in ((location, "a source URL"), (ref, "a ref")):
                if value is not None and value.startswith("-"):
                    raise UserError(f"{shown}: {credentials.redact(value)!r} is not {what}: a value that begins "
                                    f"with - would be read as an option of git")
            if ref is not None and not ref.strip():
                raise UserError(f"{shown}: no ref after the URL; give URL@REF (a tag or a commit), or the URL alone")
            if not re.match(r"[^/]*:", location):     # no scheme (https://) nor scp's host: (git@host:path)
                raise UserError(f"{shown}: no such file or folder, and not a URL (URL@REF)")
    for given in submodules:
        if not Path(given).exists():
            raise UserError(f"--submodule-src {given!r}: no such file or folder")


def _no_tag(matrix: Matrix, version: str) -> str:
    near = sorted(v for v in matrix.torch_npu_tags if v.split(".post")[0] == version.split(".post")[0])
    return (f"no release tag builds torch_npu {version} (imported.yaml torch_npu_tags, from `invoke update "
            f"--pytorch-git`)" + (f"; the tags build {', '.join(near)}" if near else "")
            + ". Pass --src with a tree that builds it, or take the released wheel")


def expected(matrix: Matrix, kind: str, st: Stack) -> Expected:
    """What the source of `kind` for this stack must be."""
    if kind == "torch_npu":
        tag = matrix.torch_npu_tags.get(st.package)
        if not tag:
            return Expected(f"torch_npu {st.package}", version=st.package)
        return Expected(f"torch_npu {st.package} (tag {tag.tag})", tag.commit, st.package, dict(tag.submodules))
    src = matrix.sources[kind]
    return Expected(f"apex at {src.ref[:12]}", src.ref if len(src.ref) == 40 else None)


# ---------------------------------------------------------------------------- wheels

@dataclass(frozen=True)
class WheelRequest:
    kind: str
    stack: Stack | None = None     # None: the matrix's default line
    flavor: str | None = None
    python: str | None = None
    platform: str | None = None
    source: str | None = None      # PATH or URL@REF; default from the matrix
    submodule_sources: tuple[str, ...] = ()     # bundles / tarballs / checkouts of its submodules


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


def build_wheel(matrix: Matrix, req: WheelRequest, site: Site, engine: eng.Engine,
                builder_repository: str = BUILDER.repository) -> Path:
    """A torch_npu or apex wheel compiled in the stack's builder, from the wheel cache
    when the same source, builder and Python made one before."""
    kind = SOURCE_KINDS[req.kind]
    check_network(site.net)
    bcell = _builder_cell(matrix, req, site.emulated)
    python = bcell.pythons[0]
    location, ref = parse_source(req.source) if req.source else default_source(matrix, req.kind, bcell.stack)
    apex = matrix.sources["apex"]
    if kind.name == "apex" and (location, ref) == (apex.repo, apex.ref) and not apex.builds_for(python):
        # the pinned apex's script would refuse it after the builder's build: say so first
        raise UserError(f"apex: Ascend apex {apex.ref[:7]} (matrix.yaml sources.apex) builds for Python "
                        f"{', '.join(apex.pythons)}, not {python}: choose one of them (--python), or give an apex tree "
                        f"whose scripts/build.sh takes {python} (--src; --apex-src to build)")
    if site.dry:
        console.show(f"# {kind.name}: source {credentials.redact(location)}{'@' + ref if ref else ''}, "
                     f"builder {bcell.flavor.name}, python {python}")
        build_builder(matrix, bcell, site, engine, builder_repository)
        console.show(f"# then: in a container of the builder, bash {kind.entry} --python={python}; collect {kind.dist}/*.whl")
        console.show(_compile_minutes(kind, bcell, site))
        return wheel_cache(site.cache_dir, req.kind) / "<key>" / f"{kind.wheel_prefix}*.whl"

    want = expected(matrix, req.kind, bcell.stack)
    given = [Path(p) for p in req.submodule_sources]
    src = checkout(location, ref, site.cache_dir, want, [] if kind.name == "apex" else given)
    check_python(kind, src, python)
    extra = apex_inputs(matrix, src, given, site.cache_dir, bcell) if kind.name == "apex" else ApexInputs()
    console.say(f"{kind.name}: source {src.origin}: {want.what}" + (f", commit {want.commit[:12]}" if want.commit else "")
                + "".join(f", {p} {c[:12]}" for p, c in sorted(want.submodules.items())) + " (checked)")
    tag = builder_tag(builder_repository, bcell, site)
    if engine.image_id(tag) is None:
        console.say(f"{kind.name}: builder {tag} not present; building it first")
        build_builder(matrix, bcell, site, engine, builder_repository)
    builder_id = engine.image_id(tag)
    if builder_id is None:
        raise BuildFailed(f"{kind.name}: builder {tag} is not in the engine's store after its build")
    key = hashlib.sha256(f"{kind.name}\0{src.revision}\0{builder_id}\0{python}{extra.key}".encode()).hexdigest()[:16]
    out_dir = wheel_cache(site.cache_dir, req.kind) / key
    cached = sorted(out_dir.glob(f"{kind.wheel_prefix}*.whl"))
    if cached:
        console.say(f"{kind.name}: reusing {cached[0]} (source {src.revision[:16]}, builder {builder_id[:19]}, "
                    f"python {python})")
        return cached[0]
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=out_dir.parent))
    try:
        wheel = _compile(engine, kind, src, bcell, tag, tmp, site, site.work / f"{kind.name}-{key}.log", matrix, extra)
        check_version(kind, wheel, want)
        _publish(tmp, out_dir, kind, {"kind": kind.name, "wheel": wheel.name, "revision": src.revision,
                                      "source": src.origin, "builder": tag, "builder_id": builder_id,
                                      "python": python, "arch": bcell.arch, "torch": bcell.torch.version,
                                      "gcc": bcell.gcc})
    finally:
        with interrupts.deferred():
            shutil.rmtree(tmp, ignore_errors=True)
    wheel = sorted(out_dir.glob(f"{kind.wheel_prefix}*.whl"))[0]
    console.say(f"{kind.name}: built {wheel}")
    return wheel


@dataclass(frozen=True)
class ApexInputs:
    """What an apex build takes beside its tree: NVIDIA apex's repository for its build
    script's `git clone` (offline), and, for a tree whose setup.py compiles against torch_npu,
    the torch_npu wheel installed in the build venv first."""
    mounts: tuple[tuple[Path, str], ...] = ()
    script: str = ""
    key: str = ""


NVIDIA_IN_BUILD = "/nvidia-apex.git"
_PINNED = re.compile(r"git\s+clone\s+(\S*NVIDIA/apex\S*)[\s\S]*?git\s+checkout\s+([0-9a-f]{7,40})")
# Up to Ascend apex 0027c91 the setup.py its patch writes adds torch_npu's include and lib
# folders from the build venv (patch/npu.patch, CppExtension); from d1ac604 (5.0.rc3, 5.0.0)
# it compiles against torch alone, and a build needs no torch_npu (none to fetch offline).
APEX_PATCH = "patch/npu.patch"
_AGAINST_TORCH_NPU = "torch_npu/include"


def apex_inputs(matrix: Matrix, src: Checkout, given: list[Path], cache: Path, bcell: BuilderCell) -> ApexInputs:
    """Ascend apex's scripts/build.sh clones NVIDIA apex and checks out a pinned commit: with
    a bundle or checkout of NVIDIA apex given, that clone reads it instead (git's insteadOf),
    so the script runs as upstream wrote it; the commit is checked first. Where the tree's
    setup.py compiles against torch_npu, it goes into the build venv: the wheel built here for
    this torch and Python, else the released one."""
    entry = (src.path / SOURCE_KINDS["apex"].entry)
    text = entry.read_text(errors="replace") if entry.is_file() else ""
    m = _PINNED.search(text)
    pinned_url, pinned = (m.group(1), m.group(2)) if m else (None, None)
    nvidia = matrix.sources["apex"].nvidia
    if pinned and nvidia and nvidia.ref and not nvidia.ref.startswith(pinned):
        console.say(f"apex: its build script pins NVIDIA apex {pinned}, matrix.yaml sources.apex.nvidia says "
                    f"{nvidia.ref[:12]}: the script's pin is the one built")
    mounts: list[tuple[Path, str]] = []
    script = ""
    key = f"\0nvidia={pinned}"
    if given:
        if not pinned_url:
            raise UserError(f"apex: {entry.name} clones no NVIDIA apex; --submodule-src is for that clone")
        repo = repository_with(given[0], pinned or "", cache, "NVIDIA apex")
        mounts.append((repo, NVIDIA_IN_BUILD))
        script += f"git config --global url.{NVIDIA_IN_BUILD}.insteadOf {shlex.quote(pinned_url)}; "
        console.say(f"apex: NVIDIA apex {pinned} from {given[0]} (its build script's clone reads it; no network)")
    elif pinned_url:
        console.say(f"apex: its build script clones {pinned_url} at {pinned} (online); offline, give a bundle or checkout "
                    f"of it with --submodule-src")
    patch = src.path / APEX_PATCH
    if not (patch.is_file() and _AGAINST_TORCH_NPU in patch.read_text(errors="replace")):
        console.say(f"apex: its setup.py compiles against torch alone ({APEX_PATCH} adds no {_AGAINST_TORCH_NPU}): "
                    f"no torch_npu in the build venv")
        return ApexInputs(tuple(mounts), script, key)
    npu = find_cached(cache, "torch_npu", bcell.torch.version, bcell.pythons[0], bcell.arch)
    if npu is not None:
        mounts.append((npu.parent, "/torch-npu-wheel"))
        script += f"pip install --no-cache-dir --no-deps /torch-npu-wheel/{shlex.quote(npu.name)}; "
        key += f"\0torch_npu={npu.parent.name}"
        console.say(f"apex: torch_npu in the build venv: {npu.name} (built here)")
    else:
        release = bcell.stack.package
        script += f"pip install --no-cache-dir --no-deps torch_npu=={release}; "
        key += f"\0torch_npu={release}"
        console.say(f"apex: torch_npu in the build venv: the released torch_npu {release} (none built here)")
    return ApexInputs(tuple(mounts), script, key)


def check_python(kind: SourceKind, src: Checkout, python: str) -> None:
    """Refuse, before the builder is even started, a Python the tree's script does not take
    (apex at the pinned commit: 3.7 to 3.10)."""
    entry = src.path / kind.entry
    text = entry.read_text(errors="replace") if entry.is_file() else ""
    m = re.search(r"SUPPORTED_PY_VERSION=\(([^)]*)\)", text)
    if m and python not in m.group(1).split():
        raise UserError(f"{kind.name}: {kind.entry} builds for Python {' '.join(m.group(1).split())}, not {python}: "
                        f"pass --python with one of them (and a builder flavor that has it)")


def wheel_version(wheel: Path) -> str:
    return wheel.name.split("-")[1]


def check_version(kind: SourceKind, wheel: Path, want: Expected) -> None:
    """A built torch_npu must be the stack's release: refused (and not cached) otherwise."""
    if kind.name == "torch_npu" and want.version and wheel_version(wheel) != want.version:
        raise BuildFailed(f"torch_npu: the build made {wheel.name}, version {wheel_version(wheel)}, but the stack's "
                          f"is {want.version} ({want.what}); nothing was cached")


def pick_flavor(matrix: Matrix, st: Stack, flavor: str | None, python: str | None, platform: str | None,
                emulated: bool = False) -> str | None:
    """The builder flavor: --flavor when given (or --emulated, which asks for qemu); else the
    stack's own, unless this machine would run it under qemu with no cross compiler and a
    flavor that cross-compiles with the stack's gcc has the Python the build takes: that one,
    said with why (None: the stack's own)."""
    if flavor or emulated:
        return flavor
    if st.torch is None or not matrix.platform(platform).emulated():
        return None
    own = matrix.builders[st.torch.builder]
    if own.cross:
        return None
    want = python or (st.python_default if st.python_default in own.pythons else None)
    for name, b in matrix.builders.items():
        if b.cross and b.serves(st) and (want is None or want in b.pythons):
            console.say(f"builder: {name}, which cross-compiles with gcc {st.torch.gcc} on this "
                        f"{host_platform() or 'build'} machine; the stack's own flavor, {own.name}, has no cross compiler "
                        f"and would compile under qemu, about 6 times slower (--flavor {own.name} for it: a wheel "
                        f"built as upstream builds it)")
            return name
    return None


def _builder_cell(matrix: Matrix, req: WheelRequest, emulated: bool = False) -> BuilderCell:
    """The builder for one wheel (its flavor as pick_flavor says): the request's Python, else
    the stack's default where the builder has it, else the builder's first."""
    stack = req.stack or matrix.stack()
    flavor = pick_flavor(matrix, stack, req.flavor, req.python, req.platform, emulated)
    full = matrix.builder_cell(stack, flavor, None, req.platform)
    python = req.python or (full.stack.python_default if full.stack.python_default in full.pythons else full.pythons[0])
    if python in full.pythons:
        return replace(full, pythons=(python,))
    return matrix.builder_cell(stack, flavor, python, req.platform)        # raises with the choices


# Which compiler runs, on which machine, for which (cc1's ELF machine: 62 x86_64, 183 aarch64).
_COMPILER_SAYS = (
    'cc1="$($CC -print-prog-name=cc1)"; '
    'case "$(od -An -j18 -N2 -tu2 "$cc1" | tr -d " ")" in 62) runs=x86_64 ;; 183) runs=aarch64 ;; *) runs=other ;; esac; '
    'case "$runs" in "$(uname -m)") how="" ;; *) how=", no qemu" ;; esac; '
    'echo "compiler: $($CC --version | head -n1), runs as $runs$how, makes $($CC -dumpmachine) code";')


def offline_settings(matrix: Matrix, kind: SourceKind, src: Checkout) -> tuple[list[str], dict[str, str], list[str]]:
    """The flags, environment and reasons a torch_npu build takes offline (torch_npu_build),
    each flag only where the tree's entry script has it (older tags lack some)."""
    build = matrix.torch_npu_build
    if kind.name != "torch_npu" or not build:
        return [], {}, []
    entry = src.path / kind.entry
    text = entry.read_text(errors="replace") if entry.is_file() else ""
    flags = [f for f in build.flags if f in text]
    env = dict(build.env)
    said = [f"{kind.entry} {' '.join(flags)}" if flags else f"{kind.entry} has none of {' '.join(build.flags)}",
            " ".join(f"{k}={v}" for k, v in env.items())]
    return flags, env, said


def _compile(engine: eng.Engine, kind: SourceKind, src: Checkout, bcell: BuilderCell, tag: str, out: Path,
             site: Site, log: Path, matrix: Matrix | None = None, extra: ApexInputs | None = None) -> Path:
    """Run the upstream entry point in a builder container; the one wheel it leaves."""
    python = bcell.pythons[0]
    extra = extra or ApexInputs()
    log.parent.mkdir(parents=True, exist_ok=True)
    flags, env, said = offline_settings(matrix, kind, src) if matrix else ([], {}, [])
    if said:
        console.say(f"{kind.name}: offline build: {'; '.join(said)} (torchair and Tensorpipe fetch sources while "
                    f"they build; see matrix.yaml torch_npu_build)")
    exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in sorted(env.items()))
    if bcell.flavor.wheel_plat:
        # upstream's setup.py runs auditwheel when AUDITWHEEL_PLAT names a manylinux tag
        exports += f"export AUDITWHEEL_PLAT={bcell.flavor.wheel_plat}_$(uname -m); "
    script = (f"{net_setup()} set -eu; cp -a /src/. /work/; cd /work; export PATH=/opt/venvs/py{python}/bin:$PATH; "
              f"git config --global --add safe.directory '*' 2>/dev/null || true; {exports}{extra.script}"
              f"{_COMPILER_SAYS} ccache --zero-stats >/dev/null; export PYTHONUNBUFFERED=1; "
              f"bash {kind.entry} --python={python}{''.join(' ' + f for f in flags)}; "
              f"ccache --show-stats | grep -i -E 'hit|miss' || true; "
              f"cp {kind.dist}/{kind.wheel_prefix}*.whl /out/")
    progress = Progress(kind.name)
    # The site's proxy, index and CA, as in image builds: read-only files for this run
    # only (a container of the builder, removed after; the wheel carries none of them).
    with steps.secrets(site.net) as secrets:
        mounts = [eng.Mount(str(path), f"/run/secrets/{sid}") for sid, path in sorted(secrets.items())]
        mounts += [eng.Mount(str(host_path), inside) for host_path, inside in extra.mounts]
        mounts += [eng.Mount(str(src.path), "/src"), eng.Mount(str(out), "/out", read_only=False),
                   eng.Mount("ascend-build-ccache", "/ccache", read_only=False)]
        spec = eng.RunSpec(tag, ("bash", "-c", script), platform=bcell.platform, network=site.net.mode,
                           mounts=tuple(mounts))
        console.say(f"{kind.name}: building from {src.origin} ({src.revision[:16]}) in {tag}; log: {log}")
        code = eng.run(engine.run_argv(spec), None, log, show_line=lambda line: _shown(progress, line))
    console.say(progress.summary())
    wheels = sorted(out.glob(f"{kind.wheel_prefix}*.whl"))
    if code != 0 or len(wheels) != 1:
        first = f"\nFirst error: {progress.first_error}" if progress.first_error else ""
        raise BuildFailed(f"{kind.name} build failed (exit {code}, {len(wheels)} wheels); nothing was cached "
                          f"and nothing tagged. Log: {log}{first}")
    return wheels[0]


def _shown(progress: Progress, line: str) -> str | None:
    """A progress line now and then, the first error, and the lines that are not compiler
    calls (the rest is in the log)."""
    said = progress.feed(line)
    if said is not None:
        return said
    quiet = line.startswith(("[", "gcc", "g++", "cc ", "c++", "ccache", "/", "In file included", "x86_64",
                             "aarch64")) or " -c " in line or "warning:" in line or "note:" in line or line.startswith(" ")
    return None if quiet else line


def _publish(tmp: Path, out_dir: Path, kind: SourceKind, meta: dict) -> None:
    """Move a finished wheel into the cache: whole, or not at all."""
    with interrupts.deferred():
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        try:
            os.replace(tmp, out_dir)          # atomic: the cache never holds half a result
        except OSError:
            if not any(out_dir.glob(f"{kind.wheel_prefix}*.whl")):
                raise                         # not a concurrent build that published this key
