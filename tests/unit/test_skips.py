"""Under CI=true a skip fails the run (tests/conftest.py, one hook), except where only
missing hardware explains it (ALLOWED_SKIPS, each with why), and so does an xfail. Planted
tests, run by a pytest of their own with this suite's conftest as a plugin."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PLANTED = '''
import pytest

def test_skips_for_no_good_reason():
    pytest.skip("this machine is not in the mood")

def test_skips_for_want_of_an_npu():
    pytest.skip("no /dev/davinciN on this host: the smoke test needs a 910B host")

@pytest.mark.skipif(True, reason="a condition nobody checked")
def test_skipped_by_a_mark():
    pass

def test_passes():
    assert True
'''


PLANTED_XFAIL = '''
import pytest

@pytest.mark.xfail(reason="a bug nobody fixed")
def test_fails_as_expected():
    assert False

@pytest.mark.xfail(reason="a bug that went away")
def test_passes_though_marked_to_fail():
    pass

def test_xfails_on_its_own():
    pytest.xfail("the card is busy")

def test_passes():
    assert True
'''


def run_planted(tmp_path: Path, ci: str | None, planted: str = PLANTED) -> subprocess.CompletedProcess:
    (tmp_path / "test_planted.py").write_text(planted)
    # Not a module of the outer run: its timings stay out of that run's module table.
    env = {k: v for k, v in os.environ.items()
           if k not in ("CI", "PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS", "ASCEND_BUILD_TEST_TIMINGS")}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider",
                           "-v", "--rootdir", str(tmp_path), str(tmp_path / "test_planted.py")],
                          cwd=tmp_path, capture_output=True, text=True, env={**env, "PYTHONPATH": str(ROOT)})


def outcomes(out: subprocess.CompletedProcess) -> dict[str, str]:
    """test name -> PASSED, FAILED, ERROR (a failure in setup, e.g. a skipif mark), SKIPPED,
    XFAIL or XPASS."""
    found = {}
    for line in out.stdout.splitlines():
        if line.startswith("test_planted.py::"):
            name, word = line.split("::", 1)[1].split()[:2]
            found[name] = word
    return found


def test_a_skip_fails_under_ci_unless_missing_hardware_explains_it(tmp_path):
    out = run_planted(tmp_path, "true")
    assert outcomes(out) == {"test_skips_for_no_good_reason": "FAILED", "test_skipped_by_a_mark": "ERROR",
                             "test_skips_for_want_of_an_npu": "SKIPPED", "test_passes": "PASSED"}, out.stdout[-3000:]
    assert out.returncode == 1
    assert "CI=true: this test skipped (Skipped: this machine is not in the mood)" in out.stdout


@pytest.mark.parametrize("ci", [None, "false"])
def test_outside_ci_a_skip_is_a_skip(tmp_path, ci):
    out = run_planted(tmp_path, ci)
    assert out.returncode == 0, out.stdout[-3000:]
    assert set(outcomes(out).values()) == {"SKIPPED", "PASSED"}


def test_an_xfail_fails_under_ci_whether_it_failed_or_passed(tmp_path):
    out = run_planted(tmp_path, "true", PLANTED_XFAIL)
    assert outcomes(out) == {"test_fails_as_expected": "FAILED", "test_passes_though_marked_to_fail": "FAILED",
                             "test_xfails_on_its_own": "FAILED", "test_passes": "PASSED"}, out.stdout[-3000:]
    assert out.returncode == 1
    assert "CI=true: this test is marked xfail (a bug nobody fixed) and failed as expected" in out.stdout
    assert "CI=true: this test is marked xfail (a bug that went away) and passed" in out.stdout


@pytest.mark.parametrize("ci", [None, "false"])
def test_outside_ci_an_xfail_is_an_xfail(tmp_path, ci):
    out = run_planted(tmp_path, ci, PLANTED_XFAIL)
    assert out.returncode == 0, out.stdout[-3000:]
    assert outcomes(out) == {"test_fails_as_expected": "XFAIL", "test_passes_though_marked_to_fail": "XPASS",
                             "test_xfails_on_its_own": "XFAIL", "test_passes": "PASSED"}, out.stdout[-3000:]


def test_every_allowed_skip_says_which_hardware_it_needs():
    from tests.conftest import ALLOWED_SKIPS
    assert ALLOWED_SKIPS and all(len(why) > 40 for why in ALLOWED_SKIPS.values())
