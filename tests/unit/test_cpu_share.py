"""benchmarks/cpu_share.py names what used the CPU: an emulated program by the program qemu
runs (not by qemu), a Python by what it runs."""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("cpu_share", ROOT / "benchmarks" / "cpu_share.py")
assert _spec and _spec.loader
cpu_share = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cpu_share)


def test_a_program_under_qemu_is_named_by_what_qemu_runs():
    binfmt = "/usr/libexec/qemu-binfmt/aarch64-binfmt-P"
    assert cpu_share.program([binfmt, "/opt/venv/bin/python", "python", "-c", "import torch\nprint(1)"]) \
        == "qemu: python -c import torch"
    assert cpu_share.program([binfmt, "/usr/bin/perl", "/usr/bin/perl", "-e", "1"]) == "qemu: perl"
    assert cpu_share.program(["/usr/bin/qemu-aarch64-static", "/bin/dpkg", "dpkg", "--configure", "-a"]) \
        == "qemu: dpkg"


def test_a_native_program_is_named_by_itself_and_a_python_by_what_it_runs():
    assert cpu_share.program(["dockerd"]) == "dockerd"
    assert cpu_share.program(["/srv/.venv/bin/python", "-m", "pytest", "tests"]) == "python -m pytest"
    assert cpu_share.program(["python3", "/tmp/pip_for_target.py", "aarch64"]) == "python3 pip_for_target.py"
    # a name that merely ends like qemu's is not emulated: only binfmt's interpreters are
    assert not cpu_share.program(["/usr/bin/myqemu-tool", "x"]).startswith("qemu: ")
    assert cpu_share.program([]) == "(kernel thread or gone)"


def test_it_measures_a_command_and_says_what_it_saw():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "cpu_share.py"), "--interval", "0.2", "--",
                          sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 1.5: pass"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "machine CPU" in out.stdout and "seen by sampling" in out.stdout
    # the busy loop is the one thing that used a second of CPU
    busy = [line for line in out.stdout.splitlines() if re.fullmatch(r" *[0-9]+ s +[0-9.]+% +python -c import time", line)]
    assert busy and float(busy[0].split()[0]) >= 1, out.stdout
