"""Every imported vLLM-Ascend release, as `invoke build --vllm RELEASE --dry` takes it: each
release that pairs is planned on its own stack and CANN for every chip its images serve
there, on the engine double (the plan whole, then the stop a real run makes first where the
stack has no lock: the refusal naming `invoke lock`); each stack it takes resolves into a
lock (uv and the index as doubles); every other release is refused naming what is missing.
And `--like` for every variant upstream publishes of a release."""
from __future__ import annotations

import re

import pytest

from ascend_build.errors import UserError
from ascend_build.images import batch, serving
from ascend_build.inputs.options import Inputs, Site
from ascend_build.locking import resolve
from ascend_build.matrix import load_matrix
from ascend_build.matrix.like import VLLM_VARIANTS
from ascend_build.matrix.like import resolve as like
from ascend_build.matrix.serving import image
from tests.conftest import committed_imported_text
from tests.doubles.engine_double import EngineDouble

RELEASES = list(__import__("yaml").safe_load(committed_imported_text())["vllm_ascend_releases"])
# What a release that is not served here is refused for: each names what is missing.
MISSING = re.compile(r"pins disagree with each other .*(not one release|it pins no)|no stack in matrix\.yaml has all "
                     r"three|no vllm release to pair with|sets no SOC_VERSION \(ARG SOC_VERSION")


@pytest.fixture(scope="module")
def m(tmp_path_factory):
    from tests.conftest import copy_matrix, link_locks
    return load_matrix(link_locks(copy_matrix(tmp_path_factory.mktemp("matrix"))))


def _served(rel) -> list[str]:
    """The chips a release's images serve on the CANN of its stack."""
    return sorted({i.chip for i in rel.images if i.cann.lower() == rel.stack.cann.lower() and i.soc_version})


@pytest.mark.parametrize("version", RELEASES)
def test_every_imported_release_is_planned_on_its_stack_or_refused_naming_what_is_missing(m, version, tmp_path,
                                                                                        capsys):
    try:
        rel = m.serving(version)
    except UserError as refused:
        assert MISSING.search(str(refused)), str(refused)
        assert "Traceback" not in str(refused)
        return
    site = Site(dry=True, cache=tmp_path / "cache", work=tmp_path / "work")
    planned = []
    for chip in _served(rel):
        try:
            cell = m.cell(rel.stack, chip=chip)
        except UserError as refused:     # the chip's own needs (950: a TorchNPU made for it), said
            assert str(refused).startswith(f"chip {chip}: "), str(refused)
            continue
        planned.append(chip)
        req = serving.request(m, cell, serving.Wanted(rel, True, None))
        ready = batch.prepare(m, cell, site, [(serving, req)])
        engine = EngineDouble()
        try:
            batch.build_cell(m, cell, site, Inputs(repository="ascend-runtime"), ready, engine)
            stop = ""
        except UserError as exc:
            stop = str(exc)
        out = capsys.readouterr().out
        # the plan whole: the runtime's Dockerfile of its stack, the serving image on it, the chip's SOC_VERSION
        assert f"images/runtime/{rel.stack.name}/{cell.os.name}/Dockerfile" in out, (version, chip)
        assert f"--build-arg SOC_VERSION={image(rel, chip, cell.os.name).soc_version} " in out, (version, chip)
        assert f"vLLM-Ascend {version} from " in out and f"vLLM {rel.vllm} from its sdist" in out
        assert f"--build-arg TORCH_NPU_VERSION={rel.stack.package} " in out
        assert not engine.called("build"), "a dry run builds nothing"
        # then, where the stack has no lock, the refusal naming the command that makes it
        if stop:
            assert re.search(rf"stack {re.escape(rel.stack.name)} / Python {cell.python} / aarch64 has no lock .*"
                             rf"invoke lock --torch {re.escape(rel.stack.name)}", stop), stop
    assert "910b" in planned, "every release that pairs is planned for the chip of its Dockerfile"


def test_the_issues_releases_plan_each_on_its_own_pins_and_cann(m):
    want = {"0.13.0": ("2.8.0.post2-cann8.5.0", "2.8.0", "2.8.0.post2", "8.5.0"),
            "0.23.0.post1": ("2.10.0-26.1.0", "2.10.0", "2.10.0.post4", "9.1.0"),
            "0.25.1rc1": ("2.10.0-26.0.1", "2.10.0", "2.10.0.post2", "9.0.1"),
            "0.30.0rc2": ("2.10.0.post4-cann9.2.0", "2.10.0", "2.10.0.post4", "9.2.0")}
    for version, (stack, torch, npu, cann) in want.items():
        st = m.serving(version).stack
        assert (st.name, st.torch.version, st.package, st.cann) == (stack, torch, npu, cann), version
    assert len([v for v in RELEASES if v in {r.version for r in m.serving_releases()}]) >= 20


