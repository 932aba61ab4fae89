"""YAML loading that remembers the line of every key, so errors can point at it."""
from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import yaml

from ..errors import MatrixError, Problem

KeyPath = tuple[Any, ...]
# libyaml's parser where it is there (about 10x faster), else the pure-Python one.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str) -> Any:
    """yaml.safe_load's result, by libyaml's parser where it is there (imported.yaml takes
    about a second with the pure-Python one)."""
    return yaml.load(text, Loader=SAFE_LOADER)


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


# Bounds on what one file may hold. An alias repeats a node without its size on the page:
# nine levels of ten ("billion laughs") are a few hundred bytes that expand to 10**9 nodes,
# which every reader of the data would then walk. The matrix is some thousands of nodes.
MAX_BYTES = 8 << 20
MAX_NODES = 200_000


def read(path: Path) -> str:
    """A YAML file's text: bounded in size, UTF-8, or a MatrixError naming the file and
    the byte offset of the first byte that is not."""
    with open(path, "rb") as fh:
        raw = fh.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise MatrixError([Problem(str(path), None, "(file)", f"larger than {MAX_BYTES >> 20} MB: not a matrix file")])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise MatrixError([Problem(str(path), line, "(file)", f"not UTF-8 text: byte {exc.start} "
                                                              f"(0x{raw[exc.start]:02x}) {exc.reason}")]) from None


def load(text: str, file: str, aliases: bool = True) -> Located:
    """The file's data and lines. `aliases=False` refuses anchors and aliases (a
    machine-written file never needs them); with them, the data may expand to at most
    MAX_NODES nodes."""
    if len(text) > MAX_BYTES:
        raise MatrixError([Problem(file, None, "(file)", f"larger than {MAX_BYTES >> 20} MB: not a matrix file")])
    key = (text, aliases)
    with _PARSED_LOCK:
        hit = _PARSED.get(key)
        if hit is not None:
            _PARSED.move_to_end(key)
    if hit is not None:
        return Located(copy.deepcopy(hit[0]), dict(hit[1]), file)
    loader = SAFE_LOADER(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _bound(node, file, aliases)
        data = loader.construct_document(node) if node is not None else None
        lines: dict[KeyPath, int] = {}
        dupes: list[Problem] = []
        if node is not None:
            _walk(loader, node, (), lines, dupes, file, set())
    except yaml.YAMLError as exc:
        # Where the construct that is not closed began (an unclosed bracket, a quote): the line
        # to look at, rather than the one below it where the parser gave up.
        mark = getattr(exc, "context_mark", None) or getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        context = getattr(exc, "context", None)
        said = f"not valid YAML: {getattr(exc, 'problem', exc)}" + (f" ({context})" if context else "")
        raise MatrixError([Problem(file, line, "(syntax)", said)]) from None
    finally:
        loader.dispose()
    if dupes:
        raise MatrixError(dupes)
    with _PARSED_LOCK:
        _PARSED[key] = (copy.deepcopy(data), dict(lines))
        while len(_PARSED) > _KEEP:
            _PARSED.popitem(last=False)
    return Located(data, lines, file)


# Texts parsed without a problem, by their text: a process that reads the same 280 KB
# imported.yaml again (the unit suite reads hundreds of copies of the committed files)
# takes the data in 5 ms, not 100. A copy each way: what one reader changes, no other
# reader sees. Problems name their file, so a text with one is parsed each time.
_PARSED: OrderedDict[tuple[str, bool], tuple[Any, dict[KeyPath, int]]] = OrderedDict()
_PARSED_LOCK = threading.Lock()
_KEEP = 4


def _bound(root: yaml.Node, file: str, aliases: bool) -> None:
    """Refuse an alias where none may be, and data that expands past MAX_NODES."""
    if _plain_size(root) <= MAX_NODES:
        return          # no alias, so the data is as large as the file: nothing to refuse
    _bound_expanded(root, file, aliases)


def _plain_size(root: yaml.Node) -> int:
    """The number of nodes, or more than MAX_NODES as soon as one is reached twice (an
    alias): one quick walk, all a file without aliases (imported.yaml) needs."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            return MAX_NODES + 1
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for pair in node.value:
                stack += pair
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value
    return len(seen)


def _bound_expanded(root: yaml.Node, file: str, aliases: bool) -> None:
    """Each node's expanded size once (memoized by the node, which an alias shares): the
    first alias where none may be, or the first node past MAX_NODES, refused."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in sizes and not done:
            if not aliases:
                raise MatrixError([Problem(file, node.start_mark.line + 1, "(alias)",
                                           "an alias (*name): this file is written by `invoke update` and never "
                                           "holds anchors or aliases")])
            continue
        children = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else \
            list(node.value) if isinstance(node, yaml.SequenceNode) else []
        if not done:
            sizes[id(node)] = 0       # in progress: seen
            stack.append((node, True))
            stack += [(child, False) for child in children]
            continue
        sizes[id(node)] = 1 + sum(sizes.get(id(child), 0) for child in children)
        if sizes[id(node)] > MAX_NODES:
            raise MatrixError([Problem(file, node.start_mark.line + 1, "(size)",
                                       f"expands to more than {MAX_NODES} nodes (through aliases): not a matrix")])


_STR = "tag:yaml.org,2002:str"


def _walk(loader: Any, node: yaml.Node, path: KeyPath,
          lines: dict[KeyPath, int], dupes: list[Problem], file: str, seen_nodes: set[int]) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if id(node) in seen_nodes:
        return          # an alias: its keys were recorded where its anchor is
    seen_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key_node, value_node in node.value:
            # A plain string key is its text (what the constructor makes of it); others are built.
            key = key_node.value if key_node.tag == _STR and isinstance(key_node, yaml.ScalarNode) else \
                loader.construct_object(key_node, deep=True)
            if key in seen:
                # PyYAML silently keeps the last one; a silent override is a trap.
                dupes.append(Problem(file, key_node.start_mark.line + 1, format_path(path + (key,)),
                                     "duplicate key: each key may appear once"))
            seen.add(key)
            lines[path + (key,)] = key_node.start_mark.line + 1
            _walk(loader, value_node, path + (key,), lines, dupes, file, seen_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(loader, item, path + (index,), lines, dupes, file, seen_nodes)
