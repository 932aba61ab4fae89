"""The runtime image suite's own fixture: the matrix cell the image was built for
(from its labels + the matrix, so expectations come from matrix.yaml). The container
fixtures are shared, in tests/conftest.py."""
from __future__ import annotations

import pytest

from ascend_build.matrix import Cell, load_matrix
from tests.conftest import label


@pytest.fixture(scope="session")
def cell(pytestconfig, labels) -> Cell:
    matrix = load_matrix(pytestconfig.getoption("--matrix"))
    return matrix.cell(*(label(labels, k) for k in ("stack", "os", "python", "chip", "platform")))
