"""MindSpore as a framework of the matrix: its stacks resolve beside torch's on the same CANN
part, bad MindSpore stacks are refused naming the key and what would work, locks and
Dockerfiles have the framework's layers, and torch-only inputs are refused for it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from ascend_build.errors import MatrixError, UserError
from ascend_build.images.render import runtime_dockerfile
from ascend_build.locking import lock as locks
from ascend_build.matrix import load_matrix
from ascend_build.matrix.frameworks import MINDSPORE
from ascend_build.provenance.sbom import _wheel_sha
from tests import forked
from tests.conftest import committed_matrix_text, copy_matrix

ROOT = Path(__file__).resolve().parents[2]
REAL = committed_matrix_text()
STACK = """mindspore_stacks:
  "2.9.0":
    cann: 9.0.0
    python: {min: "3.9", max: "3.12", default: "3.11"}
    pins: {numpy: "<2"}          # mindspore 2.9.0 requires numpy>=1.20,<2 (its wheel's metadata)
    cxx11_abi: {aarch64: false, x86_64: false}
"""


def with_stack(tmp_path: Path, stack: str) -> Path:
    assert STACK in REAL
    return copy_matrix(tmp_path, REAL.replace(STACK, stack))


def refused(tmp_path: Path, stack: str) -> str:
    with pytest.raises(MatrixError) as info:
        load_matrix(with_stack(tmp_path, stack))
    return str(info.value)


def test_the_mindspore_stack_shares_the_cann_part_and_has_its_own_layers():
    m = load_matrix(ROOT / "matrix.yaml")
    st = m.stacks["mindspore2.9.0"]
    assert (st.framework, st.release, st.cann, st.layers) == (MINDSPORE, "2.9.0", "9.0.0", ("cann", "mindspore"))
    assert st.torch is None and st.flag == "--mindspore 2.9.0" and st.key_path == "mindspore_stacks.2.9.0"
    assert m.pairing(st) == ("published", "MindSpore 2.9.0 was released for CANN 9.0.0")
    assert m.stack_for(MINDSPORE, "2.9.0") is st
    cell = m.cell(st.name, "debian12")
    assert cell.name == "cann9.0.0-910b-debian12-py3.11-mindspore2.9.0" and cell.python == "3.11"
    torch = m.cell("2.10.0", "debian12")
    # The same CANN files and era as the torch line on that CANN: one CANN part, two frameworks.
    assert (cell.toolkit, cell.kernels, cell.cann.era) == (torch.toolkit, torch.kernels, torch.cann.era)
    # CANN's own Python needs are the same layer request for both frameworks.
    assert locks.requirements(m, st, "aarch64")["cann"] == locks.requirements(m, torch.stack, "aarch64")["cann"]
    assert locks.requirements(m, st, "aarch64")["mindspore"] == ["mindspore==2.9.0", "numpy<2"]
    # NNAL is on for MindSpore too (its ATB kernels), at the ABI its wheels are built with.
    assert cell.nnal is not None and cell.nnal.file == "Ascend-cann-nnal_9.0.0_linux-aarch64.run" and cell.abi == 0


def test_an_unpaired_release_is_refused_with_the_paired_ones(tmp_path):
    error = refused(tmp_path, STACK.replace('"2.9.0":', '"2.8.0":'))
    assert "mindspore_stacks['2.8.0']" in error and "MindSpore 2.8.0 is unpaired" in error
    assert "2.7.2" in error and "2.9.0" in error


def test_a_cann_the_release_was_not_made_for_is_refused_naming_the_right_one(tmp_path):
    error = refused(tmp_path, STACK.replace("cann: 9.0.0", "cann: 8.5.0"))
    assert "mindspore_stacks['2.9.0'].cann" in error
    assert "MindSpore 2.9.0 was released for CANN 9.0.0, not 8.5.0; use cann: 9.0.0" in error


def test_a_python_without_wheels_is_refused(tmp_path):
    error = refused(tmp_path, STACK.replace('max: "3.12"', 'max: "3.13"'))
    assert "mindspore_stacks['2.9.0'].python" in error and "no aarch64 wheel for Python 3.13" in error


def test_nnal_without_the_abi_is_refused(tmp_path):
    """NNAL is on by default where CANN has one: the ABI must be named (or NNAL turned off)."""
    error = refused(tmp_path, STACK.replace("    cxx11_abi: {aarch64: false, x86_64: false}\n", ""))
    assert "mindspore_stacks['2.9.0'].cxx11_abi" in error and "cxx_abi_N" in error
    off = load_matrix(with_stack(tmp_path, STACK.replace("    cxx11_abi: {aarch64: false, x86_64: false}\n",
                                                          "    nnal: false\n")))
    assert off.cell("mindspore2.9.0", "debian12").nnal is None


def test_an_unknown_release_says_how_to_add_it():
    m = load_matrix(ROOT / "matrix.yaml")
    with pytest.raises(UserError) as info:
        m.stack_for(MINDSPORE, "2.7.2")
    assert "MindSpore 2.7.2 was released for CANN 8.5.0" in str(info.value)
    assert "mindspore_stacks:" in str(info.value)
    with pytest.raises(UserError, match="unknown MindSpore stack '2.8.0'"):
        m.cell("mindspore2.8.0")


def test_a_mindspore_stack_has_no_builder():
    m = load_matrix(ROOT / "matrix.yaml")
    with pytest.raises(UserError, match="MindSpore 2.9.0: its images take the released wheel, so it has no builder"):
        m.builder_cell("mindspore2.9.0")


def test_the_mindspore_dockerfile_installs_mindspore_and_no_torch():
    m = load_matrix(ROOT / "matrix.yaml")
    text = runtime_dockerfile(m, m.stacks["mindspore2.9.0"], m.os["debian12"]).text
    assert "requirements/mindspore.txt" in text and "FROM mindspore-pip-${PIP_ON} AS runtime" in text
    assert "torch" not in text.replace("torch_npu/*.whl", "")       # the shared wheel-cache clean-up names it
    assert 'io.ascend-build.mindspore="2.9.0"' in text
    # The CANN part (toolkit, operators, ENV) is the torch image's of that CANN and OS, to the byte.
    torch = runtime_dockerfile(m, m.stacks["2.10.0"], m.os["debian12"]).text
    sections = lambda t: {s.split("\n", 1)[0]: s for s in re.split(r"\n# -{20,} ", t)}      # noqa: E731
    # but for NNAL's default ABI: MindSpore's wheels are the old ABI, torch 2.10.0's the new one
    # (`invoke build` passes the cell's either way).
    assert "ARG NNAL_CXX_ABI=0" in text and "ARG NNAL_CXX_ABI=1" in torch
    assert sections(text)["CANN"].replace("ARG NNAL_CXX_ABI=0", "ARG NNAL_CXX_ABI=1") == sections(torch)["CANN"]
    assert "toolkit" in sections(text)["CANN"]
    assert set(sections(text)) - set(sections(torch)) == {"MindSpore"}


def test_the_sbom_takes_the_one_locked_file_of_a_wheel_whose_inner_tag_differs():
    """PyPI's MindSpore aarch64 wheel is named cp311-none-any and says py3-none-any inside."""
    lock = ("mindspore==2.9.0 \\\n    --hash=sha256:" + "5" * 64 + "\n    # " + "5" * 16 + " mindspore-2.9.0-cp311-none-any.whl\n")
    assert _wheel_sha({"mindspore": lock}, "mindspore", "2.9.0", ["py3-none-any"]) == "5" * 64
    assert _wheel_sha({"mindspore": lock}, "mindspore", "2.8.0", ["py3-none-any"]) is None


