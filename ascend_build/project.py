"""The project a command works on: the checkout it runs in (the one whose tasks.py the
command line loaded), or the checkout `--matrix` names; never the folder the package is
installed from. Its images/, docs/, templates/ and tests/ are the ones read and written: a
second checkout (a fork, a branch) run with another checkout's venv renders, builds and
tests its own files. Outside a task (the library used on its own) it is the folder the
process runs in."""
from __future__ import annotations

import contextlib
from contextvars import ContextVar
from pathlib import Path
from typing import Iterator

MATRIX = "matrix.yaml"          # the matrix file a checkout holds at its top
_ROOT: ContextVar[Path | None] = ContextVar("project_root", default=None)


def is_checkout(folder: Path) -> bool:
    """A checkout of this project: its tasks and its matrix at the top."""
    return (folder / "tasks.py").is_file() and (folder / MATRIX).is_file()


def root() -> Path:
    """The project's folder for the task running now (see `working_in`)."""
    found = _ROOT.get()
    return found if found is not None else Path.cwd()


def checkout_for(matrix: str | Path | None, tasks: Path) -> Path:
    """The project of a command: the checkout holding the `--matrix` file where that is one,
    else the checkout of the tasks the command line loaded (`tasks`: tasks.py's folder)."""
    if matrix is not None:
        folder = Path(matrix).expanduser().absolute().parent
        if is_checkout(folder):
            return folder
    return tasks


def matrix_file(given: str, tasks: Path) -> str:
    """The default --matrix (matrix.yaml) where the command runs below its checkout (in its
    docs/, say): the checkout's, not a file of that name in the folder it runs in; a path
    given on the command line, or a matrix.yaml in the folder, as it is."""
    if given != MATRIX or Path(given).exists():
        return given
    return str(tasks / MATRIX) if (tasks / MATRIX).is_file() else given


@contextlib.contextmanager
def working_in(folder: Path) -> Iterator[Path]:
    """`root()` is `folder` while the block runs (one task)."""
    token = _ROOT.set(folder.absolute())
    try:
        yield folder
    finally:
        _ROOT.reset(token)
