"""The environment of a CANN release: what its set_env.sh scripts export (the toolkit's,
NNAL's ATB, SiP), as a record. `invoke update --cann-images` imports it from the official
CANN images, whose last stage copies those exports into ENV (imported.yaml: cann.<v>.env,
with env_source); SiP's, which no image copies, is matrix.yaml's hand fact nnal_sip_env.

A plain `docker run` sources no set_env.sh, so the runtime image's ENV is rendered from
this record, each part in the stage that installs it, and the CANN test double's
set_env.sh scripts export it. Values are Dockerfile ENV text: ${NAME} is a variable set
before it; ${ASCEND_ARCH} (the image's arch) and ${NNAL_CXX_ABI} (the NNAL stage's build
arg) stand where set_env.sh works them out itself (`$(arch)`, its --cxx_abi)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import UserError

PARTS = ("toolkit", "atb", "sip")
# Lists of folders: each set_env.sh puts its entries before what was set already.
PATH_LISTS = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "CMAKE_PREFIX_PATH")
ARCH = "${ASCEND_ARCH}"
ABI = "${NNAL_CXX_ABI}"
_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class EnvVar:
    name: str
    value: str | tuple[str, ...]     # a path list (tuple): its entries, put before what was set already

    @property
    def is_list(self) -> bool:
        return isinstance(self.value, tuple)

    def refs(self) -> set[str]:
        """The variables its value refers to."""
        text = ":".join(self.value) if isinstance(self.value, tuple) else self.value
        return {a or b for a, b in _REF.findall(text)}


@dataclass(frozen=True)
class CannEnv:
    parts: tuple[tuple[str, tuple[EnvVar, ...]], ...]     # (part, its variables in the order set)
    source: str                                            # where it was read
    borrowed_from: str = ""        # the release whose images it was read from, when not this one's

    def part(self, name: str) -> tuple[EnvVar, ...]:
        return dict(self.parts).get(name, ())

    def names(self, parts: tuple[str, ...] = PARTS) -> list[str]:
        return list(dict.fromkeys(v.name for p in parts for v in self.part(p)))

    def entries(self, name: str, parts: tuple[str, ...] = PARTS) -> list[str]:
        """A path list's entries over the parts, the later part's first (it is set after)."""
        out: list[str] = []
        for p in parts:
            out = [e for v in self.part(p) if v.name == name and isinstance(v.value, tuple) for e in v.value] + out
        return list(dict.fromkeys(out))

    def value(self, name: str, parts: tuple[str, ...] = PARTS) -> str | None:
        """A plain variable's value (the last part's that sets it)."""
        found = [v.value for p in parts for v in self.part(p) if v.name == name and isinstance(v.value, str)]
        return found[-1] if found else None


def from_data(data: Mapping[str, Any], source: str, borrowed_from: str = "",
              sip: Mapping[str, Any] | None = None) -> CannEnv:
    """imported.yaml's cann.<v>.env (part -> name -> value, a list for a path list), with
    SiP's part (matrix.yaml's nnal_sip_env) where the release's NNAL holds SiP."""
    parts = [(part, tuple(EnvVar(str(k), tuple(map(str, v)) if isinstance(v, list) else str(v))
                          for k, v in (data.get(part) or {}).items()))
             for part in PARTS if part != "sip" and data.get(part)]
    if sip:
        parts.append(("sip", tuple(EnvVar(str(k), tuple(map(str, v)) if isinstance(v, list) else str(v))
                                   for k, v in sip.items())))
    return CannEnv(tuple(parts), source, borrowed_from)


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# A value as the data may hold it (the loader's pattern, schema.py; the import's check,
# upstream/cann_env.py): Dockerfile ENV text, where ${NAME} refers to another variable;
# no quote, backslash or backtick (no set_env.sh export needs one), no control character.
ENV_VALUE = r"[^\"'\\`\x00-\x1f\x7f-\x9f\u2028\u2029]*"


def refused(name: str, value: str | list[str] | tuple[str, ...]) -> str:
    """Why a variable read from upstream cannot be this project's data ("" when it can)."""
    if not _NAME.fullmatch(name):
        return f"{name[:80]!r} is not an environment variable's name"
    for item in [value] if isinstance(value, str) else value:
        if not re.fullmatch(ENV_VALUE, item):
            return (f"{name}={item[:120]!r}: a value holds no quote, backslash, backtick, line break or other "
                    f"control character")
    return ""


def env_text(value: str, name: str = "") -> str:
    """A value as Dockerfile ENV text: bare when it is one word, else in double quotes with
    its backslashes and quotes escaped, so no value ends the instruction or starts another
    (a ${NAME} in it is still expanded, as the data means). A line break cannot be written
    in ENV at all: refused (the loader refuses it first: matrix/schema.py)."""
    if _CONTROL.search(value):
        raise UserError(f"ENV {name}: {value[:120]!r} holds a line break or control character; an image's "
                        f"environment is one line per value")
    if value and not re.search(r"[\s\"'\\]", value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def env_instructions(variables: tuple[EnvVar, ...], set_before: set[str]) -> list[list[tuple[str, str]]]:
    """The ENV instructions that set `variables` after `set_before` (names the image has
    already: a path list among them keeps its value after the new entries), as
    [(name, value), ...] per instruction: a new instruction wherever a value refers to a
    variable set in the one being written (Docker expands it to the value from before the
    instruction; hadolint DL3044)."""
    out: list[list[tuple[str, str]]] = []
    current: set[str] = set()
    for var in variables:
        if not _NAME.fullmatch(var.name):
            raise UserError(f"ENV {var.name[:120]!r}: not an environment variable's name")
        if isinstance(var.value, tuple):
            text = env_text(":".join(var.value) + (f":${{{var.name}}}" if var.name in set_before else ""), var.name)
        else:
            text = env_text(var.value, var.name)
        if not out or var.refs() & current or var.name in current:
            out.append([])
            current = set()
        out[-1].append((var.name, text))
        current.add(var.name)
        set_before.add(var.name)
    return out
