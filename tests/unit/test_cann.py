"""CANN only, the third framework record: no framework, OS + Python + CANN (+ NNAL), as
Huawei's cann:<ver>-<chip>-<os>-py<ver> images. Its stacks load from cann_stacks: keyed by
the CANN release, its images are named without a framework word, its lock is CANN's layer
alone, its Dockerfile ends with the CANN stage and the common tail, its build plans the CANN
files the torch image of that CANN takes, what it cannot be is refused naming what exists,
and the image suite leaves every torch and MindSpore check out for it."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ascend_build.cluster.launch import framework_of, launcher_of
from ascend_build.errors import MatrixError, UserError
from ascend_build.images.kinds import RUNTIME
from ascend_build.images.render import runtime_dockerfile
from ascend_build.locking import lock as locks
from ascend_build.matrix import load_matrix
from ascend_build.matrix.frameworks import CANN, MINDSPORE, TORCH
from ascend_build.matrix.like import resolve
from ascend_build.matrix.report import ci_matrix
from tests.conftest import committed_matrix_text, copy_matrix
from tests.forked import invoke

ROOT = Path(__file__).resolve().parents[2]
MATRIX = load_matrix(ROOT / "matrix.yaml")
REAL = committed_matrix_text()
ENTRY = '  8.0.RC3:\n    python: {min: "3.8", max: "3.11", default: "3.11"}'


def with_entry(tmp_path: Path, entry: str) -> Path:
    assert ENTRY in REAL
    return copy_matrix(tmp_path, REAL.replace(ENTRY, entry))


# ---------------------------------------------------------------- the stacks and their cells

def test_the_cann_stacks_load_keyed_by_their_release():
    st = MATRIX.stacks["cann8.0.RC3"]
    assert (st.framework, st.key, st.release, st.package, st.cann) == (CANN, "8.0.RC3", "8.0.RC3", "8.0.RC3", "8.0.RC3")
    assert st.layers == ("cann",) and st.torch is None and st.pins == {}
    assert st.flag == "--cann 8.0.RC3" and st.key_path == "cann_stacks.8.0.RC3" and st.cann_path == st.package_path
    assert (st.python_min, st.python_max, st.python_default) == ("3.8", "3.11", "3.11")
    assert MATRIX.stack_for(CANN, "8.0.RC3") is st
    assert MATRIX.pairing(st) == ("published", "CANN 8.0.RC3 alone: no framework release to pair with it")
    assert {s.key for s in MATRIX.stacks.values() if s.framework is CANN} >= {"8.0.RC3", "9.0.0", "9.1.0"}
    # the ranges the torch_npu releases on each CANN cover
    for key, torch in (("9.0.0", ("2.7.1", "2.10.0")), ("9.1.0", ("2.7.1-26.1.0", "2.12.0"))):
        have = MATRIX.stacks[CANN.stack_name(key)].pythons()
        assert set(have) == {p for t in torch for p in MATRIX.stacks[t].pythons()}, key


def test_a_cann_only_cell_is_named_without_a_framework_word():
    cell = MATRIX.cell("cann8.0.RC3", "debian12", "3.11", "910b", "linux/arm64")
    assert cell.name == "cann8.0.rc3-910b-debian12-py3.11"
    tags = RUNTIME.tags(RUNTIME.repository, cell.tag_name, "sha-0123456789abcdef", cell.target, cell.alias)
    assert tags.readable == "ascend-runtime:cann8.0.rc3-910b-debian12-py3.11-arm64"
    assert MATRIX.cell("cann9.1.0", "ubuntu22.04", chip="A3").name == "cann9.1.0-a3-ubuntu22.04-py3.10"
    assert MATRIX.cell("cann9.0.0", "debian12", no_nnal=True).tag_name == "cann9.0.0-910b-debian12-py3.11-nonnal"
    # The CANN part is the torch image's of that CANN: the same files, era and NNAL.
    torch = MATRIX.cell("2.1.0", "debian12", "3.11", "910b", "linux/arm64")
    assert cell.cann_files == torch.cann_files and cell.nnal is None and cell.pairing == "published"


def test_nnal_goes_in_at_the_tree_its_set_env_takes_by_default():
    """No framework binary decides NNAL's ABI: cxx_abi_1 on every arch, named by the record."""
    cell = MATRIX.cell("cann9.0.0", "debian12")
    assert cell.nnal is not None and cell.nnal.file == "Ascend-cann-nnal_9.0.0_linux-aarch64.run" and cell.abi == 1
    assert MATRIX.stacks["cann9.0.0"].cxx11_abi == {"aarch64": True, "x86_64": True}
    text = runtime_dockerfile(MATRIX, MATRIX.stacks["cann9.0.0"], MATRIX.os["debian12"]).text
    assert "ARG NNAL_CXX_ABI=1" in text and "FROM cann-nnal-${WITH_NNAL} AS cann" in text


