"""Where torch comes from (ascend_build/locking/torch_index.py): only the index the stack
names (or the site's mirror of it), tried in seconds before anything resolves; torch's
hashes from that index alone; CUDA packages refused in a lock; the test-only switch said."""
from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from ascend_build.engine.network import Network
from ascend_build.errors import NetworkError, UserError
from ascend_build.locking import resolve, torch_index
from ascend_build.matrix import load_matrix
from tests import forked
from tests.conftest import copy_matrix

ROOT = Path(__file__).resolve().parents[2]
MATRIX = load_matrix(ROOT / "matrix.yaml")
CPU = "https://download.pytorch.org/whl/cpu"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_stack_naming_an_index_takes_torch_from_it_or_the_sites_mirror_only():
    st = MATRIX.stacks["2.12.0"]
    assert torch_index.source(st, "aarch64", environ={}) == torch_index.TorchSource(CPU, CPU)
    mirrored = torch_index.source(st, "aarch64", "https://mirror.example/cpu", environ={})
    assert mirrored.index == "https://mirror.example/cpu" and mirrored.mirrored
    # 2.1.0 names the CPU index for x86_64 only: aarch64 torch is PyPI's CPU build.
    assert torch_index.source(MATRIX.stacks["2.1.0"], "aarch64", environ={}).index is None
    switched = torch_index.source(st, "aarch64", environ={torch_index.TEST_ONLY_SWITCH: "1"})
    assert switched.index is None and switched.test_only and torch_index.TEST_ONLY_SWITCH in switched.describe()


def test_an_index_that_does_not_answer_is_refused_naming_it_and_the_mirror_option():
    url = f"http://127.0.0.1:{closed_port()}/whl/cpu"
    with pytest.raises(UserError) as info:
        torch_index.reach(torch_index.TorchSource(url, CPU), Network())
    assert f"the torch index {url}/torch/ does not answer" in str(info.value)
    assert "--torch-index-url" in str(info.value) and "no fallback" in str(info.value)


def test_an_index_that_answers_with_an_error_is_bad_input_and_one_that_does_not_is_the_network():
    """Exit 8 is for silence (a closed port, a timeout); a 404 is an answer: the URL given is
    not an index of torch, exit 2."""
    import http.server

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_error(404)

        def log_message(self, *args):
            pass
    server = http.server.HTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(UserError) as info:
            torch_index.reach(torch_index.TorchSource(f"http://127.0.0.1:{server.server_port}/cpu", CPU), Network())
        assert "HTTP 404" in str(info.value) and info.value.exit_code == 2
    finally:
        server.shutdown()
    with pytest.raises(NetworkError) as silent:
        torch_index.reach(torch_index.TorchSource(f"http://127.0.0.1:{closed_port()}/cpu", CPU), Network())
    assert silent.value.exit_code == 8


def test_an_index_that_accepts_but_never_answers_is_given_up_on():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    held = []
    threading.Thread(target=lambda: held.append(server.accept()), daemon=True).start()
    try:
        src = torch_index.TorchSource(f"http://127.0.0.1:{server.getsockname()[1]}/cpu", CPU)
        with pytest.raises(UserError, match=r"does not answer \(.*within 1 s\)"):
            torch_index.reach(src, Network(), timeout=1.0)
    finally:
        server.close()


def test_a_mirror_with_credentials_or_no_scheme_is_refused():
    torch_index.check_mirror("https://mirror.example/pytorch/whl/cpu")
    with pytest.raises(UserError, match="carries credentials"):
        torch_index.check_mirror("https://user:secret@mirror.example/cpu")
    with pytest.raises(UserError, match="expected an http"):
        torch_index.check_mirror("mirror.example/cpu")


def test_cuda_packages_are_named_and_refused_unless_the_test_switch_stands_pypi_in():
    found = torch_index.cuda_packages([("torch", "2.12.0"), ("nvidia-cublas", "13.0.0"), ("cuda-bindings", "13.0"),
                                       ("numpy", "2.3.0"), ("torchvision", "0.27.0+cu130")])
    assert found == ["cuda-bindings==13.0", "nvidia-cublas==13.0.0", "torchvision==0.27.0+cu130"]
    with pytest.raises(UserError, match=r"would hold CUDA packages \(cuda-bindings==13.0, nvidia-cublas"):
        torch_index.refuse_cuda(found, "the lock", torch_index.TorchSource(CPU, CPU))
    torch_index.refuse_cuda(found, "the lock", torch_index.TorchSource(None, CPU, test_only=True))


UV_CUDA = """\
numpy==2.3.0  # via -r cann.in
torch==2.12.0  # via -r torch.in
nvidia-cublas==13.0.0  # via torch
"""


