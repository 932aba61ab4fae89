"""The builder image suite's own fixture: the builder cell, from labels + matrix."""
from __future__ import annotations

import dataclasses

import pytest

from ascend_build.matrix import BuilderCell, load_matrix
from tests.conftest import label


@pytest.fixture(scope="session")
def bcell(pytestconfig, labels) -> BuilderCell:
    matrix = load_matrix(pytestconfig.getoption("--matrix"))
    pythons = label(labels, "pythons").split()
    cell = matrix.builder_cell(label(labels, "stack"), label(labels, "flavor"), platform=label(labels, "platform"))
    assert set(pythons) <= set(cell.pythons), f"image serves {pythons}, the matrix allows {cell.pythons}"
    return dataclasses.replace(cell, pythons=tuple(pythons))