def test_a_cann_only_image_may_be_for_a_chip_whose_framework_images_need_a_torch_npu_for_it():
    """950: torch images need TorchNPU 26.1.0 (chip_support:); a CANN-only image needs only
    CANN's operator package, as Huawei's cann:9.0.0-950 images are."""
    assert "950" in MATRIX.chips(MATRIX.stacks["cann9.0.0"])
    assert "950" not in MATRIX.chips(MATRIX.stacks["2.10.0"])
    assert MATRIX.cell("cann9.0.0", "ubuntu22.04", chip="950").kernels.file == "Ascend-cann-950-ops_9.0.0_linux-aarch64.run"


# ---------------------------------------------------------------- the matrix refuses

@pytest.mark.parametrize("entry, where, message", [
    ('  7.0.0:\n    python: {min: "3.8", max: "3.11", default: "3.11"}', "cann_stacks['7.0.0']",
     "got '7.0.0'; CANN releases defined under cann:"),
    (ENTRY + "\n    cann: 8.0.RC3", "cann_stacks['8.0.RC3'].cann", "unknown key 'cann'; accepted keys: python, pins"),
    (ENTRY.replace('default: "3.11"', 'default: "3.12"'), "cann_stacks['8.0.RC3'].python.default",
     "expected a version from 3.8 to 3.11"),
    (ENTRY + '\n    pins: {numpy: ">=2"}', "cann_stacks['8.0.RC3'].pins.numpy", "which admits numpy versions CANN 8.0.RC3"),
    (ENTRY + "\n    nnal: true", "cann_stacks['8.0.RC3'].nnal", "CANN 8.0.RC3 publishes no NNAL package"),
])
def test_a_bad_cann_stack_is_refused_naming_its_key(tmp_path, entry, where, message):
    with pytest.raises(MatrixError) as info:
        load_matrix(with_entry(tmp_path, entry))
    assert where in str(info.value) and message in str(info.value), str(info.value)


def test_no_pairing_and_no_numpy_pin_are_asked_of_it(tmp_path):
    """No framework release to pair, and CANN's own layer bounds numpy (cann_numpy) already."""
    m = load_matrix(with_entry(tmp_path, ENTRY))
    assert "numpy<2" in locks.requirements(m, m.stacks["cann8.0.RC3"], "aarch64")["cann"]


def test_an_unknown_release_is_refused_naming_the_key_and_the_releases_there_are():
    with pytest.raises(UserError) as info:
        MATRIX.stack_for(CANN, "7.0.0")
    text = str(info.value)
    assert "unknown CANN only stack '7.0.0'" in text and "defines: 8.0.RC3, 9.0.0, 9.0.1, 9.1.0, 9.2.0" in text
    assert "(cann_stacks:)" in text and "not a CANN release cann: knows (8.0.RC1" in text
    assert "the import derives: 8.0.RC1, 8.0.RC2, 8.0.0, 8.1.RC1" in text
    # a release no official image publishes: its line derived from the releases published for it
    assert "published for CANN 8.0.0" in MATRIX.stack_for(CANN, "8.0.0").python_path


# ---------------------------------------------------------------- derived from the import

