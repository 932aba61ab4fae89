"""pip_for_target.py, the fast path's pip: on this machine, it installs a wheel built for
another machine into a venv as pip would there (tags and markers of that machine), and
still refuses one for a third. Wheels are made here (doubles); no network."""
from __future__ import annotations

import base64
import hashlib
import platform
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ascend_build.images import pip_for_target

OTHER = "aarch64" if platform.machine() != "aarch64" else "x86_64"
THIRD = "s390x"


def wheel_double(folder: Path, name: str, machine: str) -> Path:
    """A binary wheel of `name` 1.0 for CPython of this version on `machine`, with a
    console script and a .pth file."""
    py = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    tag = f"{py}-{py}-manylinux_2_17_{machine}"
    files = {
        f"{name}/__init__.py": b"VALUE = 1\ndef main():\n    return 0\n",
        f"{name}.pth": b"",
        f"{name}-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
        f"{name}-1.0.dist-info/WHEEL": f"Wheel-Version: 1.0\nGenerator: double\nRoot-Is-Purelib: false\nTag: {tag}\n".encode(),
        f"{name}-1.0.dist-info/entry_points.txt": f"[console_scripts]\n{name} = {name}:main\n".encode(),
    }

    def row(path: str, data: bytes) -> str:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        return f"{path},sha256={digest},{len(data)}"

    path = folder / f"{name}-1.0-{tag}.whl"
    with zipfile.ZipFile(path, "w") as z:
        for member, data in files.items():
            z.writestr(member, data)
        z.writestr(f"{name}-1.0.dist-info/RECORD",
                   "\n".join([row(m, d) for m, d in files.items()] + [f"{name}-1.0.dist-info/RECORD,,"]) + "\n")
    return path


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    return where


def pip(venv: Path, *args: str, helper: bool) -> subprocess.CompletedProcess:
    cmd = [str(venv / "bin" / "python3")] + ([pip_for_target.__file__, OTHER] if helper else ["-m", "pip"])
    return subprocess.run(cmd + ["install", "--no-index", "--no-cache-dir", *args], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PIP_CONFIG_FILE": "/dev/null"})


def test_installs_what_pip_on_the_other_machine_would(venv, tmp_path):
    wheel_double(tmp_path, "onother", OTHER)
    plain = pip(venv, "--find-links", str(tmp_path), "onother", helper=False)
    assert plain.returncode != 0, "this machine's pip must refuse the other machine's wheel"
    out = pip(venv, "--find-links", str(tmp_path), "onother", helper=True)
    assert out.returncode == 0, out.stderr
    site = next((venv / "lib").glob("python3.*/site-packages"))
    script = venv / "bin" / "onother"
    assert script.read_text().splitlines()[0] == f"#!{venv}/bin/python3", "the venv's python, as pip there writes"
    record = (site / "onother-1.0.dist-info" / "RECORD").read_text()
    assert "../../../bin/onother," in record, "scripts recorded relative to site-packages, as in the venv"
    assert (site / "onother.pth").exists() and (site / "onother-1.0.dist-info" / "INSTALLER").read_text() == "pip\n"
    assert list((site / "onother" / "__pycache__").glob(f"__init__.cpython-{sys.version_info[0]}{sys.version_info[1]}.pyc"))


def test_markers_are_the_other_machines(venv, tmp_path):
    wheel_double(tmp_path, "marked", OTHER)
    req = tmp_path / "req.txt"
    req.write_text(f'marked; platform_machine == "{OTHER}"\n')
    out = pip(venv, "--find-links", str(tmp_path), "-r", str(req), helper=True)
    assert out.returncode == 0, out.stderr
    assert "Successfully installed marked-1.0" in out.stdout


def test_a_third_machines_wheel_is_still_refused(venv, tmp_path):
    wheel_double(tmp_path, "elsewhere", THIRD)
    out = pip(venv, "--find-links", str(tmp_path), "elsewhere", helper=True)
    assert out.returncode != 0 and not (venv / "bin" / "elsewhere").exists()


def test_usage_without_a_machine():
    out = subprocess.run([sys.executable, pip_for_target.__file__, "install", "x"], capture_output=True, text=True)
    assert out.returncode == 2 and "usage: pip_for_target.py MACHINE" in out.stderr
