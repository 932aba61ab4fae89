"""One project root (issue 78): the tool works on the checkout it runs in, or the one --matrix
names, never on the checkout its venv was installed from. Run from a second checkout (a
fork, a branch) with this checkout's venv, `render` read the second's matrix and wrote into
this one. Each case runs the real command line (`python -m ascend_build`, which finds the
tasks.py of the folder it runs in, as `.venv/bin/ascend-build` does) in a second checkout
made of copies, with a change of its own in its templates, and holds this checkout's files
to their bytes."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, committed_matrix_text

# What rendering writes (images/ and the generated pages) and reads (templates/), copied; the
# rest a checkout has, linked (nothing of it is written).
COPIED = ("images", "docs", "templates", "README.md")
LINKED = ("tasks.py", "imported.yaml", "locks", "pyproject.toml", "tests", "scripts", "mkdocs.yml")
MARK = "# a line only the second checkout's template has"


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def second(tmp_path_factory) -> Path:
    """A second checkout of the project: its own images/, docs/ and templates/ (a line added
    to its devel template), its own matrix.yaml."""
    folder = tmp_path_factory.mktemp("second-checkout")
    for name in COPIED:
        src = ROOT / name
        (shutil.copytree(src, folder / name, symlinks=True) if src.is_dir() else shutil.copy2(src, folder / name))
    for name in LINKED:
        (folder / name).symlink_to(ROOT / name)
    (folder / "matrix.yaml").write_text(committed_matrix_text())
    template = folder / "templates" / "devel.Dockerfile.j2"
    template.write_text(template.read_text().replace("WORKDIR /opt", f"{MARK}\nWORKDIR /opt"))
    return folder


def run(cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    """The command line as a user runs it in `cwd`: no PYTHONPATH, so the package is the one
    this venv installed, and the tasks the ones invoke finds from `cwd` up."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",) and not k.startswith("INVOKE_")}
    return subprocess.run([sys.executable, "-m", "ascend_build", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_render_from_a_second_checkout_writes_into_that_checkout_only(second):
    mine = {name: _digest(ROOT / name) for name in ("images", "docs")}
    readme = (ROOT / "README.md").read_bytes()
    out = run(second, "render")
    assert out.returncode == 0, out.stdout + out.stderr
    # it says where it writes, and writes there: the second checkout's template, rendered
    assert f"into {second}" in out.stdout, out.stdout
    assert "wrote images/devel/debian12/Dockerfile" in out.stdout, out.stdout
    assert MARK in (second / "images" / "devel" / "debian12" / "Dockerfile").read_text()
    # this checkout: not a byte changed
    assert {name: _digest(ROOT / name) for name in ("images", "docs")} == mine
    assert (ROOT / "README.md").read_bytes() == readme
    assert MARK not in (ROOT / "images" / "devel" / "debian12" / "Dockerfile").read_text()
    # run again from a folder below it: the same checkout, current now (its matrix.yaml found)
    again = run(second / "docs", "render", "--check")
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"generated pages in {second} are current" in again.stdout


def test_a_dry_build_in_a_second_checkout_reads_its_dockerfile(second):
    """The build's Dockerfile is the checkout's own (current against its templates), not the
    install's: the path in the plan is the second checkout's."""
    if MARK not in (second / "images" / "devel" / "debian12" / "Dockerfile").read_text():
        assert run(second, "render").returncode == 0
    out = run(second, "build", "--cann", "8.0.RC3", "--os", "debian12", "--python", "3.11", "--devel", "--dry",
              "--packages", str(second / "no-packages"))
    assert f"-f {second}/images/devel/debian12/Dockerfile " in out.stdout, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"-f {ROOT}/images/" not in out.stdout


def test_the_matrix_option_names_the_checkout_to_work_on(second, tmp_path):
    """From this checkout, `--matrix` naming the second checkout's matrix: its checkout is the
    project (render --check compares its files, and says so)."""
    out = run(ROOT, "render", "--check", "--matrix", str(second / "matrix.yaml"))
    assert f"in {second}" in out.stdout + out.stderr, out.stdout + out.stderr
    # a matrix copied alone (no checkout around it) leaves the project the checkout run in
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "matrix.yaml").write_text(committed_matrix_text())
    shutil.copy2(ROOT / "imported.yaml", alone / "imported.yaml")
    out = run(ROOT, "render", "--check", "--matrix", str(alone / "matrix.yaml"))
    assert f"in {ROOT}" in out.stdout + out.stderr, out.stdout + out.stderr
    assert not (alone / "images").exists()
