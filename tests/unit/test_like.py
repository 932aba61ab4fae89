"""`invoke build --like TAG`: the official tags resolved to the matrix's cells. The 26.1.0
torch-npu tags (Ascend/pytorch docker/OVERVIEW.md, written here by hand: 5 torch_npu releases
x CANN 9.1.0 x 310p/910b/a3/950 x ubuntu22.04/openeuler24.03 x py3.12)."""
from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from ascend_build.errors import UserError
from ascend_build.matrix import load_matrix
from ascend_build.matrix.like import resolve

ROOT = Path(__file__).resolve().parents[2]
MATRIX = load_matrix(ROOT / "matrix.yaml")
RELEASES_26_1_0 = ("2.7.1.post8", "2.9.0.post6", "2.10.0.post4", "2.11.0", "2.12.0")
TAGS_26_1_0 = [f"quay.io/ascend/torch-npu:{npu}-cann9.1.0-{chip}-{os}-py3.12" for npu, chip, os in
               itertools.product(RELEASES_26_1_0, ("310p", "910b", "a3", "950"), ("ubuntu22.04", "openeuler24.03"))]


def test_every_26_1_0_tag_resolves_to_its_stack():
    assert len(TAGS_26_1_0) == 40
    for tag in TAGS_26_1_0:
        like = resolve(MATRIX, tag)
        st = MATRIX.stacks[like.stack]
        assert st.cann == "9.1.0" and tag.split(":")[1].startswith(st.package + "-cann"), (tag, like)
        assert like.python == "3.12" and like.os in tag and like.chip in tag
    assert {resolve(MATRIX, t).stack for t in TAGS_26_1_0} == {
        "2.7.1-26.1.0", "2.9.0-26.1.0", "2.10.0-26.1.0", "2.11.0-26.1.0", "2.12.0-26.1.0"}


def test_every_26_1_0_tag_plans_as_a_cell_with_python_3_12_from_source():
    """Neither Ubuntu 22.04 (3.10) nor openEuler 24.03 (3.11) ships Python 3.12: each of the 40
    tags is a cell whose Python is built from pythons."3.12"'s tarball (not pinned: no sum
    could be checked from here, which the build says)."""
    for tag in TAGS_26_1_0:
        like = resolve(MATRIX, tag)
        cell = MATRIX.cell(like.stack, like.os, like.python, like.chip, "linux/arm64")
        assert cell.python == "3.12" and cell.python_source is not None, tag
        assert cell.python_source.version.startswith("3.12.") and cell.python_source.sha256 is None
        assert cell.python_source.urls[0].startswith("https://www.python.org/ftp/python/3.12.")


def test_pythons_3_13_and_3_14_have_tarballs_and_3_13_is_pinned():
    assert MATRIX.pythons["3.13"].sha256 == "93e583f243454e6e9e4588ca2c2662206ad961659863277afcdb96801647d640"
    assert any(u.startswith("http://deb.debian.org/debian/pool/main/p/python3.13/") for u in MATRIX.pythons["3.13"].urls)
    assert MATRIX.pythons["3.14"].version.startswith("3.14.")
    cell = MATRIX.cell("2.10.0", "ubuntu22.04", "3.13", None, "linux/arm64")
    assert cell.python_source is not None and cell.python_source.sha256 == MATRIX.pythons["3.13"].sha256


def test_a_release_no_stack_pairs_with_the_cann_is_refused_naming_the_nearest():
    with pytest.raises(UserError, match="no stack pairs torch_npu 2.7.1.post10 with CANN 9.1.0. Nearest: --torch"):
        resolve(MATRIX, "quay.io/ascend/torch-npu:2.7.1.post10-cann9.1.0-910b-ubuntu22.04-py3.12")


@pytest.mark.parametrize("ref, message", [
    ("quay.io/ascend/cann:8.5.1-910b-ubuntu22.04-py3.11", "no CANN-only stack of CANN 8.5.1"),
    ("quay.io/ascend/torch-npu:latest", "a torch-npu tag reads"),
    ("quay.io/ascend/torch-npu", "not an image reference with a tag"),
    ("quay.io/ascend/vllm-ascend:v0.9.0", "vllm-ascend is neither"),
    ("quay.io/ascend/torch-npu:2.12.0-cann9.9.9-910b-ubuntu22.04-py3.12", "CANN 9.9.9: not a release"),
    ("quay.io/ascend/torch-npu:2.12.0-cann9.1.0-910b-alpine3.20-py3.12", "no OS alpine3.20"),
])
def test_a_tag_that_names_no_cell_is_refused_with_why(ref, message):
    import re
    with pytest.raises(UserError, match=re.escape(message)):
        resolve(MATRIX, ref)


