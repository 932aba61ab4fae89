"""Test double of the image suite's pytest: tests/unit/test_gate.py links it as `pytest.py`
into a folder it puts first on PYTHONPATH, so the gate's own command (`python -m pytest
tests/image ... --image ID`, images/steps.py run_image_tests) starts this instead, through
the real runner (engine/runner.py). It says what it was asked, then ends as SUITE_DOUBLE_END
says: an exit code ("5"), or death by a signal ("signal:9"), as a suite killed by the
kernel's OOM killer ends. Only tests use it."""
from __future__ import annotations

import os
import signal
import sys


class SuiteDouble:
    """Stands in for the image suites in-process (the gate's `run_tests`): records each image
    it was run on; `verdict` is its exit code."""

    def __init__(self, verdict: int = 0):
        self.verdict, self.ran = verdict, []

    def __call__(self, image, matrix_path, engine) -> int:
        self.ran.append(image)
        return self.verdict


def main() -> int:
    end = os.environ.get("SUITE_DOUBLE_END", "0")
    print("suite double:", " ".join(sys.argv[1:]), flush=True)
    if end.startswith("signal:"):
        number = int(end.removeprefix("signal:"))
        if number != signal.SIGKILL:                # no handler can be set for it; for the others,
            signal.signal(number, signal.SIG_DFL)   # die of it, as a process without a handler does
        os.kill(os.getpid(), number)
        signal.pause()
    return int(end)


if __name__ == "__main__":
    sys.exit(main())
