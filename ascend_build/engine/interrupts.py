"""Ctrl-C, wherever it lands first.

A terminal sends SIGINT to the whole foreground process group: this process and the
engine client it runs. Either may see it first, and a process started in the background
of a script may not see it at all (the shell starts it with SIGINT ignored, and Python
keeps an ignored SIGINT; the docker client, written in Go, does not). So an interrupt is
recognised three ways, and all three end the same: `Interrupted`, exit 130, nothing
tagged, the staged context removed.

- The task's own handler (`install`, called by every task) records the signal, even when
  it was started with SIGINT ignored.
- While an engine client runs, the handler does not raise in the middle of reading its
  output: it forwards the signal (the client then cancels its build cleanly) and the
  runner raises once the client has gone (`watching`).
- A client that died of the interrupt on its own (killed by SIGINT, exit 130, or the
  build's "context canceled") is an interrupt too, even if this process never saw one.

Steps that must not stop half-way (tagging, publishing a cache entry, cleaning up) run
under `deferred`: an interrupt that arrives there waits until the step is over. A second
Ctrl-C while the first is being handled never cuts the cleanup short.
"""
from __future__ import annotations

import signal
import subprocess
import threading
from contextlib import contextmanager
from typing import Iterator

from .. import console
from ..errors import CODE

# The engine client's own words when the build it ran was cancelled under it.
CANCEL_MARKS = ("context canceled",)


class Interrupted(KeyboardInterrupt):
    """The user interrupted a task (Ctrl-C / SIGINT): nothing half-done was kept.
    `detail` says what was left undone (e.g. the images `build --all` did not reach)."""

    exit_code = CODE[130].code

    def __init__(self, detail: str = ""):
        super().__init__(detail)
        self.detail = detail


class _State:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.count = 0            # SIGINTs received since install()
        self.raised = False       # an Interrupted is on its way up
        self.child: subprocess.Popen | None = None
        self.deferring = 0        # depth of deferred() blocks
        self.done: list[str] = [] # what was completed for good before the interrupt ("tagged X")


_state = _State()


def install() -> None:
    """Take SIGINT in this process, whatever the parent left it as (ignored, default)."""
    if threading.current_thread() is not threading.main_thread():
        return
    _state.reset()
    signal.signal(signal.SIGINT, _on_sigint)


def uninstall() -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
    _state.reset()


def received() -> bool:
    return _state.count > 0


def stop(detail: str = "") -> None:
    """Raise the interrupt (once a task knows one happened)."""
    _state.raised = True
    raise Interrupted(detail)


def record(what: str) -> None:
    """Note a step completed for good ("tagged X", "pushed Y"), for the interrupt report."""
    _state.done.append(what)


def report(exc: BaseException) -> str:
    """The line a task prints when it was interrupted."""
    detail = exc.detail if isinstance(exc, Interrupted) else ""
    if _state.done:
        said = "completed before the interrupt: " + "; ".join(_state.done) + "; nothing else was tagged"
    else:
        said = "nothing was tagged"
    return f"interrupted: {said}" + (f". {detail}" if detail else "")


def _on_sigint(signum, frame) -> None:
    _state.count += 1
    child = _state.child
    if child is not None and child.poll() is None:
        # The client cancels its build on SIGINT (a terminal's Ctrl-C may have reached it
        # already; a second one changes nothing). Asked again, it is stopped outright.
        child.send_signal(signal.SIGINT if _state.count == 1 else signal.SIGTERM)
        return
    if _state.raised or _state.count > 1:
        console.note("interrupt: still cleaning up, one moment")
        return
    if _state.deferring:
        return              # deferred() raises when its step is done
    stop()


def died_of_interrupt(code: int, tail: str = "") -> bool:
    """Did a client end because of an interrupt (its own SIGINT, or a cancelled build)?"""
    if code in (-signal.SIGINT, 128 + signal.SIGINT):
        return True
    return code != 0 and any(mark in tail for mark in CANCEL_MARKS)


class _Watch:
    def __init__(self, before: int):
        self.before = before

    def interrupted(self, code: int, tail: str = "") -> bool:
        """Did the client end because of an interrupt: one this process received while
        it ran, or one only the client saw?"""
        return _state.count > self.before or died_of_interrupt(code, tail)


@contextmanager
def watching(proc: subprocess.Popen) -> Iterator[_Watch]:
    """Run the body while `proc` is the client an interrupt is forwarded to."""
    previous, _state.child = _state.child, proc
    try:
        yield _Watch(_state.count)
    finally:
        _state.child = previous


def check() -> None:
    """Raise the interrupt now if one arrived while it could not be raised."""
    if _state.count and not _state.raised:
        stop()


class deferred:
    """A step that, once begun, runs to its end (tagging, publishing into a cache,
    cleaning up): an interrupt during it is raised when it is over, unless another
    error is already on its way up (the task then reports the interrupt, see `received`)."""

    def __enter__(self) -> deferred:
        _state.deferring += 1
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        _state.deferring -= 1
        if exc_type is None and not _state.deferring:
            check()
