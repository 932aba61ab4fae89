"""The 26.x train, built for real: one of the 26.1.0 tags users run today, torch 2.10.0 +
torch_npu 2.10.0.post4 (real aarch64 wheels, hash-checked by a lock made here) on CANN 9.1.0
with NNAL (ATB and SiP), linux/arm64, Debian 13 and its Python 3.13. CANN 9.1.0 publishes no
sums: the doubles (toolkit, 910b operator package, NNAL in the 9.x layout: tests/doubles)
are pinned with `invoke pin` first, as a user would on first use, then built with
--require-pins. The lane's 2.10.0 image (test_source_build_trixie) is on the same OS and
Python: this build takes those layers as they are, and makes the CANN 9.1.0, NNAL, torch and
torch_npu ones.
One difference from the shipped stack, on purpose and said: the 26.x stacks take torch
from PyTorch's CPU index (on aarch64 too: PyPI's aarch64 torch is a CUDA build from 2.11),
which CI cannot reach. This module stands PyPI in for it through the named test-only
switch (ASCEND_BUILD_TEST_ONLY_TORCH_FROM_PYPI=1): the lock says so, the CUDA check stands
aside, and the image's labels say it is not one to ship (`invoke push` refuses it:
tests/unit/test_gate.py). Without the switch the same lock is refused before anything
resolves. (Until 2026-11-27 this module built the 2.12.0 line the same way, with PyPI's
CUDA torch: 5.8 GB and most of a lane's time; the 2.12.0 plan stays in the unit tests.)
This image is also where the lane's source build on Debian 13 (test_source_build_trixie.py)
is loaded: its stand-in torch_npu extension, compiled by the builder's gcc 13, imports in the
image's Python 3.13; and where `invoke doctor --image` matches an image to hosts by the drivers
its CANN runs on."""
from __future__ import annotations

import subprocess
import sys

from ascend_build.engine import Mount, RunSpec
from ascend_build.locking.torch_index import TEST_ONLY_SWITCH
from ascend_build.matrix import load_matrix
from tests.integration.conftest import REPO, ROOT, STACK_26, TRIXIE_BUILDER, image_exists

STACK = STACK_26


def invoke(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env)


def test_the_26_1_0_line_with_nnal_passes_its_suite_and_is_tagged(engine, built_26, matrix_26):
    cell = load_matrix(matrix_26).cell(**STACK)
    assert cell.nnal is not None and cell.nnal.file == "Ascend-cann-nnal_9.1.0_linux-aarch64.run"
    assert cell.stack.package == "2.10.0.post4" and cell.cann.version == "9.1.0" and cell.abi == 1
    suite = built_26.stdout.split("tests/image", 1)[1].split("tested and tagged")[0]
    assert " passed" in suite and " failed" not in suite and " error" not in suite.lower()
    assert "no NNAL in this image" not in suite, "the NNAL checks were skipped"
    tag = f"{REPO}:{cell.name}-arm64"
    assert image_exists(engine, tag)
    labels = subprocess.run(engine.command("image", "inspect", "--format", "{{json .Config.Labels}}", tag),
                            capture_output=True, text=True).stdout
    assert '"io.ascend-build.nnal":"9.1.0 cxx_abi_1"' in labels and '"io.ascend-build.torch-npu":"2.10.0.post4"' in labels
    # The stand-in is said where the image is: not one to ship.
    assert f"({TEST_ONLY_SWITCH}): not an image to ship" in labels
    assert '"io.ascend-build.driver":"26.0.RC1"' in labels and '"io.ascend-build.runs-on":"26.0.RC1 25.2' in labels
    env = subprocess.run(engine.command("image", "inspect", "--format", "{{json .Config.Env}}", tag),
                         capture_output=True, text=True).stdout
    assert "ATB_HOME_PATH=/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_1" in env
    assert "ASDSIP_HOME_PATH=/usr/local/Ascend/nnal/asdsip/latest/" in env
    assert "ASCEND_TOOLKIT_HOME=/usr/local/Ascend/cann-9.1.0" in env


