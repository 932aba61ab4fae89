"""The matrix's records: what matrix.yaml (people's decisions) and imported.yaml (Huawei's
and Ascend's published facts) say, typed, and the cells an image or a builder is resolved
to. Plain data: reading them is in load.py, resolving in model.py, checking in
semantics.py."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from packaging.specifiers import SpecifierSet

from ..platforms import ARCHES, Platform
from .cannenv import CannEnv
from .eras import Era, cann_key, cann_series, era_of
from .frameworks import Framework
from .official import OfficialTag


@dataclass(frozen=True)
class OSBase:
    name: str
    image: str
    family: str        # apt or dnf: which package manager the template speaks
    python: str        # the distro's python3 minor version
    suite: str | None = None   # a Debian release debootstrap can make without a registry
    glibc: str | None = None   # the C library's version (what torch_atb's floor is checked against)


@dataclass(frozen=True)
class PythonSource:
    minor: str
    version: str
    urls: tuple[str, ...]
    sha256: str | None


@dataclass(frozen=True)
class CannFile:
    kind: str          # toolkit, kernels or nnal
    file: str
    url: str           # full download URL
    sha256: str | None
    key: tuple[Any, ...]   # where it is written: ("cann", ...) in imported.yaml, ("cann_chips", ...) by hand
    zip_sha256: str | None = None   # Huawei's sum of the published .zip around the .run

    @property
    def zip(self) -> str:
        return self.file[:-len(".run")] + ".zip"

    @property
    def zip_url(self) -> str:
        return self.url[:-len(".run")] + ".zip"

    @property
    def checked_name(self) -> str:
        """The file to fetch so that a build can check it: the published .zip where its sum is
        known (Huawei's), else the .run (pinned or not)."""
        return self.zip if self.zip_sha256 else self.file

    @property
    def arch(self) -> str:
        return self.key[-1]

    @property
    def imported(self) -> bool:
        """Named by the import (imported.yaml), not recorded by hand in matrix.yaml."""
        return self.key[0] == "cann"

    @property
    def pin_path(self) -> str:
        """Where its .run's sha256 is written in matrix.yaml: cann_pins for an imported file
        (imported.yaml is machine-written), beside a hand-recorded entry otherwise."""
        return f"cann_pins.{self.file}" if self.imported else ".".join(map(str, self.key)) + ".sha256"

    @property
    def zip_path(self) -> str:
        """Where Huawei's sum of its .zip is written (imported.yaml)."""
        return ".".join(map(str, self.key)) + ".zip_sha256"

    @property
    def chip(self) -> str | None:
        """The kernels' chip, from where they sit: (section, version, "kernels", chip, arch)."""
        if self.kind != "kernels":
            return None
        _section, _version, _kind, chip, _arch = self.key
        return str(chip)


@dataclass(frozen=True)
class CannRelease:
    version: str
    url: str
    driver: str | None                        # the driver it is paired with (None: no source names it)
    numpy: str | None
    toolkit: dict[str, CannFile]
    kernels: dict[str, dict[str, CannFile]]   # chip -> arch -> file
    nnal: dict[str, CannFile] = field(default_factory=dict)     # arch -> file (the NNAL package: ATB, SiP)
    runs_on: tuple[str, ...] = ()             # drivers its release notes say it runs on (25.2: any 25.2.x)
    sip: bool = False                         # its NNAL holds SiP (nnal/asdsip) beside ATB
    source: str = ""                          # where the import read it (imported.yaml's source:)
    env: CannEnv | None = None                # what its set_env.sh scripts export (None: not imported)
    images: tuple[OfficialTag, ...] = ()      # the official CANN images of it (imported: cann.<release>.images)
    devel_images: tuple[OfficialTag, ...] = ()   # their -devel twins (cann.<release>.devel_images)

    @property
    def era(self) -> Era:
        return era_of(self.version)


@dataclass(frozen=True)
class PackageRelease:
    """One release of a framework's package (torch_npu, mindspore) as Huawei's data and
    PyPI's index know it: the CANN it was published for, its wheels and their sums."""
    version: str
    cann: tuple[str, ...]                     # (): unpaired
    source: str                               # where the pairing (or the release) was read
    on_pypi: bool = True                      # False: Huawei's mirror only
    pypi_pythons: Mapping[str, tuple[str, ...]] = field(default_factory=dict)   # arch (or "any") -> Pythons
    wheels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)      # "cp310-aarch64" -> {wheel: sha256}
    wheels_source: str = ""

    torchnpu: str = ""       # the TorchNPU release it belongs to (torch_npu's only)
    branch: str = ""         # its release tag, or branch, in Ascend/pytorch (torch_npu's only)

    @property
    def series(self) -> str:
        """The TorchNPU series (26.1) Huawei's compatibility grid is keyed by; "" when none."""
        return ".".join(self.torchnpu.split(".")[:2]) if self.torchnpu else ""

    def pythons(self, arch: str) -> set[str]:
        """The Pythons it has `arch` wheels for: Huawei's list and PyPI's files (an index's
        wheel tagged for any platform stands for aarch64: PyPI serves MindSpore's so)."""
        listed = set(self.pypi_pythons.get(arch, ())) | {f"3.{t.split('-')[0][3:]}" for t in self.wheels
                                                          if t.endswith(arch)}
        return listed | (set(self.pypi_pythons.get("any", ())) if arch == "aarch64" else set())

    def checked_arches(self) -> list[str]:
        """The arches a stack's Python range is held against its wheels on: those Huawei
        lists wheels for."""
        return sorted({tag.split("-")[1] for tag in self.wheels})

    def sums(self, python: str, arch: str) -> dict[str, str]:
        """Huawei's sha256 of its wheels (and torch's, listed with torch_npu) for a Python and arch."""
        return dict(self.wheels.get(f"cp{python.replace('.', '')}-{arch}", {}))


