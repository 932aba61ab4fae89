"""Frameworks as records: each record in ascend_build/matrix/frameworks.py is all the rest
of the package asks of a framework. What a record names must exist (its template block
with the three macros the runtime template calls, its launcher, its sections in the two
files), its lock spec gives exactly its layers, and nothing in the package tells
frameworks apart by name."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from ascend_build.cluster.launch import LAUNCHERS, framework_of, launcher_of
from ascend_build.errors import UserError
from ascend_build.images.render import TEMPLATES, runtime_dockerfile
from ascend_build.locking import lock as locks
from ascend_build.matrix import FRAMEWORKS, load_matrix, schema

ROOT = Path(__file__).resolve().parents[2]
MATRIX = load_matrix(ROOT / "matrix.yaml")


@pytest.mark.parametrize("fw", FRAMEWORKS.values(), ids=lambda f: f.name)
def test_what_a_record_names_exists(fw):
    block = (TEMPLATES / fw.template).read_text()
    for macro in ("native", "steps", "labels"):
        assert re.search(rf"{{%-? macro {macro}\(", block), (fw.template, macro)
    if fw.launcher:
        assert fw.launcher in LAUNCHERS and fw.operator_label
    else:                   # CANN only: no ranks to start, and `invoke run`/`job` say so
        with pytest.raises(UserError, match="it has no launcher to start ranks with"):
            launcher_of(fw)
    if fw.paired:
        assert fw.package and fw.releases in schema.IMPORTED_KEYS
    else:                   # no package of its own: nothing to pair, a stack keyed by its CANN
        assert not (fw.package or fw.package_key)
    stacks = [st for st in MATRIX.stacks.values() if st.framework is fw]
    assert stacks, f"no stack of {fw.name} in the matrix to hold the record against"
    for st in stacks:
        assert st.name == fw.stack_name(st.key) and st.flag == f"{fw.flag} {st.key}"
        assert fw.paired or st.cann == st.release == st.key
        assert set(locks.requirements(MATRIX, st, "aarch64")) == set(st.layers) == {"cann", *fw.layers}
        text = runtime_dockerfile(MATRIX, st, MATRIX.os["debian12"]).text
        assert f'.{fw.release_label}="{st.release}"' in text, "the label an image is known by"
        assert framework_of("any:tag", fw.name)[0] is fw


def test_an_image_is_known_by_its_labels_else_its_name_else_the_default():
    torch, mindspore = FRAMEWORKS["torch"], FRAMEWORKS["mindspore"]
    assert framework_of("r/ascend-runtime:cann9.0.0-910b-debian12-py3.11-mindspore2.9.0-arm64", None)[0] is mindspore
    assert framework_of("r/ascend-runtime:sha-0123-arm64", None) == (torch, "default (the image is not here to read "
                                                                      "its labels; --framework mindspore for MindSpore)")
    assert framework_of("r/x:mindspore", "torch")[0] is torch, "the label wins over the name"


def test_nothing_in_the_package_tells_frameworks_apart_by_name():
    """The issue's measure: no `framework ==` (nor `!=`) anywhere in the package; a
    framework's differences are its record's fields."""
    found = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "ascend_build").rglob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"framework\s*[!=]=", line)]
    assert found == []
