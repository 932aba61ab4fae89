"""What a runtime image must satisfy, as pure functions the image suite applies to
what it reads from a container (and the unit tests apply to crafted input)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

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


@dataclass(frozen=True)
class Resolved:
    """A path as the kernel sees it in the image: its real path, and each symbolic link on
    the way (`LINK -> TARGET`). From 8.5 a release's tree is /usr/local/Ascend/cann-<v>, and
    ascend-toolkit/latest a link to it: two spellings of one folder."""
    real: str
    links: tuple[str, ...] = ()


# What the image suite read in the image (RESOLVE_SCRIPT below): each path, resolved.
Seen = Mapping[str, Resolved]

# Run in the image with the paths as JSON (argv[1]): each one's real path and links, as JSON.
RESOLVE_SCRIPT = (
    "import json, os, sys\n"
    "out = {}\n"
    "for p in json.loads(sys.argv[1]):\n"
    "    links, here = [], '/'\n"
    "    for part in [x for x in p.split('/') if x]:\n"
    "        here = os.path.join(here, part)\n"
    "        if os.path.islink(here):\n"
    "            links.append(here + ' -> ' + os.readlink(here))\n"
    "    out[p] = [os.path.realpath(p), links]\n"
    "print(json.dumps(out))\n")


def read_resolved(text: str) -> dict[str, Resolved]:
    """RESOLVE_SCRIPT's output, as records."""
    import json
    return {path: Resolved(real, tuple(links)) for path, (real, links) in json.loads(text).items()}


def _real(entry: str, seen: Seen) -> str:
    found = seen.get(entry)
    return _folder(found.real) if found is not None else _folder(entry)


def _through(entry: str, seen: Seen) -> str:
    """How the kernel reaches an entry, where a link is on the way: said in a gap's message."""
    found = seen.get(entry)
    if found is None or not found.links:
        return ""
    return f" (the folder {found.real}, through {', '.join(found.links)})"


def paths_of(*envs: Mapping[str, str]) -> list[str]:
    """Every path the environments name (the path lists' entries, and the absolute values):
    what the image suite resolves in the image before it compares them."""
    found: dict[str, None] = {}
    for env in envs:
        for name, value in env.items():
            if name in CANN_PATH_LISTS or name in PATH_LISTS:
                found.update((e, None) for e in value.split(":") if e.startswith("/"))
            elif value.startswith("/") and ":" not in value:
                found[value] = None
    return list(found)


def sourcing_changes(before: dict[str, str], after: dict[str, str], seen: Seen | None = None) -> list[str]:
    """What sourcing set_env.sh changed in an image's environment (`before`: a plain `docker
    run`'s, `after`: the same shell's once sourced): a variable it set to another value, or
    unset, or a folder it added to a path list that the list did not hold. Putting a folder
    the list holds first again changes nothing that matters (empty entries and a folder's
    trailing / aside), nor does another spelling of a folder it holds: paths compare as the
    kernel sees them (`seen`: what the image resolved them to)."""
    seen = seen or {}
    changes = []
    for name in sorted((set(before) | set(after)) - SHELL_OWN):
        was, now = before.get(name), after.get(name)
        if was == now:
            continue
        if now is None:
            changes.append(f"{name} unset (the image ENV: {was})")
        elif name in CANN_PATH_LISTS:
            held = {_real(e, seen) for e in (was or "").split(":") if e}
            added = [e for e in now.split(":") if e and _real(e, seen) not in held]
            if added:
                changes.append(f"{name} gains {':'.join(dict.fromkeys(added))}"
                               + "".join(_through(e, seen) for e in dict.fromkeys(added))
                               + f" (the image ENV: {was or 'unset'})")
        elif was is None:
            changes.append(f"{name}={now} set (the image ENV has none)")
        elif _real(was, seen) != _real(now, seen):
            changes.append(f"{name}={now}{_through(now, seen)} (the image ENV: {was}{_through(was, seen)})")
    return changes


def env_gaps(set_env: dict[str, str], image_env: dict[str, str],
             variables: tuple[str, ...] = SET_ENV_VARS, seen: Seen | None = None) -> list[str]:
    """What set_env.sh exports that the image ENV lacks: whole variables, or entries of
    the path lists (order aside). Paths compare as the kernel sees them (`seen`: what the
    image resolved them to): a folder the image ENV reaches through ascend-toolkit/latest is
    the one set_env.sh names by the release's tree. A gap names the entry and the link."""
    seen = seen or {}
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
            held = {_real(e, seen) for e in have.split(":") if e}
            missing = [p for p in want.split(":") if p and _real(p, seen) not in held]
            for entry in missing:
                gaps.append(f"image ENV {var} lacks {entry}{_through(entry, seen)}: no entry of the image's {var} "
                            f"reaches that folder")
        elif _real(want, seen) != _real(have, seen):
            gaps.append(f"image ENV {var}={have}{_through(have, seen)}, set_env.sh gives {want}"
                        f"{_through(want, seen)}")
    return gaps


def gap_fix(version: str, source: str) -> str:
    """What to do about a gap between a release's set_env.sh and the image ENV."""
    return (f"The image ENV is CANN {version}'s environment as imported (imported.yaml: cann.{version}.env, read "
            f"from {source or 'its official images'}); this package's set_env.sh exports what that environment "
            f"has not. Import the environment again from official images that install this package (`invoke "
            f"update --cann-images DIR`), then `invoke render` and build again; `--keep-failed` keeps the image to "
            f"look inside (`invoke test --image ID` runs the suite again).")
