"""Errors a user can act on. Everything the tool refuses is one of these: tasks print
them and exit with the class's code, never with a traceback. The codes (README, "Exit
codes"): 2 bad input (options, matrix.yaml), 3 a CANN package or source missing or
corrupt, 4 a build failed, 5 an image's tests failed, 6 no usable container engine,
7 `invoke verify` found an image and its rebuild differ (images/verify.py: Differs);
130 interrupted (interrupts.Interrupted)."""
from __future__ import annotations

from dataclasses import dataclass


class UserError(Exception):
    """A problem with the user's input or machine, with what to do about it."""

    exit_code = 2


@dataclass(frozen=True)
class Problem:
    file: str
    line: int | None
    path: str          # dotted key path, e.g. stacks.2.1.0.python.default
    message: str       # says the bad value and what would be accepted

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.path}: {self.message}"


class MatrixError(UserError):
    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class PackageError(UserError):
    """A CANN package or source tarball is missing, corrupt or does not fit."""

    exit_code = 3


class PackageMissing(PackageError):
    """A CANN package is in none of the places looked in (and could not be downloaded)."""


class BuildFailed(UserError):
    """An image or wheel build ran and failed (its log says why)."""

    exit_code = 4


class TestsFailed(UserError):
    """An image was built but its test suite failed: it was not tagged."""

    exit_code = 5


class EngineError(UserError):
    """No usable container engine, or it refused a command."""

    exit_code = 6
