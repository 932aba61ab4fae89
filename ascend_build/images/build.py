"""`invoke build` of a runtime image: everything that can be refused is refused before
the first docker command (matrix, packages, wheels, network settings); then the build
context is staged and the generic steps (steps.py) build an untagged candidate, test it
and only then tag it."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from .. import console, project
from .. import engine as eng
from ..engine import interrupts
from ..engine.network import check as check_network
from ..engine.network import describe as describe_network
from ..errors import BuildFailed, EngineError, PackageError, PackageMissing, UserError
from ..hashing import kind_of, sha256_of
from ..inputs import baseimage
from ..inputs.durations import said, takes_minutes
from ..inputs.options import Inputs, Site, on_build_machine
from ..inputs.packages import Located, PackageStore, warn_unpinned
from ..locking import lock as locks
from ..locking import torch_index
from ..matrix import Cell, Matrix
from ..platforms import host as host_platform
from . import finish, steps
from .kinds import RUNTIME, RuntimeFacts, Tags, content_tag
from .render import Rendered, runtime_dockerfile
from .steps import Built

KIND = RUNTIME      # this module is the runtime kind (catalog.py)


def render(matrix: Matrix) -> list[Rendered]:
    """Every runtime Dockerfile: each stack (those derived from the import too) on each OS the
    matrix allows it."""
    stacks = [*matrix.stacks.values(), *matrix.derived.values()]
    return [runtime_dockerfile(matrix, stack, os) for stack in stacks for os in matrix.os.values()
            if matrix.allows(stack, os)]


@dataclass(frozen=True)
class Plan:
    """One runtime image, every input decided: what `docker build` gets and what it tags."""
    cell: Cell
    rendered: Rendered
    toolkit: Located
    kernels: Located
    nnal: Located | None             # NNAL (ATB), where the cell installs it
    inputs: Inputs
    requirements: dict[str, str]     # lock/<layer>.txt in the context
    locked: Path | None              # the lock they come from, None: not locked
    build_args: dict[str, str]
    host_args: dict[str, str]        # how this machine builds it: not part of the content tag
    content: str
    epoch: int | None                # --reproducible: SOURCE_DATE_EPOCH (part of the content tag)
    tags: Tags
    labels: dict[str, str]
    work: Path

    @property
    def what(self) -> str:
        return f"{self.cell.name} ({self.cell.platform})"


@dataclass(frozen=True)
class Prepared:
    """Everything decided before the engine builds: the plan, and what runs it."""
    plan: Plan
    site: Site
    engine: eng.Engine
    dockerfile: Path
    lock: locks.Lock | None
    stops: tuple[str, ...] = ()      # a dry run: where the real one would stop (it then exits as that would)
    refusal: UserError | None = None  # a dry run: the input a real run refuses first (no lock), planned past


def prepare(matrix: Matrix, cell: Cell, site: Site, inputs: Inputs, engine: eng.Engine) -> Prepared:
    """The runtime image's plan, every input checked (matrix, lock, packages, wheels,
    network settings) before the first engine command."""
    # The matrix's own stack: a cell's choices (--torch-atb, --no-nnal) are build arguments of
    # the committed Dockerfile, not another file.
    rendered = runtime_dockerfile(matrix, cell.matrix_stack, cell.os)
    dockerfile = steps.current_dockerfile(rendered)
    _refuse_early(cell, site, inputs)
    site = _with_debootstrap(matrix, cell, site)
    refusal = None
    try:
        lock, said = _lock(matrix, cell, site)
    except UserError as exc:
        if not site.dry or isinstance(exc, PackageError):
            raise
        # A dry run shows the plan a newcomer asked for, then ends as the real run would.
        refusal, lock, said = exc, None, "python packages: no lock (a real run stops here: see the end)"
    (console.show if site.dry else console.say)(said)      # the plan says which lock: a dry run's too (--quiet)
    torch_src = torch_index.source(cell.stack, cell.arch, site.net.torch_index_url)
    if torch_src.named:
        console.say(torch_src.describe())
    if not site.dry:
        torch_index.reach(torch_src, site.net)     # seconds, before CANN downloads and pip's minutes of retries
    (toolkit, kernels, nnal), stops = _locate_packages(cell, site)
    console.say(engine.describe())
    # After every check of the input: the first to ask the engine anything.
    site = _made_here_before(cell, site, engine)
    if site.epoch is not None:
        cannot = engine.reproducible()
        console.say(f"reproducible: every time in the image is SOURCE_DATE_EPOCH={site.epoch}"
                    + (f"; {cannot}" if cannot else ""))
    console.say(f"python: {cell.python} from " + (f"source (CPython {cell.python_source.version}; {cell.os.name} has "
                f"{cell.os.python})" if cell.python_source else f"{cell.os.name}'s python3 (distro)"))
    inputs = _source_built_wheels(matrix, cell, site, inputs, engine)
    plan = _plan(rendered, cell, site, inputs, (toolkit, kernels, nnal),
                 locks.with_torch_index(_requirements(matrix, cell, lock, inputs), torch_src), lock, engine.kind,
                 torch_src)
    return Prepared(plan, site, engine, dockerfile, lock, tuple(stops), refusal)


def _request(p: Prepared, secrets: dict[str, Path], ctx: Path) -> eng.BuildRequest:
    plan, site = p.plan, p.site
    return eng.BuildRequest(dockerfile=p.dockerfile, context=ctx, platform=plan.cell.platform,
                            build_args={**plan.build_args, **plan.host_args}, secrets=secrets, labels=plan.labels,
                            iidfile=plan.work / "image-id", no_cache=site.no_cache, network=site.net.mode,
                            epoch=plan.epoch, cache_ref=p.engine.cache_ref(site.cache_registry, plan.work.name))


def _say_how(p: Prepared) -> None:
    for line in describe_network(p.site.net):
        console.say(line)
    native = p.plan.host_args["PIP_ON"] == "native"
    console.say("python packages: pip runs " + (f"on the build machine ({host_platform()}) for {p.plan.cell.arch}, no qemu"
                                          if native else f"in the image ({p.plan.cell.platform})"))
    if p.plan.cell.os.family == "apt":
        console.say("OS packages: " + (f"apt fetches and unpacks them on the build machine ({host_platform()}); their "
                                       f"maintainer scripts run in the image ({p.plan.cell.platform})"
                                       if p.plan.host_args.get("OS_ON") == "native"
                                       else f"apt runs in the image ({p.plan.cell.platform})"))


def build(matrix: Matrix, cell: Cell, site: Site, inputs: Inputs, engine: eng.Engine, run_tests=None) -> Built:
    """Build, test and tag one runtime image. An image with the same content tag is here
    already only if it passed its tests when it was tagged (the content tag hashes every
    input): it is taken as it is, in seconds, unless --no-cache or --retest."""
    p = prepare(matrix, cell, site, inputs, engine)
    plan, site, engine, cell = p.plan, p.site, p.engine, p.plan.cell
    ctx = plan.work / "context"
    test = run_tests or partial(steps.run_image_tests, kind=KIND)
    if not site.dry and not site.no_cache:
        reused = steps.reuse(engine, plan.tags, plan.content, plan.what, site.retest,
                             lambda image: test(image, matrix.path, engine))
        if reused:
            # What this build did, where its log would be (CI uploads .build/*/*.log); a
            # real build's build.log beside it stays.
            log = plan.work / "reused.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(f"{plan.what}: nothing built. {plan.tags.content} ({reused}) is here, tested when it was "
                           "tagged from these same inputs; tagged again:\n" + "".join(f"  {t}\n" for t in plan.tags))
            return Built(cell, reused, plan.tags, log, plan.content)
    _say_how(p)
    if not site.dry:
        _check_bases(engine, matrix, cell, plan, site)
    with steps.secrets(site.net, fresh=site.no_cache) as secrets:
        req = _request(p, secrets, ctx)
        if site.dry:
            console.show(f"# stage {plan.toolkit.path} -> {ctx}/cann/toolkit/, {plan.kernels.path} -> {ctx}/cann/kernels/"
                         + (f", {plan.nnal.path} -> {ctx}/cann/nnal/" if plan.nnal else ""))
            layers = ",".join(cell.stack.layers)
            files = f"{{{layers}}}" if len(cell.stack.layers) > 1 else layers     # CANN only: cann.txt alone
            console.show(f"# stage requirements/{files}.txt (the lock without comments) from "
                         + (str(p.lock.where) if p.lock else "nothing: there is no lock (a real run stops here)"
                            if p.refusal else "the matrix's specifiers (unlocked: --unlocked)"))
            for line in _missing_bases(matrix, p) + _long_steps(p):
                console.show(line)
            steps.show_dry(engine, req, plan.tags, RUNTIME)
            return Built(cell, None, plan.tags, None, plan.content, stop=_stop(p))
        try:
            _stage(plan, ctx)
            image_id = steps.build_test_tag(
                engine, req, plan.what, plan.tags, plan.work / "build.log",
                lambda image: test(image, matrix.path, engine),
                lambda image: finish.runtime(engine, image, cell, plan.requirements, plan.tags.readable, plan.work,
                                             _reproducible(engine, plan)).image,
                keep_failed=site.keep_failed)
        finally:
            with interrupts.deferred():     # a second Ctrl-C does not leave the context behind
                shutil.rmtree(ctx, ignore_errors=True)
    return Built(cell, image_id, plan.tags, plan.work / "build.log", plan.content)


def _stop(p: Prepared) -> UserError | None:
    """Where a real build of a dry run's plan stops, as it would end (a CI pre-flight fails
    here too): the first refusal (no lock: 2), else the missing packages (3)."""
    if p.refusal is not None:
        return p.refusal
    if p.stops:
        return PackageError("a real build of this image stops before it starts:\n" + "\n\n".join(p.stops))
    return None


def _missing_bases(matrix: Matrix, p: Prepared) -> list[str]:
    """A dry run's lines for the base images the engine lacks (the image's, and on the fast
    path the build machine's): the real run pulls them first, and stops there (exit 6) where no
    registry serves them; each with what to do. None with --debootstrap (its lines say it
    makes them), nor where no engine answers (a dry run needs none)."""
    plan, site, cell, engine = p.plan, p.site, p.plan.cell, p.engine
    if site.debootstrap:
        return []
    bases = {plan.build_args["BASE_IMAGE"]: cell.platform}
    if plan.host_args["PIP_ON"] == "native":
        bases.setdefault(plan.host_args["BUILD_BASE_IMAGE"], str(host_platform()))
    try:
        if not engine.answers():
            return []
        missing = [(ref, platform) for ref, platform in bases.items() if not engine.exists(ref)]
    except EngineError:
        return []
    if not missing:
        return []
    advice = baseimage.advice(matrix, cell.os.image, cell.stack, cell.platform, chip=cell.chip)
    return [f"# base image {ref} ({platform}) is not in the engine: the real run pulls it first, and stops there "
            f"(exit 6) where no registry serves it." for ref, platform in missing] + [f"#   {advice}"]


def _long_steps(p: Prepared) -> list[str]:
    """A dry plan's lines for its steps that take minutes, each with its time here: the
    bases debootstrap would make (as _check_bases decides), CPython compiled, the image."""
    plan, site, cell = p.plan, p.site, p.plan.cell
    native = on_build_machine(plan.host_args)
    lines = []
    if site.debootstrap and cell.os.suite:
        bases = {plan.build_args["BASE_IMAGE"]: cell.platform}
        if native:
            bases.setdefault(plan.host_args["BUILD_BASE_IMAGE"], str(host_platform()))
        lines += [baseimage.plan_line(cell.os.image, platform, ref) for ref, platform in bases.items()]
    emulated = cell.target.emulated()
    if cell.python_source:
        where = f", for {cell.target.suffix} under qemu" + (" and for the build machine" if native else "")
        lines.append(takes_minutes(f"compiling CPython {cell.python_source.version}, which {cell.os.name} lacks"
                                   + (where if emulated else ""),
                                   "cpython under qemu" if emulated else "cpython",
                                   "once per base: later builds take it from the cache"))
    step = ("cann-only image" if not cell.stack.framework.layers else
            "image, pip under qemu" if emulated and not native else "image")
    lines.append(takes_minutes(f"the image {cell.name}, cold", step,
                               ("of that, the OS packages under qemu: " + said("os packages under qemu") + "; "
                                if emulated else "") + "later builds take the unchanged steps from the cache",
                               emulated))
    return lines


def rebuild(matrix: Matrix, p: Prepared) -> str:
    """The prepared image built again, every step (--no-cache), with its project files, and
    neither tested nor tagged: returns its id (`invoke verify` compares it and removes it)."""
    plan, engine = p.plan, p.engine
    _say_how(p)
    _check_bases(engine, matrix, plan.cell, plan, p.site)
    ctx = plan.work / "context"
    log = plan.work / "rebuild.log"
    with steps.secrets(p.site.net, fresh=True) as secrets:
        req = replace(_request(p, secrets, ctx), no_cache=True)
        try:
            _stage(plan, ctx)
            assert req.iidfile is not None
            req.iidfile.unlink(missing_ok=True)
            console.say(f"rebuilding {plan.what}; log: {log}")
            if engine.build(req, log) != 0:
                raise BuildFailed(f"the rebuild of {plan.what} failed; log: {log}")
            candidate = req.iidfile.read_text().strip()
            try:
                return finish.runtime(engine, candidate, plan.cell, plan.requirements, plan.tags.readable, plan.work,
                                      _reproducible(engine, plan)).image
            finally:
                with interrupts.deferred():
                    steps.remove_untagged(engine, [candidate])
        finally:
            with interrupts.deferred():
                shutil.rmtree(ctx, ignore_errors=True)


def _reproducible(engine: eng.Engine, plan: Plan) -> finish.Reproducible | None:
    if plan.epoch is None:
        return None
    return finish.Reproducible(plan.epoch, frozenset(engine.layers(plan.build_args["BASE_IMAGE"])))


def _with_debootstrap(matrix: Matrix, cell: Cell, site: Site) -> Site:
    """--debootstrap: the cell's Debian base comes from this machine's debootstrap, under
    a local name with {arch} (both arches a cross build needs), unless the site maps it."""
    if not site.debootstrap or cell.os.image in site.base_images:
        return site
    if not cell.os.suite:
        other = matrix.offline_os(cell.stack)
        raise UserError(f"--debootstrap makes Debian bases; {cell.os.name} ({cell.os.image}) is not one. "
                        + (f"The Debian cell of this line builds without a registry: "
                           f"`invoke build {cell.stack.flag} --os {other.name}"
                           f"{baseimage.cell_flags(matrix, cell.platform, cell.chip)} --debootstrap`" if other
                           else ""))
    return baseimage.on_local_base(site, cell.os.image, cell.os.suite)


def _made_here_before(cell: Cell, site: Site, engine: eng.Engine) -> Site:
    """The cell's Debian base is not in the engine, and a `--debootstrap` build made it here
    under the local name: that one, said (a site with no registry would otherwise be told to
    add --debootstrap with the base sitting there)."""
    if site.debootstrap or not cell.os.suite or cell.os.image in site.base_images:
        return site
    local = baseimage.on_local_base(site, cell.os.image, cell.os.suite)
    try:
        if engine.exists(cell.os.image) or not engine.exists(local.base(cell.os.image, cell.target)):
            return site
    except EngineError:         # no engine yet: the build's own check says so, after the input's
        return site
    console.say(f"base: {local.base(cell.os.image, cell.target)} (made here by an earlier --debootstrap; "
                f"{cell.os.image} is not in the engine)")
    return local


def _check_bases(engine: eng.Engine, matrix: Matrix, cell: Cell, plan: Plan, site: Site) -> None:
    """Both base images (the image's and, on the fast path, the build machine's) are here
    or can be had, before the build: pulled, or made by debootstrap with --debootstrap."""
    make = baseimage.made_here(engine, site, cell.os.suite)
    advice = baseimage.advice(matrix, cell.os.image, cell.stack, cell.platform, chip=cell.chip)
    steps.check_base(engine, plan.build_args["BASE_IMAGE"], cell.platform, advice, make)
    if on_build_machine(plan.host_args):
        steps.check_base(engine, plan.host_args["BUILD_BASE_IMAGE"], str(host_platform()), advice, make)


def _refuse_early(cell: Cell, site: Site, inputs: Inputs) -> None:
    """Input problems, before any package is read or docker command run."""
    if not cell.stack.framework.has_builder:
        given = [flag for flag, value in (("--torch-npu-wheel", inputs.torch_npu_wheel), ("--torch-npu-src",
                 inputs.torch_npu_src), ("--apex-wheel", inputs.apex_wheel), ("--apex-src", inputs.apex_src)) if value]
        if given:
            raise UserError(f"{', '.join(given)}: stack {cell.stack.name} is {cell.stack.title}, which has no "
                            f"torch_npu or apex; these flags are for torch stacks (--torch)")
    from .sources import check_source
    check_source("--torch-npu-src", inputs.torch_npu_src)
    check_source("--apex-src", inputs.apex_src)
    _check_torch_npu_source(cell, inputs)
    if site.require_pins and cell.python_source and not cell.python_source.sha256:
        raise PackageError(f"CPython {cell.python_source.version} tarball has no sha256 (pythons."
                           f"\"{cell.python}\".sha256) and --require-pins is set")
    check_network(site.net)
    torch_index.check_mirror(site.net.torch_index_url)
    for f in (inputs.torch_npu_wheel, inputs.apex_wheel):
        if f and kind_of(f):
            raise UserError(f"{f}: " + ("a folder, not a wheel file (--wheelhouse takes a folder)" if f.is_dir()
                                       else f"{kind_of(f)}, not a wheel file"))
    if inputs.wheelhouse and not inputs.wheelhouse.is_dir():
        raise UserError(f"--wheelhouse {inputs.wheelhouse}: no such folder")
    inputs.wheels()         # each a regular file of its folder (hashing.files_in), before anything runs


def _lock(matrix: Matrix, cell: Cell, site: Site) -> tuple[locks.Lock | None, str]:
    """The cell's lock, wherever the matrix is, and the plan's line that says which (its folder
    and package count, or unlocked). A cell without one is refused unless --unlocked."""
    found = locks.find(matrix, cell, project.root())      # a stale lock is refused here
    lock = found.lock
    if lock is not None:
        if found.project:
            return lock, (f"python packages: locked by the project's {found.name} (no lock beside {matrix.path}; that "
                          f"one was made from what this matrix asks) ({len(lock.packages)} packages, sha256-checked)")
        return lock, f"python packages: locked by {found.name} ({len(lock.packages)} packages, sha256-checked)"
    what = f"stack {cell.stack.name} / Python {cell.python} / {cell.arch}"
    hint = (f"`invoke lock {cell.stack.flag} --python {cell.python} --platform {cell.platform}"
            + ("" if matrix.path.resolve() == (project.root() / "matrix.yaml").resolve() else f" --matrix {matrix.path}")
            + "` makes one")
    if site.require_pins:
        raise PackageError(f"{what} has no lock and --require-pins is set; {hint}")
    if not site.unlocked:
        looked = locks.folder(found.root, cell.stack.name, cell.python, cell.arch)
        other = (f"; the project's {found.other.where.relative_to(project.root())} was made from other inputs than this "
                 f"matrix asks" if found.other else "")
        raise UserError(f"{what} has no lock (none in {looked}{other}): pip would resolve its Python packages at "
                        f"build time, so two builds may differ (an unlocked build once put two numpys in one image); "
                        f"{hint}, or --unlocked builds it without one")
    console.warn(f"{what} has no lock: pip resolves its Python packages at build time, so two builds may differ "
                 f"(--unlocked); {hint}")
    return None, "python packages: unlocked (--unlocked): pip resolves them at build time from the matrix's specifiers"


def _requirements(matrix: Matrix, cell: Cell, lock: locks.Lock | None, inputs: Inputs) -> dict[str, str]:
    files = dict(lock.files) if lock else locks.unlocked(matrix, cell)
    wheel = inputs.torch_npu_wheel
    if wheel:
        files = locks.with_wheel(files, wheel, sha256_of(wheel) if wheel.is_file() else "", "/tmp/torch_npu")
    return files


def _locate_packages(cell: Cell, site: Site) -> tuple[tuple[Located, Located, Located | None], list[str]]:
    # A dry run touches no network: it says what a real run would download instead.
    store = PackageStore(site.packages, site.cache_dir, download=not site.offline and not site.dry, keep=not site.dry)
    located, errors, stops = [], [], []
    for f in cell.cann_files:
        try:
            found, stop = _locate(store, f, site)
            located.append(found)
            stops += [stop] if stop else []
        except PackageError as exc:
            errors.append(str(exc))
    if errors:   # report every missing or bad package at once, not one per run
        raise PackageError("\n\n".join(errors))
    warn_unpinned([pkg.file.file for pkg in located if not pkg.pinned and pkg.path.is_file()]
                  + [n for n in cell.unpinned() if n.startswith("CPython")])
    return (located[0], located[1], (located[2] if len(located) > 2 else None)), stops


def _plan(rendered: Rendered, cell: Cell, site: Site, inputs: Inputs,
          cann: tuple[Located, Located, Located | None], requirements: dict[str, str], lock: locks.Lock | None,
          engine_kind: str = "docker", torch_src: torch_index.TorchSource | None = None) -> Plan:
    toolkit, kernels, nnal = cann
    packages = [p for p in cann if p is not None]
    build_args = {"BASE_IMAGE": site.base(cell.os.image, cell.target),
                  "PYTHON_FROM": "source" if cell.python_source else "distro",
                  "ASCEND_CHIP": cell.chip}
    if nnal:
        build_args["NNAL_CXX_ABI"] = str(cell.abi)
        if cell.stack.torch_atb:
            build_args["NNAL_TORCH_ATB"] = "1"
    if cell.nnal_left_out:
        build_args["WITH_NNAL"] = "0"
    if torch_src and torch_src.test_only:
        build_args["ALLOW_CUDA_TEST_ONLY"] = "1"   # the pip steps' CUDA check stands aside, and the label says so
    user = cell.user
    if user:
        build_args.update(RUN_AS_UID=str(user[0]), RUN_AS_GID=str(user[1]))
    if cell.python_source:
        build_args.update(PYTHON_VERSION=cell.python_source.version, PYTHON_SHA256=cell.python_source.sha256 or "",
                          PYTHON_URLS=" ".join(cell.python_source.urls))
    if inputs.apex_wheel:
        build_args["APEX_WHEEL"] = inputs.apex_wheel.name
    if site.epoch is not None:
        build_args["SOURCE_DATE_EPOCH"] = str(site.epoch)
    hashes = {pkg.path.name: pkg.sha256 for pkg in packages}
    for wheel in inputs.wheels():
        hashes[wheel.name] = sha256_of(wheel) if wheel.is_file() else "<built at run time>"
    for layer, text in requirements.items():       # the lock is part of what the image is
        hashes[f"lock/{layer}.txt"] = hashlib.sha256(text.encode()).hexdigest()
    hashes[finish.FINISH_KEY] = finish.fingerprint()
    content = content_tag(rendered.text, build_args, hashes)
    tags = RUNTIME.tags(inputs.repository, cell.tag_name, content, cell.target, cell.alias_name)
    labels = RUNTIME.labels(RuntimeFacts(
        cell, content, build_args["BASE_IMAGE"], inputs.apex_wheel.name if inputs.apex_wheel else "absent",
        " ".join(pkg.path.name for pkg in packages),
        f"{lock.where.parent.name}/{lock.where.name} inputs:{lock.digest[:16]}" if lock else "none",
        _cann_sums(cell, *packages), site.epoch,
        (f"torch from the site's index in place of {torch_src.named} ({torch_index.TEST_ONLY_SWITCH}): not an image "
         "to ship") if torch_src and torch_src.test_only else ""))
    return Plan(cell, rendered, toolkit, kernels, nnal, inputs, requirements, lock.where if lock else None, build_args,
                site.pip_args(cell.target, cell.os.image), content, site.epoch, tags, labels,
                work_dir(site, cell, engine_kind))


def _cann_sums(cell: Cell, *located: Located) -> str:
    """The CANN installers as the build verified them, for the SBOM (a label, so that
    `invoke sbom` can say it for any image this project built)."""
    return json.dumps([{
        "file": pkg.path.name, "version": cell.cann.version, "sha256": pkg.sha256,
        "verified": ("the .run taken out of Huawei's .zip, whose sha256 matched matrix.yaml" if pkg.file.zip_sha256
                     else "sha256 pinned in matrix.yaml" if pkg.pinned else "not pinned: sha256 as found"),
        "zip_sha256": pkg.file.zip_sha256 or None,
        "url": pkg.file.zip_url if pkg.file.zip_sha256 else pkg.file.url} for pkg in located],
        separators=(",", ":"))


def work_dir(site: Site, cell: Cell, engine_kind: str = "docker") -> Path:
    """Where one runtime image's build log, manifest, SBOM and staged context live."""
    return site.work_dir(f"{cell.tag_name}-{cell.target.suffix}", engine_kind)