@dataclass(frozen=True)
class MindSporeRelease(PackageRelease):
    def checked_arches(self) -> list[str]:
        """Every arch: MindSpore's aarch64 wheels are on PyPI for any platform."""
        return list(ARCHES)


@dataclass(frozen=True)
class TorchNpuTag:
    """A torch_npu release tag in Ascend/pytorch (`invoke update --pytorch-git`)."""
    version: str                      # what its tree's setup.py builds
    tag: str
    commit: str
    submodules: Mapping[str, str]     # path -> commit, the ones a build compiles
    flags: tuple[str, ...]            # the offline flags its ci/build.sh takes


@dataclass(frozen=True)
class Repo:
    """Where a source build comes from by default."""
    repo: str
    ref: str = ""                     # "": the release's tag (torch_npu)
    nvidia: Repo | None = None        # apex: the NVIDIA apex its build script clones
    pythons: tuple[str, ...] = ()     # apex: the Pythons its build script takes at `ref` (): any

    def builds_for(self, python: str) -> bool:
        return not self.pythons or python in self.pythons


@dataclass(frozen=True)
class TorchNpuBuild:
    """How a torch_npu source build runs offline (matrix.yaml torch_npu_build)."""
    source: str
    flags: tuple[str, ...]
    env: Mapping[str, str]
    submodules: tuple[str, ...]


@dataclass(frozen=True)
class Builder:
    name: str
    image: str         # may hold {arch}: aarch64 / x86_64
    family: str        # manylinux or apt
    gccs: tuple[int, ...]    # the gcc majors it offers; a builder image carries the stack's one
    python: str        # interpreter path pattern with {X.Y} and {XY}
    pythons: tuple[str, ...]
    toolset: str = ""  # manylinux: the gcc-toolset root, {gcc} filled in; "": the image's own gcc
    cann_from: str = ""   # offered for stacks on this CANN release and later ("": any)
    # The Debian image (build machine's arch) whose g++-N-aarch64-linux-gnu packages cross-
    # compile for this flavor's aarch64 images; "": compiled by the image's own gcc only.
    cross: str = ""
    # The platform tag auditwheel gives its wheels (the glibc it ships); manylinux images say
    # so themselves (AUDITWHEEL_PLAT).
    wheel_plat: str = ""

    def serves(self, st: Stack) -> bool:
        """This flavor builds for the stack: its gcc, one of its Pythons, its CANN era."""
        return (st.torch is not None and self.offers(st.torch.gcc) and any(p in st.pythons() for p in self.pythons)
                and (not self.cann_from or cann_key(st.cann) >= cann_key(self.cann_from)))

    def offers(self, gcc: int) -> bool:
        return gcc in self.gccs

    def toolset_root(self, gcc: int) -> str:
        return self.toolset.replace("{gcc}", str(gcc))

    def gcc_text(self) -> str:
        return " or ".join(map(str, self.gccs))


