"""A 310B board's image, built for real: the 2.1.0 line's CANN 8.0.0 variant (real torch
2.1.0 and torch_npu 2.1.0.post10 aarch64 wheels from PyPI) with the 310b kernels,
linux/arm64, Debian 12 (the bookworm base, so the OS and Python layers are the 2.1.0 image's own).
The CANN installers are the test doubles of 8.0.0's toolkit and 310b kernels; the 310b
file is hand-recorded in matrix.yaml (cann_chips:) with no published sum, so it is pinned
with `invoke pin` first, as on first use, and built with --require-pins. It runs as the
board's HwHiAiUser (`--run-as 1000:1000`, uid and gid of the driver's user, as boards set
it up): the image suite runs as that user (its test of the user included), the image is
tagged under its own name and its label says who it runs as. Then doctor and run on a
stand-in board (tests/doubles/host_roots.make_board) and a stand-in server.

The build is first interrupted (Ctrl-C to the whole process group of a task started with
SIGINT ignored, as a script's background job is: the race CI once lost) once the torch
step starts: exit 130, "interrupted", no tag, no staged context. Its rerun is the board's
image: it completes, and takes the steps finished before the interrupt from the cache.
The other orders of the signal (to the task only, to the engine client only) are proven
with a client double in tests/unit/test_interrupts.py, and an interrupt at every step of
the gate against the engine double in tests/unit/test_gate.py."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ascend_build.matrix import load_matrix
from tests.conftest import copy_matrix, link_locks
from tests.doubles.cann_double import make_run
from tests.doubles.host_roots import make_board, make_host
from tests.integration.conftest import BOOKWORM, CA, REPO, ROOT, image_exists

STACK = dict(stack="2.1.0-cann8.0.0", os="debian12", python="3.11", chip="310b", platform="linux/arm64")
RUN_AS = "1000:1000"


@pytest.fixture(scope="module")
def board_packages(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("cann-800-310b")
    make_run(folder, "toolkit", "8.0.0", "aarch64")
    # Random filler makes this kernels file (and every step from it on) new on every run, so
    # the build has real work to interrupt even where the layer cache has seen it before.
    make_run(folder, "kernels", "8.0.0", "aarch64", chip="310b", pad_bytes=4096)
    return folder


@pytest.fixture(scope="module")
def matrix_310b(tmp_path_factory, board_packages) -> Path:
    """The committed matrix with the 310b kernels (a hand-recorded entry) and the 8.0.0
    toolkit pinned by `invoke pin`."""
    path = copy_matrix(tmp_path_factory.mktemp("matrix-310b"))
    link_locks(path)
    out = subprocess.run([sys.executable, "-m", "invoke", "pin", "--matrix", str(path), "--packages",
                          str(board_packages)], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("pinned ") == 2, out.stdout
    return path


def _ignore_sigint():
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture(scope="module")
def interrupted_then_built(engine, arm64_base, board_packages, matrix_310b, tmp_path_factory):
    """The board image's build interrupted at its torch step, then run again to the end:
    (the interrupted run's exit code and output, the images its repository had after it,
    the rerun)."""
    cmd = [sys.executable, "-m", "invoke", "build", "--torch", "2.1.0-cann8.0.0", "--chip", "310b", "--os", "debian12",
           "--python", "3.11", "--platform", "linux/arm64", "--packages", str(board_packages), "--offline",
           "--require-pins", "--base-image", f"debian:bookworm={BOOKWORM}", "--repository", REPO,
           "--matrix", str(matrix_310b), "--network", "host", "--run-as", RUN_AS] \
        + (["--ca-bundle", str(CA)] if CA.exists() else [])
    env = {**os.environ, "ASCEND_BUILD_CACHE": str(tmp_path_factory.mktemp("cache-310b"))}
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True, preexec_fn=_ignore_sigint)
    seen = []
    assert proc.stdout is not None
    for line in proc.stdout:
        seen.append(line)
        # The torch layer starting in the image (a COPY from the build machine's stage on
        # the fast path, a pip step otherwise): the kernels step is done, nothing is tagged.
        if re.match(r"#\d+ \[torch-pip-(native|target) ", line):
            os.killpg(proc.pid, signal.SIGINT)      # a terminal's Ctrl-C: the whole group
            break
    else:
        pytest.fail("the build ended before reaching the torch step:\n" + "".join(seen[-40:]))
    rest = proc.stdout.read()
    code = proc.wait(timeout=300)
    left = engine.images(REPO)
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    assert again.returncode == 0, again.stdout[-6000:] + again.stderr[-3000:]
    return code, "".join(seen) + rest, left, again


@pytest.fixture(scope="module")
def built_310b(interrupted_then_built):
    return interrupted_then_built[3]


def test_an_interrupted_build_tags_nothing_and_its_rerun_takes_the_finished_steps(interrupted_then_built,
                                                                                  matrix_310b):
    code, out, left, again = interrupted_then_built
    assert code == 130, out[-3000:]
    assert "interrupted: nothing was tagged" in out and "error:" not in out, out[-3000:]
    name = _tag(matrix_310b).split(":")[1].removesuffix("-arm64")
    assert not [ref for ref in left if name in ref], "nothing of the interrupted build was tagged"
    kernels_step = [row for row in again.stdout.splitlines() if "cann/kernels" in row and row.startswith("#")]
    step_ids = {row.split()[0] for row in kernels_step}
    assert any(f"{sid} CACHED" in again.stdout for sid in step_ids), "the kernels step was redone"
    assert "tested and tagged" in again.stdout
    # Only this cell's folder: the other lane may be staging a context of its own now.
    assert not any((ROOT / ".build").glob("*-310b-*/context")), "the staged context was left behind"


def _tag(matrix: Path) -> str:
    return f"{REPO}:{load_matrix(matrix).cell(**STACK).name}-uid1000-arm64"


def test_the_310b_image_is_built_with_the_pinned_hand_recorded_kernels_and_passes_its_suite(
        engine, built_310b, matrix_310b):
    m = load_matrix(matrix_310b)
    cell = m.cell(**STACK)
    assert cell.kernels.key[0] == "cann_chips" and cell.kernels.sha256, "pinned in its hand-recorded entry"
    suite = built_310b.stdout.split("tests/image", 1)[1].split("tested and tagged")[0]
    assert " passed" in suite and " failed" not in suite and " error" not in suite.lower()
    assert "test_the_chips_operator_tree_is_installed PASSED" in suite
    assert "test_containers_run_as_the_images_user PASSED" in suite
    tag = _tag(matrix_310b)
    assert image_exists(engine, tag)
    labels = subprocess.run(engine.command("image", "inspect", "--format", "{{json .Config.Labels}}", tag),
                            capture_output=True, text=True).stdout
    assert '"io.ascend-build.chip":"310b"' in labels and '"io.ascend-build.cann":"8.0.0"' in labels
    found = subprocess.run(engine.command("image", "inspect", "--format", '{{.Config.User}} {{index .Config.Labels '
                                          '"io.ascend-build.user"}}', tag), capture_output=True, text=True)
    assert found.stdout.split() == [RUN_AS, RUN_AS], found.stdout + found.stderr


def test_doctor_and_run_take_it_to_a_board_and_refuse_it_on_a_server(engine, built_310b, matrix_310b, tmp_path):
    tag = _tag(matrix_310b)
    board = make_board(tmp_path / "board", driver="24.1.0")
    doctor = [sys.executable, "-m", "invoke", "doctor", "--image", tag, "--user", "HwHiAiUser", "--root"]
    ok = subprocess.run(doctor + [str(board)], cwd=ROOT, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "310B board: 1 card" in ok.stdout
    assert f"runs as {RUN_AS}, in the host's HwHiAiUser group" in ok.stdout
    server = make_host(tmp_path / "server", driver="24.1.0", members=("HwHiAiUser",))
    refused = subprocess.run(doctor + [str(server)], cwd=ROOT, capture_output=True, text=True)
    assert refused.returncode == 1 and "image 310b, host 910b" in refused.stdout, refused.stdout
    run = subprocess.run([sys.executable, "-m", "invoke", "run", "--image", tag, "--host-root", str(board), "--dry",
                          "--runtime", "runc", "--", "python", "-c", "1"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    for device in ("/dev/davinci0", "/dev/svm0", "/dev/ts_aisle", "/dev/vdec", "/dev/dvpp_cmdlist"):
        assert f"--device {device}" in run.stdout, run.stdout
    assert "/dev/devmm_svm" not in run.stdout
