"""Builds under emulation (qemu-user through binfmt_misc): what makes them faster without
changing a byte they produce.

arm64 distributions built with branch protection (Debian 13, seen here) sign and check
return addresses in nearly every function (pointer authentication).
qemu's `max` CPU emulates that with the architected QARMA algorithm, which costs a lot per
call: a shell loop in a Debian 13 arm64 container ran 4x slower than in Debian 12's. With
the implementation-defined algorithm (`pauth-impdef=on`) the same binaries behave the same
(the signatures are only ever checked by the same CPU) at about Debian 12's speed. qemu-user
reads the CPU model from QEMU_CPU in each emulated process's environment, so the build
passes it as a build argument that the Dockerfiles' target stages declare (ARG QEMU_CPU):
it is not part of the image's config nor of its content tag. The containers this project
runs of a foreign arch (image suites, builder containers) get it as container env
(Engine.run_argv); a line composed for a user's host does not.

Only where this machine's qemu is known to have the property (qemu 6.0 and later); when
the version cannot be read (qemu registered from a container, say) nothing is passed."""
from __future__ import annotations

import functools
import re
import shutil
import subprocess

from ..platforms import Platform

QEMU_CPU = "max,pauth-impdef=on"
_FIRST_WITH_PROPERTY = (6, 0)


@functools.lru_cache(maxsize=None)
def qemu_version(arch: str) -> tuple[int, int] | None:
    """(major, minor) of the qemu-user that runs `arch` binaries here, when it can be read."""
    for name in (f"qemu-{arch}-static", f"qemu-{arch}"):
        exe = shutil.which(name)
        if exe is None:
            continue
        try:
            out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        found = re.search(r"version (\d+)\.(\d+)", out)
        if found:
            return int(found.group(1)), int(found.group(2))
    return None


def build_args(target: Platform, host_machine: str | None = None) -> dict[str, str]:
    """The build arguments for an emulated build of `target` on this machine."""
    if not target.emulated(host_machine):
        return {}
    version = qemu_version(target.arch)
    return {"QEMU_CPU": QEMU_CPU} if version and version >= _FIRST_WITH_PROPERTY else {}
