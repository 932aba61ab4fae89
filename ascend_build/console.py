"""The one place that knows the terminal. What the package says while it works goes
through here, at the level a task set once (`configure`, from --quiet and --verbose):

- `say`: what it is doing and what it found (stdout); silent with --quiet;
- `show`: what was asked for, a dry run's commands or a result (stdout), always;
- `warn`, `error` and `note`: stderr, always;
- `stream`: a long step's own output as it comes (a build's); silent with --quiet, its
  log holds it;
- `command`: a command about to run; only with --verbose.

Scripts staged into images (pip_for_target.py, wheel_arch.py, probe.py) print for
themselves: they run in the image's Python, not here."""
from __future__ import annotations

import sys
from typing import Literal

Level = Literal["quiet", "normal", "verbose"]
_level: Level = "normal"


def configure(level: Level) -> None:
    global _level
    _level = level


def level() -> Level:
    return _level


def level_of(quiet: bool = False, verbose: bool = False) -> Level:
    """The level a task's --quiet and --verbose ask for (quiet wins)."""
    return "quiet" if quiet else "verbose" if verbose else "normal"


def say(text: str) -> None:
    if _level != "quiet":
        print(text, flush=True)


def show(text: str) -> None:
    print(text, flush=True)


def warn(text: str) -> None:
    print(f"WARNING: {text}", file=sys.stderr, flush=True)


def error(text: str) -> None:
    print(f"error: {text}", file=sys.stderr, flush=True)


def note(text: str) -> None:
    """Said on stderr beside a result on stdout, always (what a dry run could not check)."""
    print(text, file=sys.stderr, flush=True)


def stream(line: str) -> None:
    if _level != "quiet":
        sys.stdout.write(line if line.endswith("\n") else line + "\n")
        sys.stdout.flush()


def command(text: str) -> None:
    if _level == "verbose":
        print(f"$ {text}", flush=True)