def test_a_release_the_official_images_publish_has_its_stack_without_an_entry():
    st = MATRIX.stack_for(CANN, "8.5.1")
    assert st.derived and st.name == "cann8.5.1" and st.name not in MATRIX.stacks, "derived: not rendered or listed"
    assert (st.python_min, st.python_max, st.flag) == ("3.10", "3.12", "--cann 8.5.1")
    with pytest.raises(UserError, match=r"python 3.13 is outside cann stack 8.5.1's range 3.10-3.12 \(the Pythons of "
                                        r"CANN 8.5.1's official images, cann.8.5.1.images; a `cann_stacks:` entry"):
        MATRIX.cell("cann8.5.1", "ubuntu22.04", "3.13", "910b", "linux/arm64")


def _plan(m, stack: str) -> list:
    """What a build of each of the stack's cells is made of: the cell and its rendered Dockerfile
    (on the OSes the official images publish: those a derived stack is built on)."""
    from ascend_build.images.render import runtime_dockerfile
    st = m.stack(stack)
    out = []
    for base in (m.os[name] for name in m.official_oses(st)):
        for python in st.pythons():
            cell = m.cell(stack, base.name, python, "910b", "linux/arm64")
            out.append((base.name, python, cell.python_source, cell.toolkit, cell.kernels, cell.nnal, cell.pins,
                        runtime_dockerfile(m, st, base).text))
    return out


def test_a_written_entry_equal_to_the_derived_stack_changes_no_plan(tmp_path):
    """cann_stacks: keeps only what a site overrides: an entry written as the import derives it
    plans every cell of the stack (every OS the official images publish, every Python) as without
    it, to the Dockerfile's byte; what it adds is the other OSes (test below)."""
    derived = MATRIX.derived["cann8.5.1"]
    entry = (f'  8.5.1:\n    python: {{min: "{derived.python_min}", max: "{derived.python_max}", '
             f'default: "{derived.python_default}"}}')
    written = load_matrix(with_entry(tmp_path, ENTRY + "\n" + entry))
    assert not written.stacks["cann8.5.1"].derived and "cann8.5.1" not in written.derived
    assert _plan(written, "cann8.5.1") == _plan(MATRIX, "cann8.5.1") != []


def test_a_derived_stack_is_built_on_the_oses_its_images_publish_and_rendered_there(tmp_path):
    """The official images of 8.5.1 are on Ubuntu 22.04 and openEuler 24.03: the derived stack's
    Dockerfiles are rendered (and committed) for those and for the Debian releases debootstrap
    makes (a site without a registry builds on them); another OS is refused naming them and
    the entry that opens it; with no --os, the matrix's default OS, one of them."""
    from ascend_build.images import build
    st = MATRIX.derived["cann8.5.1"]
    assert MATRIX.official_oses(st) == ("openeuler24.03", "ubuntu22.04")
    rendered = {r.path.as_posix() for r in build.render(MATRIX) if "/cann8.5.1/" in r.path.as_posix()}
    assert rendered == {f"images/runtime/cann8.5.1/{o}/Dockerfile"
                        for o in ("openeuler24.03", "ubuntu22.04", "debian11", "debian12", "debian13")}
    assert all((ROOT / path).is_file() for path in rendered), "committed (`invoke render`)"
    with pytest.raises(UserError, match=r"the OSes CANN 8\.5\.1's official images publish \(openeuler24\.03, "
                                        r"ubuntu22\.04\) and on the Debian releases debootstrap makes \(debian12, "
                                        r"debian11, debian13\); not on openeuler22\.03: pass --os ubuntu22\.04, or write "
                                        r"a `cann_stacks:` entry keyed 8\.5\.1"):
        MATRIX.cell("cann8.5.1", "openeuler22.03", None, "910b", "linux/arm64")
    assert MATRIX.cell("cann8.5.1", "debian12", None, "910b", "linux/arm64").os.name == "debian12"
    assert MATRIX.cell("cann8.5.1", None, None, "910b", "linux/arm64").os.name == "ubuntu22.04"
    written = load_matrix(with_entry(tmp_path, ENTRY + '\n  8.5.1:\n    python: {min: "3.10", max: "3.12", '
                                                        'default: "3.11"}'))
    assert written.cell("cann8.5.1", "openeuler22.03", None, "910b", "linux/arm64").os.name == "openeuler22.03"


