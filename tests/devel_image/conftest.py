"""The devel suite's fixtures: the CANN-only cell (as for the runtime suite, which runs after
this one on the same image) and the devel lock, read from the image."""
from __future__ import annotations

import pytest

from tests.image.conftest import cell  # noqa: F401  (the same fixture: the CANN-only image's cell)

REQUIREMENTS = "/usr/local/share/ascend-build/requirements"


@pytest.fixture(scope="module")
def devel_lock(host) -> str:
    lock = host.file(f"{REQUIREMENTS}/devel.txt")
    assert lock.is_file, f"the devel lock is not in the image at {lock.path}"
    return lock.content_string