@dataclass(frozen=True)
class TorchParts:
    """What only a torch stack has: its torch, the torch_npu on it and how that is built."""
    version: str                       # torch
    npu: str                           # torch_npu
    npu_branch: str                    # torch_npu's release branch (Huawei's data, or torch_npu_branches)
    gcc: int                           # the toolchain torch_npu's release was built with
    index: Mapping[str, str]           # arch -> the index torch comes from (PyPI's x86_64 torch is CUDA's)
    npu_on_pypi: bool = True           # False: the wheel comes from a wheelhouse or a source build
    builder: str = ""                  # the builder flavor for its source builds
    # Installed with torch, each at the release its own metadata pairs with this torch
    # (torchvision 0.16.0 requires torch==2.1.0): the lock resolves the version.
    companions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Stack:
    """A line: a framework's release on a CANN release, its Pythons and pins."""
    name: str                          # images/, locks/ and tags name it so
    key: str                           # its key under its framework's section of matrix.yaml
    framework: Framework
    release: str                       # the framework's release the line is named by: torch 2.1.0, MindSpore 2.9.0
    package: str                       # its framework.package release: torch_npu 2.1.0.post8, mindspore 2.9.0
    cann: str
    python_min: str
    python_max: str
    python_default: str
    pins: Mapping[str, str]
    nnal: bool | None = None                  # None: on where CANN publishes NNAL and the framework uses it
    torch_atb: bool = False                   # NNAL's Python plugin too (installer --torch_atb)
    cxx11_abi: Mapping[str, bool] = field(default_factory=dict)    # arch -> built with the CXX11 ABI
    torch: TorchParts | None = None           # a torch stack's own parts
    derived: bool = False                     # not written in matrix.yaml: derived from the import (load.py)
    derived_from: str = ""                    # where a derived stack's Pythons come from
    # a derived stack's OSes: those of the images it is derived from (a vLLM-Ascend release's);
    # (): its CANN's official images' (a CANN-only stack's)
    oses: tuple[str, ...] = ()

    @property
    def python_path(self) -> str:
        """Where its Python range comes from, for messages."""
        if self.derived and self.torch is not None:
            return (f"the Pythons of the vLLM-Ascend images it is derived from (vllm_ascend_releases' images); "
                    f"a `{self.framework.section}:` entry keyed {self.key} overrides them")
        if self.derived:
            return (f"{self.derived_from or 'the import'}; a `{self.framework.section}:` entry keyed {self.key} "
                    f"overrides them")
        return f"{self.key_path}.python"

    @property
    def layers(self) -> tuple[str, ...]:
        """The image's Python package layers, in order (one lock file each): CANN's own
        needs first, shared by every framework on that CANN, then the framework's."""
        return ("cann",) + self.framework.layers

    @property
    def key_path(self) -> str:
        """Where the stack is written in matrix.yaml, for messages."""
        return f"{self.framework.section}.{self.key}"

    @property
    def package_path(self) -> tuple[str, ...]:
        """Where its package's release is written: stacks.2.1.0.torch_npu, mindspore_stacks.2.9.0."""
        return (self.framework.section, self.key) + ((self.framework.package_key,) if self.framework.package_key else ())

    @property
    def cann_path(self) -> tuple[str, ...]:
        """Where its CANN release is written: stacks.2.1.0.cann, or the key of a stack keyed by it
        (cann_stacks.8.0.RC3)."""
        return (self.framework.section, self.key) + (("cann",) if self.framework.paired else ())

    @property
    def flag(self) -> str:
        """The command-line form that names it: `--torch 2.1.0`, `--mindspore 2.9.0`, `--cann 8.0.RC3`."""
        return f"{self.framework.flag} {self.key}"

    @property
    def title(self) -> str:
        """The framework part of an image's title and of messages."""
        title = f"{self.framework.title} {self.release}"
        # a stack entry that names its package apart (torch_npu:) says it in its title
        return f"{title} + {self.framework.package} {self.package}" if self.framework.package_key else title

    def python_for(self, os: OSBase) -> str:
        """The Python an image on `os` gets unless one is asked for: the distro's python3
        when the stack supports it (no compiling, least emulated work), else the stack's
        default, built from source."""
        return os.python if os.python in self.pythons() else self.python_default

    def pythons(self) -> list[str]:
        lo, hi = minor(self.python_min), minor(self.python_max)
        return [f"3.{m}" for m in range(lo, hi + 1)]

    @property
    def variant_suffix(self) -> str:
        """What an image name adds for a stack named otherwise than its release (another
        release of the line, e.g. "2.12.0-26.1.0"): its package's release. The line's own
        stack adds nothing, so its tags stay what they have been."""
        return "" if self.key == self.release else f"-npu{self.package}"


