"""Files the project writes (images/, the generated pages, matrix.yaml, imported.yaml, the
locks) written whole and in turn: a reader sees the old bytes or the new, never half, and
processes that write at once never trip over each other. The ground floor: it imports
nothing of the package, so every room can write through it."""
from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import tempfile
from pathlib import Path
from typing import Iterator, Union

StrPath = Union[str, "os.PathLike[str]"]

NEW_MODE = 0o644        # a file that did not exist yet: as a checkout's files are


def write_text(path: StrPath, text: str, mode: int | None = None) -> None:
    """`text` (UTF-8) into `path`, replaced whole (write_bytes)."""
    write_bytes(path, text.encode("utf-8"), mode)


def write_bytes(path: StrPath, data: bytes, mode: int | None = None) -> None:
    """`data` into `path`, replaced whole: written to a temporary file of this call's own
    beside it (a unique name, so writers at once never take each other's), synced, then
    renamed over it. On any failure, Ctrl-C included, the old file stays and the temporary
    goes. An existing file keeps its mode; a new one gets `mode` (else 0o644). A link is
    followed: its target is replaced, the link stays."""
    target = Path(os.path.realpath(path))
    keep = _mode_of(target, mode)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with open(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, keep)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _sync_folder(target.parent)


def _mode_of(target: Path, mode: int | None) -> int:
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        return NEW_MODE if mode is None else mode


def _sync_folder(folder: Path) -> None:
    """The rename made durable too (best effort: some file systems refuse to sync a folder)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def lock_file(path: StrPath) -> Path:
    """The sibling file `locked` takes for `path`: .NAME.lock (git-ignored)."""
    target = Path(os.path.realpath(path))
    return target.with_name(f".{target.name}.lock")


@contextlib.contextmanager
def locked(path: StrPath) -> Iterator[None]:
    """Hold `path` for a read-modify-write (read it inside, write it with write_text):
    writers at once take turns, the later one waits and then reads what the earlier wrote,
    so both changes land and neither fails. An exclusive flock on a sibling file, which
    stays (removing it would let a third writer lock a new file while the second holds
    the old). Not re-entrant: a process (or thread) that holds `path` waits on itself."""
    with open(lock_file(path), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
