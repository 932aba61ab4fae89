"""The kind seam (images/catalog.py), read from the catalog, never a list of kinds typed
here: a kind built on a tested runtime image is a module with its options of `invoke
build` and its image, built through one path (images/batch.py's build_on_runtime); the
command line collects the options from the catalog, lists them by kind in its help, and
refuses them as each kind declares."""
from __future__ import annotations

import ast
import dataclasses
import inspect
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ascend_build.cli import building
from ascend_build.cli.options import flags, group, opt
from ascend_build.errors import UserError
from ascend_build.images import catalog, devel
from ascend_build.images.catalog import OnRuntimeModule
from ascend_build.images.kinds import option, options_of
from tests import forked

ROOT = Path(__file__).resolve().parents[2]


def _module_file(module) -> Path:
    return Path(inspect.getfile(module))


# ------------------------------------------------------------------ the catalog
def test_every_kind_names_itself_once_and_comes_after_the_kind_it_extends():
    names = [m.KIND.name for m in catalog.MODULES]
    assert len(set(names)) == len(names) and catalog.KINDS == {m.KIND.name: m.KIND for m in catalog.MODULES}
    for i, module in enumerate(catalog.MODULES):
        if module.KIND.extends is not None:       # its suites' parent is rendered and listed first
            assert module.KIND.extends in [m.KIND for m in catalog.MODULES[:i]], module.KIND.name


def test_the_kinds_built_on_a_runtime_are_the_kinds_that_extend_one(monkeypatch):
    """A kind whose image is FROM a runtime is built through the seam, and only such a kind;
    one that misses part of the protocol is not taken for one (a planted gap is found)."""
    assert catalog.ON_RUNTIME, "the catalog has kinds built on a runtime image"
    for module in catalog.MODULES:
        assert isinstance(module, OnRuntimeModule) == (module.KIND.extends is not None), module.KIND.name
    for module in catalog.ON_RUNTIME:
        assert options_of(module.Options), f"{module.KIND.name}: an Options record of kinds.option fields"
    monkeypatch.delattr(devel, "image")
    assert not isinstance(devel, OnRuntimeModule)


# Engine steps only the one build path takes; a kind on a runtime declares its image instead.
BUILD_STEPS = {"build_on", "build_test_tag", "reuse", "show_dry", "stage", "layer"}


def own_builds(source: str) -> list[str]:
    """What a kind's module does that the one build path does for it: an engine step called
    (steps.build_on, finish.layer, ...), or a function of its own that builds or stages."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in BUILD_STEPS \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in ("steps", "finish"):
            found.append(f"{node.lineno}: {node.func.value.id}.{node.func.attr}")
        elif isinstance(node, ast.FunctionDef) and node.name in ("build", "_build_on", "_stage"):
            found.append(f"{node.lineno}: def {node.name}")
    return found


def test_no_kind_on_a_runtime_builds_or_stages_itself(tmp_path):
    for module in catalog.ON_RUNTIME:
        assert own_builds(_module_file(module).read_text()) == [], module.KIND.name
    planted = _module_file(devel).read_text() + (
        "\n\ndef _stage(ctx):\n    pass\n\n\ndef _build_on(plan, site, engine):\n"
        "    return steps.build_on(plan, site, engine, None, None)\n")
    assert [x.split(": ")[1] for x in own_builds(planted)] == ["def _stage", "def _build_on", "steps.build_on"]


# ------------------------------------------------------------------ their options of `invoke build`
def _kind_options() -> list[tuple[OnRuntimeModule, str, Any]]:
    return [(m, name, said) for m in catalog.ON_RUNTIME for name, said in options_of(m.Options).items()]


def _help_sections(text: str) -> dict[str, set[str]]:
    """`invoke build --help`'s options by the heading they are listed under."""
    sections: dict[str, set[str]] = {}
    heading = None
    for line in text.splitlines():
        if line.startswith("Options"):
            heading = line.rstrip(":")
            sections[heading] = set()
        elif heading and (m := re.match(r"  (--[a-z0-9-]+)", line)):
            sections[heading].add(m[1])
    return sections


