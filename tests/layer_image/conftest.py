"""The user layer suite's fixtures: the runtime cell (as for the runtime suite, which runs
first on the same image) and the layer's own lock, read from the image."""
from __future__ import annotations

import pytest

from tests.conftest import label
from tests.image.conftest import cell  # noqa: F401  (the same fixture: the runtime's cell)

REQUIREMENTS = "/usr/local/share/ascend-build/requirements"


@pytest.fixture(scope="session")
def layer_name(labels) -> str:
    return label(labels, "layer")


@pytest.fixture(scope="module")
def layer_lock(host, layer_name) -> str:
    lock = host.file(f"{REQUIREMENTS}/layer-{layer_name}.txt")
    assert lock.is_file, f"the layer's lock is not in the image at {lock.path}"
    return lock.content_string
