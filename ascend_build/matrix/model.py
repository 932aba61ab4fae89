"""The matrix model: matrix.yaml parsed, checked for impossible combinations, and
resolved into build cells. Nothing here touches docker or the network."""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ..errors import MatrixError, UserError
from ..platforms import ARCHES, PLATFORMS, Platform
from ..platforms import get as get_platform
from . import schema as s
from .eras import NNAL as NNAL_FILE
from .eras import Era, cann_key, era_of
from .yamlsource import Located, load

PLATFORM_ARCH = {name: p.arch for name, p in PLATFORMS.items()}   # for the schema
VERSION = r"[0-9][0-9A-Za-z.+-]*"
MINOR = r"(2\.7|3\.([0-9]|1[0-9]))"        # CPython minors that exist or soon may (not 3.99)
DRIVER = r"[0-9]{2}\.[0-9]+\.([Rr][Cc][0-9]+|[0-9]+)(\.[0-9]+)?"
RUNS_ON = r"[0-9]{2}\.[0-9]+(\.([Rr][Cc][0-9]+|[0-9]+)(\.[0-9]+)?)?"
SHA256 = r"[0-9a-f]{64}"
# Companions a stack may carry: PyTorch's own domain libraries, whose wheels pin the torch
# release they were built for. DeepSpeed is not one: PyPI has only its source, which
# compiles against torch at install time (a user layer can carry it).
COMPANIONS = ("torchvision", "torchaudio")
# torch_npu ships its ATB plugin (lib/libop_plugin_atb.so, which loads NNAL's libatb.so) from
# 2.5.1 (read in the PyPI wheels: 2.4.0.post2 has none, 2.5.1 has it).
ATB_PLUGIN_FROM = Version("2.5.1")
Framework = Literal["torch", "mindspore"]
FRAMEWORKS: tuple[Framework, ...] = get_args(Framework)
FRAMEWORK_LAYERS: dict[str, tuple[str, ...]] = {"torch": ("cann", "torch", "torch_npu"), "mindspore": ("cann", "mindspore")}
MINDSPORE_PREFIX = "mindspore"      # a MindSpore stack's name: mindspore<release>


def stack_flag(name: str) -> str:
    """The command-line form that names a stack: `--torch 2.1.0` or `--mindspore 2.9.0`."""
    if name.startswith(MINDSPORE_PREFIX):
        return f"--mindspore {name[len(MINDSPORE_PREFIX):]}"
    return f"--torch {name}"


# ---------------------------------------------------------------------------- model

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
    kind: str          # toolkit or kernels
    file: str
    url: str           # full download URL
    sha256: str | None
    key: tuple[Any, ...]   # where it sits in matrix.yaml, for `invoke pin`
    zip_sha256: str | None = None   # Huawei's sum of the published .zip around the .run

    @property
    def zip(self) -> str:
        return self.file[:-len(".run")] + ".zip"

    @property
    def zip_url(self) -> str:
        return self.url[:-len(".run")] + ".zip"

    @property
    def arch(self) -> str:
        return self.key[-1]

    @property
    def chip(self) -> str | None:
        """The kernels' chip, from where they sit: ("cann", version, "kernels", chip, arch)."""
        if self.kind != "kernels":
            return None
        _cann, _version, _kind, chip, _arch = self.key
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

    @property
    def era(self) -> Era:
        return era_of(self.version)


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
        return (self.offers(st.gcc) and any(p in st.pythons() for p in self.pythons)
                and (not self.cann_from or cann_key(st.cann) >= cann_key(self.cann_from)))

    def python_path(self, minor: str) -> str:
        return self.python.replace("{X.Y}", minor).replace("{XY}", minor.replace(".", ""))

    def offers(self, gcc: int) -> bool:
        return gcc in self.gccs

    def toolset_root(self, gcc: int) -> str:
        return self.toolset.replace("{gcc}", str(gcc))


@dataclass(frozen=True)
class Stack:
    name: str
    torch: str
    torch_npu: str
    torch_npu_branch: str
    cann: str
    python_min: str
    python_max: str
    python_default: str
    gcc: int
    pins: dict[str, str]
    torch_index: dict[str, str]
    torch_npu_on_pypi: bool
    builder: str = ""
    # Packages installed with torch, each at the release its own metadata pairs with this
    # torch (torchvision 0.16.0 requires torch==2.1.0): the lock resolves the version.
    companions: tuple[str, ...] = ()
    nnal: bool | None = None                  # None: on where CANN publishes NNAL and the framework uses it
    torch_atb: bool = False                   # NNAL's Python plugin too (installer --torch_atb)
    cxx11_abi: dict[str, bool] = field(default_factory=dict)    # arch -> torch built with the CXX11 ABI
    # The framework on the CANN part: torch + torch_npu, or MindSpore (mindspore_stacks:,
    # whose stacks are named "mindspore<release>" and leave the torch fields empty).
    framework: Framework = "torch"
    mindspore: str = ""

    @property
    def layers(self) -> tuple[str, ...]:
        """The image's Python package layers, in order (one lock file each): CANN's own
        needs first, shared by every framework on that CANN, then the framework's."""
        return FRAMEWORK_LAYERS[self.framework]

    @property
    def key_path(self) -> str:
        """Where the stack is written in matrix.yaml, for messages."""
        return f"mindspore_stacks.{self.mindspore}" if self.framework == "mindspore" else f"stacks.{self.name}"

    @property
    def release(self) -> str:
        """What names the line: the torch release, or the MindSpore release."""
        return self.mindspore if self.framework == "mindspore" else self.torch

    @property
    def title(self) -> str:
        """The framework part of an image's title and of messages."""
        if self.framework == "mindspore":
            return f"MindSpore {self.mindspore}"
        return f"torch {self.torch} + torch_npu {self.torch_npu}"

    def python_for(self, os: OSBase) -> str:
        """The Python an image on `os` gets unless one is asked for: the distro's python3
        when the stack supports it (no compiling, least emulated work), else the stack's
        default, built from source."""
        return os.python if os.python in self.pythons() else self.python_default

    def pythons(self) -> list[str]:
        lo, hi = _minor(self.python_min), _minor(self.python_max)
        return [f"3.{m}" for m in range(lo, hi + 1)]

    @property
    def variant_suffix(self) -> str:
        """What an image name adds for a stack named otherwise than its torch (another
        release of the line, e.g. "2.12.0-26.1.0"): its torch_npu. The line's own stack
        adds nothing, so its tags stay what they have been."""
        return "" if self.name == self.torch or self.framework != "torch" else f"-npu{self.torch_npu}"


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


class _OnPlatform:
    """What a cell knows of its platform: the Platform record and CANN's arch name."""
    platform: str

    @property
    def target(self) -> Platform:
        return PLATFORMS[self.platform]

    @property
    def arch(self) -> str:
        return self.target.arch