def minor(version: str) -> int:
    return int(version.split(".")[1])


@dataclass(frozen=True)
class UserLayer:
    """A team's requirements built as a layer on an image of `images:` (images/userlayer.py)."""
    requirements: str           # relative to matrix.yaml's folder
    name: str | None = None     # default: the file's name


@dataclass(frozen=True)
class ImageSpec:
    stack: str
    os: tuple[str, ...]
    platforms: tuple[str, ...]
    python: str | None
    chip: str | None
    alias: str | None
    layers: tuple[UserLayer, ...] = ()


@dataclass(frozen=True)
class Cell:
    """One image to build: every choice made, every file named."""
    stack: Stack                         # the stack with this image's choices made (--torch-atb, --no-nnal)
    os: OSBase
    python: str
    python_source: PythonSource | None   # None: the distro's python3
    chip: str
    target: Platform
    cann: CannRelease
    toolkit: CannFile
    kernels: CannFile
    pins: tuple[str, ...]                # pip requirement strings
    # The stack as the matrix holds it, before those choices: the image's Dockerfile is the one
    # committed for it (the choices are build arguments of that file, not another file).
    matrix_stack: Stack
    alias: str | None = None             # the short tag `images:` gives this very image
    layers: tuple[UserLayer, ...] = ()   # user layers `images:` builds on it
    nnal: CannFile | None = None         # NNAL (ATB) installed after the operator package
    pairing: str = "published"           # published: released for this CANN; compatible: Huawei's grid
    run_as: str = "root"                 # who containers run as: root, or UID:GID (the hosts' HwHiAiUser)
    nnal_left_out: bool = False          # --no-nnal: the line's NNAL not installed (its tags say -nonnal)
    like: str = ""                       # --like: the official image it was asked as (a label says so)
    like_built: str = ""                 # that image's build time where its tag dates it (Huawei's SWR tags)

    @property
    def platform(self) -> str:
        """The --platform value (linux/arm64): what the engine and the labels take."""
        return self.target.docker

    @property
    def arch(self) -> str:
        return self.target.arch

    @property
    def abi(self) -> int:
        """NNAL's cxx_abi for this image: 1 where the framework is built with the CXX11 ABI."""
        return int(self.stack.cxx11_abi.get(self.arch, True))

    @property
    def name(self) -> str:
        """The readable tag: what is inside, lowercase."""
        word = self.stack.framework.tag_word
        # CANN only: its release is the CANN's, already said first
        framework = f"-{word}{self.stack.release}{self.stack.variant_suffix}" if word else ""
        return f"cann{self.cann.version}-{self.chip}-{self.os.name}-py{self.python}{framework}".lower()

    @property
    def user(self) -> tuple[int, int] | None:
        """(uid, gid) containers run as; None: root."""
        if self.run_as == "root":
            return None
        uid, gid = self.run_as.split(":")
        return int(uid), int(gid)

    @property
    def tag_name(self) -> str:
        """What its tags name: its name, and the user it runs as when that is not root (the
        tags of a root image and of a user's do not collide)."""
        return self.name + self._variant

    @property
    def alias_name(self) -> str | None:
        return self.alias + self._variant if self.alias else None

    @property
    def _variant(self) -> str:
        """What a variant of the line adds to its tags: no NNAL, another user."""
        return ("-nonnal" if self.nnal_left_out else "") + (f"-uid{self.user[0]}" if self.user else "")

    @property
    def torch_index(self) -> str | None:
        return self.stack.torch.index.get(self.arch) if self.stack.torch else None

    @property
    def cann_files(self) -> tuple[CannFile, ...]:
        """The CANN installers in install order: toolkit, operators, NNAL where it goes in."""
        return (self.toolkit, self.kernels) + ((self.nnal,) if self.nnal else ())

    def unpinned(self) -> list[str]:
        # A published .zip sum verifies the .run taken out of it.
        names = [f.file for f in self.cann_files if not f.sha256 and not f.zip_sha256]
        if self.python_source and not self.python_source.sha256:
            names.append(f"CPython {self.python_source.version} source tarball "
                         f"({self.python_source.urls[0].rsplit('/', 1)[-1]}: `invoke pin --file` on it)")
        return names