UV = """numpy==1.26.4             # via -r /tmp/x/cann.in, torch-npu
torch=={torch}            # via -r /tmp/x/torch.in, -r /tmp/x/torch_npu.in
torch-npu=={npu}          # via -r /tmp/x/torch_npu.in
"""


class IndexDouble:
    """The index: one aarch64 wheel of each package per Python, all sums alike."""
    def files(self, project: str, only: str | None = None):
        return [(f"{project.replace('-', '_')}-{v}-cp{p}-cp{p}-manylinux2014_aarch64.whl", "9" * 64)
                for v in ("1.26.4", "2.8.0", "2.9.0", "2.10.0", "2.8.0.post2", "2.10.0.post2", "2.10.0.post4",
                          "2.7.1") for p in ("310", "311", "312", "313")]


def test_each_stack_a_release_takes_resolves_into_its_lock(m, monkeypatch):
    """`invoke lock --torch STACK` for every stack a release takes (derived ones too): its
    inputs, resolved by a uv double, split into the stack's layers, each hash-checked."""
    stacks = {r.stack.name: r.stack for r in m.serving_releases()}
    assert {"2.8.0.post2-cann8.5.0", "2.10.0.post4-cann9.2.0", "2.10.0-26.1.0"} <= set(stacks)
    monkeypatch.setattr(resolve, "uv_version", lambda: "uv 0.0 (double)")
    for name, st in stacks.items():
        asked = resolve.requirements(m, st, "aarch64")
        assert f"torch=={st.torch.version}" in asked["torch"] and f"torch_npu=={st.package}" in asked["torch_npu"]
        monkeypatch.setattr(resolve, "compile_cell", lambda *a, st=st: resolve.parse_compiled(
            UV.format(torch=st.torch.version, npu=st.package)))
        files = resolve.make(m, st, st.python_default, "aarch64", resolve.Network(), IndexDouble())
        assert set(files) == set(st.layers), name
        assert f"torch-npu=={st.package} \\\n    --hash=sha256:" in files["torch_npu"], name
        assert all("--require-hashes" in text for text in files.values())


@pytest.mark.parametrize("variant", list(VLLM_VARIANTS))
def test_like_takes_every_variant_upstream_publishes(m, variant):
    tag = "v0.23.0" + (f"-{variant}" if variant else "")
    found = like(m, f"quay.io/ascend/vllm-ascend:{tag}")
    rel = m.serving("0.23.0")
    dockerfile = next(i for i in rel.images if i.dockerfile == VLLM_VARIANTS[variant])
    assert (found.stack.name, found.os, found.python, found.chip, found.vllm) == (
        "2.10.0-26.1.0", dockerfile.os, "3.12", dockerfile.chip, "0.23.0")
    assert found.os == ("openeuler24.03" if "openeuler" in variant else "ubuntu22.04")
    assert found.chip == {"": "910b", "a3": "a3", "310p": "310p", "a5": "950"}[variant.split("-")[0]
                                                                              if variant != "openeuler" else ""]
    assert like(m, f"ascend/vllm-ascend:{tag}") == found, "the registry may be left out"


def test_like_a3_on_openeuler_and_a_chip_950_plan(m, tmp_path, capsys):
    found = like(m, "quay.io/ascend/vllm-ascend:v0.23.0-a3-openeuler")
    assert str(found) == "stack 2.10.0-26.1.0, --os openeuler24.03, --python 3.12, --chip a3, --vllm 0.23.0"
    rel = m.serving("0.23.0")
    site = Site(dry=True, cache=tmp_path / "cache", work=tmp_path / "work")
    for cell, soc in ((m.cell(found.stack, found.os, found.python, found.chip), "ascend910_9391"),
                      (m.cell(rel.stack, chip="950"), "ascend950dt_9582")):
        ready = batch.prepare(m, cell, site, [(serving, serving.request(m, cell, serving.Wanted(rel, True, None)))])
        with pytest.raises(UserError, match="has no lock"):
            batch.build_cell(m, cell, site, Inputs(repository="ascend-runtime"), ready, EngineDouble())
        out = capsys.readouterr().out
        assert f"--build-arg SOC_VERSION={soc} " in out
        assert f"images/runtime/2.10.0-26.1.0/{cell.os.name}/Dockerfile" in out
    assert m.cell(rel.stack, chip="950").kernels.file == "Ascend-cann-950-ops_9.1.0_linux-aarch64.run", \
        "950's kernels package, as cann_chips names it"
