"""docs/code.md, the map of the code, held to the tree: every room and every module of the
package named (in its room's entry, outside the parentheses that describe it), nothing
named that is not there, every folder of tests/ named, every path it gives in backticks
there, and the sizes it gives true; the kinds' modules and their suites' folders by the
catalog (images/catalog.py's MODULES), which the map points to rather than repeat. Adding
a module without naming it fails here."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

from ascend_build.images import catalog
from tests.unit import test_layering

ROOT = Path(__file__).resolve().parents[2]
MAP = ROOT / "docs" / "code.md"


def fenced(text: str) -> list[list[str]]:
    """The lines of each ``` block."""
    blocks, current = [], None
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current = []
            else:
                blocks.append(current)
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def entries(block: list[str]) -> list[tuple[list[str], str]]:
    """Each entry of a block: the names in its first column (`cli/`, `errors.py, hashing.py,`)
    and what is said of them, its indented lines after it included."""
    found: list[tuple[list[str], str]] = []
    for line in block:
        if line[:1].isspace() or not line.strip():
            if found:
                found[-1] = (found[-1][0], found[-1][1] + " " + line.strip())
            continue
        names, said = (re.split(r"\s{2,}", line, maxsplit=1) + [""])[:2]
        found.append(([n.strip() for n in names.split(",") if n.strip()], said.strip()))
    return found


def named_in(said: str) -> list[str]:
    """The module names of a room's entry: what is left outside the parentheses, split at
    commas, semicolons, + and /."""
    bare = said
    while True:
        fewer = re.sub(r"\([^()]*\)", "", bare)
        if fewer == bare:
            break
        bare = fewer
    return [t.strip() for t in re.split(r"[,;+/]", bare) if t.strip()]


# The kinds' modules, each named by the catalog the map points to.
KIND_MODULES = [m.__name__.rsplit(".", 1)[1] for m in catalog.MODULES]


def problems(text: str, package: Path, root: Path, tests: Path) -> list[str]:
    found: list[str] = []
    layout, files = fenced(text)[:2]
    rooms = {d.name for d in package.iterdir() if (d / "__init__.py").is_file()}
    modules = {f.stem for f in package.glob("*.py") if f.name != "__init__.py"}
    seen: set[str] = set()
    for names, said in entries(layout):
        for name in names:
            if name.endswith("/"):
                room = name.rstrip("/")
                seen.add(name)
                if room not in rooms:
                    found.append(f"docs/code.md names the room {name}, which is not in the package")
                    continue
                have = {f.stem for f in (package / room).glob("*.py") if f.name != "__init__.py"}
                named = named_in(said) + (KIND_MODULES if room == "images" and "MODULES" in said else [])
                found += [f"{room}/{m}.py is not named in docs/code.md" for m in sorted(have - set(named))]
                found += [f"docs/code.md names {room}/{m}, which is not there (or is prose outside parentheses)"
                          for m in named if m not in have]
            elif name.endswith(".py") and (package / name).is_file():
                seen.add(name)
            elif not (root / name).exists():
                found.append(f"docs/code.md names {name}, which is not there")
        for count in re.findall(r"\((\d+) lines\)", said):
            (only,) = names
            real = len((root / only).read_text().splitlines())
            if int(count) != real:
                found.append(f"docs/code.md gives {only} {count} lines; it has {real}")
    found += [f"the room {r}/ is not named in docs/code.md" for r in sorted(rooms) if f"{r}/" not in seen]
    found += [f"{m}.py is not named in docs/code.md" for m in sorted(modules) if f"{m}.py" not in seen]
    given = {name for names, _ in entries(files) for name in names}
    found += [f"docs/code.md names {n}, which is not there" for n in sorted(given)
              if "<" not in n and not (root / n).exists()]
    if "tests/<suite>" in given:        # the kinds' suites, named by the catalog the map points to
        given |= {f"tests/{kind.suite}" for kind in catalog.KINDS.values()}
    folders = {f"tests/{d.name}" for d in tests.iterdir() if d.is_dir() and d.name != "__pycache__"}
    found += [f"{f} is not named in docs/code.md" for f in sorted(folders - given)]
    for path in sorted(set(re.findall(r"`((?:[a-z_]+/)+[a-z_]+\.py)`", text))):
        if not (package / path).is_file() and not (root / path).is_file():
            found.append(f"docs/code.md gives `{path}`, which is not there")
    longest = re.search(r"longer\s+than\s+(\d+)\s+lines", text)
    if not longest or int(longest[1]) != test_layering.LONGEST:
        found.append(f"docs/code.md does not give the longest function test_layering allows ({test_layering.LONGEST})")
    if "over a quarter" not in text or test_layering.LARGEST_SHARE != 0.25:
        found.append("docs/code.md does not give the largest share of a room test_layering allows")
    return found


def test_the_map_names_every_room_module_and_test_folder_and_its_sizes_are_true():
    assert problems(MAP.read_text(), ROOT / "ascend_build", ROOT, ROOT / "tests") == []


def _copy(tmp_path: Path) -> tuple[Path, Path]:
    package = tmp_path / "ascend_build"
    shutil.copytree(ROOT / "ascend_build", package, ignore=shutil.ignore_patterns("__pycache__", "templates"))
    tests = tmp_path / "tests"
    for d in (ROOT / "tests").iterdir():
        if d.is_dir() and d.name != "__pycache__":
            (tests / d.name).mkdir(parents=True)
    return package, tests


def test_a_module_or_a_test_folder_added_without_the_map_fails_and_so_does_a_wrong_size(tmp_path):
    package, tests = _copy(tmp_path)
    text = MAP.read_text()
    assert problems(text, package, ROOT, tests) == []
    (package / "images" / "planted.py").write_text("X = 1\n")
    (package / "planted.py").write_text("X = 1\n")
    (tests / "planted_image").mkdir()
    size = re.search(r"tasks\.py .*\((\d+) lines\)", text)
    assert size
    wrong = text.replace(f"({size[1]} lines)", f"({int(size[1]) + 1} lines)", 1)
    # a module placed in the wrong room, as `support` once was in images/
    wrong = wrong.replace("registry (push, join)", "registry (push, join), support", 1)
    assert sorted(problems(wrong, package, ROOT, tests)) == sorted([
        "images/planted.py is not named in docs/code.md",
        "docs/code.md names images/support, which is not there (or is prose outside parentheses)",
        f"docs/code.md gives tasks.py {int(size[1]) + 1} lines; it has {size[1]}",
        "planted.py is not named in docs/code.md",
        "tests/planted_image is not named in docs/code.md"])