@dataclass(frozen=True)
class Cell(_OnPlatform):
    """One image to build: every choice made, every file named."""
    stack: Stack
    os: OSBase
    python: str
    python_source: PythonSource | None   # None: the distro's python3
    chip: str
    platform: str
    cann: CannRelease
    toolkit: CannFile
    kernels: CannFile
    pins: tuple[str, ...]                # pip requirement strings
    alias: str | None = None
    layers: tuple[UserLayer, ...] = ()   # user layers `images:` builds on it
    nnal: CannFile | None = None         # NNAL (ATB) installed after the operator package
    pairing: str = "published"           # published: torch_npu was released for this CANN; compatible: Huawei's grid

    @property
    def abi(self) -> int:
        """NNAL's cxx_abi for this image: 1 where torch is built with the CXX11 ABI."""
        return int(self.stack.cxx11_abi.get(self.arch, True))

    @property
    def dockerfile(self) -> Path:
        return Path("images") / "runtime" / self.stack.name / self.os.name / "Dockerfile"

    @property
    def name(self) -> str:
        """The readable tag: what is inside, lowercase."""
        framework = (f"mindspore{self.stack.mindspore}" if self.stack.framework == "mindspore"
                     else f"torch{self.stack.torch}{self.stack.variant_suffix}")
        return f"cann{self.cann.version}-{self.chip}-{self.os.name}-py{self.python}-{framework}".lower()

    @property
    def torch_index(self) -> str | None:
        return self.stack.torch_index.get(self.arch)

    @property
    def cann_files(self) -> tuple[CannFile, ...]:
        """The CANN installers in install order: toolkit, operators, NNAL where it goes in."""
        return (self.toolkit, self.kernels) + ((self.nnal,) if self.nnal else ())

    def unpinned(self) -> list[str]:
        # A published .zip sum verifies the .run taken out of it.
        names = [f.file for f in self.cann_files if not f.sha256 and not f.zip_sha256]
        if self.python_source and not self.python_source.sha256:
            names.append(f"CPython {self.python_source.version} source tarball")
        return names


@dataclass(frozen=True)
class BuilderCell(_OnPlatform):
    """One builder image: a stack's toolchain on one flavor, for some Pythons."""
    stack: Stack
    flavor: Builder
    pythons: tuple[str, ...]
    platform: str

    @property
    def dockerfile(self) -> Path:
        return Path("images") / "builder" / self.stack.name / self.flavor.name / "Dockerfile"

    @property
    def gcc(self) -> int:
        return self.stack.gcc

    @property
    def name(self) -> str:
        return (f"torch{self.stack.torch}-{self.flavor.name}-gcc{self.gcc}-py"
                + "-py".join(self.pythons)).lower()


@dataclass(frozen=True)
class TorchAtb:
    """NNAL's optional Python plugin: the Pythons it is built for and, per CANN series, the
    glibc it needs (NNAL itself needs only 2.17)."""
    pythons: tuple[str, ...]
    glibc: dict[str, str]      # CANN series ("9.1") -> glibc floor
    source: str

    def floor(self, cann: str) -> str | None:
        return self.glibc.get(cann_series(cann))


@dataclass(frozen=True)
class ChipSupport:
    """A chip whose images need a torch_npu release made for it, not only CANN's operators."""
    chip: str
    torchnpu_from: str         # the first TorchNPU release with images for the chip
    source: str


