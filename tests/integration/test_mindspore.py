"""MindSpore beside torch, built for real: MindSpore 2.9.0 (the real aarch64 wheel from PyPI,
hash-checked against the lock, whose sum is Huawei's) on the CANN 9.0.0 test double,
linux/arm64, Debian 12 with its Python 3.11. The CANN installers come as the .zip files
Huawei publishes, checked against a matrix copy where the doubles' sums stand in for
Huawei's (the fixtures of the 2.10.0 build in this lane). It runs last in its lane: the
Debian 12 OS step is the 2.1.0 image's (the other lane makes it first, on the host network
as here), so this build takes that layer as it is."""
from __future__ import annotations

import json
import subprocess

from ascend_build.matrix import load_matrix
from tests.integration.conftest import MINDSPORE_CELL as CELL
from tests.integration.conftest import REPO, image_exists


def test_mindspore_2_9_builds_on_the_cann_9_double_and_passes_both_suites(engine, built_mindspore, matrix_900):
    out = built_mindspore
    cell = load_matrix(matrix_900).cell(**CELL)
    assert cell.stack.framework.name == "mindspore" and cell.pairing == "published"
    assert "python packages: locked by locks/mindspore2.9.0/py3.11-aarch64" in out.stdout, out.stdout[-3000:]
    # The image suite ran on the candidate: the CANN checks and the MindSpore ones passed
    # (the torch checks skip, saying why), before the tag.
    suite = out.stdout.split("tests/image", 1)[1].split("tested and tagged")[0]
    assert " passed" in suite and " failed" not in suite and " error" not in suite.lower()
    tag = f"{REPO}:{cell.name}-arm64"
    assert tag.endswith("cann9.0.0-910b-debian12-py3.11-mindspore2.9.0-arm64") and image_exists(engine, tag)
    labels = json.loads(subprocess.run(engine.command("image", "inspect", "--format", "{{json .Config.Labels}}", tag),
                                       capture_output=True, text=True).stdout)
    assert labels["io.ascend-build.mindspore"] == "2.9.0" and labels["io.ascend-build.cann"] == "9.0.0"
    assert "io.ascend-build.torch" not in labels and labels["io.ascend-build.apex"] == "absent"
    assert labels["io.ascend-build.lock"].startswith("mindspore2.9.0/py3.11-aarch64 ")


def test_the_cann_9_0_0_zips_were_checked_and_the_image_carries_the_9_x_layout(engine, built_mindspore, matrix_900,
                                                                                  mindspore_cache):
    """CANN 9.0.0 as Huawei publishes it: both installers came out of their .zip after its sum
    was checked (only the verified .run files are kept), and the image carries the 9.x layout
    (cann-9.0.0 tree), the driver labels and the ENV of that release."""
    out = built_mindspore
    cell = load_matrix(matrix_900).cell(**CELL)
    assert cell.cann.era.name == "9" and cell.kernels.file == "Ascend-cann-910b-ops_9.0.0_linux-aarch64.run"
    assert out.stdout.count("sha256 matches Huawei's published sum; took") == 2, out.stdout[-3000:]
    assert not any(p.suffix == ".run" for p in (mindspore_cache / "cann").glob("*")), "only the verified .run copies are kept"
    tag = f"{REPO}:{cell.name}-arm64"
    labels = json.loads(subprocess.run(engine.command("image", "inspect", "--format", "{{json .Config.Labels}}", tag),
                                       capture_output=True, text=True).stdout)
    assert labels["io.ascend-build.driver"] == "26.0.RC1"
    env = subprocess.run(engine.command("image", "inspect", "--format", "{{json .Config.Env}}", tag),
                         capture_output=True, text=True).stdout
    assert "ASCEND_TOOLKIT_HOME=/usr/local/Ascend/cann-9.0.0" in env


def test_the_mindspore_wheel_in_the_image_is_huaweis(engine, built_mindspore, matrix_900):
    """The SBOM records the sha256 pip checked for the mindspore wheel: the one Huawei's
    MindSpore_2.9.0.json lists for cp311 aarch64 (the lock took PyPI's file, the same bytes)."""
    matrix = load_matrix(matrix_900)
    tag = f"{REPO}:{matrix.cell(**CELL).name}-arm64"
    huawei = matrix.releases["mindspore"]["2.9.0"].sums("3.11", "aarch64")["mindspore"]
    sbom = subprocess.run(engine.command("run", "--rm", "--platform", "linux/arm64", tag, "cat",
                                         "/usr/local/share/ascend-build/sbom.cdx.json"), capture_output=True, text=True)
    assert sbom.returncode == 0, sbom.stderr
    entry = next(c for c in json.loads(sbom.stdout)["components"] if c.get("bom-ref") == "pypi:mindspore")
    assert entry["version"] == "2.9.0" and entry["hashes"][0]["content"] == huawei
