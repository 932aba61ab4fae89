"""Test double of a task, for the Ctrl-C tests: the real task wrapper (cli/wrap.py's user_errors),
the real engine runner and interrupt handling, around the client double.

    python interrupt_task.py DIR build [--fail]   run the client double as a build would
    python interrupt_task.py DIR tag              a deferred step (tagging) of about 1 s
Writes DIR/task.pid; DIR/cleaning and DIR/cleaned bracket its cleanup (about 1 s)."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from invoke import Exit  # noqa: E402

import tasks  # noqa: E402,F401  (imported as invoke would: its side effects on invoke's Program)
from ascend_build import engine as eng  # noqa: E402
from ascend_build.cli.wrap import user_errors  # noqa: E402
from ascend_build.engine import interrupts  # noqa: E402
from ascend_build.errors import BuildFailed  # noqa: E402

CLIENT = Path(__file__).with_name("client_double.py")


def work(folder: Path, what: str, fail: bool) -> None:
    try:
        if what == "build":
            cmd = [sys.executable, str(CLIENT), str(folder)] + (["--fail"] if fail else [])
            code = eng.run(cmd, log=folder / "build.log")
            if code != 0:
                raise BuildFailed(f"build failed (exit {code}); nothing was tagged")
        else:
            (folder / "tagging").write_text("")
            with interrupts.deferred():
                time.sleep(1)
                interrupts.record("tagged double:latest")
            (folder / "after-tagging").write_text("")
    finally:
        with interrupts.deferred():
            (folder / "cleaning").write_text("")
            time.sleep(1)
            (folder / "cleaned").write_text("")


def main() -> None:
    folder, what = Path(sys.argv[1]), sys.argv[2]
    (folder / "task.pid").write_text(str(os.getpid()))
    try:
        user_errors(work)(folder, what, "--fail" in sys.argv)
    except Exit as exc:
        sys.exit(exc.code)


if __name__ == "__main__":
    main()