def test_each_written_entry_is_an_override_of_what_the_import_derives(tmp_path):
    """No entry of the committed cann_stacks: says what the official images would derive anyway:
    each one is either a release no official image publishes (its line then derived from the
    releases published for it, a fallback the entry decides over), or differs from the derived
    stack."""
    written = [st for st in MATRIX.stacks.values() if st.framework is CANN]
    assert written
    for st in written:
        entry = f"  {st.key}:\n    python: {{min: \"{st.python_min}\", max: \"{st.python_max}\", default: \"{st.python_default}\"}}"
        assert entry in REAL, st.key
        # its `images:` entries go with it: CI builds only written stacks (their Dockerfiles are rendered)
        text = re.sub(rf"  - stack: {re.escape(st.name)}\n(    .*\n)*", "", REAL.replace(entry, "", 1))
        without = load_matrix(copy_matrix(tmp_path / st.key, text))
        if not MATRIX.cann[st.cann].images:
            assert st.name not in without.stacks and "published for CANN" in without.derived[st.name].derived_from
            continue
        got = without.derived[st.name]
        assert (got.python_min, got.python_max, got.python_default, got.pins, got.nnal) != (
            st.python_min, st.python_max, st.python_default, st.pins, st.nnal), f"{st.key}: equal to the derived"


# ---------------------------------------------------------------- the lock

def test_the_lock_spec_asks_for_the_cann_layer_alone_with_the_pins(tmp_path):
    st = MATRIX.stacks["cann8.0.RC3"]
    assert CANN.lock(st, "aarch64", ["six==1.17.0"]) == {}
    reqs = locks.requirements(MATRIX, st, "aarch64")
    assert list(reqs) == ["cann"] and reqs["cann"] == list(MATRIX.cann_python_deps) + ["numpy<2"]
    m = load_matrix(with_entry(tmp_path, ENTRY + '\n    pins: {protobuf: "==3.20.3"}'))
    assert locks.requirements(m, m.stacks["cann8.0.RC3"], "aarch64") == {"cann": reqs["cann"] + ["protobuf==3.20.3"]}


@pytest.mark.parametrize("stack, torch", [("cann8.0.RC3", "2.1.0"), ("cann9.0.0", "2.7.1"), ("cann9.1.0", "2.7.1-26.1.0")])
def test_the_committed_locks_are_the_cann_layer_of_the_torch_images_on_that_cann(stack, torch):
    """Current for each Python of the range on aarch64, one file (cann.txt), with the versions
    of the torch stack's CANN layer: the same requirement file, so the same image layers."""
    st = MATRIX.stacks[stack]
    for python in st.pythons():
        if stack == "cann9.1.0" and python == "3.14":
            continue        # no torch lock there to share with; its own lock is checked below
        lock = locks.read(ROOT, st, python, "aarch64")
        assert lock is not None and lock.digest == locks.inputs_digest(MATRIX, st, python, "aarch64"), python
        assert sorted(p.name for p in lock.where.iterdir()) == ["cann.txt"]
        other = locks.read(ROOT, MATRIX.stacks[torch], python, "aarch64")
        assert other is not None and locks.pip_text(lock.files["cann"]) == locks.pip_text(other.files["cann"]), python
    last = locks.read(ROOT, MATRIX.stacks["cann9.1.0"], "3.14", "aarch64")
    assert last is not None and last.digest == locks.inputs_digest(MATRIX, MATRIX.stacks["cann9.1.0"], "3.14", "aarch64")


# ---------------------------------------------------------------- the Dockerfile