def _check_torch_npu_source(cell: Cell, inputs: Inputs) -> None:
    if cell.stack.torch is None or cell.stack.torch.npu_on_pypi or inputs.torch_npu_wheel:
        return
    prefix = f"torch_npu-{cell.stack.package}-"
    if any(w.name.startswith(prefix) for w in inputs.wheels()):
        return
    raise PackageError(f"torch_npu {cell.stack.package} has no wheel on PyPI (stacks.{cell.stack.name}."
                       f"torch_npu_on_pypi is false); put {prefix}cp{cell.python.replace('.', '')}-*.whl in a "
                       f"folder and pass --wheelhouse DIR, or pass --torch-npu-wheel FILE")


def _stage(plan: Plan, ctx: Path) -> None:
    """The build context: installers in cann/{toolkit,kernels,nnal}, the wheelhouse in wheels/,
    a given torch_npu wheel in torch_npu/, an apex wheel in apex/, the requirement files
    (the lock) as pip reads them in requirements/.
    Hard links when possible: staging a multi-GB installer should not copy it."""
    if ctx.exists():
        shutil.rmtree(ctx)
    staged = [("cann/toolkit", plan.toolkit), ("cann/kernels", plan.kernels)] + ([("cann/nnal", plan.nnal)] if plan.nnal else [])
    for sub, src in ((sub, pkg.path) for sub, pkg in staged):
        (ctx / sub).mkdir(parents=True)
        _link_or_copy(src, ctx / sub / src.name)
    # One folder per consumer: each RUN mounts only what it installs, so a new torch_npu
    # or apex wheel does not change the cache key of the torch step.
    inputs = plan.inputs
    house = [w for w in inputs.wheels() if w not in (inputs.torch_npu_wheel, inputs.apex_wheel)]
    for folder, wheels in (("wheels", house), ("torch_npu", [inputs.torch_npu_wheel]), ("apex", [inputs.apex_wheel])):
        (ctx / folder).mkdir()
        for wheel in filter(None, wheels):
            _link_or_copy(wheel, ctx / folder / wheel.name)
    # requirements/: what pip reads, without the comments that name the stack (a layer
    # shared by stacks, see pip_text); the files as locked go into the image afterwards
    # (images/finish.py).
    (ctx / "requirements").mkdir()
    for layer, text in plan.requirements.items():
        (ctx / "requirements" / f"{layer}.txt").write_text(locks.pip_text(text))
    # pip for the image's machine, run by the build machine's stages (PIP_ON=native), and
    # the check of the wheels' binaries that every pip step runs.
    for script in ("pip_for_target.py", "wheel_arch.py"):
        shutil.copy2(Path(__file__).with_name(script), ctx / script)


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _locate(store: PackageStore, f, site: Site) -> tuple[Located, str | None]:
    """The package, or (a dry run) a stand-in and where the real run would stop, if it would."""
    try:
        return store.locate(f, site.require_pins), None
    except PackageError as exc:
        if not site.dry:
            raise
        # A dry run still shows the commands: what the real run would fetch, or where it stops.
        stand_in = Located(f, Path("<missing>") / f.file, "<unknown>", False)
        if site.offline or not isinstance(exc, PackageMissing):
            console.note(f"# NOTE: a real build stops here: {exc}".replace("\n", "\n# "))
            return stand_in, str(exc)
        console.show(f"# would download {f.zip_url if f.zip_sha256 else f.url} (unless it is in "
                     f"{', '.join(map(str, site.packages))} or the cache by then)")
        return stand_in, None


