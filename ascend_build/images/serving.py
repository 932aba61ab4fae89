"""The serving kind (`invoke build --vllm 0.23.0`): vLLM and the vLLM-Ascend plugin on the
tested runtime image of the stack that vLLM-Ascend release pins. The release and its
pairing come from the data (matrix.serving: imported from the release's own metadata);
everything is refused here, before the runtime or this image is built. It is built FROM
the runtime's content tag (one tested image: its layers are reused, never rebuilt),
locked as a user layer is, tested with its suite and then the runtime's, and tagged
`<runtime name>-vllm<release>-<arch>`."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import console, project
from .. import engine as eng
from ..errors import UserError
from ..hashing import files_in
from ..inputs import baseimage
from ..inputs.options import Site
from ..locking import layerlock, serving_lock
from ..locking import lock as locks
from ..locking.resolve import Index, target_tags, wheel_hashes
from ..matrix import Cell, Matrix, ServingRelease
from ..matrix.like import Like
from ..matrix.serving import image as release_image
from ..platforms import host as host_platform
from . import steps
from .kinds import RUNTIME, UNKNOWN, Asked, ImageKind, label, option
from .render import PACKAGES, Rendered, plain_dockerfile
from .steps import SCRIPTS, OnRuntime


@dataclass(frozen=True)
class ServingFacts:
    """What a serving image's labels say (the runtime's come with its image, FROM)."""
    release: str                 # vLLM-Ascend's
    vllm: str
    soc_version: str
    kernels: bool                # the plugin's custom kernels compiled (a wheel has them)
    plugin_from: str             # "wheel" or "sdist"
    lock: str
    content: str
    runtime: str                 # the runtime image it is built on


def _labels(f: ServingFacts) -> dict[str, str]:
    return {label("kind"): "serving", label("vllm"): f.vllm, label("vllm-ascend"): f.release,
            label("soc-version"): f.soc_version, label("kernels"): "yes" if f.kernels else "no",
            label("vllm-ascend-from"): f.plugin_from, label("serving-lock"): f.lock,
            label("content-tag"): f.content, label("runtime"): f.runtime,
            "org.opencontainers.image.base.name": f.runtime}


KIND: ImageKind[ServingFacts] = ImageKind("serving", "serving.Dockerfile.j2", "runtime", "serving_image",
                                          "ascend-runtime", _labels, extends=RUNTIME)


def render(matrix: Matrix) -> list[Rendered]:
    """One Dockerfile per OS (its build-machine stages install the OS's Python, as the
    runtime's fast path does): the runtime, the releases and the chip are build arguments
    and staged files."""
    return [plain_dockerfile(KIND.template, f"images/serving/{os.name}/Dockerfile", os=os, packages=PACKAGES[os.family])
            for os in matrix.os.values()]


NEEDS_VLLM = "is for a serving image: give --vllm RELEASE"


@dataclass(frozen=True)
class Options:
    """A serving image, vLLM and vLLM-Ascend on the tested runtime image."""
    vllm: str | None = option(None, "build a serving image: vLLM and vLLM-Ascend of this release (0.23.0) on the "
                                    "tested runtime image of the stack the release pins (--torch may be left out), "
                                    "locked with the runtime's packages held, tested, tagged "
                                    "<runtime name>-vllm<release>-<arch>")
    no_kernels: bool = option(False, "with --vllm, where vLLM-Ascend is built from its sdist: without its custom "
                                     "kernels (labelled; `invoke run` warns)", needs=("vllm",), unmet=NEEDS_VLLM)
    serving_wheelhouse: str | None = option(None, "with --vllm: a folder of wheels the serving lock may take where "
                                                  "the index has none (triton-ascend from Huawei's index, "
                                                  "arctic-inference built by your team)", needs=("vllm",),
                                            unmet=NEEDS_VLLM)


@dataclass(frozen=True)
class Wanted:
    """`--vllm RELEASE` as asked, its release looked up once (it names the stack)."""
    release: ServingRelease
    kernels: bool
    wheelhouse: str | None


def ask(matrix: Matrix, options: Options, like: Like | None) -> Asked | None:
    """The release `--vllm` names, from the data; its stack is the one built when no
    framework option names one."""
    release = options.vllm or (like.vllm if like is not None else "")
    if not release:
        return None
    if options.vllm and like is not None and like.vllm and options.vllm != like.vllm:
        raise UserError(f"--vllm {options.vllm}: --like names vLLM-Ascend {like.vllm}'s image; give one of them")
    rel = matrix.serving(release)
    return Asked(Wanted(rel, not options.no_kernels, options.serving_wheelhouse), stack=rel.stack,
                 python=rel.images_python())


def request(matrix: Matrix, cell: Cell, asked: Wanted) -> ServingRequest:
    return ServingRequest.of(matrix, cell, asked.release, asked.kernels, asked.wheelhouse)


def suffix_of(release: str) -> str:
    """What a serving image's name adds to its runtime's: <runtime name>-vllm0.23.0-<arch>."""
    return f"vllm{release}"


@dataclass(frozen=True)
class ServingRequest:
    """`--vllm RELEASE [--no-kernels]` on one runtime cell, checked against the data."""
    release: str
    vllm: str
    soc_version: str
    kernels: bool
    plugin_file: str | None      # the wheel for this Python and arch, or None: the sdist
    plugin_sdist: str
    plugin_sdist_sha256: str
    vllm_sdist: str
    vllm_sdist_sha256: str
    torch: str
    torch_npu: str
    wheelhouse: Path | None = None     # wheels the lock may take where the index has none
    ray: str = serving_lock.RAY        # Ray's requirement: the release's images' where they state one

    @property
    def suffix(self) -> str:
        return suffix_of(self.release)

    @property
    def plugin_from(self) -> str:
        return "wheel" if self.plugin_file else "sdist"

    @classmethod
    def of(cls, matrix: Matrix, cell: Cell, rel: ServingRelease, kernels: bool = True, wheelhouse: str | None = None
           ) -> ServingRequest:
        """Every refusal the data can give on the cell, naming what would work (exit 2)."""
        if rel.stack.name != cell.stack.name:
            raise UserError(f"vLLM-Ascend {rel.version} pins torch {rel.pins['torch']} and torch_npu "
                            f"{rel.pins['torch_npu']}: the stack {rel.stack.name}, not {cell.stack.name}; "
                            f"build it with --torch {rel.stack.name} (or leave --torch out)")
        fits = rel.pythons(rel.stack)
        if cell.python not in fits:
            raise UserError(f"vLLM-Ascend {rel.version} and vLLM {rel.vllm} take Python {', '.join(fits)} on "
                            f"stack {rel.stack.name} (Requires-Python {rel.requires_python}), not {cell.python}; "
                            f"pass --python {fits[-1]}")
        soc = release_image(rel, cell.chip, cell.os.name).soc_version
        if wheelhouse is not None and not Path(wheelhouse).is_dir():
            raise UserError(f"--serving-wheelhouse {wheelhouse}: no such folder")
        if wheelhouse is not None:
            files_in(Path(wheelhouse), "*.whl")      # each a regular file of the folder, before anything runs
        wheel = (cell.python, cell.arch) in rel.wheels
        if wheel and not kernels:
            raise UserError(f"--no-kernels: vLLM-Ascend {rel.version} has a wheel for Python {cell.python} on "
                            f"{cell.arch}, kernels included; --no-kernels is for a build from its sdist")
        return cls(rel.version, rel.vllm or "", soc, kernels, "wheel" if wheel else None, rel.sdist,
                   rel.sdist_sha256, rel.vllm_sdist or "", rel.vllm_sdist_sha256 or "", rel.pins["torch"],
                   rel.pins["torch_npu"], Path(wheelhouse) if wheelhouse else None, rel.ray or serving_lock.RAY)


@dataclass(frozen=True)
class Release:
    """The two files staged for the build, checked, with their sums."""
    vllm: Path
    plugin: Path
    plugin_sha256: str


def plan_lines(req: ServingRequest, cell: Cell) -> list[str]:
    """What `--dry` says of the serving image beyond its engine command."""
    plugin = (f"its wheel for CPython {cell.python} on {cell.arch} (PyPI)" if req.plugin_file else
              f"its sdist {req.plugin_sdist}, built here " + (
                  f"with its custom kernels for SOC_VERSION={req.soc_version} against the image's CANN"
                  if req.kernels else "WITHOUT its custom kernels (--no-kernels: labelled, not pushed)"))
    return [f"# serving: vLLM {req.vllm} from its sdist {req.vllm_sdist} (VLLM_TARGET_DEVICE=empty), "
            f"vLLM-Ascend {req.release} from {plugin}",
            f"# serving: SOC_VERSION={req.soc_version} (chip {cell.chip}), TASK_QUEUE_ENABLE=1, OMP_NUM_THREADS=1",
            f"# serving: held at the stack's pins: torch {req.torch}, torch_npu {req.torch_npu}; a step that moves "
            "either, a CUDA triton or a CUDA package, or `pip check` failing refuses the build",
            f"# serving: the lock adds {req.ray} (a server across nodes: invoke job --kind serving --nodes N) and "
            f"vLLM's bench extra (`vllm bench serve` without a network)"]


def _lock_input(matrix: Matrix, req: ServingRequest) -> Path:
    """Beside the matrix, as the runtimes' locks: locks/serving/vllm-ascend-<release>.in, its
    locks in vllm-ascend-<release>.lock/<stack>-py<X.Y>-<arch>.txt."""
    return matrix.path.parent / "locks" / "serving" / f"vllm-ascend-{req.release}.in"


@dataclass(frozen=True)
class Ready:
    request: ServingRequest
    lock: layerlock.LayerLock
    release: Release | None         # None: a dry run, which fetches nothing


def prepare(matrix: Matrix, cell: Cell, site: Site, req: ServingRequest) -> Ready:
    """The release files fetched and checked, the lock made or reused: every refusal before
    anything is built. A dry run fetches and writes nothing."""
    path = _lock_input(matrix, req)
    if site.dry:
        for line in plan_lines(req, cell):
            console.show(line)
        lock_path = layerlock.path_for(path, cell)
        console.show(f"# serving: the real run fetches both release files (sha256-checked) and checks or makes "
                     f"{lock_path}")
        return Ready(req, layerlock.read(lock_path) or layerlock.LayerLock(lock_path, ""), None)
    hold = layerlock.held(cell, locks.find(matrix, cell, project.root()).lock)
    cache = site.cache_dir / "serving"
    vllm = serving_lock.release_file(site.net, "vllm", req.vllm_sdist, req.vllm_sdist_sha256, cache)
    plugin_name, plugin_sha = _plugin(req, cell, site)
    plugin = serving_lock.release_file(site.net, "vllm-ascend", plugin_name, plugin_sha, cache)
    skip = {"vllm", "vllm-ascend"}
    extras = (req.ray, *serving_lock.vllm_extra(vllm, serving_lock.BENCH))
    lines_text = [t for t in serving_lock.requirement_lines(serving_lock.vllm_requirements(vllm),
                                                            serving_lock.plugin_requirements(plugin), extras=extras)
                  if serving_lock.named(t) not in skip]
    serving_lock.write_input(path, lines_text, [vllm.name, plugin.name])
    lines = layerlock.parse(path)
    from ..locking.layer_resolve import lock_layer
    lock, said = lock_layer(f"vllm-ascend {req.release}", path, lines, cell, hold, site.net, req.wheelhouse,
                             kind=serving_lock.SERVING_LAYER)
    for line in said:
        console.say(line)
    return Ready(req, lock, Release(vllm, plugin, plugin_sha))


def _plugin(req: ServingRequest, cell: Cell, site: Site) -> tuple[str, str]:
    """The wheel for the image's Python and arch (its name and sum from the index), or the sdist."""
    if not req.plugin_file:
        return req.plugin_sdist, req.plugin_sdist_sha256
    files = Index(site.net).files("vllm-ascend")
    picked = wheel_hashes(files, "vllm-ascend", req.release, target_tags(cell.python, cell.arch))
    if not picked:
        raise UserError(f"vLLM-Ascend {req.release}: the index lists no wheel for CPython {cell.python} on "
                        f"{cell.arch} (the import said it had one); `invoke update` reads it again")
    return picked[0]


def image(matrix: Matrix, cell: Cell, site: Site, ready: Ready) -> OnRuntime:
    """Its OS's Dockerfile; the lock as requirements/serving.txt, the two release files and
    their SHA256SUMS (checked again in the build) in release/, the wheelhouse's wheels the
    lock names; the build machine's base checked (pulled or made) when it is built."""
    req, lock, release = ready.request, ready.lock, ready.release
    # A dry run has neither release file nor (maybe) the lock: what it does not know is said
    # so (the index's wheel is named by the real run), and no content tag is made from it.
    plugin_name = release.plugin.name if release else (UNKNOWN if req.plugin_file else req.plugin_sdist)
    sums = {req.vllm_sdist: req.vllm_sdist_sha256, plugin_name: release.plugin_sha256 if release else
            (UNKNOWN if req.plugin_file else req.plugin_sdist_sha256)}
    lock_sha = lock.sha256 if lock.text else UNKNOWN
    host_args = _pip_args(site, cell)

    def check_base(engine: eng.Engine) -> None:
        if host_args["PIP_ON"] == "native":
            steps.check_base(engine, host_args["BUILD_BASE_IMAGE"], str(host_platform()),
                             baseimage.advice(matrix, cell.os.image, cell.stack, cell.platform),
                             baseimage.made_here(engine, site, cell.os.suite))
    files = {f"release/{path.name}": path for path in (release.vllm, release.plugin)} if release else {}
    return OnRuntime(
        KIND, suffix=req.suffix, rendered=next(r for r in render(matrix) if r.path.parent.name == cell.os.name),
        lock=lock, own="serving",
        build_args={"SOC_VERSION": req.soc_version, "COMPILE_CUSTOM_KERNELS": "1" if req.kernels else "0",
                    "VLLM_SDIST": req.vllm_sdist, "VLLM_ASCEND_FILE": plugin_name, "TORCH_VERSION": req.torch,
                    "TORCH_NPU_VERSION": req.torch_npu},
        hashes={"requirements/serving.txt": lock_sha, **sums},
        labels=lambda content, base: KIND.labels(ServingFacts(req.release, req.vllm, req.soc_version, req.kernels,
                                                              req.plugin_from, f"{lock.path.name} sha256:{lock_sha[:16]}", content,
                                                              base)),
        what=f"serving image vLLM-Ascend {req.release}",
        staged=f"{lock.path} as requirements/serving.txt, {req.vllm_sdist} and {plugin_name} in release/",
        context={"requirements/serving.txt": lock.text,
                 **{script: SCRIPTS / script for script in ("wheel_arch.py", "serving_check.py", "pip_for_target.py")},
                 **{f"wheels/{wheel.name}": wheel for wheel in layerlock.named_wheels(lock.text, req.wheelhouse)},
                 **files,
                 "release/SHA256SUMS": "".join(f"{sha}  {name}\n" for name, sha in sorted(sums.items()))},
        folders=("wheels", "release"), host_args=host_args, before=check_base)


def _pip_args(site: Site, cell: Cell) -> dict[str, str]:
    """Where the serving lock's pip runs: on the build machine for the image's machine on a
    cross-arch build (the runtime's fast path), unless the runtime's Python is built from
    source (its build-machine twin would be compiled again: pip runs in the image)."""
    if cell.python_source or not site.pip_native(cell.target):
        return {"PIP_ON": "target"}
    # (its image starts FROM the runtime: no OS step of its own, so no OS_ON)
    return {k: v for k, v in site.pip_args(cell.target, cell.os.image).items() if k != "OS_ON"}