def test_the_dockerfile_ends_with_the_cann_stage_and_the_common_tail():
    st, os_ = MATRIX.stacks["cann8.0.RC3"], MATRIX.os["debian12"]
    text = runtime_dockerfile(MATRIX, st, os_).text
    assert text.startswith("# GENERATED by `invoke render`")
    assert re.findall(r"^FROM (.*)$", text, re.M)[-1] == "cann AS runtime"
    torch = runtime_dockerfile(MATRIX, MATRIX.stacks["2.1.0"], os_).text
    # the common tail (the user, the workspace) as every image has it, then CANN only's labels
    tail = text.split("FROM cann AS runtime\n", 1)[1]
    common = torch.split("# Who containers run as", 1)[1].split("LABEL ", 1)[0]
    assert tail.split("# Who containers run as", 1)[1].split("LABEL ", 1)[0] == common
    assert 'io.ascend-build.cann="8.0.RC3"' in tail and 'image.title="Ascend NPU runtime: CANN 8.0.RC3"' in tail
    assert not re.search(r"io\.ascend-build\.(torch|torch-npu|mindspore)=", text)
    assert "torch" not in text.replace("torch_npu/*.whl", "") and "mindspore" not in text
    assert "requirements/cann.txt" in text and "requirements/torch" not in text
    # The CANN part (toolkit, operators, ENV) is the torch image's of that CANN and OS, to the byte.
    sections = lambda t: {s.split("\n", 1)[0]: s for s in re.split(r"\n# -{20,} ", t)}      # noqa: E731
    assert sections(text)["CANN"].split("\n\n# -")[0] == sections(torch)["CANN"]
    assert set(sections(text)) - set(sections(torch)) == {"CANN only"}


def test_render_writes_a_dockerfile_per_os_of_each_cann_stack():
    for st in (s for s in MATRIX.stacks.values() if s.framework is CANN):
        for os_ in MATRIX.os.values():
            path = ROOT / "images/runtime" / st.name / os_.name / "Dockerfile"
            assert path.read_text() == runtime_dockerfile(MATRIX, st, os_).text, path


# ---------------------------------------------------------------- build: the plan and refusals

def test_build_dry_plans_the_image_with_the_torch_images_cann_files_and_runs_no_engine_command(tmp_path, checkout):
    """--dry shows the commands; the client double records what was run: only the probe of
    its version, never a build, a run, a pull or a tag."""
    log = tmp_path / "client.log"
    client = tmp_path / "docker"
    client.write_text(f'#!/bin/sh\necho "$*" >> {log}\ncase "$1" in version) echo 28.2.2 ;; buildx) echo v0.12 ;; '
                      f'*) exit 1 ;; esac\n')
    client.chmod(0o755)
    cell = ("--os", "debian12", "--python", "3.11", "--chip", "910b", "--platform", "linux/arm64", "--dry",
            "--docker", str(client))
    out = invoke("build", "--cann", "8.0.RC3", *cell, cwd=checkout)      # no ./packages a build left
    assert out.returncode == 0, out.stdout + out.stderr
    assert "# stage requirements/cann.txt (the lock without comments) from " in out.stdout
    assert "python packages: locked by locks/cann8.0.RC3/py3.11-aarch64" in out.stdout + out.stderr
    assert "images/runtime/cann8.0.RC3/debian12/Dockerfile" in out.stdout
    assert "ascend-runtime:cann8.0.rc3-910b-debian12-py3.11-arm64" in out.stdout
    assert "--label org.opencontainers.image.version=cann8.0.rc3-910b-debian12-py3.11 " in out.stdout
    assert "apex" not in out.stdout.replace("io.ascend-build.apex=absent", "")
    ran = {line.split()[0] for line in log.read_text().splitlines()}
    assert "version" in ran and ran <= {"version", "buildx", "--version", "image", "info"}, ran
    torch = invoke("build", "--torch", "2.1.0", *cell, cwd=checkout)
    assert torch.returncode == 0, torch.stderr

    def files(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith("# would download ")] + \
               [re.sub(r"\.build/[^/]+/", ".build/CELL/", line) for line in text.splitlines()
                if line.startswith("# stage <") or line.startswith("# stage /")]
    assert files(out.stdout + out.stderr) == files(torch.stdout + torch.stderr) != []
    # `invoke ci-matrix` names a stack by its name for --torch: the same image
    row = ci_matrix(MATRIX, [MATRIX.cell("cann8.0.RC3", "debian12", "3.11", "910b", "linux/arm64")])[0]
    assert (row["torch"], row["name"]) == ("cann8.0.RC3", "cann8.0.rc3-910b-debian12-py3.11-arm64")
    by_name = invoke("build", "--torch", row["torch"], *cell, cwd=checkout)
    assert by_name.returncode == 0 and "ascend-runtime:cann8.0.rc3-910b-debian12-py3.11-arm64" in by_name.stdout


