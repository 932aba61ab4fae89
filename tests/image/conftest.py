"""The runtime image suite's own fixture: the matrix cell the image was built for
(from its labels + the matrix, so expectations come from matrix.yaml). The container
fixtures are shared, in tests/conftest.py."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ascend_build.images.kinds import LABEL_PREFIX
from ascend_build.matrix import Cell, load_matrix
from tests.conftest import label


@pytest.fixture(scope="session")
def cell(pytestconfig, labels) -> Cell:
    matrix = load_matrix(pytestconfig.getoption("--matrix"))
    return matrix.cell(*(label(labels, k) for k in ("stack", "os", "python", "chip", "platform")),
                       torch_atb=labels.get(f"{LABEL_PREFIX}.torch-atb") == "yes")


@pytest.fixture(scope="session")
def torch_cell(cell) -> Cell:
    """The cell, for a check of torch and torch_npu: a MindSpore image has neither."""
    if cell.stack.framework.name != "torch":
        pytest.skip(f"a torch check; this image is {cell.stack.title}")
    return cell


@pytest.fixture(scope="session")
def mindspore_cell(cell) -> Cell:
    """The cell, for a check of MindSpore (tests/image/test_mindspore.py)."""
    if cell.stack.framework.name != "mindspore":
        pytest.skip(f"a MindSpore check; this image is {cell.stack.title}")
    return cell


def run_on_npu(client: str, image: str, code: str, needs: str) -> subprocess.CompletedProcess:
    """`python -c CODE` in the image on this host's first NPU, started the way `invoke run`
    starts containers; skips (saying what `needs` it) on a host without NPUs."""
    from ascend_build.host.run import RunOptions, compose, host_cards
    cards = host_cards(Path("/"))
    if not cards:
        pytest.skip(f"no /dev/davinciN on this host: {needs} needs a 910B host")
    runtimes = subprocess.run([client, "info", "--format", "{{range $k, $v := .Runtimes}}{{$k}} {{end}}"],
                              capture_output=True, text=True).stdout.split()
    cmd = compose(client, RunOptions(image, ("python", "-c", code), devices=str(cards[0]), interactive=False),
                  Path("/"), frozenset(runtimes))
    return subprocess.run(cmd, capture_output=True, text=True)
