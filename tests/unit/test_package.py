"""The package works outside a checkout: its wheel carries the templates and the scripts
staged into builds, and a fresh virtual environment where pip installed only that wheel
(the other dependencies taken from this one's site-packages, without its editable
install) renders the committed Dockerfiles to the byte from a copy of matrix.yaml in
another folder."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

RENDER = """
import sys, pathlib, ascend_build
from ascend_build.matrix import load_matrix
from ascend_build.images.catalog import render_all
root = pathlib.Path(sys.argv[1])
assert pathlib.Path(ascend_build.__file__).resolve().is_relative_to(pathlib.Path(sys.prefix).resolve()), ascend_build.__file__
for r in render_all(load_matrix(root / "matrix.yaml")):
    out = root / r.path
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(r.text)
print(ascend_build.__file__)
"""


def test_the_wheel_renders_outside_the_checkout(tmp_path):
    # Built from a copy of what the wheel is made of, so the checkout gets no build/ folder.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "ascend_build", src / "ascend_build", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "templates", src / "templates")
    wheels = tmp_path / "wheels"
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q",
                          "-w", str(wheels)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    wheel = next(wheels.glob("ascend_build-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for staged in ("ascend_build/templates/runtime.Dockerfile.j2", "ascend_build/templates/_pip.j2",
                   "ascend_build/images/pip_for_target.py", "ascend_build/images/wheel_arch.py"):
        assert staged in names, staged
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # pip (this environment's, told the other Python) installs the wheel alone into it.
    out = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q", str(wheel)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    # The dependencies (jinja2, yaml, packaging...) from this environment: a plain path, so
    # its .pth files (the editable install's finder among them) are not processed.
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "matrix.yaml", project / "matrix.yaml")
    shutil.copy(ROOT / "imported.yaml", project / "imported.yaml")
    # Without PYTHONPATH: a checkout named there would be imported instead of the wheel.
    alone = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([str(py), "-c", RENDER, str(project)], cwd=tmp_path, capture_output=True, text=True,
                          env=alone)
    assert done.returncode == 0, done.stdout + done.stderr
    assert str(venv) in done.stdout
    rendered = sorted(p.relative_to(project) for p in (project / "images").rglob("Dockerfile"))
    assert len(rendered) > 50
    for rel in rendered:
        assert (project / rel).read_text() == (ROOT / rel).read_text(), rel