@dataclass
class Matrix:
    path: Path
    source: Located
    defaults: dict[str, str]
    os: dict[str, OSBase]
    pythons: dict[str, PythonSource]
    cann: dict[str, CannRelease]
    stacks: dict[str, Stack]
    images: list[ImageSpec]
    cann_python_deps: list[str] = field(default_factory=list)
    builders: dict[str, Builder] = field(default_factory=dict)
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)     # torch_npu, apex (apex: its nvidia too)
    torch_atb: TorchAtb | None = None
    chip_support: dict[str, ChipSupport] = field(default_factory=dict)
    torch_npu_build: dict = field(default_factory=dict)         # flags, env, submodules (offline builds)
    torch_npu_tags: dict[str, dict] = field(default_factory=dict)   # version -> tag, commit, submodules

    def builder_cell(self, stack: str | None = None, flavor: str | None = None, python: str | None = None,
                     platform: str | None = None) -> BuilderCell:
        st = self._stack(stack)
        stack = st.name
        if st.framework != "torch":
            raise UserError(f"stack {stack} is {st.title}: its images take the released wheel, so it has no "
                            f"builder; builders are for torch_npu and apex (--torch, one of: "
                            f"{', '.join(n for n, x in self.stacks.items() if x.framework == 'torch')})")
        flavor = flavor or st.builder
        if flavor not in self.builders:
            raise UserError(f"unknown builder flavor {flavor!r}; {self.path} defines: {', '.join(self.builders)}")
        b = self.builders[flavor]
        if b.cann_from and cann_key(st.cann) < cann_key(b.cann_from):
            raise UserError(f"builder {flavor} is for the lines on CANN {b.cann_from} and later; torch stack "
                            f"{stack} is on CANN {st.cann}: use --flavor "
                            f"{', '.join(n for n, x in self.builders.items() if x.serves(st)) or st.builder}")
        if not b.offers(st.gcc):
            raise UserError(f"builder {flavor} has gcc {_gccs(b)} but torch stack {stack} needs gcc {st.gcc} "
                            f"(stacks.{stack}.gcc); builders with gcc {st.gcc}: "
                            f"{', '.join(n for n, x in self.builders.items() if x.offers(st.gcc)) or 'none'}")
        usable = [p for p in b.pythons if p in st.pythons()]
        if python:
            if python not in usable:
                raise UserError(f"python {python} is not available in builder {flavor} for torch stack {stack}; "
                                f"choose one of: {', '.join(usable) or 'none'}")
            usable = [python]
        if not usable:
            raise UserError(f"builder {flavor} has no Python in torch stack {stack}'s range "
                            f"{st.python_min}-{st.python_max}")
        return BuilderCell(st, b, tuple(usable), self._platform(platform))

    def pairing(self, st: Stack) -> tuple[str, str] | None:
        """How the stack's torch_npu release goes with its CANN: ("published", why) when the
        release was made for that CANN, ("compatible", why) when Huawei's grid of TorchNPU
        series x CANN series says they work together; None when neither."""
        if st.framework == "mindspore":
            ms = (self.source.data.get("mindspore_releases") or {}).get(st.mindspore) or {}
            if st.cann in (ms.get("cann") or []):
                return "published", f"MindSpore {st.mindspore} was released for CANN {st.cann}"
            return None
        rel = (self.source.data.get("torch_npu_releases") or {}).get(st.torch_npu) or {}
        if st.cann in (rel.get("cann") or []):
            return "published", f"torch_npu {st.torch_npu} was released for CANN {st.cann}"
        torchnpu = str(rel.get("torchnpu") or "")
        series = ".".join(torchnpu.split(".")[:2])
        grid = (self.source.data.get("torchnpu_compatible") or {}).get(series) or []
        if series and cann_series(st.cann) in [str(c) for c in grid]:
            published = ", ".join(rel.get("cann") or []) or "none"
            return "compatible", (f"torch_npu {st.torch_npu} (TorchNPU {torchnpu}, released for CANN {published}) "
                                  f"works with CANN {cann_series(st.cann)}.x by Huawei's compatibility grid")
        return None

    def nnal(self, st: Stack, cann: CannRelease, arch: str) -> CannFile | None:
        """The NNAL installer an image of this stack gets: on by default where the CANN
        release publishes NNAL and the framework loads it (torch_npu's ATB plugin from
        2.5.1, MindSpore's ATB kernels); `nnal: false` turns it off."""
        if st.nnal is False or arch not in cann.nnal:
            return None
        if st.framework == "torch" and st.nnal is None and Version(Version(st.torch_npu).base_version) < ATB_PLUGIN_FROM:
            return None
        return cann.nnal[arch]

    def allows(self, st: Stack, os: OSBase) -> bool:
        """A (stack, OS) the matrix allows, so a Dockerfile is rendered for it: every OS, but
        one below torch_atb's glibc floor for a stack that asks for torch_atb."""
        if not st.torch_atb:
            return True
        try:
            torch_atb_fits(self, st, self.cann[st.cann], os, None)
        except UserError:
            return False
        return True

    def debootstrap_suite(self, image: str) -> str | None:
        """The Debian suite that makes `image` without a registry, if the matrix names one."""
        return next((o.suite for o in self.os.values() if o.image == image and o.suite), None)

    def offline_os(self, stack: Stack) -> OSBase | None:
        """The OS whose base debootstrap can make for this stack, its distro Python first
        (nothing compiled), for when the stack's base image cannot be pulled."""
        debian = [o for o in self.os.values() if o.suite]
        return next((o for o in debian if o.python in stack.pythons()), debian[0] if debian else None)

    def mindspore_stack(self, release: str) -> str:
        """The name of the MindSpore stack of `release` (`--mindspore 2.9.0`), or why there is none."""
        name = MINDSPORE_PREFIX + release
        if name in self.stacks:
            return name
        defined = [st.mindspore for st in self.stacks.values() if st.framework == "mindspore"]
        paired = {r: v.get("cann") for r, v in (self.source.data.get("mindspore_releases") or {}).items()
                  if v.get("cann")}
        hint = (f"MindSpore {release} was released for CANN {', '.join(paired[release])} (mindspore_releases): add a "
                f"`mindspore_stacks:` entry naming that CANN and the Python range (see the {defined[-1]} entry)"
                if release in paired and defined else
                f"Huawei's data pairs these releases with a CANN: {', '.join(paired) or 'none'}")
        raise UserError(f"unknown MindSpore stack {release!r}; {self.path} defines: {', '.join(defined) or 'none'}. "
                        + hint)

    def _stack(self, name: str | None) -> Stack:
        name = name or self.defaults["torch"]
        if name in self.stacks:
            return self.stacks[name]
        if name.startswith(MINDSPORE_PREFIX):
            self.mindspore_stack(name[len(MINDSPORE_PREFIX):])
        releases = self.source.data.get("torch_npu_releases") or {}
        mine = {r: v for r, v in releases.items() if r == name or r.startswith(name + ".")}
        paired = [r for r, v in mine.items() if v.get("cann")]
        if mine and not paired:
            raise UserError(f"unknown torch stack {name!r}: torch_npu {', '.join(mine)} is on PyPI but unpaired: the "
                            f"data {self.path} imported publishes no CANN release for it, so a stack on it would be "
                            f"refused. `invoke update` brings the pairing once Huawei publishes it; the lines here: "
                            f"{', '.join(self.stacks)}")
        hint = (f"torch_npu {', '.join(paired)} is paired (torch_npu_releases): add a `stacks:` entry naming it, "
                f"its CANN and the Python range (see the 2.10.0 entry)" if paired else
                f"`invoke update` imports Huawei's torch_npu and CANN releases into {self.path}; then add a "
                f"`stacks:` entry naming the torch_npu release, its CANN and the Python range (see the 2.10.0 entry)")
        raise UserError(f"unknown torch stack {name!r}; {self.path} defines: {', '.join(self.stacks)}. To add a "
                        f"line: {hint}")

    def _platform(self, platform: str | None) -> str:
        platform = platform or self.defaults["platform"]
        get_platform(platform)
        return platform

    # ------------------------------------------------------------ resolution
    def cell(self, stack: str | None = None, os: str | None = None, python: str | None = None,
             chip: str | None = None, platform: str | None = None, alias: str | None = None,
             torch_atb: bool = False) -> Cell:
        """One image, every choice made; `torch_atb` asks for NNAL's Python plugin as well
        (`invoke build --torch-atb`), as the stack's `torch_atb: true` does."""
        st = self._stack(stack)
        if torch_atb and not st.torch_atb:
            st = dataclasses.replace(st, torch_atb=True)
        stack = st.name
        os = os or self.defaults["os"]
        if os not in self.os:
            raise UserError(f"unknown os {os!r}; {self.path} defines: {', '.join(self.os)}")
        base = self.os[os]
        python = python or st.python_for(base)
        if python not in st.pythons():
            raise UserError(f"python {python} is outside {st.framework} stack {st.release}'s range "
                            f"{st.python_min}-{st.python_max} ({st.key_path}.python); choose one of: "
                            f"{', '.join(st.pythons())}")
        source = None
        if python != base.python:
            if python not in self.pythons:
                raise UserError(f"python {python} is not {os}'s python3 ({base.python}) and pythons.{python!r} "
                                f"in {self.path} has no source tarball; add one, or choose python {base.python}")
            source = self.pythons[python]
        platform = self._platform(platform)
        arch = PLATFORM_ARCH[platform]
        cann = self.cann[st.cann]
        chip = chip or self.defaults["chip"]
        if chip not in cann.kernels:
            having = [n for n, s in self.stacks.items() if chip in self.cann[s.cann].kernels]
            raise UserError(f"CANN {cann.version} has no kernels for chip {chip!r} "
                            f"(cann.{cann.version}.kernels); chips with kernels: {', '.join(cann.kernels)}"
                            + (f". Stacks on a CANN with {chip} kernels: {', '.join(stack_flag(n) for n in having)}"
                               if having else ""))
        if arch not in cann.kernels[chip]:
            raise UserError(f"CANN {cann.version}'s {chip} kernels are published for "
                            f"{', '.join(cann.kernels[chip])} only, not {arch}: build --platform "
                            f"{next(p for p, a in PLATFORM_ARCH.items() if a in cann.kernels[chip])}")
        self._check_chip(st, chip)
        pins = [f"{name}{spec}" for name, spec in sorted(st.pins.items())]
        nnal = self.nnal(st, cann, arch)
        if st.torch_atb:
            if nnal is None:
                raise UserError(f"--torch-atb: torch_atb comes with NNAL, which stack {st.name} has no NNAL for on "
                                f"{arch} (CANN {cann.version}"
                                + (", nnal: false" if st.nnal is False else "" if cann.nnal else ": none published")
                                + f"); stacks with NNAL: {', '.join(self._with_nnal()) or 'none'}")
            torch_atb_fits(self, st, cann, base, python)
        kind = (self.pairing(st) or ("published", ""))[0]
        return Cell(stack=st, os=base, python=python, python_source=source, chip=chip,
                    platform=platform, cann=cann, toolkit=cann.toolkit[arch],
                    kernels=cann.kernels[chip][arch], pins=tuple(pins), alias=alias, nnal=nnal, pairing=kind)

    def chips(self, st: Stack) -> list[str]:
        """The chips images of this stack can be built for: its CANN's operator packages,
        less those whose images need a newer torch_npu (chip_support:)."""
        def fits(chip: str) -> bool:
            try:
                self._check_chip(st, chip)
            except UserError:
                return False
            return True
        return [chip for chip in self.cann[st.cann].kernels if fits(chip)]

    def _with_nnal(self) -> list[str]:
        return [n for n, s in self.stacks.items() if s.framework == "torch" and self.nnal(s, self.cann[s.cann], "aarch64")]

    def _check_chip(self, st: Stack, chip: str) -> None:
        """A chip whose images need a torch_npu made for it (chip_support:): the stack's
        TorchNPU release must be that one or newer."""
        need = self.chip_support.get(chip)
        if need is None:
            return
        have = self.torchnpu_of(st)
        if st.framework == "torch" and have and Version(have) >= Version(need.torchnpu_from):
            return
        fits = [n for n, s in self.stacks.items() if chip in self.cann[s.cann].kernels and (t := self.torchnpu_of(s))
                and Version(t) >= Version(need.torchnpu_from)]
        what = f"TorchNPU {have}" if have else ("MindSpore" if st.framework == "mindspore" else "a release before 26.x")
        raise UserError(f"chip {chip}: its images need TorchNPU {need.torchnpu_from} or newer (chip_support.{chip}: "
                        f"{need.source}); stack {st.name} is {what}. Stacks for {chip}: "
                        f"{', '.join(stack_flag(n) for n in fits) or 'none'}")

    def torchnpu_of(self, st: Stack) -> str | None:
        """The TorchNPU release (26.1.0, ...) the stack's torch_npu belongs to, where the data names it."""
        if st.framework != "torch":
            return None
        rel = (self.source.data.get("torch_npu_releases") or {}).get(st.torch_npu) or {}
        return str(rel["torchnpu"]) if rel.get("torchnpu") else None

    def aliased(self, cell: Cell) -> Cell:
        """The cell with the alias `images:` gives this very image, if any."""
        def key(c: Cell) -> tuple:
            return (c.stack.name, c.os.name, c.python, c.chip, c.platform)
        alias = next((c.alias for c in self.image_cells() if key(c) == key(cell) and c.alias), None)
        return dataclasses.replace(cell, alias=alias)

    def image_cells(self) -> list[Cell]:
        """Every cell the `images:` list asks for (the CI matrix)."""
        cells = []
        for spec in self.images:
            for os in spec.os:
                for platform in spec.platforms:
                    alias = spec.alias if os == self.defaults["os"] else None
                    cells.append(dataclasses.replace(self.cell(spec.stack, os, spec.python, spec.chip, platform, alias),
                                                     layers=spec.layers))
        return cells