def _source_wheel(kind: str, src: str, matrix: Matrix, cell: Cell, site: Site, inputs: Inputs,
                  engine: eng.Engine) -> Path:
    """A torch_npu or apex wheel compiled in the stack's builder (`src`: a tree, a URL@ref,
    or "upstream"), from the wheel cache when it was compiled before."""
    from .sources import WheelRequest, build_wheel
    req = WheelRequest(kind, cell.matrix_stack, inputs.builder_flavor, cell.python, cell.platform,
                       None if src == "upstream" else src)
    return build_wheel(matrix, req, site, engine, inputs.builder_repository)


def _source_built_wheels(matrix: Matrix, cell: Cell, site: Site, inputs: Inputs,
                         engine: eng.Engine) -> Inputs:
    """The inputs with torch_npu / apex filled from source builds, or apex from the
    wheel cache; says plainly when the image will have no apex."""
    from .sources import find_cached
    if inputs.torch_npu_src:
        inputs = replace(inputs, torch_npu_wheel=_source_wheel("torch_npu", inputs.torch_npu_src, matrix, cell, site,
                                                               inputs, engine))
    if inputs.apex_src:
        inputs = replace(inputs, apex_wheel=_source_wheel("apex", inputs.apex_src, matrix, cell, site, inputs, engine))
    if cell.stack.torch is None or "apex" not in cell.stack.framework.builds:
        return inputs      # apex is torch's: a MindSpore image has no apex slot to fill
    if inputs.apex_wheel is None:
        cached = find_cached(site.cache_dir, "apex", cell.stack.torch.version, cell.python, cell.arch)
        if cached:
            console.say(f"apex: using the built wheel {cached}")
            return replace(inputs, apex_wheel=cached)
        apex = matrix.sources["apex"]
        how = (f"Build one with `invoke apex --torch {cell.stack.name} --python {cell.python}` (or pass --apex-src / "
               f"--apex-wheel)." if matrix.apex_builds(cell) else
               f"Ascend apex {apex.ref[:7]} builds for Python {', '.join(apex.pythons)} only (a wheel of another "
               f"apex may be given with --apex-wheel).")
        console.say(f"apex: no Ascend apex wheel built for torch {cell.stack.torch.version} / python {cell.python} / "
                    f"{cell.arch}; the image will have NO apex. {how}")
    return inputs
