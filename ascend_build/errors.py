"""Errors a user can act on. Everything the tool refuses is one of these: tasks print
them and exit non-zero, never with a traceback."""
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


class EngineError(UserError):
    """No usable container engine, or it refused a command."""
