"""The code's lint and types, as configured in pyproject.toml: ruff (pyflakes, pycodestyle,
bugbear, import order and pyupgrade for Python 3.8: the staged scripts run in the images'
own Pythons) and mypy on the package and tasks.py. A finding fails the suite."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_finds_nothing():
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", "."], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_ruff_would_find_a_planted_unused_import(tmp_path):
    """The check can fail: the same configuration on a file with an unused import."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n")
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--config", str(ROOT / "pyproject.toml"), str(bad)],
                         capture_output=True, text=True)
    assert out.returncode == 1 and "F401" in out.stdout, out.stdout + out.stderr


def test_mypy_finds_nothing():
    out = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_mypy_would_find_a_planted_type_error(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("x: int = 'three'\n")
    out = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), str(bad)],
                         cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 1 and "Incompatible types in assignment" in out.stdout, out.stdout + out.stderr