@dataclass(frozen=True)
class BuilderCell:
    """One builder image: a torch stack's toolchain on one flavor, for some Pythons."""
    stack: Stack
    torch: TorchParts
    flavor: Builder
    pythons: tuple[str, ...]
    target: Platform

    @property
    def platform(self) -> str:
        return self.target.docker

    @property
    def arch(self) -> str:
        return self.target.arch

    @property
    def gcc(self) -> int:
        return self.torch.gcc

    @property
    def name(self) -> str:
        return (f"torch{self.torch.version}-{self.flavor.name}-gcc{self.gcc}-py"
                + "-py".join(self.pythons)).lower()


@dataclass(frozen=True)
class TorchAtb:
    """NNAL's optional Python plugin: the Pythons it is built for and, per CANN series, the
    glibc it needs (NNAL itself needs only 2.17)."""
    pythons: tuple[str, ...]
    glibc: Mapping[str, str]      # CANN series ("9.1") -> glibc floor
    source: str

    def floor(self, cann: str) -> str | None:
        return self.glibc.get(cann_series(cann))


@dataclass(frozen=True)
class ChipSupport:
    """A chip whose images need a torch_npu release made for it, not only CANN's operators."""
    chip: str
    torchnpu_from: str         # the first TorchNPU release with images for the chip
    source: str


@dataclass(frozen=True)
class Files:
    """The matrix's two files: matrix.yaml (hand-written) and the imported facts beside it."""
    matrix: Path
    imported: Path


@dataclass(frozen=True)
class VllmRelease:
    """vLLM's release of a vLLM-Ascend release's number: its sdist (built with
    VLLM_TARGET_DEVICE=empty, so that it brings no torch of its own)."""
    version: str
    sdist: str
    sdist_sha256: str
    requires_python: str          # as its index page says it: ">=3.10,<3.15"
    source: str


@dataclass(frozen=True)
class ReleaseImage:
    """One of a vLLM-Ascend release's Dockerfiles, as its sdist holds it: the official image
    it builds FROM and so its CANN, chip, OS and Python, and the SOC_VERSION its kernels are
    compiled for there."""
    dockerfile: str               # Dockerfile.a3.openEuler
    base: str                     # FROM, its ARGs filled in
    cann: str                     # as the tag spells it: 9.1.0, 8.1.rc1, 9.1.0-beta.1 ("": not a CANN image)
    build: str                    # a dated build of that release (SWR's 9.2.0_20260930220649): its date, else ""
    chip: str                     # as the tag spells it: 910b, a3, 310p, 950
    os: str
    python: str
    soc_version: str              # "": the Dockerfile sets none
    read: str                     # where each fact was read (its lines)


