"""What a newcomer meets in the first hour (issue: the first hour, second pass): the
offline path is one printed command, a build machine previews the run command, words
that used to disagree agree, and the manifest says what it could not find."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ascend_build.errors import UserError
from ascend_build.images import finish
from ascend_build.inputs import baseimage
from ascend_build.matrix import load_matrix
from tests import forked

ROOT = Path(__file__).resolve().parents[2]


def invoke(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return forked.invoke(*args, cwd=cwd)


def test_a_base_that_cannot_be_pulled_leads_to_a_command_that_works_offline():
    m = load_matrix(ROOT / "matrix.yaml")
    debian = baseimage.advice(m, "debian:bookworm", m.stacks["2.1.0"], "linux/arm64")
    assert "add --debootstrap" in debian and "--base-image debian:bookworm=MIRROR/debian:bookworm-{arch}" in debian
    ubuntu = baseimage.advice(m, "ubuntu:22.04", m.stacks["2.1.0"], "linux/arm64")
    # The Debian cell whose distro Python fits the stack: nothing compiled, no registry.
    assert "`invoke build --torch 2.1.0 --os debian12 --debootstrap` (Python 3.11)" in ubuntu
    assert "--base-image ubuntu:22.04=MIRROR/ubuntu:22.04" in ubuntu
    builder = baseimage.advice(m, "quay.io/pypa/manylinux2014_aarch64:2023-10-07-c1e05d1", m.stacks["2.1.0"],
                               "linux/arm64", task="builder")
    assert "`invoke builder --torch 2.1.0 --flavor debian11 --debootstrap`" in builder


def test_debootstrap_on_a_cell_it_cannot_make_names_the_one_it_can(tmp_path):
    out = invoke("build", "--torch", "2.1.0", "--os", "ubuntu22.04", "--debootstrap", "--dry",
                 "--packages", str(tmp_path))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "ubuntu22.04 (ubuntu:22.04) is not one" in out.stderr
    assert "build --torch 2.1.0 --os debian12 --debootstrap" in out.stderr


def test_debootstrap_maps_the_debian_base_to_a_local_name_for_both_arches(tmp_path):
    out = invoke("build", "--torch", "2.1.0", "--os", "debian12", "--debootstrap", "--dry",
                 "--packages", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "--build-arg BASE_IMAGE=ascend-build/debian:bookworm-arm64" in out.stdout
    assert "--build-arg BUILD_BASE_IMAGE=ascend-build/debian:bookworm-amd64" in out.stdout


def test_every_task_answers_help_without_running():
    from tests.unit.test_task_fuzz import options_of_every_task
    for name in options_of_every_task():
        out = invoke(name, "--help")
        assert out.returncode == 0 and out.stdout.startswith("Usage:"), (name, out.stdout[:200], out.stderr[-300:])


def test_run_dry_previews_anywhere_and_says_it_is_a_preview(tmp_path):
    empty = tmp_path / "no-npu"
    empty.mkdir()
    out = invoke("run", "--dry", "--image", "img", "--host-root", str(empty), "--devices", "0-1", "--runtime", "runc",
                 "--", "python", "train.py")
    assert out.returncode == 0, out.stderr
    assert "# preview:" in out.stdout and "has no NPUs" in out.stdout
    line = out.stdout.strip().splitlines()[-1]
    assert "--device /dev/davinci0 --device /dev/davinci1 " in line and "davinci2" not in line
    assert "-v /usr/local/Ascend/driver:/usr/local/Ascend/driver:ro" in line
    assert line.endswith("img python train.py")
    # Not a dry run: still refused on a machine without NPUs.
    real = invoke("run", "--image", "img", "--host-root", str(empty))
    assert real.returncode != 0 and "no NPU on this host" in real.stderr and "--dry" in real.stderr


def test_the_matrix_table_says_which_python_the_default_image_gets_and_why_2_1_0_is_unpaired():
    out = invoke("matrix", "--wide")       # the full table: one line a row
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith("2.1.0 "))
    assert "3.8-3.11 (3.10 on ubuntu22.04, the distro's)" in row
    assert "2.1.0 (data starts at 2.1.0.post3)" in out.stdout
    unpaired = next(line for line in out.stdout.splitlines() if line.startswith("torch_npu on PyPI with no"))
    assert " 2.1.0," not in unpaired
    # Huawei publishes the .zip: the list of packages names it, with its URL.
    assert "Ascend-cann-toolkit_8.0.RC3_linux-aarch64.zip  <- https://" in out.stdout


def test_an_unpaired_line_is_not_sent_to_write_a_stack(tmp_path):
    # A line PyPI serves and no source pairs with a CANN release (as 2.9.1 is today), added
    # to a copy of the imported facts so that the test holds whatever the import brings.
    from tests.conftest import committed_imported_text, copy_matrix
    text = committed_imported_text().replace("\ntorch_npu_releases:\n", "\ntorch_npu_releases:\n  2.99.0:\n"
                                              "    cann: []\n    source: PyPI index (simple page of torch-npu)\n"
                                              "    pypi_pythons:\n      aarch64: ['3.11']\n", 1)
    m = load_matrix(copy_matrix(tmp_path, imported=text))
    releases = m.releases["torch"]
    unpaired = [r for r, v in releases.items() if not v.cann]
    line = next(r for r in unpaired if all(not v.cann for k, v in releases.items()
                                           if k.startswith(r.split(".post")[0])))
    base = line.split(".post")[0]
    with pytest.raises(UserError, match="is on PyPI but unpaired") as info:
        m.cell(base)
    assert "add a `stacks:` entry" not in str(info.value)


def test_messages_name_the_invoke_that_runs_here():
    from ascend_build.cli.program import localize, program
    text = localize("pin it with `invoke pin --packages DIR`")
    assert f"`{program()} pin --packages DIR`" in text
    assert "`invoke pin" not in text or program() == "invoke"


def test_the_manifest_says_which_operator_record_it_could_not_find():
    m = load_matrix(ROOT / "matrix.yaml")
    cell = m.cell("2.10.0", "debian13", "3.13")
    found = {"toolkit_home": "/usr/local/Ascend/cann-9.0.0", "freeze": "torch==2.10.0\n",
             "files": {"/usr/local/Ascend/cann-9.0.0/aarch64-linux/ascend_toolkit_install.info": "version=9.0.0\n"}}
    text = finish.manifest_text(cell, found)
    assert "# CANN operator package: no version file at /usr/local/Ascend/cann-9.0.0/opp_kernel/version.info" in text
    assert "was not seen by this project" in text and "# pip freeze\ntorch==2.10.0" in text
    found["files"]["/usr/local/Ascend/cann-9.0.0/share/info/ops_nn/version.info"] = "Version=9.0.0\n"
    text = finish.manifest_text(cell, found)
    assert "# CANN operator package (/usr/local/Ascend/cann-9.0.0/share/info/ops_nn/version.info)\nVersion=9.0.0" in text


def test_the_files_the_project_writes_are_the_same_bytes_every_time():
    files = {"/usr/local/share/ascend-build/manifest.txt": b"m\n", "/usr/local/share/ascend-build/requirements/a.txt": b"a"}
    one, two = finish.files_tar(files, 1700000000), finish.files_tar(dict(reversed(files.items())), 1700000000)
    assert one == two
    import io
    import tarfile
    with tarfile.open(fileobj=io.BytesIO(one)) as tar:
        members = tar.getmembers()
    assert [m.name for m in members][:4] == ["usr", "usr/local", "usr/local/share", "usr/local/share/ascend-build"]
    assert {m.mtime for m in members} == {1700000000} and {m.uid for m in members} == {0}
    assert finish.files_tar(files, 1700000001) != one