def test_build_help_lists_each_kinds_options_under_its_kind():
    out = forked.invoke("build", "--help", env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    sections = _help_sections(out.stdout)
    own = sections.pop("Options")
    for module in catalog.ON_RUNTIME:
        heading = next(h for h in sections if h.startswith(f"Options of the {module.KIND.name} kind ("))
        assert sections.pop(heading) == {"--" + n.replace("_", "-") for n in options_of(module.Options)}
    assert sections == {}, "a section for each kind on a runtime, and no other"
    kinds = {"--" + n.replace("_", "-") for _, n, _ in _kind_options()}
    assert own == {"--" + x.name.replace("_", "-") for x in flags(building.BuildOptions)} - kinds


def _options_with(**given: Any) -> building.BuildOptions:
    """`invoke build` as given these options (a kind's by its name), all else left out."""
    kinds = {}
    for module in catalog.ON_RUNTIME:
        mine = {k: v for k, v in given.items() if k in options_of(module.Options)}
        kinds[module.KIND.name] = module.Options(**mine)
    rest = {k: v for k, v in given.items() if not any(k in options_of(m.Options) for m in catalog.ON_RUNTIME)}
    choice = building.Choice(**{k: rest.pop(k) for k in list(rest) if k in {f.name for f in
                                                                            dataclasses.fields(building.Choice)}})
    return building.BuildOptions(choice=choice, kinds=building.KindOptions(**kinds), **rest)


def _value(default: Any) -> Any:
    return True if default is False else "x"


@pytest.mark.parametrize("module, name, said", _kind_options(), ids=[f"{m.KIND.name}-{n}" for m, n, _ in _kind_options()])
def test_each_kind_option_is_refused_as_its_kind_declares(module, name, said):
    """Read from the kind's declaration: with --all unless --all takes it; without what it
    needs, with the kind's own words; with one of those, not refused here."""
    default = module.Options.__dataclass_fields__[name].default
    flag = "--" + name.replace("_", "-")
    if not said.with_all:
        with pytest.raises(UserError, match=f"^{flag} builds on one runtime image: drop --all$"):
            building._refuse_kind_options(_options_with(**{name: _value(default), "all": True}))
    if said.needs:
        with pytest.raises(UserError) as refused:
            building._refuse_kind_options(_options_with(**{name: _value(default)}))
        assert str(refused.value) == f"{flag} {said.unmet}"
        for need in said.needs:
            building._refuse_kind_options(_options_with(**{name: _value(default), need: "x"}))
    else:
        building._refuse_kind_options(_options_with(**{name: _value(default)}))


@dataclass(frozen=True)
class _PlantedOptions:
    """A kind's options as a planted kind might declare them."""
    every: bool = option(False, "taken by --all", with_all=True)
    one: str | None = option(None, "one runtime's")
    after: bool = option(False, "needs --one or --cann", needs=("one", "cann"), unmet="is for ONE: give --one")


@dataclass(frozen=True)
class _PlantedKinds:
    planted: _PlantedOptions = group(_PlantedOptions, "the planted kind")


@dataclass(frozen=True)
class _Planted:
    all: bool = opt(False, "all of them")
    cann: str | None = opt(None, "a CANN release")
    kinds: Any = group(_PlantedKinds)


def _planted(all: bool = False, cann: str | None = None, **given: Any) -> _Planted:
    return _Planted(all, cann, _PlantedKinds(_PlantedOptions(**given)))


def test_all_takes_the_options_a_kind_says_it_takes_and_needs_are_any_of():
    building._refuse_kind_options(_planted(all=True, every=True))
    with pytest.raises(UserError, match="^--one builds on one runtime image: drop --all$"):
        building._refuse_kind_options(_planted(all=True, one="x"))
    with pytest.raises(UserError, match="^--after is for ONE: give --one$"):
        building._refuse_kind_options(_planted(after=True))
    building._refuse_kind_options(_planted(after=True, one="x"))
    building._refuse_kind_options(_planted(after=True, cann="9.0.0"))
    assert [x.heading for x in flags(_Planted)] == ["", "", "the planted kind", "the planted kind", "the planted kind"]


def test_a_kind_option_is_declared_whole():
    with pytest.raises(TypeError, match="help says what it does"):
        option(None, " ")
    with pytest.raises(TypeError, match="both needs= and unmet="):
        option(False, "x", needs=("vllm",))
    with pytest.raises(TypeError, match="never empty text"):
        option("", "x")

    @dataclass(frozen=True)
    class Bare:
        plain: bool = False
    with pytest.raises(TypeError, match="Bare.plain: declare a kind's option"):
        options_of(Bare)


# The build task's path through cli/: its record, its action, its help and pages.
BUILD_PATH = ("building.py", "options.py", "pages.py", "entry.py", "wrap.py")


def names_of_kind_options(package: Path) -> list[str]:
    """Where the build task's path through cli/ names a kind's option: an attribute of that
    name (o.vllm), or its flag in a string ("--vllm")."""
    names = {name for _, name, _ in _kind_options()}
    found = []
    for file in BUILD_PATH:
        for node in ast.walk(ast.parse((package / "cli" / file).read_text())):
            if isinstance(node, ast.Attribute) and node.attr in names:
                found.append(f"cli/{file}:{node.lineno}: .{node.attr}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                for name in names:
                    if re.search(rf"--{name.replace('_', '-')}\b", node.value):
                        found.append(f"cli/{file}:{node.lineno}: --{name.replace('_', '-')}")
    return found


def test_the_build_tasks_command_line_names_no_kinds_option(tmp_path):
    assert names_of_kind_options(ROOT / "ascend_build") == []
    copy = tmp_path / "ascend_build"
    shutil.copytree(ROOT / "ascend_build" / "cli", copy / "cli", ignore=shutil.ignore_patterns("__pycache__"))
    building_py = copy / "cli" / "building.py"
    name = _kind_options()[0][1]
    building_py.write_text(building_py.read_text() + f"\n\ndef planted(o):\n    if o.kinds.x.{name}:\n"
                           f"        raise ValueError('--{name.replace('_', '-')} planted')\n")
    assert len(names_of_kind_options(copy)) == 2


def test_all_builds_the_image_of_a_kind_it_takes_on_every_image_a_refused_cell_a_failed_row(monkeypatch, capsys):
    """An option --all takes (the devel kind's, declared so here): each image of `images:`
    gets the kind's image on it, planned after its runtime's; a cell the kind refuses is a
    failed row, and the others are built all the same."""
    from ascend_build import engine as eng
    from ascend_build.matrix import load_matrix
    declared = building.options_of
    monkeypatch.setattr(building, "options_of", lambda record: {
        name: dataclasses.replace(said, with_all=True, needs=(), unmet="") for name, said in declared(record).items()})
    monkeypatch.setattr(eng, "for_task", lambda kind="docker", client=None, dry=False: eng.Engine(
        "docker", "docker", "buildx", "?"))
    with pytest.raises(UserError, match="would be refused"):
        building.build(_options_with(devel=True, all=True, dry=True, unlocked=True))
    rows = {line.split()[0]: line.split()[2] for line in capsys.readouterr().out.splitlines()
            if len(line.split()) > 2 and line.split()[2] in ("tagged", "failed")}
    cells = load_matrix(ROOT / "matrix.yaml").image_cells()
    cann_only = [c for c in cells if c.stack.framework.name == "cann"]
    assert cann_only and len(cann_only) < len(cells)
    for cell in cells:
        assert rows[cell.name] == "tagged", cell.name             # every runtime image planned
        assert rows[f"{cell.name}-devel"] == ("tagged" if cell in cann_only else "failed"), cell.name