class TwoIndexes:
    """PyPI with a CUDA torch, the CPU index with another build of the same release."""
    def __init__(self):
        self.asked = []

    def files(self, project, only=None):
        self.asked.append((project, only))
        tag = "cp311-cp311-manylinux_2_28_aarch64"
        if only == CPU:
            return [(f"torch-2.12.0+cpu-{tag}.whl", "c" * 64)] if project == "torch" else []
        return [(f"{project.replace('-', '_')}-{v}-{tag}.whl", "p" * 64) for v in ("2.3.0", "2.12.0", "13.0.0")]


def test_a_lock_with_cuda_packages_is_refused_before_anything_is_written(monkeypatch):
    monkeypatch.setattr(resolve, "compile_cell", lambda *a: resolve.parse_compiled(UV_CUDA))
    monkeypatch.delenv(torch_index.TEST_ONLY_SWITCH, raising=False)
    with pytest.raises(UserError, match=r"nvidia-cublas==13.0.0.*torch must come from " + CPU):
        resolve.make(MATRIX, MATRIX.stacks["2.12.0"], "3.11", "aarch64", Network(), TwoIndexes())


def test_torchs_hashes_come_from_its_index_alone(monkeypatch):
    monkeypatch.setattr(resolve, "compile_cell", lambda *a: resolve.parse_compiled(UV_CUDA.replace(
        "nvidia-cublas==13.0.0  # via torch\n", "").replace("torch==2.12.0", "torch==2.12.0+cpu")))
    monkeypatch.setattr(resolve, "uv_version", lambda: "uv 0.0 (double)")
    monkeypatch.delenv(torch_index.TEST_ONLY_SWITCH, raising=False)
    index = TwoIndexes()
    files = resolve.make(MATRIX, MATRIX.stacks["2.12.0"], "3.11", "aarch64", Network(), index)
    assert "--hash=sha256:" + "c" * 64 in files["torch"] and "p" * 64 not in files["torch"]
    assert ("torch", CPU) in index.asked and ("numpy", None) in index.asked
    assert f"# torch: only from {CPU}" in files["torch"]


def test_invoke_lock_with_the_torch_index_unreachable_fails_in_seconds_and_locks_nothing(tmp_path):
    """`invoke lock --torch 2.12.0` where the CPU index (here a site mirror on a closed port)
    does not answer: exit 8 (the network) naming it, before uv runs, and no lock is written."""
    matrix = copy_matrix(tmp_path)
    url = f"http://127.0.0.1:{closed_port()}/whl/cpu"
    out = forked.invoke("lock", "--torch", "2.12.0", "--python", "3.11", "--matrix", str(matrix),
                        "--torch-index-url", url,
                        env={k: v for k, v in os.environ.items() if k != torch_index.TEST_ONLY_SWITCH})
    assert out.returncode == 8, out.stdout + out.stderr
    assert f"the torch index {url}/torch/ does not answer" in out.stderr and "--torch-index-url" in out.stderr
    assert not (tmp_path / "locks").exists()


def test_the_staged_torch_layers_name_the_index_and_the_image_refuses_cuda():
    """The torch layers' requirement files carry the index; every pip step of the rendered
    Dockerfiles checks the venv for CUDA packages, which only the test switch's build
    argument lets pass."""
    from ascend_build.locking import lock as locks
    cell = MATRIX.cell("2.12.0", "ubuntu22.04")
    staged = locks.with_torch_index(locks.unlocked(MATRIX, cell), torch_index.source(cell.stack, cell.arch, environ={}))
    assert staged["torch"].startswith(f"--extra-index-url {CPU}\n") and not staged["cann"].startswith("--extra")
    text = (ROOT / "images/runtime/2.12.0/ubuntu22.04/Dockerfile").read_text()
    pip_steps = [s for s in text.split("\nRUN ")[1:] if " download --no-cache-dir" in s]
    assert pip_steps and all("refused: CUDA packages in an NPU image" in s for s in pip_steps)
    assert text.count("ARG ALLOW_CUDA_TEST_ONLY") == len(pip_steps)


@pytest.mark.parametrize("value, on", [("1", True), (" 1 ", True), ("0", False), ("", False), ("true", False),
                                       ("yes", False), ("2", False)])
def test_the_test_only_switch_is_on_only_for_1(value, on):
    """ASCEND_BUILD_TEST_ONLY_TORCH_FROM_PYPI=0 (or any value but 1) must not make a
    test-only image; `invoke push` and `join` refuse one that is (tests/unit/test_gate.py)."""
    from ascend_build.locking.torch_index import TEST_ONLY_SWITCH, test_only
    assert test_only({TEST_ONLY_SWITCH: value}) is on
    assert test_only({}) is False
