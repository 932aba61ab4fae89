"""The package's floors, written down once: each room (a subpackage or top-level module of
ascend_build) imports only rooms on floors below its own, so nothing climbs back up and no
circle can form. Read from the code's own imports (ast), relative and absolute, anywhere
in a module (an import inside a function climbs as much as one at the top)."""
from __future__ import annotations

import ast
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Top first. tasks.py sits above them all.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("__main__",),      # `python -m ascend_build`: the command line's entry (cli/entry.py)
    ("cli",),
    ("cluster",),
    ("host", "images"),     # neither imports the other: doctor reads the label names in provenance
    ("provenance",),
    ("inputs", "locking"),
    ("upstream",),
    ("matrix",),
    ("engine",),
    ("platforms", "chips"),
    ("hashing", "errors", "console", "atomic", "project"),
)
FLOOR = {room: level for level, rooms in enumerate(FLOORS) for room in rooms}


def _imports(path: Path, package: Path) -> list[tuple[int, str]]:
    """(line, the ascend_build module imported, dotted below ascend_build) of one file."""
    rel = path.relative_to(package).with_suffix("")
    here = list(rel.parts[:-1])            # the package the file is in
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - (node.level - 1)] if node.level > 1 else here
                if node.module:
                    found.append((node.lineno, ".".join(base + [node.module])))
                else:
                    found += [(node.lineno, ".".join(base + [alias.name])) for alias in node.names]
            elif node.module and node.module.split(".")[0] == "ascend_build":
                rest = node.module.split(".")[1:]
                if rest:
                    found.append((node.lineno, ".".join(rest)))
                else:
                    found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, ".".join(alias.name.split(".")[1:])) for alias in node.names
                      if alias.name.split(".")[0] == "ascend_build" and "." in alias.name]
    return found


def climbs(package: Path) -> list[str]:
    """Every import that reaches a room on the same floor or above, or a room no floor names."""
    problems = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        room = rel.parts[0].removesuffix(".py")
        if room == "__init__":
            continue
        if room not in FLOOR:
            problems.append(f"{rel}: room {room!r} is on no floor (FLOORS in {Path(__file__).name})")
            continue
        for line, target in _imports(path, package):
            other = target.split(".")[0]
            if other == room:
                continue
            if other not in FLOOR:
                problems.append(f"{rel}:{line}: imports {target}, a room on no floor")
            elif FLOOR[other] <= FLOOR[room]:
                problems.append(f"{rel}:{line}: {room} imports {target}, which is not below it")
    return problems


def test_no_import_climbs_a_floor():
    rooms = {p.name.removesuffix(".py") for p in (ROOT / "ascend_build").iterdir()
             if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.name != "__init__.py")}
    assert rooms == set(FLOOR), "every room of the package on one floor, and no floor for a room that is gone"
    assert climbs(ROOT / "ascend_build") == []


def test_a_planted_upward_import_is_found(tmp_path):
    """The check can fail: the engine (low) importing the cluster room (high), once
    relative inside a function and once absolute."""
    copy = tmp_path / "ascend_build"
    shutil.copytree(ROOT / "ascend_build", copy, ignore=shutil.ignore_patterns("__pycache__", "templates"))
    client = copy / "engine" / "client.py"
    client.write_text(client.read_text() + "\n\ndef planted():\n    from ..cluster import facts\n    return facts\n"
                      "\n\nimport ascend_build.images.kinds  # noqa\n")
    found = climbs(copy)
    assert any(p.startswith("engine/client.py:") and "engine imports cluster," in p for p in found), found
    assert any("engine imports images.kinds" in p for p in found), found
    assert len(found) == 2


def test_host_importing_images_is_found_again(tmp_path):
    """host shares a floor with images (#67): the doctor's old import of a label from images
    climbs now."""
    copy = tmp_path / "ascend_build"
    shutil.copytree(ROOT / "ascend_build", copy, ignore=shutil.ignore_patterns("__pycache__", "templates"))
    doctor = copy / "host" / "doctor.py"
    doctor.write_text(doctor.read_text() + "\n\ndef planted():\n    from ..images.kinds import label\n    return label\n")
    found = climbs(copy)
    assert len(found) == 1 and "host imports images.kinds" in found[0], found


# A room that grows past this share of the package is doing several rooms' work: split it
# (docs/code.md), as images/ (inputs/) and matrix/ (upstream/) were.
LARGEST_SHARE = 0.25


def room_shares(package: Path) -> dict[str, float]:
    """Each room's share of the package's lines (its .py files, a subpackage's all of them)."""
    lines: dict[str, int] = {}
    for path in package.rglob("*.py"):
        room = path.relative_to(package).parts[0].removesuffix(".py")
        if room != "__init__":
            lines[room] = lines.get(room, 0) + len(path.read_text().splitlines())
    total = sum(lines.values())
    return {room: n / total for room, n in lines.items()}


def test_no_room_holds_over_a_quarter_of_the_package():
    shares = room_shares(ROOT / "ascend_build")
    assert {r: round(s, 3) for r, s in shares.items() if s > LARGEST_SHARE} == {}


