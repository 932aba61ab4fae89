"""The target platforms, one record each: every name an arch goes by (docker's platform,
CANN's and the kernel's arch, the tag suffix that is also Debian's arch name, the CI
runner that builds it natively). Nothing else in the package spells an arch table."""
from __future__ import annotations

import platform as _host
from dataclasses import dataclass

from .errors import UserError


@dataclass(frozen=True)
class Platform:
    docker: str        # linux/arm64: what --platform takes
    arch: str          # aarch64: CANN's file names, uname -m, ELF
    suffix: str        # arm64: the tag suffix, Debian's and Go's arch name
    runner: str        # a GitHub-hosted runner that builds it natively

    def __str__(self) -> str:
        return self.docker

    def emulated(self, host_machine: str | None = None) -> bool:
        """Does building it on this machine need qemu?"""
        return (host_machine or _host.machine()) != self.arch


PLATFORMS: dict[str, Platform] = {p.docker: p for p in (
    Platform("linux/arm64", "aarch64", "arm64", "ubuntu-24.04-arm"),   # 910B hosts (Kunpeng)
    Platform("linux/amd64", "x86_64", "amd64", "ubuntu-24.04"),        # Atlas 800 9010 hosts
)}
ARCHES = tuple(p.arch for p in PLATFORMS.values())


def get(name: str) -> Platform:
    """The platform of a --platform value, or a clear error with the choices."""
    if name not in PLATFORMS:
        raise UserError(f"unknown platform {name!r}; choose one of: {', '.join(PLATFORMS)}")
    return PLATFORMS[name]


def of_arch(arch: str) -> Platform:
    return next(p for p in PLATFORMS.values() if p.arch == arch)


def host() -> Platform | None:
    """This machine's platform, when it is one the images are built for."""
    return next((p for p in PLATFORMS.values() if p.arch == _host.machine()), None)
