"""Ctrl-C, deterministically in each order: the signal to the task first, to the engine
client first (the task never sees one), or to both while the task was started with
SIGINT ignored (a background job of a script, where the old race lost). Each ends as an
interrupt: exit 130, "interrupted: nothing was tagged", cleanup complete."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ascend_build.engine.interrupts import died_of_interrupt

TASK = Path(__file__).resolve().parents[1] / "doubles" / "interrupt_task.py"


def _ignore_sigint():
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def start(folder: Path, *args: str, ignore_sigint: bool = False) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(TASK), str(folder), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=_ignore_sigint if ignore_sigint else None)


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"the task ended before {path.name}: {proc.communicate()}"
        assert time.monotonic() < end, f"no {path.name} after {timeout} s"
        time.sleep(0.02)


def wait_for_progress(folder: Path, proc: subprocess.Popen) -> int:
    """The client double's pid, once the build streams its progress."""
    wait_for(folder / "client.pid", proc)
    log = folder / "build.log"
    end = time.monotonic() + 30
    while "Collecting torch" not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < end and proc.poll() is None
        time.sleep(0.02)
    return int((folder / "client.pid").read_text())


def finish(proc: subprocess.Popen) -> tuple[int, str]:
    out, err = proc.communicate(timeout=60)
    return proc.returncode, err


def assert_interrupted(code: int, err: str, folder: Path) -> None:
    assert code == 130, err
    assert "interrupted: nothing was tagged" in err, err
    assert "error:" not in err, "an interrupt was reported as a failure"
    assert (folder / "cleaned").exists(), "the cleanup did not finish"


def test_signal_to_the_task_first_is_forwarded_to_the_client(tmp_path):
    proc = start(tmp_path, "build")
    wait_for_progress(tmp_path, proc)
    os.kill(proc.pid, signal.SIGINT)              # `kill -INT <task>`: the client gets nothing itself
    code, err = finish(proc)
    assert_interrupted(code, err, tmp_path)
    # The task passed it on: the client cancelled its build instead of running on.
    assert (tmp_path / "client.log").read_text() == "signal SIGINT\n"
    assert "context canceled" in (tmp_path / "build.log").read_text()


def test_signal_to_the_client_first_is_still_an_interrupt(tmp_path):
    proc = start(tmp_path, "build")
    client = wait_for_progress(tmp_path, proc)
    os.kill(client, signal.SIGINT)                # only the client dies of it; the task saw nothing
    code, err = finish(proc)
    assert_interrupted(code, err, tmp_path)


def test_ctrl_c_to_the_group_when_the_task_was_started_with_sigint_ignored(tmp_path):
    """What failed in CI: a background job inherits SIGINT ignored; the client (Go) takes
    it anyway, dies of the cancel, and its exit 1 was taken for a failed build."""
    proc = start(tmp_path, "build", ignore_sigint=True)
    wait_for_progress(tmp_path, proc)
    os.killpg(proc.pid, signal.SIGINT)            # a terminal's Ctrl-C: the whole group
    code, err = finish(proc)
    assert_interrupted(code, err, tmp_path)


def test_a_build_that_fails_on_its_own_is_a_failure_not_an_interrupt(tmp_path):
    proc = start(tmp_path, "build", "--fail")
    code, err = finish(proc)
    assert code == 4 and "error: build failed (exit 1)" in err and "interrupted" not in err, err
    assert (tmp_path / "cleaned").exists()


def test_a_second_ctrl_c_during_cleanup_does_not_cut_it_short(tmp_path):
    proc = start(tmp_path, "build")
    wait_for_progress(tmp_path, proc)
    os.killpg(proc.pid, signal.SIGINT)
    wait_for(tmp_path / "cleaning", proc)
    os.killpg(proc.pid, signal.SIGINT)            # impatient second Ctrl-C
    code, err = finish(proc)
    assert_interrupted(code, err, tmp_path)
    assert "still cleaning up" in err


def test_an_interrupt_during_tagging_waits_for_the_last_tag_and_says_what_was_tagged(tmp_path):
    proc = start(tmp_path, "tag")
    wait_for(tmp_path / "tagging", proc)
    os.killpg(proc.pid, signal.SIGINT)
    code, err = finish(proc)
    assert code == 130, err
    assert "completed before the interrupt: tagged double:latest; nothing else was tagged" in err, err
    assert not (tmp_path / "after-tagging").exists(), "the task went on after the interrupt"
    assert (tmp_path / "cleaned").exists()


@pytest.mark.parametrize("code, tail, expected", [
    (-signal.SIGINT, "", True), (130, "", True), (1, "#11 CANCELED\nERROR: failed to solve: context canceled", True),
    (1, "ERROR: process did not complete successfully: exit code: 1", False), (0, "context canceled", False),
])
def test_which_client_exits_count_as_interrupts(code, tail, expected):
    assert died_of_interrupt(code, tail) is expected