@pytest.mark.parametrize("args, message", [
    (["--torch", "2.1.0", "--cann", "8.0.RC3"], "--torch and --cann each name the image's framework: give one"),
    (["--mindspore", "2.9.0", "--cann", "9.0.0"], "--mindspore and --cann each name the image's framework: give one"),
    (["--cann", "7.0.0"], "matrix.yaml defines: 8.0.RC3, 9.0.0, 9.0.1, 9.1.0, 9.2.0 (cann_stacks:), and the import "
                          "derives: 8.0.RC1"),
    (["--cann", "8.0.RC3", "--torch-npu-wheel", "x.whl"], "stack cann8.0.RC3 is CANN only 8.0.RC3, which has no torch_npu"),
    (["--cann", "9.0.0", "--torch-atb"], "--torch-atb: torch_atb is NNAL's plugin for torch, and stack cann9.0.0"),
    (["--cann", "8.0.RC3", "--like", "quay.io/ascend/cann:8.0.rc3-910b-debian12-py3.11"], "leave out --torch, "
                                                                                         "--mindspore, --cann"),
    (["--cann", "8.0.RC3", "--all"], "drop --torch/--mindspore/--cann/"),
])
def test_build_refuses_what_a_cann_only_image_cannot_take(args, message):
    out = invoke("build", *args, "--os", "debian12", "--dry") if "--like" not in args and "--all" not in args \
        else invoke("build", *args, "--dry")
    assert out.returncode == 2 and message in out.stderr, out.stdout + out.stderr


def test_lock_takes_cann_and_refuses_an_unknown_release():
    out = invoke("lock", "--cann", "8.0.RC3", "--cann", "9.0.0", "--check")
    assert out.returncode == 0 and "locks: none stale" in out.stdout, out.stdout + out.stderr
    bad = invoke("lock", "--cann", "7.0.0", "--check")
    assert bad.returncode == 2 and "unknown CANN only stack '7.0.0'" in bad.stderr, bad.stderr


def test_a_cann_only_stack_has_no_builder():
    with pytest.raises(UserError, match="CANN only 8.0.RC3: its images have no framework, so it has no builder"):
        MATRIX.builder_cell("cann8.0.RC3")


def test_like_an_official_cann_tag_builds_its_cann_only_cell():
    like = resolve(MATRIX, "quay.io/ascend/cann:8.0.rc3-910b-debian12-py3.11")
    assert (like.stack.name, like.os, like.python, like.chip) == ("cann8.0.RC3", "debian12", "3.11", "910b")
    assert resolve(MATRIX, "quay.io/ascend/cann:8.5.0-910b-ubuntu22.04-py3.11").stack.name == "cann8.5.0"   # derived
    assert resolve(MATRIX, "quay.io/ascend/cann:8.0.0-910b-ubuntu22.04-py3.11").stack.name == "cann8.0.0"   # derived
    devel = resolve(MATRIX, "quay.io/ascend/cann:9.0.0-910b-ubuntu22.04-py3.11-devel")    # its devel twin
    assert devel.devel and (devel.stack.name, devel.os) == ("cann9.0.0", "ubuntu22.04")
    out = invoke("build", "--like", "quay.io/ascend/cann:9.1.0-a3-ubuntu22.04-py3.10", "--dry")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ascend-runtime:cann9.1.0-a3-ubuntu22.04-py3.10-arm64" in out.stdout