@pytest.mark.parametrize("args, message", [
    (["--torch", "2.1.0", "--mindspore", "2.9.0"], "--torch and --mindspore each name the image's framework"),
    (["--mindspore", "2.9.0", "--apex-src", "upstream"], "--apex-src: stack mindspore2.9.0 is MindSpore 2.9.0"),
    (["--mindspore", "2.6.0"], "MindSpore 2.6.0 was released for CANN 8.2.RC1"),
])
def test_build_refuses_what_a_mindspore_image_cannot_take(args, message):
    out = forked.invoke("build", *args, "--dry", "--os", "debian12")
    assert out.returncode != 0 and message in out.stdout + out.stderr, out.stdout + out.stderr


def test_build_dry_names_the_mindspore_layers():
    out = forked.invoke("build", "--mindspore", "2.9.0", "--os", "debian12", "--dry")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "requirements/{cann,mindspore}.txt" in out.stdout
    assert "locked by locks/mindspore2.9.0/py3.11-aarch64" in out.stdout


def test_no_nnal_builds_the_line_without_its_third_file():
    """The first hour: CANN 9.0.0's MindSpore line asks for a third file (NNAL, no published
    sum). --no-nnal builds it with two: the committed Dockerfile takes WITH_NNAL=0, the image
    says so in a label, its tags in -nonnal, and the suite's cell (from the labels) has no NNAL,
    so NNAL's checks are left out."""
    from tests.forked import invoke
    out = invoke("build", "--mindspore", "2.9.0", "--os", "debian12", "--dry", "--no-nnal")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Ascend-cann-nnal_" not in out.stdout and "--build-arg WITH_NNAL=0" in out.stdout
    assert "--label io.ascend-build.nnal-left-out=yes" in out.stdout
    assert "ascend-runtime:cann9.0.0-910b-debian12-py3.11-mindspore2.9.0-nonnal-arm64" in out.stdout
    with_nnal = invoke("build", "--mindspore", "2.9.0", "--os", "debian12", "--dry")
    assert "Ascend-cann-nnal_9.0.0_linux-aarch64.run" in with_nnal.stdout and "WITH_NNAL" not in with_nnal.stdout
    from tests.image.conftest import _cell
    labels = {"io.ascend-build.stack": "mindspore2.9.0", "io.ascend-build.os": "debian12",
              "io.ascend-build.python": "3.11", "io.ascend-build.chip": "910b",
              "io.ascend-build.platform": "linux/arm64"}
    assert _cell(str(ROOT / "matrix.yaml"), labels).nnal is not None
    assert _cell(str(ROOT / "matrix.yaml"), {**labels, "io.ascend-build.nnal-left-out": "yes"}).nnal is None