def test_a_room_grown_past_a_quarter_is_found(tmp_path):
    copy = tmp_path / "ascend_build"
    shutil.copytree(ROOT / "ascend_build", copy, ignore=shutil.ignore_patterns("__pycache__", "templates"))
    total = sum(len(p.read_text().splitlines()) for p in copy.rglob("*.py"))
    (copy / "host" / "planted.py").write_text("x = 1\n" * total)
    assert room_shares(copy)["host"] > LARGEST_SHARE


def _module_file(package: Path, target: str) -> Path | None:
    """The file of ascend_build that `target` (dotted below ascend_build) names: a module, a
    package's __init__, or the module a name is taken from."""
    parts = target.split(".")
    for cut in (parts, parts[:-1]):
        if cut and (package.joinpath(*cut).with_suffix(".py")).exists():
            return package.joinpath(*cut).with_suffix(".py")
        if (package.joinpath(*cut) / "__init__.py").exists():
            return package.joinpath(*cut) / "__init__.py"
    return None


def circles(package: Path) -> list[list[str]]:
    """Every set of files that import each other round (Tarjan's strongly connected
    components over the file graph; imports under TYPE_CHECKING count, they tie the
    files as much). Floors keep rooms apart; this keeps the files of one room apart."""
    files = sorted(package.rglob("*.py"))
    edges = {f: {t for _, target in _imports(f, package) if (t := _module_file(package, target)) and t != f}
             for f in files}
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    found: list[list[str]] = []

    def visit(f: Path) -> None:
        index[f] = low[f] = len(index)
        stack.append(f)
        for t in edges.get(f, ()):
            if t not in index:
                visit(t)
                low[f] = min(low[f], low[t])
            elif t in stack:
                low[f] = min(low[f], index[t])
        if low[f] == index[f]:
            group = []
            while True:
                g = stack.pop()
                group.append(str(g.relative_to(package)))
                if g == f:
                    break
            if len(group) > 1:
                found.append(sorted(group))
    for f in files:
        if f not in index:
            visit(f)
    return found


def test_no_files_import_each_other_round():
    assert circles(ROOT / "ascend_build") == []


def test_a_planted_circle_between_two_files_of_one_room_is_found(tmp_path):
    copy = tmp_path / "ascend_build"
    shutil.copytree(ROOT / "ascend_build", copy, ignore=shutil.ignore_patterns("__pycache__", "templates"))
    eras = copy / "matrix" / "eras.py"
    eras.write_text(eras.read_text() + "\n\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                    "    from .records import Stack  # noqa\n")
    assert circles(copy) == [["matrix/eras.py", "matrix/records.py"]]


LONGEST = 60        # lines a function of the package may have (docs/code.md says so)


def long_functions(package: Path) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > LONGEST:
                    found.append(f"{path.relative_to(package)}:{node.lineno} {node.name}: {lines} lines")
    return found


def test_no_function_is_longer_than_sixty_lines(tmp_path):
    assert long_functions(ROOT / "ascend_build") == []
    planted = tmp_path / "planted.py"
    planted.write_text("def long():\n" + "    x = 1\n" * LONGEST)
    assert long_functions(tmp_path) == [f"planted.py:1 long: {LONGEST + 1} lines"]


# ------------------------------------------------------------------ the engine room
# Only engine/ knows docker's and podman's command lines: everything else asks an Engine
# for an operation (issue #49). Found by ast: a call of `.command(...)` (the raw command
# line, kept for tests), or a list that starts with a client (`engine.client`, "docker",
# "podman", "skopeo", "buildah").
CLIENT_WORDS = {"docker", "podman", "skopeo", "buildah"}


def command_lines_outside_the_engine(package: Path) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        if rel.parts[0] == "engine":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "command":
                found.append(f"{rel}:{node.lineno}: .command(...)")
            elif isinstance(node, ast.List) and node.elts:
                first = node.elts[0]
                if (isinstance(first, ast.Attribute) and first.attr == "client") or \
                        (isinstance(first, ast.Constant) and first.value in CLIENT_WORDS):
                    found.append(f"{rel}:{node.lineno}: a command line that starts with the client")
    return found


def test_no_command_line_of_an_engine_outside_the_engine_room():
    assert command_lines_outside_the_engine(ROOT / "ascend_build") == []


def test_the_engine_room_check_finds_a_planted_command_line(tmp_path):
    package = tmp_path / "ascend_build"
    shutil.copytree(ROOT / "ascend_build", package, ignore=shutil.ignore_patterns("__pycache__"))
    planted = package / "images" / "planted.py"
    planted.write_text("def f(engine, ref):\n    return [engine.client, 'image', 'inspect', ref]\n\n\n"
                       "def g(engine):\n    return engine.command('tag', 'a', 'b')\n\n\n"
                       "X = ['docker', 'run', 'img']\n")
    assert sorted(command_lines_outside_the_engine(package)) == [
        "images/planted.py:2: a command line that starts with the client",
        "images/planted.py:6: .command(...)",
        "images/planted.py:9: a command line that starts with the client"]
