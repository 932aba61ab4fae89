"""The environment each CANN release's set_env.sh scripts export, read from the official
CANN images' Dockerfiles (Ascend/cann-container-image). Their last stage copies the
exports into ENV under two notes, "Toolkit Environment variables, obtained from
/usr/local/Ascend/ascend-toolkit/set_env.sh" and "NNAL Environment variables, obtained from
/usr/local/Ascend/nnal/set_env.sh"; the ENV lines under any other note (the image's own
Python) are not CANN's.

What is read, per variable in the order set: its value, or for a path list its entries
in the order the image ends up with them (each ENV line puts its entries first), and the
part that sets it: ATB's where it names ATB_HOME_PATH or is one of ATB's own variables
(the 9.x images list the toolkit's library folders under NNAL's note too), else the
toolkit's. Made to hold for any image of the release, in this project's install paths:

- ATB's cxx_abi_<N> (and 9.0.1's ATB_CXX_ABI) is the image's ABI, ${NNAL_CXX_ABI};
- op_tiling: the images list `.../tbe/op_tiling`, where set_env.sh lists the arch's folder
  `.../tbe/op_tiling/lib/linux/$(arch)` (an ENV line cannot run `arch`): ${ASCEND_ARCH};
- the host driver's folders as set_env.sh lists them (driver/lib64, lib64/common,
  lib64/driver): the 8.1 to 8.3 images leave driver/lib64 itself out;
- `$V` is written `${V}`, `//` and a folder's trailing `/` dropped.

ASCEND_TOOLKIT_HOME must be where the project's era table puts the release (eras.py):
a Dockerfile that says otherwise stops the import, naming both."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import UserError
from ..matrix.cannenv import ABI, ARCH, PATH_LISTS, refused
from ..matrix.eras import era_of

_NOTE = {"toolkit environment variables": "toolkit", "nnal environment variables": "atb"}
_ATB_OWN = ("ATB_", "LCCL_", "ASDOPS_")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\"(?:[^\"\\]|\\.)*\"|'[^']*'|\S*)")
_OP_TILING = "/opp/built-in/op_impl/ai_core/tbe/op_tiling"
DRIVER = "/usr/local/Ascend/driver/lib64"           # where `invoke run` mounts the host's driver

Env = dict[str, dict[str, "str | list[str]"]]          # part -> name -> value, or a path list's entries


@dataclass
class EnvFound:
    """What one release's Dockerfiles set: the environment most of them set, and which differ."""
    env: Env
    dockerfiles: list[str] = field(default_factory=list)   # those that set exactly it
    differ: list[str] = field(default_factory=list)        # what the others set otherwise


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'" else value


def _entry(text: str) -> str:
    text = re.sub(r"\$([A-Za-z_][A-Za-z0-9_]*)", r"${\1}", text)
    text = re.sub(r"/{2,}", "/", text)
    text = text.rstrip("/") if len(text) > 1 else text
    return text + "/lib/linux/" + ARCH if text.endswith(_OP_TILING) else text


def _part(name: str, value: str, section: str) -> str:
    return "atb" if name.startswith(_ATB_OWN) or "${ATB_HOME_PATH}" in value else section


def final_env(text: str, where: str, version: str) -> Env:
    """The CANN environment the last stage of one Dockerfile sets (empty: none). A value
    this project could not write as data (a quote, a line break: cannenv.refused) stops
    the import, naming the Dockerfile and its line: nothing of a third party's file
    becomes an instruction of this project's."""
    stage = re.split(r"(?m)^\s*FROM\s", text)[-1]
    first = text[:len(text) - len(stage)].count("\n") + 1      # the stage's first line in the file
    env: Env = {}
    section: str | None = None
    current = ""
    start = first
    for number, raw in enumerate(stage.splitlines(), first):
        line = raw.strip()
        start = start if current else number
        if line.startswith("#"):
            if not current:
                note = line.lstrip("#").strip().lower().removeprefix("note:").strip()
                section = next((part for words, part in _NOTE.items() if note.startswith(words)), None)
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        line, current = (current + line).strip(), ""
        word, _, rest = line.partition(" ")
        if word.upper() != "ENV":
            section = section if not line else None        # another instruction ends the notes' lines
            continue
        if section is None:
            continue
        pairs = _ASSIGN.findall(rest) or [tuple(rest.split(None, 1))]
        if any(len(pair) != 2 for pair in pairs):
            raise UserError(f"{where} line {start}: {line[:120]!r} is not an ENV this project reads (NAME=VALUE)")
        for name, raw_value in pairs:
            value = _unquote(raw_value.strip())
            why = refused(name, value)
            if why:
                raise UserError(f"{where} line {start}: ENV {why}; the import stops (nothing was written)")
            _set(env, name, value, section, where, version)
    return env