def test_build_like_plans_the_cell_and_refuses_other_choices_beside_it():
    from tests.forked import invoke
    # --unlocked: the 26.x stacks have no lock yet (a build refuses them without it)
    out = invoke("build", "--like", "quay.io/ascend/torch-npu:2.12.0-cann9.1.0-910b-ubuntu22.04-py3.11", "--dry",
                 "--unlocked")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "stack 2.12.0-26.1.0, --os ubuntu22.04, --python 3.11, --chip 910b" in out.stdout + out.stderr
    assert "ascend-runtime:cann9.1.0-910b-ubuntu22.04-py3.11-torch2.12.0-npu2.12.0-arm64" in out.stdout
    both = invoke("build", "--like", "quay.io/ascend/torch-npu:2.12.0-cann9.1.0-910b-ubuntu22.04-py3.11",
                  "--torch", "2.1.0", "--dry")
    assert both.returncode == 2 and "--like names the stack" in both.stderr


# The official CANN-only images of the 9.x releases, as Ascend/cann-container-image c5a67b3a
# has them under cann/ (the released ones: not -devel, not the betas): 5 chips x 2 OSes x
# Python 3.10-3.12, for 9.0.0 and 9.0.1.
CANN_9_TAGS = [f"quay.io/ascend/cann:{v}-{chip}-{os}-py{py}" for v, chip, os, py in itertools.product(
    ("9.0.0", "9.0.1"), ("310p", "910", "910b", "950", "a3"), ("ubuntu22.04", "openeuler24.03"), ("3.10", "3.11", "3.12"))]


def _label(plan: str, name: str) -> str:
    found = re.search(rf"--label '?io\.ascend-build\.{name}=([^' ]+)", plan)
    assert found, (name, plan[-2000:])
    return found.group(1)


def test_build_like_dry_plans_every_26_1_0_tag_and_every_9_x_cann_tag_as_the_tag_says(monkeypatch, capsys):
    """`invoke build --like TAG --dry`, the task's own action, for each of the 100 tags: the plan's
    chip, OS, Python, CANN and torch_npu are the tag's. (The engine is the dry run's stand-in
    for a machine without a client: a plan, not this machine's docker, is what is checked.)"""
    from ascend_build import engine as eng
    from ascend_build.chips import spelling
    from ascend_build.cli import building
    monkeypatch.setattr(building, "load_matrix", lambda path: MATRIX)
    monkeypatch.setattr(eng, "for_task", lambda kind="docker", client=None, dry=False: eng.Engine(
        "docker", "docker", "buildx", "?"))
    assert len(TAGS_26_1_0) == 40 and len(CANN_9_TAGS) == 60
    for tag in TAGS_26_1_0 + CANN_9_TAGS:
        name = tag.split(":", 1)[1]
        parts = re.fullmatch(r"(?:(?P<npu>[^-]+)-cann)?(?P<cann>[0-9.RCrc]+)-(?P<chip>[^-]+)-(?P<os>[a-z]+[0-9.]+)"
                             r"-py(?P<py>3\.[0-9]+)", name)
        assert parts, tag
        building.build(building.BuildOptions(like=tag, dry=True, unlocked=True))
        plan = capsys.readouterr()
        plan_text = plan.out + plan.err
        stack = MATRIX.stacks[_label(plan_text, "stack")]
        assert _label(plan_text, "chip") == spelling(parts["chip"]), tag
        assert _label(plan_text, "os") == parts["os"] and _label(plan_text, "python") == parts["py"], tag
        assert stack.cann == parts["cann"] and f"toolkit_{parts['cann']}_linux-aarch64" in plan_text, tag
        if parts["npu"]:
            assert stack.package == parts["npu"], tag
        else:
            assert stack.framework.name == "cann", tag
