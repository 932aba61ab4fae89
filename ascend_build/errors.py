"""Errors a user can act on, and the exit codes they end a task with. Everything the tool
refuses is one of these: tasks print them and exit with the class's code, never with a
traceback. EXIT_CODES is the one table of codes: the classes take theirs from it, and
the tasks page (docs/tasks.md) is generated from it and README's sentence is held
against it (tests/unit/test_tasks.py)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExitCode:
    code: int
    meaning: str            # as the docs say it


EXIT_CODES: tuple[ExitCode, ...] = (
    ExitCode(0, "done"),
    ExitCode(1, "`invoke update --check` found news, or `invoke doctor` found something that blocks"),
    ExitCode(2, "bad input (an option, `matrix.yaml`)"),
    ExitCode(3, "a CANN package (or source tarball) missing, corrupt or not what its name says"),
    ExitCode(4, "a build failed (its log is named)"),
    ExitCode(5, "an image's tests failed (`build`: nothing tagged; `test --image`)"),
    ExitCode(6, "no usable container engine, or it refused a command (a base image it cannot pull, too)"),
    ExitCode(7, "`invoke verify` found the image and its rebuild (or `--against` image) differ"),
    ExitCode(8, "the network: a torch index or CANN download site that does not answer (said in seconds, with the "
                "option that points at a mirror)"),
    ExitCode(141, "what read its output went away (`| head`): it ends quietly, as Unix tools do (SIGPIPE)"),
    ExitCode(130, "interrupted"),
)
CODE = {e.code: e for e in EXIT_CODES}


class UserError(Exception):
    """A problem with the user's input or machine, with what to do about it."""

    exit_code = CODE[2].code


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

    exit_code = CODE[3].code


class PackageMissing(PackageError):
    """A CANN package is in none of the places looked in (and could not be downloaded)."""


class PackageUnreachable(PackageMissing):
    """A CANN package is nowhere here and its download site did not answer: the network."""

    exit_code = CODE[8].code


class NetworkError(UserError):
    """A torch index, mirror or download site did not answer (an index that answers with an
    error is bad input: exit 2)."""

    exit_code = CODE[8].code


class BuildFailed(UserError):
    """An image or wheel build ran and failed (its log says why)."""

    exit_code = CODE[4].code


class TestsFailed(UserError):
    """An image was built but its test suite failed: it was not tagged."""

    exit_code = CODE[5].code


class EngineError(UserError):
    """No usable container engine, or it refused a command."""

    exit_code = CODE[6].code


class Differs(UserError):
    """`invoke verify`: the image and its rebuild are not the same bytes."""

    exit_code = CODE[7].code

