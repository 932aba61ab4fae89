"""What a build is told, split the way cibuildwheel splits it: the selection is a matrix
cell (resolved before anything runs); `Site` is how this site builds (packages, caches,
network, mirrors, the engine's cache), frozen; `Inputs` are the wheels that go into a
runtime image besides the cell's. What a build finds or makes is returned, never
written back into these."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Mapping, get_args

from .. import console
from ..engine.network import Network
from ..errors import UserError
from ..hashing import files_in
from ..platforms import Platform, host
from .packages import default_cache

# Where pip installs the image's Python packages: on the build machine for the image's
# machine (native: no qemu), or in the image (target); auto: native when cross-building.
PipOn = Literal["auto", "native", "target"]
PIP_ON: tuple[str, ...] = get_args(PipOn)
# Where apt resolves, fetches and unpacks the image's OS packages: on the build machine into
# a copy of the image's base (native: only the maintainer scripts run as the image's machine,
# under qemu when cross-building), or apt in the image (target); auto: native when
# cross-building. dnf's OS step runs in the image either way.
OsOn = PipOn


@dataclass(frozen=True)
class Site:
    packages: tuple[Path, ...] = (Path("packages"),)
    cache: Path | None = None
    offline: bool = False
    require_pins: bool = False
    unlocked: bool = False                 # --unlocked: a cell without a lock is built, pip resolving at build time
    base_images: Mapping[str, str] = field(default_factory=dict)   # matrix ref -> replacement ({arch} allowed)
    # How this site reaches things (index, proxy, CA: secrets only; the build network): the
    # one record the command line makes and the engine's steps and this host's reads take.
    net: Network = field(default_factory=Network)
    cache_registry: str | None = None      # registry repository for layer cache
    no_cache: bool = False                 # rebuild every step, download every file again
    epoch: int | None = None               # --reproducible: every time in the image is this SOURCE_DATE_EPOCH
    pip_on: PipOn = "auto"
    os_on: OsOn = "auto"
    emulated: bool = False                 # source builds: compile under qemu, not with the cross compiler
    debootstrap: bool = False              # make a missing Debian base here (debootstrap)
    retest: bool = False                   # a tested image with the same content tag: test it again
    keep_failed: bool = False              # keep a candidate whose tests failed (to debug it)
    dry: bool = False
    work: Path = Path(".build")

    @property
    def cache_dir(self) -> Path:
        return self.cache or default_cache()

    def work_dir(self, name: str, engine_kind: str = "docker") -> Path:
        """Where one image's build log, manifest, SBOM and staged context live (one folder
        per engine: docker and podman builds of an image do not share files)."""
        return self.work / (name + ("" if engine_kind == "docker" else f"-{engine_kind}"))

    def pip_native(self, target: Platform) -> bool:
        """Do the Python package steps run on the build machine (the fast path)?"""
        return _native("--pip-on", self.pip_on, target)

    def os_native(self, target: Platform) -> bool:
        """Does apt fetch and unpack the OS packages on the build machine (the fast path)?"""
        return _native("--os-on", self.os_on, target)

    def pip_args(self, target: Platform, image: str, builder_image: str | None = None) -> dict[str, str]:
        """The build arguments that say how this machine builds an image, not what is in it:
        where pip runs and where apt unpacks (the fast paths: on the build machine, FROM
        `builder_image`, the same release of the base as `image` for the build machine's
        arch; by default the same name). Not part of the content tag."""
        args = {"PIP_ON": "target", "OS_ON": "target"}
        pip, os_packages = self.pip_native(target), self.os_native(target)
        if not (pip or os_packages):
            return args
        builder = host()
        if builder is None:
            import platform
            given = "--pip-on" if self.pip_on == "native" else "--os-on"
            raise UserError(f"{given} native: this machine ({platform.machine()}) is not one of the build platforms")
        named = builder_image or image
        base = self.build_machine_base(named, builder)
        if base is None:
            if "native" not in (self.pip_on, self.os_on):
                console.say(f"python and OS packages: --base-image {named}={self.base(named, target)} names one arch's "
                            f"image, so pip and apt run in the image; put {{arch}} in it (with a {builder.suffix} image "
                            f"there) for the fast path")
                return args
            base = self.base(named, builder)        # --pip-on/--os-on native: the user's word for it
        return {"PIP_ON": "native" if pip else "target", "OS_ON": "native" if os_packages else "target",
                "BUILD_BASE_IMAGE": base, "TARGET_MACHINE": target.arch}

    def build_machine_base(self, image: str, builder: Platform) -> str | None:
        """The base of the build machine's stages: the same release for its arch. None
        when this site replaces the image by one image of one arch (no {arch} in it)."""
        replacement = self.base_images.get(image)
        if replacement is not None and "{arch}" not in replacement:
            return None
        return self.base(image, builder)

    def base(self, image: str, target: Platform) -> str:
        """The base image to build FROM: the matrix's, or this site's replacement."""
        return self.base_images.get(image, image).replace("{arch}", target.suffix)


@dataclass(frozen=True)
class Inputs:
    repository: str = "ascend-runtime"
    wheelhouse: Path | None = None
    torch_npu_wheel: Path | None = None    # a source-built wheel (the builder's seam)
    apex_wheel: Path | None = None
    torch_npu_src: str | None = None       # PATH, URL@REF, or "upstream" (the matrix default)
    apex_src: str | None = None
    builder_flavor: str | None = None      # default: the stack's builder
    builder_repository: str = "ascend-builder"

    def wheels(self) -> list[Path]:
        """Every wheel file this build stages (the wheelhouse, then the slots)."""
        found = files_in(self.wheelhouse, "*.whl") if self.wheelhouse and self.wheelhouse.is_dir() else []
        return found + [w for w in (self.torch_npu_wheel, self.apex_wheel) if w]


NO_INPUTS = Inputs()      # no given wheels: the released ones


def parse_base_images(items: list[str]) -> dict[str, str]:
    mapping = {}
    for item in items:
        if "=" not in item:
            raise UserError(f"--base-image takes FROM=TO (e.g. ubuntu:22.04=mirror.local/ubuntu:22.04), got {item!r}")
        src, dst = item.split("=", 1)
        mapping[src.strip()] = dst.strip()
    return mapping


def _native(flag: str, value: str, target: Platform) -> bool:
    if value not in PIP_ON:
        raise UserError(f"{flag} {value!r}: choose one of {', '.join(PIP_ON)}")
    if value == "auto":
        return target.emulated() and host() is not None
    return value == "native"


def on_build_machine(host_args: Mapping[str, str]) -> bool:
    """Does a build with these host arguments run steps on the build machine (its base needed)?"""
    return "BUILD_BASE_IMAGE" in host_args
