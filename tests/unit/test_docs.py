"""Ascend's published tables, the second upstream source: each parser on the snapshot of
the documents as published (tests/data/upstream-docs, with its sources), the two kinds of
pairing a stack can have, and NNAL's glibc floor refused before anything runs."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ascend_build.images.catalog import render_all
from ascend_build.matrix import load_matrix
from ascend_build.upstream import docs
from tests import forked

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "tests" / "data" / "upstream-docs"
MATRIX = load_matrix(ROOT / "matrix.yaml")


def read(name: str) -> str:
    return (SNAPSHOT / name).read_text()


def test_the_compatibility_table_pairs_each_torchnpu_release_with_its_cann():
    found = docs.parse_compatibility(read("COMPATIBILITY.en.md"), "COMPATIBILITY.en.md")
    pairs = {p.release: (p.cann, p.branch) for p in found.pairings}
    assert pairs["2.12.0"] == ("9.1.0", "v2.12.0-26.1.0")
    assert pairs["2.10.0.post4"] == ("9.1.0", "v2.10.0-26.1.0")
    assert pairs["2.1.0.post8"][0] == "8.0.RC3"
    # Release candidates and betas are not releases.
    assert not any("rc" in r for r in pairs)
    with pytest.raises(Exception, match="no TorchNPU -> CANN table"):
        docs.parse_compatibility("# nothing here\n", "empty.md")


def test_the_release_notes_give_the_26_2_branches_and_the_grid():
    found = docs.parse_release_notes(read("torch_npu-26.2.0-release_notes.md"), "notes")
    pairs = {p.release: p.cann for p in found.pairings}
    assert pairs["2.14.0"] == pairs["2.13.0"] == pairs["2.12.0.post3"] == "9.2.0"
    assert found.compatible["26.2"] == ["8.5", "9.0", "9.1", "9.2"]
    assert set(found.compatible) == {"7.3", "26.0", "26.1", "26.2"}


def test_the_tags_name_the_torchnpu_release_of_each_package_version():
    found = docs.parse_tags(read("pytorch-tags.txt"), "tags")
    assert found.series["2.10.0.post2"][0] == "26.0.1"
    assert "2.10.0" in found.series and not any("beta" in v for v, _ in found.series.values())


@pytest.mark.parametrize("version, file, paired, runs, not_runs", [
    ("9.0.1", "cann-9.0.1-release-notes.md", "26.0.RC3", ["26.0.RC1", "25.5.2", "25.5.1"], []),
    ("9.1.0", "cann-9.1.0-release-notes_en.md", "26.0.RC1", ["25.2", "25.5", "26.1.0"], ["25.0"]),
    ("9.1.1", "cann-9.1.1-release-notes.md", "26.1.1", [], []),
])
def test_the_cann_notes_name_the_paired_driver_and_what_it_runs_on(version, file, paired, runs, not_runs):
    notes = docs.parse_cann_notes(read(file), version, file)
    assert notes.drivers[0] == paired
    allowed, _ = docs.runs_on([notes], version)
    assert all(d in allowed for d in runs) and not any(d in allowed for d in not_runs), allowed


def test_a_stacks_pairing_is_published_or_compatible():
    assert MATRIX.pairing(MATRIX.stacks["2.13.0"])[0] == "published"
    kind, why = MATRIX.pairing(MATRIX.stacks["2.12.0"])
    assert kind == "compatible" and "TorchNPU 26.2.0, released for CANN 9.2.0" in why
    assert MATRIX.pairing(MATRIX.stacks["2.1.0"])[0] == "published"
    cell = MATRIX.cell("2.12.0", "debian13", None, None, "linux/arm64")
    assert cell.pairing == "compatible" and cell.nnal is not None and cell.abi == 1
    assert MATRIX.cann["9.2.0"].driver is None     # no document read names it


def _dry(*args: str) -> subprocess.CompletedProcess:
    # --unlocked: no lock of the 26.x stacks is committed (a build refuses them without it)
    return forked.invoke("build", "--torch", "2.12.0", *args, "--dry", "--unlocked")


def test_the_26_line_plans_the_default_os_with_nnal():
    """NNAL needs glibc 2.17 and is on every OS: `invoke build --torch 2.12.0` with no other
    option (but --unlocked) plans Ubuntu 22.04 (the official 2.12.0 image's OS) with NNAL, ATB and SiP."""
    out = _dry()
    assert out.returncode == 0, out.stdout + out.stderr
    assert "-f " + str(ROOT / "images/runtime/2.12.0/ubuntu22.04/Dockerfile") in out.stdout
    assert "Ascend-cann-nnal_9.1.0_linux-aarch64.run -> " in out.stdout
    assert "--label 'io.ascend-build.nnal=9.1.0 cxx_abi_1'" in out.stdout
    assert "torch: only from https://download.pytorch.org/whl/cpu" in out.stdout
    assert "images/runtime/2.12.0/ubuntu22.04/Dockerfile" in {str(r.path) for r in render_all(MATRIX)}
    dockerfile = (ROOT / "images/runtime/2.12.0/ubuntu22.04/Dockerfile").read_text()
    assert "ASDSIP_HOME_PATH=/usr/local/Ascend/nnal/asdsip/latest/" in dockerfile


def test_torch_atb_below_its_glibc_floor_is_refused_before_any_build():
    out = _dry("--torch-atb", "--os", "ubuntu22.04")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "torch_atb (NNAL's Python plugin, --torch-atb) needs glibc 2.38 or newer from CANN 9.1" in out.stderr
    assert "ubuntu22.04 has glibc 2.35" in out.stderr and "ubuntu24.04 (2.39)" in out.stderr
    assert "NNAL itself needs glibc 2.17" in out.stderr
    assert "docker" not in out.stdout


def test_torch_atb_on_a_python_it_is_not_built_for_is_refused():
    out = _dry("--torch-atb", "--os", "ubuntu24.04")          # its python3 is 3.12
    assert out.returncode == 2, out.stdout + out.stderr
    assert "built for Python 3.10, 3.11 only" in out.stderr and "--python 3.10 or 3.11" in out.stderr
    fits = _dry("--torch-atb", "--os", "ubuntu24.04", "--python", "3.11")
    assert fits.returncode == 0, fits.stdout + fits.stderr
    assert "--build-arg NNAL_TORCH_ATB=1" in fits.stdout and "io.ascend-build.torch-atb=yes" in fits.stdout


def test_the_mindspore_page_names_every_file_its_build_takes():
    """The first hour: the page showed a one-line build, the README said "the two files", and
    the build asked for a third (NNAL). The page names each file of its own command's cell."""
    from ascend_build.matrix import load_matrix
    cell = load_matrix(ROOT / "matrix.yaml").cell("mindspore2.9.0", "debian12")
    page = (ROOT / "docs" / "mindspore.md").read_text()
    assert "invoke build --mindspore 2.9.0 --os debian12" in page
    for f in cell.cann_files:
        assert f.checked_name in page, f.checked_name
    assert cell.nnal is not None and "--no-nnal" in page
    readme = (ROOT / "README.md").read_text()
    assert "two files" not in readme and "--no-nnal" in readme