def test_the_atb_plugin_finds_libatb_from_the_image_env(engine, built_26, matrix_26):
    """torch_npu's ATB plugin (lib/libop_plugin_atb.so) resolves libatb.so from a plain
    `docker run` (NNAL's double stands in for the real library)."""
    cell = load_matrix(matrix_26).cell(**STACK)
    tag = f"{REPO}:{cell.name}-arm64"
    script = ("p=$(python -c 'import importlib.util as u; print(u.find_spec(\"torch_npu\").submodule_search_locations[0])')"
              "; ldd \"$p/lib/libop_plugin_atb.so\" | grep libatb")
    out = engine.run_container(RunSpec(tag, ("bash", "-c", script), platform="linux/arm64"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "/usr/local/Ascend/nnal/atb/9.1.0/atb/cxx_abi_1/lib/libatb.so" in out.stdout or \
        "/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_1/lib/libatb.so" in out.stdout, out.stdout


def test_the_lock_made_under_the_switch_says_so_and_is_not_taken_without_it(matrix_26):
    lock = (matrix_26.parent / "locks" / "2.10.0-26.1.0" / "py3.13-aarch64" / "torch.txt").read_text()
    assert f"# torch: from the site's index in place of https://download.pytorch.org/whl/cpu ({TEST_ONLY_SWITCH}" in lock
    # Without the switch the same cell's lock is stale: it was made for another torch source.
    out = invoke("build", "--torch", "2.10.0-26.1.0", "--os", "debian13", "--python", "3.13", "--dry", "--matrix",
                 str(matrix_26))
    assert out.returncode == 2 and "is stale" in out.stderr, out.stdout + out.stderr


def test_the_source_built_extension_compiled_by_gcc_13_loads_in_the_image(engine, built_26, matrix_26, trixie_wheel):
    """The wheel test_source_build_trixie.py compiled (the stand-in torch_npu, cp313 aarch64)
    unpacked beside the image's own packages: its extension loads in the image's Python 3.13
    and reports the builder's gcc 13 as its compiler."""
    wheel, _ = trixie_wheel
    tag = f"{REPO}:{load_matrix(matrix_26).cell(**STACK).name}-arm64"
    gcc = engine.run_container(RunSpec(TRIXIE_BUILDER, ("bash", "-c", "$CC -dumpfullversion"), platform="linux/arm64"))
    assert gcc.returncode == 0, gcc.stderr
    script = (f"python -m zipfile -e /wheel/{wheel.name} /tmp/standin && cd /tmp && PYTHONPATH=/tmp/standin "
              "python -c 'import torch_npu._standin as t; print(t.__file__); print(t.compiler())'")
    got = engine.run_container(RunSpec(tag, ("bash", "-c", script), platform="linux/arm64", user="0",
                                       mounts=(Mount(str(wheel.parent), "/wheel"),)))
    assert got.returncode == 0, got.stdout + got.stderr
    where, compiler = got.stdout.strip().splitlines()[-2:]
    assert where.startswith("/tmp/standin/torch_npu/"), where
    assert gcc.stdout.strip().startswith("13.")
    assert compiler.split()[0] == gcc.stdout.strip()


def test_doctor_reads_the_built_image_and_matches_it_to_a_host(engine, built_26, matrix_26, tmp_path):
    """`invoke doctor --image` on the image built above: CANN 9.1.0's image carries the drivers
    its release notes say it runs on; a host on 24.1.0 is refused and told which line would
    run; 25.5.0 (in the 25.5 series) can."""
    from tests.doubles.host_roots import make_host
    tag = f"{REPO}:{load_matrix(matrix_26).cell(**STACK).name}-arm64"
    task = [sys.executable, "-m", "invoke", "doctor", "--image", tag, "--user", "alice", "--root"]
    old = subprocess.run(task + [str(make_host(tmp_path / "old", driver="24.1.0"))], cwd=ROOT,
                         capture_output=True, text=True)
    assert old.returncode == 1, old.stdout + old.stderr
    assert "CANN 9.1.0's release notes list the drivers it runs on, and 24.1.0 is not one of them" in old.stdout
    assert "or use the 2.4.0 on CANN 8.0.0 image" in old.stdout
    new = subprocess.run(task + [str(make_host(tmp_path / "new", driver="25.5.0"))], cwd=ROOT,
                         capture_output=True, text=True)
    assert new.returncode == 0, new.stdout + new.stderr
    assert "CANN 9.1.0 runs on 25.5.0 (its release notes:" in new.stdout
