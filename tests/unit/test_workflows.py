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


def zizmor(*paths: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "zizmor"
    return subprocess.run([str(exe), "--offline", "--format", "json", *map(str, paths)], capture_output=True, text=True)


def test_workflows_pass_zizmor_without_suppressions():
    """Pinned actions, no `${{ }}` inside scripts, no persisted checkout credentials, the
    narrowest permissions: zizmor's offline audits find nothing, and nothing is ignored."""
    import json
    out = zizmor(*WORKFLOWS)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert json.loads(out.stdout) == []
    assert not list(ROOT.glob("zizmor.y*ml")) and not list((ROOT / ".github").glob("zizmor.y*ml"))
    assert not any("zizmor: ignore" in f.read_text() for f in WORKFLOWS)


def test_zizmor_does_find_what_it_checks(tmp_path):
    """The same audit on a workflow with a moving tag and an expansion inside a script."""
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\npermissions: {}\njobs:\n  j:\n    runs-on: ubuntu-24.04\n    permissions: {}\n"
                   "    steps:\n      - uses: actions/checkout@v4\n"
                   "      - run: echo \"${{ github.event.head_commit.message }}\"\n")
    out = zizmor(bad)
    assert out.returncode != 0
    found = {f["ident"] for f in __import__("json").loads(out.stdout)}
    assert {"unpinned-uses", "template-injection", "artipacked"} <= found, found
