"""YAML loading that remembers the line of every key, so errors can point at it."""
from __future__ import annotations

from typing import Any

import yaml

from ..errors import MatrixError, Problem

KeyPath = tuple[Any, ...]


def format_path(path: KeyPath) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and part.replace("_", "").replace("-", "").isalnum():
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out or "(top level)"


class Located:
    """Parsed YAML data plus the line (1-based) of every key path in it."""

    def __init__(self, data: Any, lines: dict[KeyPath, int], file: str):
        self.data = data
        self.lines = lines
        self.file = file

    def line(self, path: KeyPath) -> int | None:
        # Fall back to the nearest parent that has a line (a missing key has none).
        while path not in self.lines and path:
            path = path[:-1]
        return self.lines.get(path)

    def problem(self, path: KeyPath, message: str) -> Problem:
        return Problem(self.file, self.line(path), format_path(path), message)


def load(text: str, file: str) -> Located:
    # libyaml's parser where it is there (about 10x faster), else the pure-Python one.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
        lines: dict[KeyPath, int] = {}
        dupes: list[Problem] = []
        if node is not None:
            _walk(loader, node, (), lines, dupes, file)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        raise MatrixError([Problem(file, line, "(syntax)", f"not valid YAML: {getattr(exc, 'problem', exc)}")]) from None
    finally:
        loader.dispose()
    if dupes:
        raise MatrixError(dupes)
    return Located(data, lines, file)


def _walk(loader: Any, node: yaml.Node, path: KeyPath,
          lines: dict[KeyPath, int], dupes: list[Problem], file: str) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if key in seen:
                # PyYAML silently keeps the last one; a silent override is a trap.
                dupes.append(Problem(file, key_node.start_mark.line + 1, format_path(path + (key,)),
                                     "duplicate key: each key may appear once"))
            seen.add(key)
            lines[path + (key,)] = key_node.start_mark.line + 1
            _walk(loader, value_node, path + (key,), lines, dupes, file)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(loader, item, path + (index,), lines, dupes, file)