# ---------------------------------------------------------------------------- schema

def _file_entry() -> s.Check:
    return s.record({"file": s.string(r"[A-Za-z0-9._-]+\.run", "a .run file name"),
                     "sha256": s.optional(s.string(SHA256, "64 lowercase hex digits, or null"))},
                    # Huawei's published sum of the .zip around the .run (imported)
                    {"zip_sha256": s.string(SHA256, "64 lowercase hex digits")})


def _doc() -> s.Check:
    return s.record({"url": s.string(r"https?://\S+", "a URL"), "file": s.string(r"[A-Za-z0-9._-]+", "a file name")})


def _per_arch(item: s.Check) -> s.Check:
    return s.record({arch: item for arch in ARCHES})


RUN_AS = r"root|[0-9]{1,9}:[0-9]{1,9}"

_SCHEMA = s.record({
    "schema": s.integer(1, 1),
    "defaults": s.record({"torch": s.string(), "os": s.string(), "chip": s.string(),
                          "platform": s.one_of(*PLATFORM_ARCH)},
                         {"run_as": s.string(RUN_AS, "root, or UID:GID like 1000:1000")}),
    "os": s.map_of(s.string(r"[a-z0-9.]+", "lowercase name like ubuntu22.04"), s.record({
        "image": s.string(r"\S+", "an image reference"),
        "family": s.one_of("apt", "dnf"),
        "python": s.string(MINOR, "a python minor version like \"3.10\""),
    }, {"debootstrap": s.string(r"[a-z]+", "a Debian suite like bookworm"),
        "glibc": s.string(r"2\.[0-9]+", "a glibc version like \"2.35\"")})),
    "pythons": s.map_of(s.string(MINOR, "a python minor version like \"3.10\""), s.record({
        "version": s.string(r"3\.[0-9]+\.[0-9]+", "a full CPython version like 3.9.2"),
        "urls": s.list_of(s.string(r"(https?|file)://\S+", "a URL")),
        "sha256": s.optional(s.string(SHA256, "64 lowercase hex digits, or null")),
    })),
    "cann": s.map_of(s.string(VERSION, "a CANN version like 8.0.RC3"), s.record({
        "url": s.string(r"https?://\S+/", "a base URL ending in /"),
        "driver": s.optional(s.string(DRIVER, "an NPU driver version like 24.1.RC3, or null")),
        "toolkit": _per_arch(_file_entry()),
        "kernels": s.map_of(s.string(r"[0-9A-Za-z]+", "a chip like 910b"), _per_arch(_file_entry())),
    }, {"numpy": s.optional(s.specifier), "source": s.string(), "nnal": _per_arch(_file_entry()),
        "runs_on": s.list_of(s.string(RUNS_ON, "a driver like 26.0.RC1, or a series like 25.2")),
        "runs_on_source": s.string()})),
    "torch_npu_releases": s.map_of(s.string(VERSION, "a torch_npu version"), s.record({
        "cann": s.list_of(s.string(), non_empty=False),
    }, {"branch": s.string(r"v\S+", "a release branch like v2.1.0-6.0.rc3"), "source": s.string(), "pypi": s.boolean,
        "torchnpu": s.string(r"[0-9]+\.[0-9]+\.[0-9]+", "a TorchNPU release like 26.1.0"),
        "wheels": s.map_of(s.string(r"cp3[0-9]+-(aarch64|x86_64)", "a tag like cp310-aarch64"),
                           s.map_of(s.one_of("torch", "torch_npu"), s.string(SHA256, "64 hex digits"))),
        "pypi_pythons": s.map_of(s.one_of(*ARCHES), s.list_of(s.string(MINOR, "like \"3.10\"")))})),
    "cann_python_deps": s.list_of(s.string(r"[A-Za-z0-9_.-]+", "a PyPI name")),
    "stacks": s.map_of(s.string(VERSION, "a torch version like \"2.1.0\""), s.record({
        "torch": s.string(VERSION),
        "torch_npu": s.string(VERSION),
        "cann": s.string(),
        "python": s.record({"min": s.string(MINOR, "like \"3.8\""), "max": s.string(MINOR, "like \"3.11\""),
                            "default": s.string(MINOR, "like \"3.9\"")}),
        "gcc": s.integer(4, 20),
        "pins": s.map_of(s.string(r"[A-Za-z0-9_.-]+", "a PyPI name"), s.specifier, non_empty=False),
    }, {
        "torch_index": s.map_of(s.one_of(*ARCHES), s.string(r"https?://\S+", "an index URL"), non_empty=False),
        "torch_npu_on_pypi": s.boolean,
        "builder": s.string(),
        "companions": s.list_of(s.one_of(*COMPANIONS), non_empty=False),
        "nnal": s.boolean,
        "torch_atb": s.boolean,
        "cxx11_abi": s.map_of(s.one_of(*ARCHES), s.boolean),
    })),
    "builders": s.map_of(s.string(r"[a-z0-9._]+", "a lowercase name"), s.record({
        "image": s.string(r"\S+", "an image reference; {arch} becomes aarch64 or x86_64"),
        "family": s.one_of("manylinux", "apt"),
        "gcc": s.list_of(s.integer(4, 20)),
        "python": s.string(r"/\S*\{(X\.Y|XY)\}\S*", "an interpreter path with {X.Y} or {XY}"),
        "pythons": s.list_of(s.string(MINOR, "like \"3.9\"")),
    }, {"toolset": s.string(r"/\S*\{gcc\}\S*", "a toolset root with {gcc}, like /opt/rh/gcc-toolset-{gcc}"),
        "cann_from": s.string(VERSION, "a CANN version like 9.0.1"),
        "cross": s.string(r"\S+", "a Debian image with g++-N-aarch64-linux-gnu for the flavor's gccs"),
        "wheel_plat": s.string(r"manylinux_2_[0-9]+", "the wheels' platform tag, like manylinux_2_31")})),
    "sources": s.record({
        "torch_npu": s.record({"repo": s.string(r"\S+", "a git URL")}),
        "apex": s.record({"repo": s.string(r"\S+", "a git URL"), "ref": s.string(r"\S+", "a commit or tag")},
                         {"nvidia": s.record({"repo": s.string(r"\S+", "a git URL"),
                                              "ref": s.string(r"[0-9a-f]{40}", "a 40-digit commit")})}),
    }),
    "images": s.list_of(s.record({
        "stack": s.string(),
        "os": s.list_of(s.string()),
        "platforms": s.list_of(s.one_of(*PLATFORM_ARCH)),
    }, {"python": s.string(MINOR), "chip": s.string(), "alias": s.string(r"[a-z0-9._-]+", "a lowercase tag"),
        "layers": s.list_of(s.record({"requirements": s.string(r"\S+", "a requirements file, relative to matrix.yaml")},
                                     {"name": s.string(r"[a-z0-9][a-z0-9_.-]{0,39}", "a lowercase tag part")}))})),
}, {
    # Hand-written facts that sit beside the imported ones.
    "cann_numpy": s.map_of(s.string(VERSION, "a CANN version"), s.specifier),
    # Kernels of chips no import lists (310B), per CANN release, each with its source.
    "cann_chips": s.map_of(s.string(VERSION, "a CANN version"), s.record({
        "source": s.string(),
        "kernels": s.map_of(s.string(r"[0-9A-Za-z]+", "a chip like 310b"),
                            s.map_of(s.one_of(*ARCHES), _file_entry())),
    })),
    # How a torch_npu source build runs offline (hand-written, with its source).
    "torch_npu_build": s.record({
        "source": s.string(),
        "flags": s.list_of(s.string(r"--[a-z_]+", "a ci/build.sh flag like --disable_rpc"), non_empty=False),
        "env": s.map_of(s.string(r"[A-Z_]+", "an environment variable"), s.string(), non_empty=False),
        "submodules": s.list_of(s.string(r"third_party/\S+", "a submodule path like third_party/op-plugin")),
    }),
    # Imported: each torch_npu release's tag, its commit and its submodules' commits.
    "torch_npu_tags": s.map_of(s.string(VERSION, "a torch_npu version"), s.record({
        "tag": s.string(r"v\S+", "a release tag like v6.0.rc3-pytorch2.1.0"),
        "commit": s.string(r"[0-9a-f]{40}", "a 40-digit commit"),
        "submodules": s.map_of(s.string(r"third_party/\S+", "a submodule path"),
                               s.string(r"[0-9a-f]{40}", "a 40-digit commit"), non_empty=False),
        "flags": s.list_of(s.string(r"--[a-z_]+", "a ci/build.sh flag"), non_empty=False),
    }), non_empty=False),
    "torch_npu_branches": s.map_of(s.string(VERSION, "a torch_npu version"),
                                   s.string(r"v\S+", "a release branch like v2.1.0-6.0.rc3")),
    "upstream": s.record({"deployer": s.list_of(s.string(r"[0-9]+\.[0-9]+\.[0-9]+", "a release like \"26.0.0\""))},
                         {"choices": s.map_of(s.string(), s.record({"take": s.string(), "why": s.string()}),
                                              non_empty=False),
                          "docs": s.record({}, {
                              "compatibility": _doc(), "tags": _doc(),
                              "torch_npu_notes": s.map_of(s.string(r"[0-9]+\.[0-9]+\.[0-9]+", "a TorchNPU release"),
                                                          _doc()),
                              "cann_notes": s.map_of(s.string(VERSION, "a CANN release"), _doc())})}),
    "torchnpu_compatible": s.map_of(s.string(r"[0-9]+\.[0-9]+", "a TorchNPU series like \"26.1\""),
                                    s.list_of(s.string(r"[0-9]+\.[0-9]+", "a CANN series like \"9.1\""))),
    # torch_atb (NNAL's Python plugin): its Pythons and its glibc floor per CANN series.
    "torch_atb": s.record({"source": s.string(), "pythons": s.list_of(s.string(MINOR, "like \"3.10\"")),
                           "glibc": s.map_of(s.string(r"[0-9]+\.[0-9]+", "a CANN series like \"9.1\""),
                                             s.string(r"2\.[0-9]+", "a glibc version like \"2.38\""))}),
    # NNAL of the releases no import lists it for, each with its source.
    "cann_nnal": s.map_of(s.string(VERSION, "a CANN version"), s.record({
        "source": s.string(), "nnal": s.map_of(s.one_of(*ARCHES), _file_entry())})),
    "nnal_sip_from": s.string(VERSION, "a CANN version like 8.3.RC1"),
    "chip_support": s.map_of(s.string(r"[0-9A-Za-z]+", "a chip like 950"), s.record({
        "torchnpu_from": s.string(r"[0-9]+\.[0-9]+\.[0-9]+", "a TorchNPU release like 26.1.0"),
        "source": s.string()})),
    # MindSpore stacks: the framework beside torch on the same CANN part (mindspore_releases pairs them).
    "mindspore_stacks": s.map_of(
        s.string(r"[0-9]+\.[0-9]+\.[0-9]+([.-]?(rc|post)[0-9]+)*", "a MindSpore release like 2.9.0"), s.record({
            "cann": s.string(),
            "python": s.record({"min": s.string(MINOR, "like \"3.9\""), "max": s.string(MINOR, "like \"3.11\""),
                                "default": s.string(MINOR, "like \"3.11\"")}),
            "pins": s.map_of(s.string(r"[A-Za-z0-9_.-]+", "a PyPI name"), s.specifier, non_empty=False),
        }, {"nnal": s.boolean, "cxx11_abi": s.map_of(s.one_of(*ARCHES), s.boolean)})),
    # Imported beside torch_npu_releases: MindSpore releases, their CANN and wheel sums.
    "mindspore_releases": s.map_of(
        s.string(r"[0-9]+\.[0-9]+\.[0-9]+([.-]?(rc|post)[0-9]+)*", "a MindSpore release like 2.9.0"),
        s.record({"cann": s.list_of(s.string(), non_empty=False)}, {
        "source": s.string(), "pypi": s.boolean,
        "pypi_pythons": s.map_of(s.one_of(*ARCHES, "any"), s.list_of(s.string(MINOR, "like \"3.10\""))),
        "wheels": s.map_of(s.string(r"cp3[0-9]+-(aarch64|x86_64)", "a tag like cp310-aarch64"),
                           s.map_of(s.one_of("mindspore"), s.string(SHA256, "64 hex digits")))})),
})