# ---------------------------------------------------------------- no launcher

def test_the_image_is_known_by_its_label_else_by_a_readable_tag_with_no_framework_word():
    assert framework_of("r/x:sha-0123-arm64", "cann")[0] is CANN
    assert framework_of("r/ascend-runtime:cann8.0.rc3-910b-debian12-py3.11-arm64", None)[0] is CANN
    assert framework_of("r:5000/ascend-runtime:cann9.0.0-910b-debian12-py3.11-nonnal-uid1000-arm64", None)[0] is CANN
    # every readable tag starts with its CANN: a framework's word after the Python says otherwise
    assert framework_of("r/ascend-runtime:cann8.0.rc3-910b-debian12-py3.11-torch2.1.0-arm64", None)[0] is TORCH
    assert framework_of("r/ascend-runtime:cann9.0.0-910b-debian12-py3.11-mindspore2.9.0-arm64", None)[0] is MINDSPORE


def test_run_and_job_with_a_launcher_refuse_a_cann_only_image_and_say_which_images_have_one(tmp_path):
    with pytest.raises(UserError, match=r"the image is CANN only: it has no launcher .* torch \(torchrun\), "
                                        r"MindSpore \(msrun\)"):
        launcher_of(CANN)
    image = "never-built.invalid/ascend-runtime:cann8.0.rc3-910b-debian12-py3.11-arm64"
    out = invoke("run", "--dry", "--image", image, "--torchrun", "--runtime", "runc", "--host-root", str(tmp_path),
                 "--", "python", "train.py")
    assert out.returncode == 2 and "the image is CANN only, by the image's name" in out.stderr, out.stderr
    job = invoke("job", "--image", "registry.example.com/ascend-runtime:sha-0123456789abcdef-arm64", "--framework",
                 "cann", "--", "train.py")
    assert job.returncode == 2 and "it has no launcher to start ranks with" in job.stderr, job.stderr
    # One command on its cards is `invoke run`'s, as for any image.
    plain = invoke("run", "--dry", "--image", image, "--runtime", "runc", "--host-root", str(tmp_path), "--",
                   "npu-smi", "info")
    assert plain.returncode == 0 and plain.stdout.strip().endswith(f"{image} npu-smi info"), plain.stdout + plain.stderr


# ---------------------------------------------------------------- the image suite's selection

