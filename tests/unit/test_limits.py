"""The image suites' time limit per test phase (tests/limits.py): a planted test that hangs
(in Python, or in a child process the way a `docker exec` into a hung container does) fails
within the limit, named, the child is stopped, and the tests after it still run."""
from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.conftest import CONTAINER_TIMEOUT, ROOT
from tests.limits import MARGIN, _limit

PLANTED = '''
import subprocess, time

def test_hangs_in_python():
    time.sleep(3600)

def test_hangs_in_a_child():
    subprocess.run(["sleep", "3599.5"])

def test_after_them():
    assert True
'''


def test_a_hanging_test_fails_within_its_limit_and_the_suite_goes_on(tmp_path):
    (tmp_path / "test_planted_hang.py").write_text(PLANTED)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.limits", "--phase-limit", "2",
                           "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "-c", os.devnull,
                           str(tmp_path / "test_planted_hang.py")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    took = time.monotonic() - started
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "2 failed, 1 passed" in out, out
    for name in ("test_hangs_in_python", "test_hangs_in_a_child"):
        assert f"test_planted_hang.py::{name}: its call took longer than 2 s" in out, out
    assert took < 60, f"{took:.0f} s"
    left = subprocess.run(["pgrep", "-f", "sleep 3599.5"], capture_output=True, text=True)
    assert left.stdout.strip() == "", "the hung child was left running"


class _Config:
    def __init__(self, **options):
        self.options = options

    def getoption(self, name, default=None):
        return self.options.get(name, default)


def test_the_image_suites_limit_is_their_container_limit_and_a_margin():
    assert _limit(_Config(**{"--phase-limit": None, "--image": "some/image:tag"})) == CONTAINER_TIMEOUT + MARGIN
    assert _limit(_Config(**{"--phase-limit": 30.0, "--image": "some/image:tag"})) == 30.0
    assert _limit(_Config(**{"--phase-limit": None, "--image": None})) is None     # unit tests: none
