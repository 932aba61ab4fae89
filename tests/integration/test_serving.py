"""The serving kind, built for real: `invoke build --vllm 0.23.0` on the 2.10.0-26.1.0 runtime
image that test_build_train_26.py built and tested in this lane (Debian 13, Python 3.13,
linux/arm64 under qemu, the CANN 9.1.0 doubles, torch from PyPI under the test-only switch).
The runtime is taken by its content tag, never rebuilt; the serving image adds its own three
layers (the serving lock's packages, vLLM's sdist with VLLM_TARGET_DEVICE=empty, the plugin),
passes the serving suite and then the runtime's, and only then is tagged.

What differs from a user's build, and why (docs/unverified.md):
- Python 3.13, not upstream's 3.12: this machine has no 3.12 source; vLLM 0.23.0 and
  vLLM-Ascend 0.23.0 both take 3.13, and the plugin has no cp313 wheel, so it is built from
  its sdist, as it is for every Python upstream has no wheel for.
- --no-kernels: the plugin's custom kernels need CANN's AscendC toolchain, which the CANN
  double does not have; the image says so in its label, and push refuses it unless asked.
- Two of the plugin's pins are test doubles given in --serving-wheelhouse: triton-ascend
  3.2.2 (not on PyPI: upstream takes it from Huawei's index) and arctic-inference 0.1.1 (an
  sdist only on PyPI; the lock takes wheels only). Pure-Python wheels named as doubles
  (tests/doubles/wheel_double.py); nothing in the suite imports them.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ascend_build.matrix import load_matrix
from tests.doubles.wheel_double import make_wheel
from tests.integration.conftest import REPO, ROOT, STACK_26, SWITCHED, build_26_args, image_exists

RELEASE = "0.23.0"


@pytest.fixture(scope="module")
def serving_wheelhouse(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serving-wheels")
    make_wheel(folder, "triton-ascend", "3.2.2")
    make_wheel(folder, "arctic-inference", "0.1.1")
    return folder


@pytest.fixture(scope="module")
def built_serving(engine, built_26, packages_910, matrix_26, cache_26, serving_wheelhouse):
    out = subprocess.run([sys.executable, "-m", "invoke", "build", *build_26_args(packages_910, matrix_26),
                          "--vllm", RELEASE, "--no-kernels", "--serving-wheelhouse", str(serving_wheelhouse)],
                         cwd=ROOT, capture_output=True, text=True,
                         env={**SWITCHED, "ASCEND_BUILD_CACHE": str(cache_26)})
    assert out.returncode == 0, out.stdout[-8000:] + out.stderr[-4000:]
    return out


def _tags(matrix_26) -> tuple[str, str]:
    name = load_matrix(matrix_26).cell(**STACK_26).name
    return f"{REPO}:{name}-arm64", f"{REPO}:{name}-vllm{RELEASE}-arm64"


def _inspect(engine, ref: str, field: str):
    out = subprocess.run(engine.command("image", "inspect", "--format", "{{json " + field + "}}", ref),
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_serving_image_is_built_on_the_suites_runtime_tested_and_tagged(engine, built_serving, matrix_26):
    runtime, serving = _tags(matrix_26)
    said = built_serving.stdout
    # The runtime was taken as the lane built and tested it: reused by its content tag, not rebuilt.
    assert "tested when it was tagged from these same inputs: reused" in said, said[-4000:]
    # Both suites ran on the candidate, the serving suite first, before the tag.
    serving_suite = said.index("tests/serving_image")
    runtime_suite = said.index("tests/image", serving_suite)
    tagged = said.index("tested and tagged", runtime_suite)
    suites = said[serving_suite:tagged]
    assert suites.count(" passed") >= 2 and " failed" not in suites and " error" not in suites.lower(), suites
    assert image_exists(engine, serving)
    labels = _inspect(engine, serving, ".Config.Labels")
    assert labels["io.ascend-build.kind"] == "serving"
    assert labels["io.ascend-build.vllm"] == RELEASE and labels["io.ascend-build.vllm-ascend"] == RELEASE
    assert labels["io.ascend-build.kernels"] == "no"
    assert labels["io.ascend-build.soc-version"] == "ascend910b1"
    # FROM the runtime by its content tag: the one tested image, whatever its readable tag says later
    content = _inspect(engine, runtime, ".Config.Labels")["io.ascend-build.content-tag"]
    assert labels["io.ascend-build.runtime"] == f"{REPO}:{content}-arm64"
    env = _inspect(engine, serving, ".Config.Env")
    assert "SOC_VERSION=ascend910b1" in env and "TASK_QUEUE_ENABLE=1" in env and "OMP_NUM_THREADS=1" in env


def test_the_runtime_layers_are_unchanged_beneath_the_serving_layers(engine, built_serving, matrix_26):
    """`docker history`: the runtime's layers are the serving image's first layers, byte for
    byte (the same digests), and its history is the serving image's oldest history."""
    runtime, serving = _tags(matrix_26)
    below, above = _inspect(engine, runtime, ".RootFS.Layers"), _inspect(engine, serving, ".RootFS.Layers")
    assert len(above) > len(below) and above[:len(below)] == below

    def history(ref: str) -> list[str]:
        out = subprocess.run(engine.command("history", "--no-trunc", "--format", "{{.CreatedBy}}", ref),
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout.splitlines()[::-1]        # oldest first
    old, new = history(runtime), history(serving)
    assert new[:len(old)] == old
    mine = new[len(old):]
    assert any("python3 /tmp/serving_check.py" in step for step in mine), mine
    # A cross-arch build: the build machine's pip installed the lock's packages, then vLLM and
    # the plugin from the wheels built in the image, each copied in as one layer; no pip
    # install ran in the image.
    assert sum(step.startswith("COPY /layer/ / ") for step in mine) == 2, mine
    assert not any(" pip install " in step for step in mine), mine


def test_the_serving_lock_holds_the_runtimes_packages_and_names_the_doubles(built_serving, matrix_26):
    lock = (matrix_26.parent / "locks" / "serving" / f"vllm-ascend-{RELEASE}.lock" /
            "2.10.0-26.1.0-py3.13-aarch64.txt").read_text()
    assert "--require-hashes" in lock.splitlines()
    assert "triton-ascend==3.2.2" in lock and "arctic-inference==0.1.1" in lock
    # held at the runtime's versions, so not installed again in the serving layers
    runtime_lock = (matrix_26.parent / "locks" / "2.10.0-26.1.0" / "py3.13-aarch64" / "torch.txt").read_text()
    assert "torch==2.10.0" in runtime_lock and "\ntorch==" not in "\n" + lock


def test_a_reused_serving_image_is_not_built_again(engine, built_serving, packages_910, matrix_26, cache_26,
                                                     serving_wheelhouse):
    out = subprocess.run([sys.executable, "-m", "invoke", "build", *build_26_args(packages_910, matrix_26),
                          "--vllm", RELEASE, "--no-kernels", "--serving-wheelhouse", str(serving_wheelhouse)],
                         cwd=ROOT, capture_output=True, text=True,
                         env={**SWITCHED, "ASCEND_BUILD_CACHE": str(cache_26), "PATH": os.environ["PATH"]})
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert out.stdout.count("reused") >= 2, out.stdout[-3000:]     # the runtime and the serving image


BREAKS = {
    "none": "true",
    # (a) torch moved by a later step: its installed release is no longer the stack's
    "torch moved": 'sed -i "s/^Version: .*/Version: 2.9.1/" "$sp"/torch-2.10.0*.dist-info/METADATA',
    # (b) the plugin's entry point lost (an install without its metadata)
    "entry point missing": 'rm "$sp"/vllm_ascend-*.dist-info/entry_points.txt',
    # (c) CUDA's triton left in (a wheel double named triton, installed as a resolver would)
    "cuda triton": "pip install --quiet --no-index --no-deps /wheels/triton-3.5.0-py3-none-any.whl",
}
SAID = {
    "none": "",
    "torch moved": "refused: the serving layers moved torch to 2.9.1, not the stack's 2.10.0",
    "entry point missing": "refused: vLLM's platform entry point vllm.platform_plugins:ascend is missing",
    "cuda triton": "refused: CUDA's triton 3.5.0 is in the image",
}


@pytest.mark.parametrize("brk", list(BREAKS))
def test_the_builds_check_refuses_each_break_by_hand_in_the_built_image(engine, built_serving, matrix_26, brk,
                                                                          tmp_path):
    """The check the serving build's last step runs (images/serving_check.py), run in the
    built image with each break made by hand: the image as built passes it, and each break is
    refused with exit 1 (in a build, the step fails: nothing is tested or tagged)."""
    from ascend_build.engine import Mount, RunSpec
    make_wheel(tmp_path / "wheels", "triton", "3.5.0")
    check = ROOT / "ascend_build" / "images" / "serving_check.py"
    script = ('set -e; sp=$(python3 -c "import site; print(site.getsitepackages()[0])"); '
              f'{BREAKS[brk]}; set +e; python3 /check/serving_check.py 2.10.0 2.10.0.post4; echo "exit=$?"')
    out = engine.run_container(RunSpec(_tags(matrix_26)[1], ("bash", "-c", script), platform="linux/arm64", user="0",
                                       mounts=(Mount(str(check.parent), "/check"), Mount(str(tmp_path / "wheels"),
                                                                                         "/wheels"))))
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip().endswith("exit=1" if SAID[brk] else "exit=0"), out.stdout + out.stderr
    assert SAID[brk] in out.stderr
