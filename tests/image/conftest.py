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


def pytest_collection_modifyitems(config, items):
    """The checks that do not apply to this image are left out (pytest says "deselected"),
    not skipped: a torch check on a MindSpore image (it asks for `torch_cell`), a MindSpore
    check on a torch image, both on a CANN-only image (its framework, cann, is neither), NNAL's
    checks where the image has no NNAL (needs_nnal), the companions' where its stack has none
    (needs_companions), apex's where its label says absent (needs_apex). Under CI=true a skip
    fails, so what is left must run."""
    image = config.getoption("--image")
    applies = _what_applies(config, image) if image else None
    if applies is None:
        return
    keep, dropped = [], []
    for item in items:
        need = set()
        if Path(str(item.fspath)).parent == Path(__file__).parent:
            need |= {kind for kind, fixture in (("torch", "torch_cell"), ("mindspore", "mindspore_cell"))
                     if fixture in item.fixturenames}
            need |= {kind for kind in ("nnal", "companions", "apex") if item.get_closest_marker(f"needs_{kind}")}
        (keep if need <= applies else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def _what_applies(config, image: str) -> set[str] | None:
    """What the image has, from its labels and the matrix: its framework, and nnal, companions
    and apex where it has them. None when the image is not there (the suite then fails on it)."""
    from ascend_build import engine as eng
    labels = eng.detect(config.getoption("--engine"), config.getoption("--engine-client")).labels(image)
    if labels is None:
        return None
    found = _cell(config.getoption("--matrix"), labels)
    torch = found.stack.torch
    return {found.stack.framework.name} | ({"nnal"} if found.nnal else set()) \
        | ({"companions"} if torch is not None and torch.companions else set()) \
        | ({"apex"} if labels.get(f"{LABEL_PREFIX}.apex", "absent") != "absent" else set())


def _cell(matrix_path: str, labels: dict[str, str]) -> Cell:
    matrix = load_matrix(matrix_path)
    return matrix.cell(*(label(labels, k) for k in ("stack", "os", "python", "chip", "platform")),
                       torch_atb=labels.get(f"{LABEL_PREFIX}.torch-atb") == "yes",
                       no_nnal=labels.get(f"{LABEL_PREFIX}.nnal-left-out") == "yes")


@pytest.fixture(scope="session")
def cell(pytestconfig, labels) -> Cell:
    return _cell(pytestconfig.getoption("--matrix"), labels)


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


def run_on_npu(engine, image: str, code: str, needs: str) -> subprocess.CompletedProcess:
    """`python -c CODE` in the image on this host's first NPU, started the way `invoke run`
    starts containers; skips (saying what `needs` it) on a host without NPUs."""
    from ascend_build.host.run import RunOptions, compose, host_cards
    cards = host_cards(Path("/"))
    if not cards:
        pytest.skip(f"no /dev/davinciN on this host: {needs} needs a 910B host")
    cmd = compose(engine, RunOptions(image, ("python", "-c", code), devices=str(cards[0]), interactive=False),
                  Path("/"), engine.runtimes())
    return subprocess.run(cmd, capture_output=True, text=True)