def _set(env: Env, name: str, value: str, section: str, where: str, version: str) -> None:
    if name in PATH_LISTS or re.search(rf"\$\{{?{name}\}}?(:|$)", value):
        new: dict[str, list[str]] = {}
        items = [_entry(item.strip()) for item in value.split(":")]
        driver = next((i for i, e in enumerate(items) if e.startswith(DRIVER + "/")), None)
        if driver is not None and DRIVER not in items:
            items.insert(driver, DRIVER)
        for entry in items:
            if not entry or entry == f"${{{name}}}":
                continue
            new.setdefault(_part(name, entry, "toolkit"), []).append(entry)
        for part, entries in new.items():
            before = env.setdefault(part, {}).get(name, [])
            env[part][name] = list(dict.fromkeys(entries + [e for e in before if e not in entries]))
        return
    value = _entry(value) if value.startswith(("/", "$")) else value
    if name == "ATB_HOME_PATH" or name == "ATB_CXX_ABI":
        value = re.sub(r"cxx_abi_[01]$", f"cxx_abi_{ABI}", value) if name == "ATB_HOME_PATH" else \
            (ABI if value in ("0", "1") else value)
    if name == "ASCEND_TOOLKIT_HOME":
        home = era_of(version).home(version)
        if value != home:
            raise UserError(f"{where}: ASCEND_TOOLKIT_HOME={value}, where this project's era table puts CANN "
                            f"{version} ({home}); fix ascend_build/matrix/eras.py or record why")
    env.setdefault(_part(name, value, section), {})[name] = value


def release_env(found: dict[str, Env]) -> EnvFound | None:
    """One release's environment from its Dockerfiles' (path -> env): the one most of them
    set (the first in path order among equals), and what each other one sets otherwise."""
    import json
    groups: dict[str, list[str]] = {}
    for path in sorted(found):
        if found[path]:
            groups.setdefault(json.dumps(found[path], sort_keys=False), []).append(path)
    if not groups:
        return None
    best = max(groups.values(), key=len)
    env = found[best[0]]
    differ = []
    for paths in groups.values():
        if paths is best:
            continue
        other = found[paths[0]]
        names = {(p, n) for p, vs in env.items() for n in vs}
        theirs = {(p, n) for p, vs in other.items() for n in vs}
        lacks = sorted(n for _, n in names - theirs)
        adds = sorted(n for _, n in theirs - names)
        changed = sorted(n for p, n in names & theirs if env[p][n] != other[p][n])
        what = "; ".join(x for x in (f"lacks {', '.join(lacks)}" if lacks else "",
                                     f"adds {', '.join(adds)}" if adds else "",
                                     f"sets {', '.join(changed)} otherwise" if changed else "") if x)
        differ.append(f"{paths[0]}" + (f" and {len(paths) - 1} more" if len(paths) > 1 else "") + f": {what}")
    return EnvFound(env, best, differ)


def borrowed(env: Env, source_version: str, version: str) -> Env:
    """A release's environment read from another release's images: the other's toolkit
    home made this one's (the era table's)."""
    theirs, mine = era_of(source_version).home(source_version), era_of(version).home(version)

    def move(value: str) -> str:
        return re.sub(rf"{re.escape(theirs)}(?=/|$)", mine, value)
    return {part: {name: [move(e) for e in v] if isinstance(v, list) else move(v) for name, v in names.items()}
            for part, names in env.items()}
