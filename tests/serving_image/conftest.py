"""The serving suite's fixtures: the runtime cell (as for the runtime suite, which runs after
this one on the same image) and the serving lock, read from the image."""
from __future__ import annotations

import pytest

from tests.conftest import label
from tests.image.conftest import cell  # noqa: F401  (the same fixture: the runtime's cell)

REQUIREMENTS = "/usr/local/share/ascend-build/requirements"


@pytest.fixture(scope="session")
def serving(labels) -> dict[str, str]:
    """What the build said of the image: the releases, the chip, the kernels."""
    return {key: label(labels, key) for key in ("vllm", "vllm-ascend", "soc-version", "kernels", "vllm-ascend-from")}


@pytest.fixture(scope="module")
def serving_lock(host) -> str:
    lock = host.file(f"{REQUIREMENTS}/serving.txt")
    assert lock.is_file, f"the serving lock is not in the image at {lock.path}"
    return lock.content_string
