"""The sha256 of a file, read in blocks: the ground floor every room that checks a
download (CANN packages, the deployer's wheel, wheels) stands on."""
from __future__ import annotations

import hashlib
from pathlib import Path

CHUNK = 1 << 20


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()
