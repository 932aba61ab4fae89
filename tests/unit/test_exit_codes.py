"""Every code of the README's exit-code table (its paragraph "Exit codes: 0 done, ..."), reached
by a command line as a user types it, and no code reached here that the table does not name:
through the tasks and the one place that maps errors to codes (cli/wrap.py). Where only an
engine can end a task so (a build that fails: 4, a suite that fails: 5, a rebuild that
differs: 7, Ctrl-C during a build: 130), the engine double (tests/doubles/engine_double.py)
stands in for the detected engine in a forked child of this process, so each code takes
milliseconds; the engine's absence (6) is the real detection's, and a closed pipe (141) a
real pipe's."""
from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import forked
from tests.conftest import ROOT, copy_matrix, link_locks
from tests.doubles.cann_double import make_run
from tests.doubles.engine_double import EngineDouble
from tests.unit.test_torch_index import closed_port

BASE = "debian:bookworm"
CELL = ["--torch", "2.1.0", "--os", "debian12", "--platform", "linux/arm64"]


@pytest.fixture(scope="module")
def program():
    from invoke import Collection

    import tasks
    from ascend_build.cli.entry import AscendProgram
    # the project's Program, as tests/forked.py runs it: its parse errors are bad input (2)
    return AscendProgram(namespace=Collection.from_module(tasks), name="invoke", binary="invoke")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("codes")
    packages = folder / "packages"
    packages.mkdir()
    make_run(packages, "toolkit", "8.0.RC3", "aarch64")
    make_run(packages, "kernels", "8.0.RC3", "aarch64", chip="910b")
    return folder, link_locks(copy_matrix(folder / "matrix")), packages


def readme_codes() -> set[int]:
    """The codes README's paragraph names: "Exit codes: 0 done, 1 ..., 2 bad input, ..., 130
    interrupted" (each code a number after the start, a comma or a semicolon, then its words)."""
    text = (ROOT / "README.md").read_text()
    assert "Exit codes: " in text, "README.md has no paragraph `Exit codes: 0 done, ...`"
    paragraph = text.split("Exit codes: ", 1)[1].split("\n\n", 1)[0].replace("\n", " ")
    return {int(n) for n in re.findall(r"(?:^|[;,] )(\d+) ", paragraph)}


def test_the_readme_paragraph_is_read_as_its_codes():
    assert {0, 2, 4, 141, 130} <= readme_codes()


def run(program, argv: list[str], cwd: Path, timeout: float = 120) -> dict:
    """One command line in a forked child of this process (the engine double in place)."""
    env = {**os.environ, "ASCEND_BUILD_CACHE": str(cwd / "cache")}
    return forked._run_one(program, {"argv": argv, "cwd": str(cwd), "env": env, "timeout": timeout})


def with_engine(monkeypatch, double: EngineDouble, suite_code: int = 0) -> None:
    """The double where a task asks for its engine, and the image suite's verdict."""
    from ascend_build import engine as eng
    from ascend_build.engine import client
    from ascend_build.images import steps
    double.add(BASE, platform="linux/arm64")
    double.add(BASE, platform="linux/amd64")
    monkeypatch.setattr(eng, "for_task", lambda *a, **k: double)
    monkeypatch.setattr(client, "for_task", lambda *a, **k: double)
    monkeypatch.setattr(eng, "detect", lambda *a, **k: double)
    monkeypatch.setattr(client, "detect", lambda *a, **k: double)
    monkeypatch.setattr(steps, "run_image_tests", lambda *a, **k: suite_code)


def test_each_code_of_the_table_is_reached_by_a_command_line(program, inputs, monkeypatch, tmp_path):
    folder, matrix, packages = inputs
    build = ["build", *CELL, "--matrix", str(matrix), "--packages", str(packages), "--offline"]
    reached: dict[int, str] = {}

    def expect(code: int, argv: list[str], said: str, cwd: Path = tmp_path) -> None:
        out = run(program, argv, cwd)
        assert out["code"] == code, f"{argv}: {out['code']}\n{out['out'][-1500:]}{out['err'][-1500:]}"
        assert said in out["out"] + out["err"], f"{argv}: {out['err'][-1500:]}"
        assert "Traceback" not in out["err"], out["err"]
        reached[code] = " ".join(argv)

    expect(0, ["matrix", "--matrix", str(matrix)], "cann8.0.rc3-910b-debian12-py3.11-torch2.1.0")
    empty = tmp_path / "bare-host"
    empty.mkdir()
    expect(1, ["doctor", "--root", str(empty), "--matrix", str(matrix)], "driver")
    expect(2, ["build", "--bogus"], "No idea what '--bogus' is")
    expect(3, ["build", *CELL, "--matrix", str(matrix), "--dry", "--offline", "--packages", str(empty)],
           "package not found")
    expect(6, [*build, "--docker", str(tmp_path / "no-such-client")], "no-such-client")
    expect(8, ["lock", "--torch", "2.12.0", "--python", "3.11", "--matrix", str(matrix),
               "--torch-index-url", f"http://127.0.0.1:{closed_port()}/whl/cpu"], "does not answer")

    with monkeypatch.context() as m:
        with_engine(m, EngineDouble(fail_build=lambda req: True))
        expect(4, build, "nothing was tagged")
    with monkeypatch.context() as m:
        with_engine(m, EngineDouble(), suite_code=1)
        expect(5, build, "image tests failed")
    with monkeypatch.context() as m:
        with_engine(m, EngineDouble(interrupt_at=4))
        expect(130, build, "interrupted")
    with monkeypatch.context() as m:
        # A --reproducible image, built here; then verify with an engine that writes its clock.
        double = EngineDouble()
        with_engine(m, double)
        from ascend_build.images import build as runtime_build
        from ascend_build.inputs.options import Inputs, Site
        from ascend_build.matrix import load_matrix
        mx = load_matrix(matrix)
        site = Site(packages=(packages,), offline=True, cache=tmp_path / "cache", work=tmp_path / ".build",
                    epoch=1700000000)
        built = runtime_build.build(mx, mx.cell("2.1.0", "debian12", "3.11", None, "linux/arm64"), site,
                                    Inputs(), double, lambda *a: 0)
        real_build = double.build
        m.setattr(double, "build", lambda req, log=None, show_line=None:
                  real_build(dataclasses.replace(req, epoch=None), log, show_line))
        expect(7, ["verify", "--image", built.tags.readable, "--matrix", str(matrix), "--packages", str(packages),
                   "--offline"], "DIFFERS")

    # 141: what reads the output goes away (a real pipe, closed before the task writes).
    reader = subprocess.Popen([sys.executable, "-m", "invoke", "matrix"], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert reader.stdout is not None
    reader.stdout.close()
    _, err = reader.communicate(timeout=60)
    assert reader.returncode in (141, -13), (reader.returncode, err)     # -13: SIGPIPE, as the shell shows 141
    assert b"Traceback" not in err
    reached[141] = "invoke matrix | (closed)"

    # README's table decides: a code it names with no case here fails, and so does a case whose
    # code it does not name (tests/unit/test_tasks.py holds the table to errors.EXIT_CODES).
    table = readme_codes()
    assert not table - set(reached), f"README's codes no command line here reaches: {sorted(table - set(reached))}"
    assert not set(reached) - table, ("codes reached here that README's table does not name: "
                                      + "; ".join(f"{c} by `{reached[c]}`" for c in sorted(set(reached) - table)))