@pytest.mark.parametrize("args, message", [
    (["--torch", "2.1.0", "--os", "debian12"], "--no-nnal: stack 2.1.0 installs no NNAL on aarch64"),
    (["--torch", "2.10.0-26.1.0", "--os", "debian13", "--torch-atb"], "--no-nnal: torch_atb is NNAL's Python plugin"),
])
def test_no_nnal_where_there_is_none_or_torch_atb_needs_it_is_refused(args, message):
    from tests.forked import invoke
    out = invoke("build", *args, "--dry", "--no-nnal")
    assert out.returncode == 2 and message in out.stderr, out.stdout + out.stderr


def test_the_stack_a_task_names_is_looked_up_once_and_travels_as_its_record(monkeypatch):
    """--mindspore 2.9.0 is the matrix's record from the options on: the cell takes it as
    given (no lookup by name again), and keeps it beside the stack with --no-nnal made, so
    the image's Dockerfile is still the committed one of the line."""
    from ascend_build.cli.options import Choice
    m = load_matrix(ROOT / "matrix.yaml")
    st = Choice(mindspore="2.9.0").stack(m)
    assert st is m.stacks["mindspore2.9.0"] and Choice().stack(m) is None
    monkeypatch.setattr(m, "stack", lambda name=None: pytest.fail(f"stack {name} looked up again by its name"))
    cell = m.cell(st, "debian12", no_nnal=True)
    assert cell.matrix_stack is st and st.nnal is not False and cell.stack.nnal is False
    committed = ROOT / "images" / "runtime" / st.name / "debian12" / "Dockerfile"
    assert runtime_dockerfile(m, cell.matrix_stack, cell.os).text == committed.read_text()
