"""CI workflow files cannot run here: validate them against the GitHub workflow schema
that check-jsonschema vendors, and check they take the image list from the matrix."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def validate(*files: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
                           *map(str, files)], capture_output=True, text=True)


def test_workflows_match_the_schema():
    assert WORKFLOWS
    out = validate(*WORKFLOWS)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_schema_check_can_fail(tmp_path):
    # One misspelt job key, the rest untouched.
    text = (ROOT / ".github/workflows/images.yml").read_text()
    assert "    runs-on: ubuntu-24.04\n" in text
    broken = tmp_path / "broken.yml"
    broken.write_text(text.replace("    runs-on: ubuntu-24.04\n", "    runs_on: ubuntu-24.04\n", 1))
    out = validate(broken)
    assert out.returncode != 0 and "runs_on" in out.stdout + out.stderr


def test_build_matrix_comes_from_invoke_ci_matrix():
    text = (ROOT / ".github/workflows/images.yml").read_text()
    assert "invoke ci-matrix" in text and "fromJSON(needs.plan.outputs.cells)" in text
    assert "invoke render" in text and "git diff --exit-code" in text and "invoke lint" in text
    # No image name from the matrix is written into the workflow.
    assert "cann8.0" not in text and "ubuntu22.04" not in text
