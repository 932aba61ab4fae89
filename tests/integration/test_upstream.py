"""The real upstream: Huawei's `ascend-deployer` releases that matrix.yaml names, fetched
from the package index with pip as `invoke update` does. Every CANN and torch_npu file
in them must parse, and the committed imported part must be exactly what they give."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_matrix_agrees_with_huaweis_published_data(tmp_path):
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text((ROOT / "matrix.yaml").read_text())
    out = subprocess.run([sys.executable, "-m", "invoke", "update", "--dry", "--matrix", str(matrix)],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    counts = dict(line.rsplit(": ", 1) for line in out.stdout.splitlines()
                  if ": " in line and line.rsplit(": ", 1)[1].isdigit())
    assert counts["deployer releases read"] == "3"
    assert int(counts["CANN releases"]) >= 9 and int(counts["torch_npu releases with a CANN pairing"]) >= 30
    assert counts["CANN files imported"] == counts["CANN checksums (sha256 of the published .zip)"]
    assert "the imported part is current" in out.stdout, \
        "matrix.yaml differs from Huawei's data (run `invoke update`):\n" + out.stdout[-3000:]
    assert matrix.read_text() == (ROOT / "matrix.yaml").read_text()
