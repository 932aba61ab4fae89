"""The 26.x train, built for real: torch 2.12.0 + torch_npu 2.12.0.post3 (real aarch64
wheels from PyPI, hash-checked by a lock made here) on CANN 9.1.0 with NNAL, linux/arm64,
Debian 13 and its Python 3.13 (glibc 2.41: above NNAL's floor). CANN 9.1.0 publishes no
sums: the doubles (toolkit, 910b operator package, NNAL in the 9.x layout: tests/doubles)
are pinned with `invoke pin` first, as a user would on first use, then built with
--require-pins.

One difference from the shipped stack, on purpose: matrix.yaml takes torch from
PyTorch's CPU index on both arches (Ascend's README; PyPI's aarch64 torch is a
CUDA build from 2.11). That index is not reachable from every CI machine, so this module's matrix
copy takes aarch64 torch from PyPI: the real 2.12.0 wheel with its CUDA libraries, which
import on a machine without GPUs as they do on a 910B host."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from ascend_build.matrix import load_matrix
from tests.doubles.cann_double import make_run
from tests.integration.conftest import CA, REPO, ROOT, TRIXIE, image_exists

STACK = dict(stack="2.12.0", os="debian13", python="3.13", platform="linux/arm64")


def invoke(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env)


@pytest.fixture(scope="module")
def packages_910(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cann-910")
    for kind in ("toolkit", "kernels", "nnal"):
        make_run(folder, kind, "9.1.0", "aarch64", chip="910b")
    return folder


@pytest.fixture(scope="module")
def matrix_26(tmp_path_factory, packages_910):
    """A matrix copy: 2.12.0's aarch64 torch from PyPI (see above), the doubles pinned by
    `invoke pin`, and a lock made by `invoke lock` beside it (its own locks/ folder)."""
    path = tmp_path_factory.mktemp("matrix-26") / "matrix.yaml"
    text = (ROOT / "matrix.yaml").read_text()
    block = re.search(r'^  "2\.12\.0":.*?(?=^  "|^\S)', text, re.M | re.S)
    assert block and "torch_index: {aarch64: " in block.group(0)
    entry = re.sub(r"torch_index: \{aarch64: [^,]+, x86_64: ([^}]+)\}",
                   "torch_index: {x86_64: https://download.pytorch.org/whl/cpu}", block.group(0))
    path.write_text(text[:block.start()] + entry + text[block.end():])
    pinned = invoke("pin", "--packages", str(packages_910), "--matrix", str(path))
    assert pinned.returncode == 0 and pinned.stdout.count("pinned ") == 3, pinned.stdout + pinned.stderr
    locked = invoke("lock", "--torch", "2.12.0", "--python", "3.13", "--platform", "linux/arm64", "--matrix", str(path),
                    *(["--ca-bundle", str(CA)] if CA.exists() else []))
    assert locked.returncode == 0, locked.stdout[-3000:] + locked.stderr[-3000:]
    return path


@pytest.fixture(scope="module")
def built_2120(engine, trixie_arm64_base, packages_910, matrix_26, tmp_path_factory):
    # The default build network, as test_build_current_line's 2.10.0 build before it in this
    # lane: the network is part of BuildKit's cache key, and on the same one this build takes
    # that build's Debian 13 OS layers (5 minutes of apt under qemu) instead of making them.
    cache = tmp_path_factory.mktemp("cache-910")
    out = invoke("build", "--torch", "2.12.0", "--os", "debian13", "--python", "3.13", "--platform", "linux/arm64",
                 "--packages", str(packages_910), "--offline", "--require-pins",
                 "--base-image", f"debian:trixie={TRIXIE}", "--repository", REPO, "--matrix", str(matrix_26),
                 *(["--ca-bundle", str(CA)] if CA.exists() else []),
                 env={**os.environ, "ASCEND_BUILD_CACHE": str(cache)})
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    return out


def test_the_2_12_line_with_nnal_passes_its_suite_and_is_tagged(engine, built_2120, matrix_26):
    cell = load_matrix(matrix_26).cell(**STACK)
    assert cell.nnal is not None and cell.nnal.file == "Ascend-cann-nnal_9.1.0_linux-aarch64.run"
    assert cell.pairing == "compatible" and cell.abi == 1
    suite = built_2120.stdout.split("tests/image", 1)[1].split("tested and tagged")[0]
    assert " passed" in suite and " failed" not in suite and " error" not in suite.lower()
    assert "no NNAL in this image" not in suite, "the NNAL checks were skipped"
    tag = f"{REPO}:{cell.name}-arm64"
    assert image_exists(engine, tag)
    labels = subprocess.run(engine.command("image", "inspect", "--format", "{{json .Config.Labels}}", tag),
                            capture_output=True, text=True).stdout
    assert '"io.ascend-build.nnal":"9.1.0 cxx_abi_1"' in labels and '"io.ascend-build.pairing":"compatible"' in labels
    assert '"io.ascend-build.driver":"26.0.RC1"' in labels and '"io.ascend-build.runs-on":"26.0.RC1 25.2' in labels
    env = subprocess.run(engine.command("image", "inspect", "--format", "{{json .Config.Env}}", tag),
                         capture_output=True, text=True).stdout
    assert "ATB_HOME_PATH=/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_1" in env
    assert "ASCEND_TOOLKIT_HOME=/usr/local/Ascend/cann-9.1.0" in env


def test_the_atb_plugin_finds_libatb_from_the_image_env(engine, built_2120, matrix_26):
    """torch_npu's ATB plugin (lib/libop_plugin_atb.so) resolves libatb.so from a plain
    `docker run` (NNAL's double stands in for the real library)."""
    cell = load_matrix(matrix_26).cell(**STACK)
    tag = f"{REPO}:{cell.name}-arm64"
    script = ("p=$(python -c 'import importlib.util as u; print(u.find_spec(\"torch_npu\").submodule_search_locations[0])')"
              "; ldd \"$p/lib/libop_plugin_atb.so\" | grep libatb")
    out = subprocess.run(engine.command("run", "--rm", "--platform", "linux/arm64", tag, "bash", "-c", script),
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "/usr/local/Ascend/nnal/atb/9.1.0/atb/cxx_abi_1/lib/libatb.so" in out.stdout or \
        "/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_1/lib/libatb.so" in out.stdout, out.stdout


def test_an_os_below_nnals_glibc_floor_is_refused_before_anything_runs(matrix_26):
    out = invoke("build", "--torch", "2.12.0", "--os", "ubuntu22.04", "--dry", "--matrix", str(matrix_26))
    assert out.returncode != 0
    assert "CANN 9.1.0's NNAL needs glibc 2.38 or newer (torch_atb); ubuntu22.04 has glibc 2.35" in out.stderr
    assert "debian13 (2.41)" in out.stderr and "stacks.2.12.0.nnal: false" in out.stderr
    assert "docker build" not in out.stdout
