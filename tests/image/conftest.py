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


@pytest.fixture(scope="session")
def torch_cell(cell) -> Cell:
    """The cell, for a check of torch and torch_npu: a MindSpore image has neither."""
    if cell.stack.framework != "torch":
        pytest.skip(f"a torch check; this image is {cell.stack.title}")
    return cell


@pytest.fixture(scope="session")
def mindspore_cell(cell) -> Cell:
    """The cell, for a check of MindSpore (tests/image/test_mindspore.py)."""
    if cell.stack.framework != "mindspore":
        pytest.skip(f"a MindSpore check; this image is {cell.stack.title}")
    return cell
