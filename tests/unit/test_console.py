"""The one place that knows the terminal: what each level lets through, and a task's
--quiet and --verbose as a user sees them."""
from __future__ import annotations

import pytest

from ascend_build import console
from tests import forked


@pytest.fixture(autouse=True)
def _level():
    yield
    console.configure("normal")


def _said(capsys, level: console.Level) -> tuple[str, str]:
    console.configure(level)
    console.say("doing")
    console.show("asked for")
    console.warn("careful")
    console.note("beside")
    console.error("broken")
    console.stream("a build's line")
    console.command("docker build .")
    out = capsys.readouterr()
    return out.out, out.err


def test_each_level_says_what_it_should(capsys):
    out, err = _said(capsys, "normal")
    assert out == "doing\nasked for\na build's line\n"
    assert err == "WARNING: careful\nbeside\nerror: broken\n"
    out, err = _said(capsys, "quiet")
    assert out == "asked for\n" and err == "WARNING: careful\nbeside\nerror: broken\n"
    out, _ = _said(capsys, "verbose")
    assert out == "doing\nasked for\na build's line\n$ docker build .\n"
    assert console.level_of(quiet=True, verbose=True) == "quiet"


def test_a_quiet_dry_build_prints_its_commands_and_nothing_of_its_progress(tmp_path):
    args = ["build", "--torch", "2.1.0", "--os", "debian12", "--dry", "--packages", str(tmp_path)]
    normal = forked.invoke(*args)
    quiet = forked.invoke(*args, "--quiet")
    assert normal.returncode == quiet.returncode == 0, normal.stderr + quiet.stderr
    assert "python: 3.11 from debian12's python3" in normal.stdout
    assert "python: 3.11" not in quiet.stdout
    commands = [line for line in normal.stdout.splitlines() if line.startswith(("DOCKER_BUILDKIT", "/usr/bin/", "#"))]
    assert commands and all(line in quiet.stdout.splitlines() for line in commands)
