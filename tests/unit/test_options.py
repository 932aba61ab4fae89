"""Each task option declared once, as a field of the record its action receives
(cli/options.py's opt and group): the task's signature invoke parses, its help and the
record handed to the action all come from it (cli/wrap.py's task)."""
from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass

import pytest
from invoke import Collection, Config, Context

from ascend_build.cli import building
from ascend_build.cli.options import Network, Output, flags, group, opt, record_of, signature
from ascend_build.cli.wrap import task


def _tasks():
    import tasks  # the checkout's tasks.py (the repository root is on sys.path, as for tests.*)
    return tasks


def _declared() -> dict:
    """task name -> the invoke Task, for the tasks declared by a record."""
    return {name: t for name, t in Collection.from_module(_tasks()).tasks.items() if getattr(t, "record", None)}


def test_each_tasks_signature_is_its_records_options():
    """What invoke reads of a task (its signature, the help, which options repeat) is its
    record's fields, but for the ones the task names in `without`."""
    declared = _declared()
    assert "build" in declared
    for name, t in declared.items():
        options = {x.name: x for x in flags(t.record) if x.name not in t.without}
        params = list(inspect.signature(t.body).parameters.values())
        assert params[0].name == "c", name
        assert {p.name: p.default for p in params[1:]} == {n: x.default for n, x in options.items()}, name
        assert set(t.without) <= {x.name for x in flags(t.record)}, name
        args = {a.attr_name or a.name: a for a in t.get_arguments()}
        assert set(args) == set(options), name
        for option, arg in args.items():
            assert (arg.kind is list) == options[option].iterable, (name, option)
            assert t.option_help[option].strip(), (name, option)


def test_the_help_of_a_task_is_its_records_unless_it_says_it_its_own_way():
    from ascend_build.cli.options import help_of
    build = _declared()["build"]
    for x in flags(building.BuildOptions):
        assert build.option_help[x.name] == x.help
    assert help_of(building.BuildOptions, "proxy") == help_of(Network, "proxy")


@dataclass(frozen=True)
class _Plain:
    matrix: str = opt("matrix.yaml", "the matrix file")
    every: bool = opt(False, "all of them", name="all")
    output: Output = group(Output)


def test_a_field_without_help_is_refused():
    @dataclass(frozen=True)
    class Untold:
        matrix: str = opt("matrix.yaml", "the matrix file")
        dry: bool = False

    with pytest.raises(TypeError, match="Untold.dry: a field with no help"):
        flags(Untold)
    with pytest.raises(TypeError, match="Untold.dry: a field with no help"):
        task(Untold)(lambda c, o: None)
    with pytest.raises(TypeError, match="help says what it does"):
        opt(None, "  ")


def test_an_option_named_twice_and_a_stray_name_are_refused():
    @dataclass(frozen=True)
    class Twice:
        quiet: bool = opt(False, "quiet, again")
        output: Output = group(Output)

    with pytest.raises(TypeError, match="Twice: options named twice: quiet"):
        flags(Twice)
    def f(c, o):
        return o
    with pytest.raises(TypeError, match="task f: nope: not an option of _Plain"):
        task(_Plain, without=("nope",))(f)
    with pytest.raises(TypeError, match="task f: nope: not an option of _Plain"):
        task(_Plain, help={"nope": "x"})(f)


def test_a_renamed_option_a_group_and_without():
    """A field may be an option of another name (`every` is --all); a group's options are
    the task's own; an option the task has not keeps its default, and is no option."""
    assert [x.name for x in flags(_Plain)] == ["matrix", "all", "quiet", "verbose"]
    assert list(signature(_Plain, without=("verbose",)).parameters) == ["c", "matrix", "all", "quiet"]
    got = record_of(_Plain, {"matrix": "m.yaml", "all": True, "quiet": True}, without=("verbose",))
    assert got == _Plain("m.yaml", True, Output(quiet=True, verbose=False))


def test_a_missing_option_is_an_error_never_its_default():
    """A task whose signature lacked one of its record's options would hand the action that
    field's default unseen (torch-npu once had no --no-cache): the record is not made."""
    given = {x.name: x.default for x in flags(building.BuildOptions)}
    assert record_of(building.BuildOptions, given) == building.BuildOptions()
    del given["no_cache"]
    with pytest.raises(TypeError, match=r"Steps.no_cache: the task has no option --no-cache"):
        record_of(building.BuildOptions, given)


def _run(t, config: dict, argv: list[str], **given):
    """The task's body as invoke calls it: the Context, then every option (its default where
    the command line gave none, [] for a repeatable one)."""
    kwargs = {a.attr_name or a.name: a.value if a.value is not None else a.default for a in t.get_arguments()}
    kwargs.update(given)
    old = sys.argv
    sys.argv = ["invoke", *argv]
    import tempfile

    import yaml
    # the site's settings as a file invoke reads (`-f FILE`), the level siteconfig takes them from
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as fh:
        fh.write(yaml.safe_dump(config))
        fh.flush()
        cfg = Config(runtime_path=fh.name)
        cfg.load_runtime()
    try:
        return t(Context(cfg), **kwargs)
    finally:
        sys.argv = old


def test_the_site_config_fills_the_records_defaults_and_the_command_line_wins(monkeypatch):
    """invoke.yaml's ascend_build: settings (cli/siteconfig.py) reach the record the action
    gets, a group's field (Network.base_image) as much as the record's own; an option on the
    command line wins."""
    got = []
    monkeypatch.setattr(building, "build", got.append)
    build = _declared()["build"]
    site = {"ascend_build": {"repository": "site.example/runtime", "base_image": ["a=b"], "offline": "true"}}
    _run(build, site, ["build"])
    o = got.pop()
    assert isinstance(o, building.BuildOptions)
    assert o.repository == "site.example/runtime" and o.network.base_image == ["a=b"] and o.files.offline is True
    assert o.engine.engine == "docker" and o.matrix == "matrix.yaml" and o.files.packages == []
    _run(build, site, ["build", "--repository", "mine"], repository="mine", torch="2.1.0")
    o = got.pop()
    assert o.repository == "mine" and o.choice.torch == "2.1.0" and o.network.base_image == ["a=b"]