def _gccs(b: Builder) -> str:
    return " or ".join(map(str, b.gccs))


def _minor(version: str) -> int:
    return int(version.split(".")[1])


# ------------------------------------------------------------ naming eras (stack ref §2)

def expected_toolkit(version: str, arch: str) -> str:
    return f"Ascend-cann-toolkit_{version}_linux-{arch}.run"


def expected_kernels(version: str, chip: str, arch: str) -> str:
    return era_of(version).kernels_file.format(chip=chip, v=version, arch=arch)


# ---------------------------------------------------------------------------- loading

def load_matrix(path: str | Path = "matrix.yaml") -> Matrix:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(f"cannot read the matrix file {path}: {exc.strerror}") from None
    return load_text(text, path)


def load_text(text: str, path: Path) -> Matrix:
    """A matrix from its text (`path` names it in errors), checked like a file."""
    source = load(text, str(path))
    checker = s.Checker(source)
    _SCHEMA(checker, source.data, ())
    if checker.problems:
        raise MatrixError(checker.problems)
    matrix = _build(path, source)
    _check_semantics(matrix, checker)
    if checker.problems:
        raise MatrixError(checker.problems)
    return matrix


def _build(path: Path, src: Located) -> Matrix:
    d = src.data
    oses = {k: OSBase(k, v["image"], v["family"], v["python"], v.get("debootstrap"), v.get("glibc"))
            for k, v in d["os"].items()}
    pythons = {k: PythonSource(k, v["version"], tuple(v["urls"]), v.get("sha256"))
               for k, v in d["pythons"].items()}
    cann = {}
    for ver, c in d["cann"].items():
        def entry(kind: str, e: dict, key: tuple, url: str = c["url"]) -> CannFile:
            return CannFile(kind, e["file"], url + e["file"], e.get("sha256"), key, e.get("zip_sha256"))
        toolkit = {a: entry("toolkit", c["toolkit"][a], ("cann", ver, "toolkit", a)) for a in ARCHES}
        kernels = {chip: {a: entry("kernels", per[a], ("cann", ver, "kernels", chip, a)) for a in ARCHES}
                   for chip, per in c["kernels"].items()}
        numpy = c.get("numpy") or (d.get("cann_numpy") or {}).get(ver)
        nnal = {a: entry("nnal", c["nnal"][a], ("cann", ver, "nnal", a)) for a in c.get("nnal") or {}}
        # Hand-recorded NNAL (cann_nnal:), where the import names none.
        for a, e in (((d.get("cann_nnal") or {}).get(ver) or {}).get("nnal") or {}).items():
            nnal.setdefault(a, entry("nnal", e, ("cann_nnal", ver, "nnal", a)))
        # Hand-recorded kernels (cann_chips:), for the arches they are published for.
        extra = (d.get("cann_chips") or {}).get(ver) or {}
        for chip, per in (extra.get("kernels") or {}).items():
            if chip not in kernels:
                kernels[chip] = {a: entry("kernels", e, ("cann_chips", ver, "kernels", chip, a)) for a, e in per.items()}
        sip = bool(nnal) and "nnal_sip_from" in d and cann_key(ver) >= cann_key(str(d["nnal_sip_from"]))
        cann[ver] = CannRelease(ver, c["url"], c.get("driver"), numpy, toolkit, kernels, nnal,
                                tuple(str(x) for x in c.get("runs_on") or ()), sip)
    releases = d["torch_npu_releases"]
    stacks = {}
    for name, st in d["stacks"].items():
        rel = releases.get(st["torch_npu"], {})
        stacks[name] = Stack(
            name=name, torch=st["torch"], torch_npu=st["torch_npu"],
            torch_npu_branch=rel.get("branch") or (d.get("torch_npu_branches") or {}).get(st["torch_npu"], ""),
            cann=st["cann"], python_min=st["python"]["min"], python_max=st["python"]["max"],
            python_default=st["python"]["default"], gcc=st["gcc"], pins=dict(st["pins"]),
            torch_index=dict(st.get("torch_index") or {}), torch_npu_on_pypi=st.get("torch_npu_on_pypi", True),
            builder=st.get("builder", ""), companions=tuple(st.get("companions") or ()), nnal=st.get("nnal"),
            torch_atb=bool(st.get("torch_atb")), cxx11_abi=dict(st.get("cxx11_abi") or {}))
    for release, st in (d.get("mindspore_stacks") or {}).items():
        name = MINDSPORE_PREFIX + release
        stacks[name] = Stack(
            name=name, torch="", torch_npu="", torch_npu_branch="", cann=st["cann"],
            python_min=st["python"]["min"], python_max=st["python"]["max"], python_default=st["python"]["default"],
            gcc=0, pins=dict(st["pins"]), torch_index={}, torch_npu_on_pypi=True, nnal=st.get("nnal"),
            cxx11_abi=dict(st.get("cxx11_abi") or {}), framework="mindspore", mindspore=release)
    images = [ImageSpec(i["stack"], tuple(i["os"]), tuple(i["platforms"]), i.get("python"), i.get("chip"),
                        i.get("alias"), tuple(UserLayer(x["requirements"], x.get("name")) for x in i.get("layers") or ()))
              for i in d["images"]]
    builders = {k: Builder(k, v["image"], v["family"], tuple(v["gcc"]), v["python"], tuple(v["pythons"]),
                           v.get("toolset", ""), str(v.get("cann_from", "")), v.get("cross", ""),
                           v.get("wheel_plat", ""))
                for k, v in d["builders"].items()}
    atb = d.get("torch_atb")
    torch_atb = TorchAtb(tuple(atb["pythons"]), {str(k): str(v) for k, v in atb["glibc"].items()}, atb["source"]) \
        if atb else None
    chips = {str(k): ChipSupport(str(k), str(v["torchnpu_from"]), v["source"])
             for k, v in (d.get("chip_support") or {}).items()}
    return Matrix(path, src, dict(d["defaults"]), oses, pythons, cann, stacks, images,
                  list(d["cann_python_deps"]), builders, {k: dict(v) for k, v in d["sources"].items()},
                  torch_atb, chips, dict(d.get("torch_npu_build") or {}),
                  {str(k): dict(v) for k, v in (d.get("torch_npu_tags") or {}).items()})


