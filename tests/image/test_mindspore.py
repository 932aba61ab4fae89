"""The image suite's MindSpore checks (a torch image skips them, as a MindSpore image skips
the torch ones in test_runtime.py; the CANN checks there run on both). Expectations come
from matrix.yaml via the `mindspore_cell` fixture."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

from ascend_build.images.checks import missing_libraries
from tests.image.conftest import run_on_npu
from tests.image.test_runtime import _installed, pyjson

# 2x2 matrix product on MindSpore's CPU backend: [[1, 2], [3, 4]] @ [[1, 2], [3, 4]].
CPU_PRODUCT = ("import json, numpy as np, mindspore as ms; ms.set_device('CPU'); "
               "x = ms.Tensor(np.array([[1, 2], [3, 4]], np.float32)); "
               "print(json.dumps({'version': ms.__version__, 'product': ms.ops.matmul(x, x).asnumpy().tolist()}))")


def test_mindspore_is_the_matrix_release(distributions, mindspore_cell):
    assert _installed(distributions)["mindspore"] == mindspore_cell.stack.release


def test_a_plain_docker_run_imports_mindspore_and_computes_on_the_cpu(docker_run, mindspore_cell):
    """No login shell, no profile: `import mindspore` and a small product on the CPU backend,
    with the image ENV alone (CANN's paths are on it; no NPU is needed for the CPU)."""
    result = docker_run("python", "-c", CPU_PRODUCT)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["version"] == mindspore_cell.stack.release
    assert found["product"] == [[7.0, 10.0], [15.0, 22.0]]


def test_the_ascend_backends_libraries_resolve(host, mindspore_cell):
    """Every library MindSpore's Ascend backend (lib/plugin/libmindspore_ascend.so and
    lib/plugin/ascend/*.so) needs resolves from the image ENV, except the host driver's and
    those of optional CANN packages the image does not have (NNAL's libatb.so, for the ATB
    kernels, where the stack has no NNAL)."""
    root = pyjson(host, "import json, importlib.util as u; "
                        "print(json.dumps(u.find_spec('mindspore').submodule_search_locations[0]))")
    files = host.run(f"find {shlex.quote(root)}/lib/plugin -maxdepth 2 -name '*.so*' -type f").stdout.split()
    backend = [f for f in files if "/plugin/ascend/" in f or Path(f).name.startswith("libmindspore_ascend.so")]
    assert any(Path(f).name.startswith("libmindspore_ascend.so") for f in backend), files
    # MindSpore's own libraries are loaded in-process before the plugins (its Python
    # extensions, lib/ and lib/plugin/); CANN's must come from the image ENV alone.
    own = ":".join([root] + [f"{root}/{d}" for d in ("lib", "lib/plugin", "lib/plugin/ascend")])
    ldd = {f: host.run(f"LD_LIBRARY_PATH={shlex.quote(own)}:$LD_LIBRARY_PATH ldd {shlex.quote(f)}").stdout
           for f in backend}
    assert all("=>" in text for text in ldd.values()), "ldd read none of the backend's libraries"
    assert missing_libraries(ldd, frozenset({"Ascend-cann-nnal"}) if mindspore_cell.nnal else frozenset()) == {}


def test_msrun_is_on_the_path_of_a_plain_docker_run(docker_run, mindspore_cell):
    """MindSpore's launcher, for multi-card jobs: on PATH, from the image's venv."""
    result = docker_run("sh", "-c", "command -v msrun && head -1 \"$(command -v msrun)\"")
    assert result.returncode == 0, result.stderr
    where, shebang = result.stdout.split()[:2]
    assert where == "/opt/venv/bin/msrun" and shebang == "#!/opt/venv/bin/python3", result.stdout


def test_run_check_on_an_npu(suite_engine, image, mindspore_cell):
    """MindSpore's own check (`mindspore.run_check()` on Ascend), on a host with NPUs;
    skipped (with the reason) elsewhere. Started the way `invoke run` starts containers."""
    result = run_on_npu(suite_engine, image, "import mindspore as ms; ms.set_device('Ascend'); ms.run_check()",
                        "MindSpore's run_check on Ascend")
    assert result.returncode == 0 and "MindSpore" in result.stdout + result.stderr, result.stderr


def test_msrun_takes_every_option_the_launchers_pass(docker_run, mindspore_cell):
    """`invoke run`/`invoke job` start msrun with these options (cluster/launch.py, and the
    same in the Kubernetes launch script): the image's own msrun must know each of them."""
    from ascend_build.cluster.launch import Launch
    argv = Launch(("train.py",), ("node-a", "node-b"), 8, rank_table=Path("hccl.json"),
                  framework=mindspore_cell.stack.framework).argv(1)
    assert argv[0] == "msrun"
    options = {a.split("=", 1)[0] for a in argv if a.startswith("--")}
    assert {"--worker_num", "--rank_table_file", "--join", "--cluster_time_out"} <= options
    result = docker_run("msrun", "--help")
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(o for o in options if o not in result.stdout) == [], result.stdout[-3000:]
