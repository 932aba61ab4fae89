"""A time limit on each phase (setup, call, teardown) of a test in the image suites, so that
a gate never waits for ever: a Python that hangs at import under qemu (two numpys, a fatal
GIL error, sigsuspend) fails its test, named, and the suite goes on to the end, its
containers removed by their fixtures. The limit is the suite's own container limit
(tests/conftest.py CONTAINER_TIMEOUT) with a margin for the container's start and end;
`--phase-limit SECONDS` sets another. Active for any run given --image or --phase-limit."""
from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

MARGIN = 120        # a container's start and removal on top of its own limit, under qemu


def pytest_addoption(parser):
    parser.addoption("--phase-limit", type=float, default=None,
                     help="seconds a test's setup, call or teardown may take (image suites: "
                          "the container limit and a margin)")


def _limit(config) -> float | None:
    given = config.getoption("--phase-limit")
    if given is not None:
        return given
    if config.getoption("--image", default=None):
        from tests.conftest import CONTAINER_TIMEOUT
        return CONTAINER_TIMEOUT + MARGIN
    return None


@contextmanager
def _limited(item, phase: str) -> Iterator[None]:
    seconds = _limit(item.config)
    if not seconds:
        yield
        return

    def stop(signum, frame):
        raise pytest.fail.Exception(f"{item.nodeid}: its {phase} took longer than {seconds:.0f} s, the suite's "
                                    "limit for one test: stopped", pytrace=False)
    before = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    with _limited(item, "setup"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    with _limited(item, "call"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    with _limited(item, "teardown"):
        return (yield)
