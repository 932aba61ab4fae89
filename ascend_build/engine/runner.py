"""Running a long command (a build, a push, a compile in a builder, a test suite) with its
output streamed to the terminal and into a log, Ctrl-C handled whichever process sees it
first (interrupts.py)."""
from __future__ import annotations

import os
import shlex
import subprocess
from collections import deque
from collections.abc import Callable
from pathlib import Path

from .. import console
from . import interrupts


def show(cmd: list[str], env: dict[str, str] | None = None) -> str:
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    return (prefix + " " if prefix else "") + " ".join(shlex.quote(c) for c in cmd)


def output(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """A short command's output; a client that is missing or does not answer gives 127."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(cmd, 127, "", str(exc))


def run(cmd: list[str], env: dict[str, str] | None = None, log: Path | None = None,
        cwd: Path | None = None, inherit: bool = True, show_line: Callable[[str], str | None] | None = None) -> int:
    """Run a command, streaming its output (and into `log` when given). Returns its exit
    code; raises `Interrupted` when it ended because of Ctrl-C, whichever process the
    signal reached first (see interrupts). `env` adds to this process's environment, or
    with `inherit=False` is the whole of it. `show_line`: what to print for each line
    (None: nothing; the log still gets every line)."""
    full_env = {**os.environ, **(env or {})} if inherit else dict(env or {})
    console.command(show(cmd, env) + (f"   # log: {log}" if log else ""))
    tail: deque[str] = deque(maxlen=50)     # the last lines: a cancelled build says so there
    fh = None
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        fh = open(log, "w", buffering=1)     # line by line: `tail -f` shows progress
        fh.write("$ " + show(cmd, env) + "\n")
        fh.flush()
    try:
        proc = subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE if fh else None,
                                stderr=subprocess.STDOUT if fh else None, text=True, bufsize=1, cwd=cwd)
        try:
            with interrupts.watching(proc) as watch:
                for line in (proc.stdout if fh and proc.stdout else ()):
                    assert fh is not None
                    fh.write(line)
                    shown = show_line(line) if show_line else line
                    if shown is not None:
                        console.stream(shown)
                    tail.append(line)
                code = proc.wait()
        except KeyboardInterrupt:
            # Python's own handler (no task installed ours): stop the client, pass it on.
            with interrupts.deferred():
                proc.terminate()
                proc.wait()
            raise
    finally:
        if fh:
            fh.close()
    if watch.interrupted(code, "".join(tail)):
        interrupts.stop()
    return code