def _check_semantics(m: Matrix, c: s.Checker) -> None:
    """What the schema cannot see: names per era, references between sections, ranges."""
    _check_cann(m, c)
    seen: dict[tuple[str, str, str], str] = {}
    for name, st in m.stacks.items():
        if st.framework == "mindspore":
            _check_mindspore_stack(m, c, ("mindspore_stacks", st.mindspore), st)
            continue
        _check_stack(m, c, ("stacks", name), st)
        # An image's name says torch, CANN and (for a variant) torch_npu: two stacks alike in
        # all three would share tags.
        other = seen.setdefault((st.torch, st.cann, st.variant_suffix), name)
        if other != name:
            c.fail(("stacks", name, "cann"), f"stacks {other} and {name} both put torch_npu {st.torch_npu} on CANN "
                   f"{st.cann}; their images would carry one name: keep one of them")
    _check_defaults(m, c)
    _check_images(m, c)


def _check_cann(m: Matrix, c: s.Checker) -> None:
    for ver, rel in m.cann.items():
        for arch in ARCHES:
            want = expected_toolkit(ver, arch)
            if rel.toolkit[arch].file != want:
                c.fail(("cann", ver, "toolkit", arch, "file"),
                       f"got {rel.toolkit[arch].file!r}; CANN {ver} names its toolkit {want!r}")
        for chip, per in rel.kernels.items():
            for arch, f in per.items():
                want = expected_kernels(ver, chip, arch)
                if f.file != want:
                    c.fail(f.key + ("file",), f"got {f.file!r}; CANN {ver} names its {chip} kernels {want!r}")
    for ver, extra in (m.source.data.get("cann_chips") or {}).items():
        if ver not in m.cann:
            c.fail(("cann_chips", ver), f"no CANN {ver} in cann: (the import); hand-recorded kernels need "
                                        f"their release there, one of {', '.join(m.cann)}")
            continue
        for chip in extra["kernels"]:
            if m.cann[ver].kernels[chip][next(iter(m.cann[ver].kernels[chip]))].key[0] == "cann":
                c.fail(("cann_chips", ver, "kernels", chip), f"CANN {ver}'s {chip} kernels are imported now "
                                                             f"(cann.{ver}.kernels.{chip}): remove this entry")
    for ver, extra in (m.source.data.get("cann_nnal") or {}).items():
        if ver not in m.cann:
            c.fail(("cann_nnal", ver), f"no CANN {ver} in cann: (the import); hand-recorded NNAL needs its "
                                       f"release there, one of {', '.join(m.cann)}")
            continue
        for arch, e in extra["nnal"].items():
            if m.cann[ver].nnal[arch].key[0] == "cann":
                c.fail(("cann_nnal", ver, "nnal", arch), f"CANN {ver}'s NNAL is imported now (cann.{ver}.nnal): "
                                                         f"remove this entry")
            elif e["file"] != NNAL_FILE.format(v=ver, arch=arch):
                c.fail(("cann_nnal", ver, "nnal", arch, "file"), f"got {e['file']!r}; CANN {ver} names its NNAL "
                                                                 f"{NNAL_FILE.format(v=ver, arch=arch)!r}")
    for name, rel in m.source.data["torch_npu_releases"].items():
        for i, cv in enumerate(rel["cann"]):
            if cv not in m.cann and not re.fullmatch(VERSION, cv):
                c.fail(("torch_npu_releases", name, "cann", i), f"got {cv!r}; expected a CANN version")


