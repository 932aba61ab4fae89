"""pip, run on the build machine, installing for the image's machine (the fast path of a
cross-arch build). `invoke build` copies this file into the build context; the runtime
Dockerfile's native stages run it with a Python of the image's exact version, on the same
OS release, in a venv at the image's path:

    python3 pip_for_target.py aarch64 install -r lock/torch.txt

It is pip itself, with one thing changed: the machine pip believes it runs on. Wheel tags
(`sysconfig.get_platform()`, from which pip derives manylinux/linux tags with the glibc
it finds) and environment markers (`platform.machine()`) say the target's machine, so pip
picks, unpacks, writes console scripts for and byte-compiles exactly what it would in
the image, at native speed. Nothing here is arch-specific: byte code depends on the
Python version only, and the script shebangs name the venv's path, the same in both.
pip's own `--platform` needs `--target`, which lays files out differently from an
install into the venv (scripts, RECORD paths) and is not what the image would get.

Standard library only: it runs before anything else is in the venv."""
from __future__ import annotations

import platform
import sys
import sysconfig


def _pretend(machine: str) -> None:
    host = platform.machine()
    if host == machine:
        return
    get_platform = sysconfig.get_platform

    def target_platform() -> str:
        # linux-x86_64 -> linux-aarch64: the glibc part of the tags stays the host's,
        # which is the image's (the native stage is the same OS release).
        return get_platform().replace(host, machine)

    sysconfig.get_platform = target_platform
    platform.machine = lambda: machine
    # pip < 21.3 vendors a packaging that asks distutils instead (gone in Python 3.12).
    from pip._vendor.packaging import tags
    if hasattr(tags, "distutils"):
        tags.distutils.util.get_platform = target_platform


# `uname -m` of the machines manylinux wheels are built for: a typo is not a machine.
MACHINES = ("x86_64", "aarch64", "ppc64le", "s390x", "armv7l", "i686", "riscv64", "loongarch64")


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in MACHINES:
        print(f"usage: pip_for_target.py MACHINE PIP-ARGS...   (MACHINE: uname -m of the image, one of "
              f"{', '.join(MACHINES)})", file=sys.stderr)
        return 2
    _pretend(argv[0])
    from pip._internal.cli.main import main as pip_main
    sys.argv = ["pip", *argv[1:]]
    return pip_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
