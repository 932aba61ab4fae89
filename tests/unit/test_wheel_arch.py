"""The check of a wheel's binaries against the image's machine (images/wheel_arch.py), on
wheel doubles tagged for any platform, and where every pip step of the images runs it."""
from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
import zipfile
from pathlib import Path

from ascend_build.images import wheel_arch
from ascend_build.images.render import layer_dockerfile, runtime_dockerfile
from ascend_build.matrix import load_matrix
from tests.doubles.wheel_double import elf_header, make_binary_wheel, make_wheel

SCRIPT = Path(wheel_arch.__file__)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_reads_the_machine_of_a_real_binary():
    # The Python running this test is an ELF for this machine.
    with open(os.path.realpath(sys.executable), "rb") as f:
        assert wheel_arch.elf_machine(f.read(20)) == platform.machine()
    assert wheel_arch.elf_machine(b"#!/bin/sh\n" + bytes(20)) is None
    assert wheel_arch.elf_machine(elf_header("aarch64")) == "aarch64"
    assert wheel_arch.elf_machine(elf_header("x86_64")) == "x86_64"
    assert wheel_arch.elf_machine(elf_header("npu")) == "e_machine 4137"


def test_a_wheel_tagged_any_with_another_machines_binaries_is_refused_before_install(tmp_path):
    wheels = tmp_path / "wheels"
    foreign = make_binary_wheel(wheels, "mindspore", "2.9.0", "cp310-none-any", "aarch64", kernels=4)
    lock = tmp_path / "framework.txt"
    lock.write_text(f"mindspore==2.9.0 \\\n    --hash=sha256:{_sha(foreign)}\n--require-hashes\n")
    out = subprocess.run([sys.executable, str(SCRIPT), "x86_64", str(lock), str(wheels)],
                         capture_output=True, text=True)
    assert out.returncode == 1
    assert "mindspore-2.9.0-cp310-none-any.whl (tagged cp310-none-any) carries aarch64 binaries" in out.stderr
    assert "the image is x86_64" in out.stderr
    assert "mindspore/lib/libmindspore_0.so: ELF aarch64" in out.stderr
    assert "... and 2 more" in out.stderr              # five libraries: three named, two counted
    assert "op_0.o" not in out.stderr and "4137" not in out.stderr, "the NPU's kernel objects are device code"
    # The same wheel in an aarch64 image is what it is for (its NPU kernels included).
    ok = subprocess.run([sys.executable, str(SCRIPT), "aarch64", str(lock), str(wheels)],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr


def test_only_shared_objects_and_files_without_a_suffix_are_read():
    assert all(map(wheel_arch.may_be_binary, ["torch/lib/libc10.so", "x/libgomp-6e1a1d1b.so.1.0.0", "torch/bin/protoc",
                                               "mindspore/_c_expression.cpython-311-aarch64-linux-gnu.so"]))
    assert not any(map(wheel_arch.may_be_binary, ["torch/__init__.py", "x/y.pyc", "torch/include/c10/core/Device.h",
                                                   "torch-2.1.0.dist-info/METADATA.json", "op/kernel/op_0.o"]))


def test_only_the_wheels_the_lock_names_are_read(tmp_path):
    """The wheel folder is a cache shared by builds for both machines: the same release for
    the other machine lies beside the locked one and is not the lock's."""
    wheels = tmp_path / "wheels"
    mine = make_binary_wheel(wheels / "x", "fastlib", "1.0", "cp311-cp311-manylinux_2_17_x86_64", "x86_64")
    other = make_binary_wheel(wheels / "y", "fastlib", "1.0", "cp311-cp311-manylinux_2_17_aarch64", "aarch64")
    for w in (mine, other):
        w.rename(wheels / w.name)
    old = make_binary_wheel(wheels, "fastlib", "0.9", "py3-none-any", "aarch64")
    lock = tmp_path / "torch.txt"
    lock.write_text(f"fastlib==1.0 --hash=sha256:{_sha(wheels / mine.name)}\n")
    assert wheel_arch.wheels_of(str(lock), [str(wheels)], "x86_64") == [str(wheels / mine.name)]
    # Without hashes (an unlocked file) every wheel of the pinned release pip could take
    # here is read: not the one tagged for the other machine, which pip would never take.
    lock.write_text("fastlib==1.0\n")
    picked = wheel_arch.wheels_of(str(lock), [str(wheels), str(tmp_path / "absent")], "x86_64")
    assert [Path(p).name for p in picked] == [mine.name]
    assert wheel_arch.main(["x86_64", str(lock), str(wheels)]) == 0
    # A wheel tagged for this machine with another machine's binaries inside is refused.
    liar = make_binary_wheel(tmp_path / "liar", "fastlib", "1.0", "cp311-cp311-manylinux_2_17_x86_64", "aarch64")
    assert wheel_arch.main(["x86_64", str(lock), str(liar.parent)]) == 1
    assert wheel_arch.main(["aarch64", str(lock), str(liar.parent)]) == 0, "tagged x86_64: not pip's pick on aarch64"
    assert old.name not in {Path(p).name for p in picked}
    # Pure-Python wheels have nothing to read.
    pure = make_wheel(tmp_path / "pure", "team-utils", "0.1")
    lock.write_text("team-utils==0.1\n")
    assert wheel_arch.main(["aarch64", str(lock), str(pure.parent)]) == 0


def test_installed_files_are_read_by_what_each_distribution_records(tmp_path):
    site = tmp_path / "site-packages"
    for wheel in (make_binary_wheel(tmp_path / "w", "goodlib", "1.0", "cp311-none-any", "aarch64", 2),
                  make_binary_wheel(tmp_path / "w", "badlib", "2.0", "cp311-none-any", "x86_64", 2)):
        zipfile.ZipFile(wheel).extractall(site)
    assert wheel_arch.installed("aarch64", [str(site)]) == {
        "badlib-2.0": [("badlib/lib/libbadlib_0.so", "x86_64"), ("badlib/lib/libbadlib_1.so", "x86_64")]}
    assert set(wheel_arch.installed("x86_64", [str(site), str(tmp_path / "not-there")])) == {"goodlib-1.0"}


def test_every_pip_step_of_the_images_checks_the_wheels_before_it_installs():
    matrix = load_matrix()
    stack = matrix.stacks["2.1.0"]
    texts = [runtime_dockerfile(matrix, stack, matrix.os["debian12"]).text, layer_dockerfile(matrix).text]
    for text in texts:
        lines = text.splitlines()
        installs = [i for i, line in enumerate(lines) if " install --no-cache-dir --no-index" in line]
        assert installs
        for i in installs:
            check = lines[i - 1]
            assert "/tmp/wheel_arch.py" in check, lines[i - 2:i + 1]
            assert '"$(uname -m)"' in check or '"${TARGET_MACHINE}"' in check
        # Each RUN that checks mounts the script.
        runs = text.split("\nRUN ")
        assert all("source=wheel_arch.py" in r for r in runs if "/tmp/wheel_arch.py " in r)
