"""A CANN `.run` file read as data, never run: a makeself archive is a shell header of
`skip` lines followed by the payload (one or more compressed tars), and the header records
each archive's size (`filesizes`) and checksums (`SHA` sha256, `MD5`; Huawei's modified
makeself writes both). The payload is checksummed here, in Python: a truncated or corrupt
installer is refused without executing a byte of it on the host (its `--check` would run
its own script as root)."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import PackageError
from ..hashing import CHUNK

HEADER_LIMIT = 1 << 20          # the header is a script of some hundred lines; nothing past this is read as text
_SKIP = (re.compile(rb'^\s*skip="?(\d+)"?\s*$', re.M),                  # makeself >= 2.4.3, Huawei's
         re.compile(rb'head -n "?(\d+)"? "?\$[01]"?'))                   # older makeself: the count in MS_Check
_SIZES = re.compile(rb'^\s*filesizes="([\d ]+)"\s*$', re.M)
_SHA = re.compile(rb'^\s*SHA="([0-9a-fA-F ]*)"\s*$', re.M)
_MD5 = re.compile(rb'^\s*MD5="([0-9a-fA-F ]*)"\s*$', re.M)


@dataclass(frozen=True)
class Header:
    skip: int                          # header lines: the payload starts after them
    offset: int                        # the payload's first byte
    sizes: tuple[int, ...]             # each archive's bytes
    sha256: tuple[str, ...]            # per archive, empty when the header has none
    md5: tuple[str, ...]


def _sums(pattern: re.Pattern, head: bytes, width: int) -> tuple[str, ...]:
    found = pattern.search(head)
    if not found:
        return ()
    sums = tuple(s.lower() for s in found.group(1).decode().split())
    # makeself writes zeros when a sum was turned off (--nomd5, --nosha256)
    return () if not sums or all(set(s) == {"0"} for s in sums) or any(len(s) != width for s in sums) else sums


def read_header(path: Path) -> Header | None:
    """The header's facts, or None when it is not a makeself header this project reads."""
    with open(path, "rb") as fh:
        head = fh.read(HEADER_LIMIT)
    if not head.startswith(b"#!"):
        return None
    skip = next((int(m.group(1)) for m in (p.search(head) for p in _SKIP) if m), None)
    sizes = _SIZES.search(head)
    if skip is None or sizes is None or skip < 1:
        return None
    offset, lines = 0, 0
    while lines < skip:
        newline = head.find(b"\n", offset)
        if newline < 0:
            return None                 # fewer lines than the header says it has
        offset, lines = newline + 1, lines + 1
    return Header(skip, offset, tuple(int(s) for s in sizes.group(1).split()), _sums(_SHA, head, 64),
                  _sums(_MD5, head, 32))


def verify(path: Path) -> Header:
    """The payload checked against the header's own sizes and sums; a PackageError names
    what is wrong (a truncated download, a corrupt byte, a header this project cannot read)."""
    header = read_header(path)
    if header is None:
        raise PackageError(f"{path}: not a makeself installer this project can check without running it (no "
                           f"`skip` and `filesizes` in its header). Pin the sha256 Huawei publishes for it "
                           f"(`invoke pin`), or use Huawei's .zip, whose sum the matrix holds")
    if not header.sha256 and not header.md5:
        raise PackageError(f"{path}: its header carries no SHA or MD5 of its payload, so its bytes cannot be "
                           f"checked; pin the sha256 Huawei publishes for it, or use Huawei's .zip")
    size = path.stat().st_size
    want = header.offset + sum(header.sizes)
    if size != want:
        raise PackageError(f"{path}: {size} bytes, but its header says {want} (a {header.skip}-line header and "
                           f"payload of {' + '.join(map(str, header.sizes))}): "
                           + ("truncated: a download cut short?" if size < want else "bytes after the payload"))
    with open(path, "rb") as fh:
        fh.seek(header.offset)
        for index, length in enumerate(header.sizes):
            sha, md5, left = hashlib.sha256(), hashlib.md5(usedforsecurity=False), length
            while left:
                block = fh.read(min(CHUNK, left))
                sha.update(block)
                md5.update(block)
                left -= len(block)
            if header.sha256 and sha.hexdigest() != header.sha256[index]:
                raise PackageError(f"{path}: archive {index + 1} of its payload has sha256 {sha.hexdigest()}, its "
                                   f"header says {header.sha256[index]}: the file is corrupt")
            if not header.sha256 and md5.hexdigest() != header.md5[index]:
                raise PackageError(f"{path}: archive {index + 1} of its payload has md5 {md5.hexdigest()}, its "
                                   f"header says {header.md5[index]}: the file is corrupt")
    return header
