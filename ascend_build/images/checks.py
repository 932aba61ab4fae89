"""What a runtime image must satisfy, as pure functions the image suite applies to
what it reads from a container (and the unit tests apply to crafted input)."""
from __future__ import annotations

import re

from ..matrix.cannenv import PATH_LISTS as CANN_PATH_LISTS

# Libraries that come from the host's NPU driver (mounted at run time from
# /usr/local/Ascend/driver/lib64), so they may be missing inside an image.
HOST_DRIVER_LIBS = frozenset({
    "libascend_hal.so",      # the driver's HAL
    "libdrvdsmi_host.so",    # device management
    "libdcmi.so",            # /usr/local/dcmi
})

# The variables set_env.sh exports that the image must carry as ENV.
SET_ENV_VARS = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH", "ASCEND_OPP_PATH", "ASCEND_AICPU_PATH",
                "TOOLCHAIN_HOME", "LD_LIBRARY_PATH", "PYTHONPATH", "PATH")
PATH_LISTS = ("LD_LIBRARY_PATH", "PYTHONPATH", "PATH")

_NOT_FOUND = re.compile(r"^\s*(\S+)\s+=>\s+not found\s*$")


def unresolved(ldd_output: str) -> set[str]:
    """Sonames that `ldd` could not resolve."""
    return {m.group(1) for line in ldd_output.splitlines() if (m := _NOT_FOUND.match(line))}


# Libraries of optional CANN packages an image may go without (a stack with `nnal: false`):
# the torch_npu plugins that need them load only when their feature is used.
OPTIONAL_PACKAGE_LIBS = {
    "libatb.so": "Ascend-cann-nnal (ATB), needed by torch_npu's ATB op plugin from 2.5.1 on and MindSpore's ATB "
                 "kernels",
}


def missing_libraries(ldd_by_file: dict[str, str], installed: frozenset[str] = frozenset()) -> dict[str, set[str]]:
    """Per file, the unresolved libraries that are neither the host driver's nor those of
    an optional package the image does not have (`installed`: the ones it has, whose
    libraries must resolve)."""
    absent = {lib for lib, package in OPTIONAL_PACKAGE_LIBS.items() if package.split()[0] not in installed}
    out = {}
    for path, text in ldd_by_file.items():
        bad = unresolved(text) - HOST_DRIVER_LIBS - absent
        if bad:
            out[path] = bad
    return out


# What NNAL's set_env.sh exports beside the path lists: every ATB_* and LCCL_* variable.
NNAL_PREFIXES = ("ATB_", "LCCL_")


def nnal_vars(exported: dict[str, str]) -> tuple[str, ...]:
    return tuple(sorted(v for v in exported if v.startswith(NNAL_PREFIXES))) + ("LD_LIBRARY_PATH", "PATH")


# What a shell sets of itself around `source` (not the script's doing).
SHELL_OWN = frozenset({"_", "SHLVL", "PWD", "OLDPWD"})


def _folder(entry: str) -> str:
    return re.sub(r"/{2,}", "/", entry).rstrip("/") or entry


def sourcing_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What sourcing set_env.sh changed in an image's environment (`before`: a plain `docker
    run`'s, `after`: the same shell's once sourced): a variable it set to another value, or
    unset, or a folder it added to a path list that the list did not hold. Putting a folder
    the list holds first again changes nothing that matters (empty entries and a folder's
    trailing / aside)."""
    changes = []
    for name in sorted((set(before) | set(after)) - SHELL_OWN):
        was, now = before.get(name), after.get(name)
        if was == now:
            continue
        if now is None:
            changes.append(f"{name} unset (the image ENV: {was})")
        elif name in CANN_PATH_LISTS:
            held = {_folder(e) for e in (was or "").split(":") if e}
            added = [e for e in now.split(":") if e and _folder(e) not in held]
            if added:
                changes.append(f"{name} gains {':'.join(dict.fromkeys(added))} (the image ENV: {was or 'unset'})")
        elif was is None:
            changes.append(f"{name}={now} set (the image ENV has none)")
        elif _folder(was) != _folder(now):
            changes.append(f"{name}={now} (the image ENV: {was})")
    return changes


def env_gaps(set_env: dict[str, str], image_env: dict[str, str],
             variables: tuple[str, ...] = SET_ENV_VARS) -> list[str]:
    """What set_env.sh exports that the image ENV lacks: whole variables, or entries of
    the path lists (order aside)."""
    gaps = []
    for var in variables:
        want = set_env.get(var)
        if want is None:
            gaps.append(f"set_env.sh does not export {var}")
            continue
        have = image_env.get(var)
        if have is None:
            gaps.append(f"image ENV lacks {var} (set_env.sh: {want})")
        elif var in PATH_LISTS:
            missing = [p for p in want.split(":") if p and p not in have.split(":")]
            if missing:
                gaps.append(f"image ENV {var} lacks {':'.join(missing)}")
        elif want.rstrip("/") != have.rstrip("/"):
            gaps.append(f"image ENV {var}={have}, set_env.sh gives {want}")
    return gaps