def _collected(tmp_path: Path, labels: dict[str, str]) -> tuple[set[str], str]:
    """The image suite collected for an image with these labels (a docker client double
    answers its `image inspect`): the tests kept, and pytest's summary line."""
    inspect = tmp_path / "inspect.json"
    inspect.write_text(json.dumps([{"Config": {"Labels": labels}}]))
    client = tmp_path / "docker"
    client.write_text(f'#!/bin/sh\ncase "$1" in version|info) echo 28.2.2 ;; buildx) echo v0.12 ;; '
                      f'image) cat {inspect} ;; *) exit 1 ;; esac\n')
    client.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    out = subprocess.run([sys.executable, "-m", "pytest", "tests/image", "--collect-only", "-q", "--image", "x:y",
                          "--engine-client", str(client)], cwd=ROOT, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    kept = {line.split("::")[1].split("[")[0] for line in out.stdout.splitlines() if "::" in line}
    return kept, out.stdout.strip().splitlines()[-1]


def test_the_suite_leaves_the_framework_checks_out_for_a_cann_only_image(tmp_path):
    """Every check asking for torch_cell or mindspore_cell is deselected (not skipped, so it
    cannot pass by asserting nothing), as NNAL's where the image has none; the CANN,
    environment, user, SBOM, manifest, lock and binaries checks stay."""
    import ast
    cell = {"stack": "cann8.0.RC3", "os": "debian12", "python": "3.11", "chip": "910b", "platform": "linux/arm64"}
    kept, summary = _collected(tmp_path, {f"io.ascend-build.{k}": v for k, v in cell.items()})
    fixtures: dict[str, set[str]] = {}
    for module in (ROOT / "tests/image").glob("test_*.py"):
        for node in ast.parse(module.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                fixtures[node.name] = {a.arg for a in node.args.args}
    framework = {n for n, args in fixtures.items() if args & {"torch_cell", "mindspore_cell"}}
    nnal = {n for n in fixtures if n in ("test_image_env_carries_what_nnals_set_env_exports",
                                         "test_a_login_shell_sources_nnal_without_importing_torch",
                                         "test_nnals_libraries_resolve_from_the_image_env")}
    assert len(framework) >= 10 and not framework & kept
    assert kept == set(fixtures) - framework - nnal
    assert {"test_set_env_exists_and_sources_cleanly", "test_image_env_carries_everything_set_env_exports",
            "test_operator_package_is_installed", "test_containers_run_as_the_images_user",
            "test_sbom_is_in_the_image_schema_valid_and_carries_the_verified_sums",
            "test_package_manifest_is_in_the_image", "test_python_packages_are_exactly_the_lock",
            "test_every_installed_binary_is_for_the_images_machine"} <= kept
    assert f"({len(framework) + len(nnal)} deselected)" in summary, summary
    # With NNAL (CANN 9.0.0), NNAL's checks stay; a torch image keeps torch's.
    with_nnal, _ = _collected(tmp_path, {f"io.ascend-build.{k}": v for k, v in {**cell, "stack": "cann9.0.0"}.items()})
    assert with_nnal == kept | nnal
    torch, _ = _collected(tmp_path, {f"io.ascend-build.{k}": v for k, v in {**cell, "stack": "2.1.0"}.items()})
    assert {"test_torch_and_torch_npu_versions", "test_npu_smoke"} <= torch and not {"test_run_check_on_an_npu"} & torch
    # apex's own check where the label names an apex wheel only (absent: the slot check alone)
    assert "test_apex_slot_matches_its_label" in torch and "test_apex_extensions_load" not in torch
    wheel = "apex-0.1+ascend-cp311-cp311-linux_aarch64.whl"
    with_apex, _ = _collected(tmp_path, {f"io.ascend-build.{k}": v
                                         for k, v in {**cell, "stack": "2.1.0", "apex": wheel}.items()})
    assert with_apex == torch | {"test_apex_extensions_load"}


def test_the_pages_name_the_image_its_one_line_build_makes():
    cell = MATRIX.cell("cann8.0.RC3", "debian12", "3.11", "910b", "linux/arm64")
    tag = f"{cell.name}-{cell.target.suffix}"
    command = "invoke build --cann 8.0.RC3 --os debian12 --platform linux/arm64"
    for page in (ROOT / "docs/images.md", ROOT / "README.md"):
        text = page.read_text()
        assert tag in text and command in text, page
    assert "CANN-only image has not run on an NPU" in (ROOT / "docs/unverified.md").read_text()
    assert "`cann_stacks:`" in (ROOT / "docs/adding.md").read_text()


def test_push_and_join_name_a_cann_only_or_mindspore_image_by_its_own_option():
    """`invoke push`/`join` took only --torch: the other frameworks' images are named by
    their own option, as `build` names them, and two framework options are refused."""
    from ascend_build.cli.images import PushOptions
    from ascend_build.cli.options import Output
    out = Output()
    cann = PushOptions(out, cann="8.0.RC3", os="debian12", python="3.11").cells(MATRIX)
    assert [c.name for c in cann] == ["cann8.0.rc3-910b-debian12-py3.11"]
    ms = PushOptions(out, mindspore="2.9.0", os="debian12").cells(MATRIX)
    assert [c.name for c in ms] == ["cann9.0.0-910b-debian12-py3.11-mindspore2.9.0"]
    with pytest.raises(UserError, match="--torch and --cann each name the image's framework"):
        PushOptions(out, torch="2.1.0", cann="8.0.RC3").cells(MATRIX)
    # none named: every image of `images:`
    assert PushOptions(out).cells(MATRIX) == MATRIX.image_cells()