def _check_stack(m: Matrix, c: s.Checker, path: tuple, st: Stack) -> None:
    releases = m.source.data["torch_npu_releases"]
    if st.cann not in m.cann:
        c.fail(path + ("cann",), f"got {st.cann!r}; CANN releases defined under cann: {', '.join(m.cann)}")
    if st.torch_npu not in releases:
        c.fail(path + ("torch_npu",), f"got {st.torch_npu!r}, which torch_npu_releases does not list; "
               f"known releases for torch {st.torch}: "
               f"{', '.join(r for r in releases if r.startswith(st.torch)) or 'none'}")
    else:
        allowed = releases[st.torch_npu]["cann"]
        fits = [r for r, v in releases.items() if st.cann in v["cann"] and r.startswith(st.torch)]
        other = f", or torch_npu: {fits[0]} for CANN {st.cann}" if fits else ""
        if m.pairing(st) is None:
            torchnpu = releases[st.torch_npu].get("torchnpu")
            series = ".".join(str(torchnpu).split(".")[:2]) if torchnpu else ""
            grid = [str(x) for x in (m.source.data.get("torchnpu_compatible") or {}).get(series) or []]
            works = f"; by Huawei's grid TorchNPU {series}.x works with CANN {', '.join(x + '.x' for x in grid)}" \
                if grid else ""
            if not allowed and not grid:
                c.fail(path + ("torch_npu",), f"torch_npu {st.torch_npu} is unpaired: no CANN release is published "
                       f"for it (torch_npu_releases.{st.torch_npu}.cann is empty) and no compatibility grid names its "
                       f"TorchNPU release; choose a paired release{other}")
            else:
                c.fail(path + ("cann",), f"torch_npu {st.torch_npu} was released for CANN {', '.join(allowed) or 'none'}, "
                       f"not {st.cann}{works}; use cann: {(allowed or [grid[-1] + '.0'])[0]}{other}")
        _check_wheels(c, path, st, releases[st.torch_npu])
        if st.torch_npu_on_pypi and releases[st.torch_npu].get("pypi") is False:
            on_pypi = [r for r, v in releases.items() if r.startswith(st.torch) and v.get("pypi") is not False
                       and v["cann"]]
            c.fail(path + ("torch_npu",), f"torch_npu {st.torch_npu} is not on PyPI (Huawei's mirror only); "
                   f"choose one that is ({', '.join(on_pypi) or 'none for this torch'}), or set "
                   f"torch_npu_on_pypi: false and pass the wheel with --wheelhouse")
    if not st.torch_npu.startswith(st.torch):
        c.fail(path + ("torch_npu",), f"torch_npu {st.torch_npu} does not belong to torch {st.torch}; "
               f"expected a version starting with {st.torch}")
    lo, hi, default = _minor(st.python_min), _minor(st.python_max), _minor(st.python_default)
    if lo > hi:
        c.fail(path + ("python", "min"), f"min {st.python_min} is above max {st.python_max}")
    elif not lo <= default <= hi:
        c.fail(path + ("python", "default"), f"got {st.python_default!r}; expected a version from "
               f"{st.python_min} to {st.python_max}")
    cann = m.cann.get(st.cann)
    if cann and cann.numpy:
        numpy = st.pins.get("numpy")
        if numpy is None:
            c.fail(path + ("pins",), f"CANN {st.cann} needs numpy{cann.numpy}; add numpy: \"{cann.numpy}\" to the pins")
        elif _allows_outside(numpy, cann.numpy):
            c.fail(path + ("pins", "numpy"), f"got {numpy!r}, which admits numpy versions CANN {st.cann} "
                   f"breaks with; it needs numpy{cann.numpy}")

    if cann and st.nnal and not cann.nnal:
        c.fail(path + ("nnal",), f"CANN {st.cann} publishes no NNAL package (cann.{st.cann}.nnal is missing); drop "
               f"`nnal: true` or choose a CANN release that has one: "
               f"{', '.join(v for v, r in m.cann.items() if r.nnal) or 'none'}")
    if cann and cann.nnal and m.nnal(st, cann, "aarch64") is not None:
        for arch in ARCHES:
            if arch in cann.nnal and arch not in st.cxx11_abi:
                c.fail(path + ("cxx11_abi",), f"NNAL is installed for CANN {st.cann}: name the C++ ABI torch {st.torch} "
                       f"is built with on {arch} (torch.compiled_with_cxx11_abi()), e.g. cxx11_abi: {{{arch}: true}}; "
                       f"or turn NNAL off with nnal: false")
    if cann and st.torch_atb and m.nnal(st, cann, "aarch64") is None:
        c.fail(path + ("torch_atb",), f"torch_atb comes with NNAL, which this stack does not install (CANN {st.cann}"
               + (", nnal: false" if st.nnal is False else "") + "); drop torch_atb: true")
    if st.builder:
        b = m.builders.get(st.builder)
        if b is None:
            c.fail(path + ("builder",), f"got {st.builder!r}; builders defined: {', '.join(m.builders)}")
        elif not b.offers(st.gcc):
            fits = [n for n, x in m.builders.items() if x.offers(st.gcc)]
            c.fail(path + ("builder",), f"builder {st.builder} has gcc {_gccs(b)}, but this stack needs gcc "
                   f"{st.gcc}; builders with gcc {st.gcc}: {', '.join(fits) or 'none'}")