@dataclass(frozen=True)
class VllmAscendRelease:
    """A vLLM-Ascend release as imported.yaml holds it (vllm_ascend_releases): the pins its
    sdist's requirements give, its wheels and sdist, its Dockerfiles' images, the Ray they
    install, and vLLM's release it pairs with."""
    version: str
    pins: Mapping[str, str]                   # torch, torch_npu, torchvision, torchaudio, triton_ascend, transformers
    requires_python: str                      # "": any
    wheels: frozenset[tuple[str, str]]        # (python "3.11", arch "aarch64")
    sdist: str
    sdist_sha256: str
    source: str
    vllm: VllmRelease | None                  # None: vLLM has no release it pairs with
    vllm_note: str = ""                       # why there is none (the import's words)
    images: tuple[ReleaseImage, ...] = ()     # its Dockerfiles' (none: an import before they were read)
    ray: str = ""                             # the Ray requirement its images install ("": none stated)
    vllm_tag: str = ""                        # the vLLM tag its Dockerfiles clone (v0.23.0)

    @property
    def candidate(self) -> bool:
        """A release candidate (0.25.1rc1): vLLM-Ascend's releases every two to three weeks."""
        return "rc" in self.version

    def image(self, dockerfile: str = "Dockerfile") -> ReleaseImage | None:
        return next((i for i in self.images if i.dockerfile == dockerfile), None)

    def main(self) -> ReleaseImage | None:
        """The image whose CANN the release is built on: its Dockerfile (910B, Ubuntu), else its first."""
        return self.image() or (self.images[0] if self.images else None)


@dataclass(frozen=True)
class ServingRelease:
    """A vLLM-Ascend release paired with the stack it is built on (Matrix.serving): its
    torch and torch_npu pins on the CANN its images use are that stack's, and vLLM has the
    release it pairs with."""
    version: str                              # vllm-ascend's: "0.23.0"
    vllm: str                                 # vllm's, the same number
    stack: Stack
    pins: Mapping[str, str]                   # torch, torch_npu, torchvision, torchaudio, triton_ascend, transformers
    requires_python: str                      # vllm-ascend's ("": any)
    wheels: frozenset[tuple[str, str]]        # (python, arch) vllm-ascend has wheels for; elsewhere its sdist
    sdist: str
    sdist_sha256: str
    vllm_sdist: str
    vllm_sdist_sha256: str
    vllm_requires_python: str
    source: str
    images: tuple[ReleaseImage, ...] = ()     # its Dockerfiles' (the chips it serves, their SOC_VERSION)
    ray: str = ""                             # the Ray requirement its images install
    candidate: bool = False                   # a release candidate

    def fits(self, python: str, stack: Stack | None = None) -> bool:
        """A Python both packages' Requires-Python take, in the stack's range."""
        st = stack or self.stack
        return (python in st.pythons() and SpecifierSet(self.requires_python).contains(python + ".0")
                and SpecifierSet(self.vllm_requires_python).contains(python + ".0"))

    def pythons(self, stack: Stack | None = None) -> list[str]:
        """The Pythons a serving image of it can have: the stack's (default: its own) that
        vllm-ascend's and vllm's Requires-Python take."""
        st = stack or self.stack
        return [p for p in st.pythons() if self.fits(p, st)]

    def images_python(self) -> str | None:
        """The Python most of its own images have, where a serving image of it can have it:
        the one a build takes when --python is not given (upstream's, not the stack's default)."""
        fits = self.pythons()
        counts = Counter(i.python for i in self.images if i.python in fits)
        return max(counts, key=lambda p: (counts[p], p)) if counts else None

    def has_wheel(self, python: str, arch: str) -> bool:
        """vllm-ascend has a wheel for it; elsewhere it is built from its sdist."""
        return (python, arch) in self.wheels
