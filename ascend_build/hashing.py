"""The sha256 of a file, read in blocks: the ground floor every room that checks a
download (CANN packages, the deployer's wheel, wheels) stands on. Only a regular file is
read: a FIFO would hang the reader, a device (/dev/zero) never end, so what is at a path
is said (`kind_of`) and a file is opened without blocking and looked at before it is read
(`open_regular`)."""
from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat
from pathlib import Path
from typing import BinaryIO

CHUNK = 1 << 20

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (a named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((what for test, what in _KINDS if test(mode)), "" if stat.S_ISREG(mode) else "not a file")


def kind_of(path: Path | str) -> str:
    """What is at `path` (a link followed): "" for a regular file, else what it is ("a
    FIFO (a named pipe)", "a folder", "nothing (no such file)", ...)."""
    try:
        return _kind(os.stat(path).st_mode)
    except FileNotFoundError:
        return "a link to nothing" if os.path.islink(path) else "nothing (no such file)"
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"


def open_regular(path: Path | str) -> BinaryIO:
    """The file at `path` opened for reading, or an OSError naming it when it is not a regular
    file. Opened non-blocking, so a FIFO with no writer cannot hang the open, and checked on
    the open file itself (fstat), so nothing swapped in between is read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        what = _kind(os.fstat(fd).st_mode)
        if what:
            raise OSError(errno.EINVAL, f"{what}, not a regular file", str(path))
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def inside(path: Path, folder: Path) -> bool:
    """Whether `path`, its links followed, is a file of `folder` (a link out of it is not)."""
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):         # a loop of links
        return False


def files_in(folder: Path, pattern: str) -> list[Path]:
    """The files of `folder` whose names match `pattern` (a wheelhouse's *.whl), each a
    regular file of that folder: a FIFO, a device, a folder, or a link out of the folder
    (a wheel named so that /etc/passwd is read into a build) is an OSError naming it."""
    found = sorted(folder.glob(pattern))
    for path in found:
        what = kind_of(path) or ("" if inside(path, folder) else f"a link out of {folder} (to {path.resolve()})")
        if what:
            raise OSError(errno.EINVAL, f"{what}, not a file of the folder it is taken from", str(path))
    return found


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open_regular(path) as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()