def _check_mindspore_stack(m: Matrix, c: s.Checker, path: tuple, st: Stack) -> None:
    """A MindSpore stack: a release Huawei pairs with the stack's CANN, a Python range its
    wheels cover (Huawei's list or PyPI's files), NNAL only with the ABI named."""
    releases = m.source.data.get("mindspore_releases") or {}
    if st.cann not in m.cann:
        c.fail(path + ("cann",), f"got {st.cann!r}; CANN releases in cann: {', '.join(m.cann)}")
    if st.mindspore not in releases:
        c.fail(path, f"MindSpore {st.mindspore} is not in mindspore_releases (the import); known: "
               f"{', '.join(releases) or 'none'}; `invoke update` imports Huawei's")
        return
    rel = releases[st.mindspore]
    if not rel.get("cann"):
        paired = [r for r, v in releases.items() if v.get("cann")]
        c.fail(path, f"MindSpore {st.mindspore} is unpaired: Huawei's data publishes no CANN release for it "
               f"(mindspore_releases.{st.mindspore}.cann is empty); paired releases: {', '.join(paired) or 'none'}")
    elif st.cann not in rel["cann"]:
        c.fail(path + ("cann",), f"MindSpore {st.mindspore} was released for CANN {', '.join(rel['cann'])}, not "
               f"{st.cann}; use cann: {rel['cann'][-1]}")
    if not (_minor(st.python_min) <= _minor(st.python_default) <= _minor(st.python_max)):
        c.fail(path + ("python", "default"), f"got {st.python_default}; not within {st.python_min}-{st.python_max}")
    wheels, on_pypi = rel.get("wheels") or {}, rel.get("pypi_pythons") or {}
    for arch in ARCHES:
        # PyPI tags MindSpore's aarch64 wheels for any platform: "any" stands for aarch64 there.
        listed = set(on_pypi.get(arch, [])) | set(on_pypi.get("any", []) if arch == "aarch64" else []) | \
            {f"3.{t.split('-')[0][3:]}" for t in wheels if t.endswith(arch)}
        missing = [p for p in st.pythons() if p not in listed]
        if missing:
            c.fail(path + ("python",), f"MindSpore {st.mindspore} has no {arch} wheel for Python "
                   f"{', '.join(missing)} (mindspore_releases lists {', '.join(sorted(listed, key=_minor)) or 'none'}, "
                   f"Huawei's list and PyPI's files); narrow the range")
    cann = m.cann.get(st.cann)
    if cann and st.nnal and not cann.nnal:
        c.fail(path + ("nnal",), f"CANN {st.cann} publishes no NNAL package; drop `nnal: true`")
    if cann and any(m.nnal(st, cann, a) and a not in st.cxx11_abi for a in ARCHES):
        c.fail(path + ("cxx11_abi",), f"NNAL is installed for CANN {st.cann}: name the C++ ABI MindSpore "
               f"{st.mindspore} is built with per arch (cxx11_abi: {{aarch64: false, x86_64: false}}), which NNAL's "
               f"cxx_abi_N tree must match; or turn NNAL off with nnal: false")


def _check_wheels(c: s.Checker, path: tuple, st: Stack, release: dict) -> None:
    """The stack's Python range must be one the torch_npu release has wheels for, on
    every arch Huawei lists it for: in Huawei's list (with sha256) or among PyPI's files."""
    wheels, on_pypi = release.get("wheels") or {}, release.get("pypi_pythons") or {}
    for arch in sorted({tag.split("-")[1] for tag in wheels}):
        listed = {p for p in on_pypi.get(arch, [])} | {f"3.{t.split('-')[0][3:]}" for t in wheels if t.endswith(arch)}
        missing = [p for p in st.pythons() if p not in listed]
        if missing:
            c.fail(path + ("python",), f"torch_npu {st.torch_npu} has no {arch} wheel for Python "
                   f"{', '.join(missing)} (torch_npu_releases lists {', '.join(sorted(listed, key=_minor))}, "
                   f"Huawei's list and PyPI's files); narrow the range")


def _check_defaults(m: Matrix, c: s.Checker) -> None:
    defaults = m.defaults
    for key, table in (("torch", m.stacks), ("os", m.os)):
        if defaults[key] not in table:
            c.fail(("defaults", key), f"got {defaults[key]!r}; defined: {', '.join(table)}")
    if defaults["torch"] in m.stacks and m.stacks[defaults["torch"]].cann in m.cann:
        chips = m.cann[m.stacks[defaults["torch"]].cann].kernels
        if defaults["chip"] not in chips:
            c.fail(("defaults", "chip"), f"got {defaults['chip']!r}; the default stack's CANN has kernels for: "
                   f"{', '.join(chips)}")


def _check_images(m: Matrix, c: s.Checker) -> None:
    defaults = m.defaults
    for i, img in enumerate(m.images):
        path = ("images", i)
        st = m.stacks.get(img.stack)
        if st is None:
            c.fail(path + ("stack",), f"got {img.stack!r}; stacks defined: {', '.join(m.stacks)}")
            continue
        for j, os in enumerate(img.os):
            if os not in m.os:
                c.fail(path + ("os", j), f"got {os!r}; os defined: {', '.join(m.os)}")
                continue
            python = img.python or st.python_for(m.os[os])
            if python not in st.pythons():
                c.fail(path + ("python",), f"got {python!r}; stack {img.stack} supports "
                       f"{st.python_min} to {st.python_max}")
            elif python != m.os[os].python and python not in m.pythons:
                c.fail(path + ("python",), f"python {python} is not {os}'s python3 ({m.os[os].python}) and "
                       f"pythons has no source tarball for it; add pythons.\"{python}\"")
            cann = m.cann.get(st.cann)
            if cann and st.torch_atb:
                try:
                    torch_atb_fits(m, st, cann, m.os[os], python)
                except UserError as exc:
                    c.fail(path + ("os", j), str(exc))
        cann = m.cann.get(st.cann)
        chip = img.chip or defaults["chip"]
        if cann and chip not in cann.kernels:
            c.fail(path + ("chip",), f"got {chip!r}; CANN {cann.version} has kernels for: {', '.join(cann.kernels)}")
        elif cann:
            try:
                m._check_chip(st, chip)
            except UserError as exc:
                c.fail(path + ("chip",), str(exc))
            for k, platform in enumerate(img.platforms):
                if PLATFORM_ARCH.get(platform) not in cann.kernels[chip]:
                    c.fail(path + ("platforms", k), f"got {platform}; CANN {cann.version}'s {chip} kernels are "
                           f"published for {', '.join(cann.kernels[chip])} only")


def torch_atb_fits(m: Matrix, st: Stack, cann: CannRelease, os: OSBase, python: str | None) -> None:
    """torch_atb (NNAL's Python plugin) against the image: its glibc floor from CANN 9.1 and
    its Pythons, refused before any build, naming what was found and what would fit. NNAL
    itself (glibc 2.17) is not what is checked: it installs on every OS here."""
    atb = m.torch_atb
    if atb is None:
        raise UserError(f"stack {st.name} asks for torch_atb, but {m.path} has no torch_atb: section (its "
                        f"Pythons and glibc floor)")
    floor = atb.floor(cann.version)
    if floor and os.glibc and Version(os.glibc) < Version(floor):
        fits = [f"{o.name} ({o.glibc})" for o in m.os.values() if o.glibc and Version(o.glibc) >= Version(floor)]
        raise UserError(f"torch_atb (NNAL's Python plugin, --torch-atb) needs glibc {floor} or newer from CANN "
                        f"{cann_series(cann.version)} ({atb.source}); {os.name} has glibc {os.glibc}. OSes that fit: "
                        f"{', '.join(fits) or 'none in the matrix'}; or build without torch_atb: NNAL itself needs "
                        f"glibc 2.17 and is in the {os.name} image without it")
    if python and python not in atb.pythons:
        fits = [p for p in atb.pythons if p in st.pythons()]
        raise UserError(f"torch_atb (NNAL's Python plugin, --torch-atb) is built for Python {', '.join(atb.pythons)} "
                        f"only ({atb.source}); this image's Python is {python}. Choose "
                        + (f"--python {' or '.join(fits)}" if fits else "another stack") + ", or build without torch_atb")


def cann_series(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _allows_outside(spec: str, required: str) -> bool:
    """True when `spec` admits a numpy release that `required` refuses (probe releases)."""
    probes = ["1.19.5", "1.21.6", "1.23.5", "1.24.4", "1.26.4", "2.0.0", "2.1.3", "2.2.6", "3.0.0"]
    allowed, needed = SpecifierSet(spec), SpecifierSet(required)
    return any(Version(p) in allowed and Version(p) not in needed for p in probes)
