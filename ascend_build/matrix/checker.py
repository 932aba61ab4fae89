"""A small declarative checker for YAML data. Each check reports problems that name the
file, the key path, the bad value and what would be accepted; checking goes on after a
problem, so one run shows them all. The shapes themselves are in schema.py."""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import Problem
from .yamlsource import KeyPath, Located

Check = Callable[["Checker", Any, KeyPath], None]


@dataclass
class Checker:
    source: Located
    problems: list[Problem] = field(default_factory=list)

    def fail(self, path: KeyPath, message: str) -> None:
        self.problems.append(self.source.problem(path, message))


@dataclass
class Checkers:
    """One checker per file of the matrix: a problem is reported in the file its key is
    written in (the imported facts' sections are in imported.yaml, the rest in matrix.yaml)."""
    hand: Checker
    imported: Checker
    imported_keys: frozenset[str]

    def fail(self, path: KeyPath, message: str) -> None:
        (self.imported if path and path[0] in self.imported_keys else self.hand).fail(path, message)

    @property
    def problems(self) -> list[Problem]:
        return self.hand.problems + self.imported.problems


def _show(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


# What no value of either file holds, whatever its kind: a line break or another control
# character (C0, DEL, C1, Unicode's line and paragraph separators). A value is one line of
# text, so none can end a Dockerfile instruction, a shell line or a YAML scalar early.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def string(pattern: str | None = None, hint: str = "") -> Check:
    regex = re.compile(pattern) if pattern else None

    def check(c: Checker, value: Any, path: KeyPath) -> None:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            # YAML reads 3.10 as the float 3.1: the classic version trap.
            c.fail(path, f"got the number {value!r}; YAML reads unquoted digits as a number; quote it: \"{value}\"")
        elif not isinstance(value, str):
            c.fail(path, f"got {_show(value)}; expected a string{hint and ' (' + hint + ')'}")
        elif CONTROL.search(value):
            c.fail(path, f"got {_show(value)}; a value is one line of text, without a line break or another "
                         f"control character")
        elif regex and not regex.fullmatch(value):
            c.fail(path, f"got {_show(value, 200)}; expected {hint or 'a match of ' + regex.pattern}")
    return check


def reference(hint: str, placeholder: str = "") -> Check:
    """An image reference by the one grammar the engine's commands take (engine.check_ref),
    with `placeholder` (like {arch}) filled in first where the value may hold it."""
    from ..engine.engine import REFERENCE

    def check(c: Checker, value: Any, path: KeyPath) -> None:
        string()(c, value, path)
        filled = value.replace(placeholder, "aarch64") if placeholder and isinstance(value, str) else value
        if isinstance(value, str) and not CONTROL.search(value) and not REFERENCE.fullmatch(filled):
            c.fail(path, f"got {_show(value, 200)}; expected {hint}")
    return check


def specifier(c: Checker, value: Any, path: KeyPath) -> None:
    """A pip version specifier such as "==3.20.3" or "<2"."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    string()(c, value, path)
    if isinstance(value, str):
        try:
            SpecifierSet(value)
        except InvalidSpecifier:
            c.fail(path, f"got {_show(value, 200)}; expected a pip version specifier like \"==3.20.3\" or \"<2\"")


def integer(minimum: int, maximum: int) -> Check:
    def check(c: Checker, value: Any, path: KeyPath) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= maximum:
            c.fail(path, f"got {_show(value)}; expected a whole number from {minimum} to {maximum}")
    return check


def boolean(c: Checker, value: Any, path: KeyPath) -> None:
    if not isinstance(value, bool):
        c.fail(path, f"got {_show(value)}; expected true or false")


def one_of(*choices: str) -> Check:
    def check(c: Checker, value: Any, path: KeyPath) -> None:
        if value not in choices:
            c.fail(path, f"got {_show(value)}; expected one of: {', '.join(choices)}")
    return check


def optional(inner: Check) -> Check:
    def check(c: Checker, value: Any, path: KeyPath) -> None:
        if value is not None:
            inner(c, value, path)
    return check


def list_of(item: Check, non_empty: bool = True) -> Check:
    def check(c: Checker, value: Any, path: KeyPath) -> None:
        if not isinstance(value, list):
            c.fail(path, f"got {_show(value)}; expected a list")
            return
        if non_empty and not value:
            c.fail(path, "got an empty list; expected at least one entry")
        for index, entry in enumerate(value):
            item(c, entry, path + (index,))
    return check


def map_of(key: Check, value_check: Check, non_empty: bool = True) -> Check:
    def check(c: Checker, value: Any, path: KeyPath) -> None:
        if not isinstance(value, dict):
            c.fail(path, f"got {_show(value)}; expected a mapping")
            return
        if non_empty and not value:
            c.fail(path, "got an empty mapping; expected at least one entry")
        for k, v in value.items():
            before = len(c.problems)
            key(c, k, path + (k,))
            if len(c.problems) == before:
                value_check(c, v, path + (k,))
    return check


def record(required: dict[str, Check], optional_fields: dict[str, Check] | None = None) -> Check:
    """A mapping with known keys; unknown keys are refused with a suggestion."""
    optional_fields = optional_fields or {}
    known = {**required, **optional_fields}

    def check(c: Checker, value: Any, path: KeyPath) -> None:
        if not isinstance(value, dict):
            c.fail(path, f"got {_show(value)}; expected a mapping with keys: {', '.join(known)}")
            return
        for k in value:
            if k not in known:
                close = difflib.get_close_matches(str(k), list(known), n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                c.fail(path + (k,), f"unknown key {k!r}; {hint}accepted keys: {', '.join(known)}")
        for k in required:
            if k not in value:
                c.fail(path, f"missing key {k!r}")
        for k, sub in known.items():
            if k in value:
                sub(c, value[k], path + (k,))
    return check
