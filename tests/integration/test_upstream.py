"""The real upstream: Huawei's `ascend-deployer` releases that matrix.yaml names, fetched
from the package index with pip as `invoke update` does, and PyPI's list of torch_npu
releases. Every CANN and torch_npu file in them must parse, and the committed imported
part must be what they give. PyPI moves on its own (a new torch_npu, unpaired until
Huawei publishes its pairing): such news is printed, not failed; everything Huawei's data
says must match exactly."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPI_NEWS = re.compile(r"^(\+ torch_npu \S+: CANN none|[+~-] torch_npu \S+ on PyPI\b.*)$")


def test_the_committed_matrix_agrees_with_huaweis_published_data(tmp_path):
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text((ROOT / "matrix.yaml").read_text())
    (tmp_path / "imported.yaml").write_text((ROOT / "imported.yaml").read_text())
    # The deployer releases from PyPI; Ascend's tables from the committed snapshot (GitHub is
    # not reachable from every CI machine, and the snapshot is what the matrix was imported from).
    out = subprocess.run([sys.executable, "-m", "invoke", "update", "--dry", "--matrix", str(matrix),
                          "--from-docs", str(ROOT / "tests" / "data" / "upstream-docs")],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    counts = dict(line.rsplit(": ", 1) for line in out.stdout.splitlines()
                  if ": " in line and line.rsplit(": ", 1)[1].isdigit())
    assert counts["deployer releases read"] == "3" and counts["conflicts between sources"] == "0"
    assert int(counts["CANN releases"]) >= 9 and int(counts["torch_npu releases with a CANN pairing"]) >= 30
    # Every file has Huawei's sum, or is one the release notes name without one (9.0.1 on).
    assert int(counts["CANN files imported"]) == int(counts["CANN checksums (sha256 of the published .zip)"]) \
        + int(counts["CANN files with no published sum (pinned on first use)"])
    assert counts["Ascend documents read"] == "6" and int(counts["torch_npu pairings the Ascend documents added"]) >= 13
    changes = [line for line in out.stdout.splitlines() if line[:2] in ("+ ", "~ ", "- ")]
    news = [line for line in changes if PYPI_NEWS.match(line)]
    if news:
        print("PyPI news since imported.yaml was written:\n  " + "\n  ".join(news))
    assert [line for line in changes if line not in news] == [], \
        "imported.yaml differs from Huawei's data (run `invoke update`):\n" + out.stdout[-3000:]
    assert matrix.read_text() == (ROOT / "matrix.yaml").read_text(), "--dry wrote"
    assert (tmp_path / "imported.yaml").read_text() == (ROOT / "imported.yaml").read_text(), "--dry wrote"
