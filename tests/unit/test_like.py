"""`invoke build --like TAG`: the official tags resolved to the matrix's cells. The 26.1.0
torch-npu tags (Ascend/pytorch docker/OVERVIEW.md, written here by hand: 5 torch_npu releases
x CANN 9.1.0 x 310p/910b/a3/950 x ubuntu22.04/openeuler24.03 x py3.12)."""
from __future__ import annotations

import itertools
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


def test_the_26_1_0_tags_resolve_to_their_stacks_where_the_matrix_has_one():
    assert len(TAGS_26_1_0) == 40
    resolved, refused = {}, {}
    for tag in TAGS_26_1_0:
        try:
            resolved[tag] = resolve(MATRIX, tag)
        except UserError as exc:
            refused[tag] = str(exc)
    assert len(resolved) == 24
    for tag, like in resolved.items():
        st = MATRIX.stacks[like.stack]
        assert st.cann == "9.1.0" and tag.split(":")[1].startswith(st.package + "-cann")
        assert like.python == "3.12" and like.os in tag and like.chip in tag
    # No stack pairs these two releases with 9.1.0 yet (#53): refused, naming the nearest.
    assert {t.split(":")[1].split("-")[0] for t in refused} == {"2.7.1.post8", "2.9.0.post6"}
    assert all("no stack pairs torch_npu" in why and "Nearest: --torch" in why for why in refused.values())


@pytest.mark.parametrize("ref, message", [
    ("quay.io/ascend/cann:9.1.0-910b-ubuntu22.04-py3.11", "a CANN-only image (no framework) is not an image"),
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
    out = invoke("build", "--like", "quay.io/ascend/torch-npu:2.12.0-cann9.1.0-910b-ubuntu22.04-py3.11", "--dry")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "stack 2.12.0-26.1.0, --os ubuntu22.04, --python 3.11, --chip 910b" in out.stdout + out.stderr
    assert "ascend-runtime:cann9.1.0-910b-ubuntu22.04-py3.11-torch2.12.0-npu2.12.0-arm64" in out.stdout
    both = invoke("build", "--like", "quay.io/ascend/torch-npu:2.12.0-cann9.1.0-910b-ubuntu22.04-py3.11",
                  "--torch", "2.1.0", "--dry")
    assert both.returncode == 2 and "--like names the stack" in both.stderr
