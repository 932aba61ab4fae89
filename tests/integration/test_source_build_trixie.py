"""Source builds on the new toolchain, and the line users run today (issue: the lines users
run today): the offline Debian 13 builder (gcc 13 as the 26.x wheels are built, Python 3.13)
of the torch 2.10.0 line is built and tested, the stand-in torch_npu tree (tests/doubles) is
compiled in it against the real torch 2.10.0, and a linux/arm64 runtime image of the 2.10.0
stack on Debian 13 installs that wheel: inside the image the extension reports that gcc 13
from the builder compiled it. The runtime's CANN is the 9.0.0 test double of the 9.x era
(operator package, cann-9.0.0 tree, cann/set_env.sh), handed in the form Huawei publishes it:
.zip files, checked against the sums in a matrix copy where the doubles' sums stand in for
Huawei's; the image passes its suite, carries the 9.0.0 layout and driver labels, and
`invoke doctor --image` matches it to hosts by the drivers CANN 9.0.0 runs on.

(Until 2026-11-27 test_build_current_line.py built the same cell with PyPI's torch_npu
2.10.0 as a second image; its checks are here, on this image. The line's PyPI wheel is built
in test_build_train_26.py: torch_npu 2.10.0.post4 on CANN 9.1.0.)"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.doubles import standin_repos as sr
from tests.integration.conftest import CA, REPO, TRIXIE, image_exists
from tests.integration.conftest import invoke_cached as invoke

BUILDER_REPO = "ascend-build-test/builder"
BUILDER = f"{BUILDER_REPO}:torch2.10.0-debian13-gcc13-py3.13-cross-arm64"   # trixie's gcc-13 cross compiler
COMMON = ["--torch", "2.10.0", "--python", "3.13", "--platform", "linux/arm64",
          "--base-image", f"debian:trixie={TRIXIE}"] + (["--ca-bundle", str(CA)] if CA.exists() else [])


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ascend-cache-trixie")


@pytest.fixture(scope="module")
def src(tmp_path_factory) -> Path:
    """The stand-in torch_npu tree, versioned for the 2.10.0 line (its tag's submodules:
    op-plugin and nlohmann)."""
    return sr.plain_tree(tmp_path_factory.mktemp("standin-2100") / "torch_npu_src", version="2.10.0", nlohmann=True)


@pytest.fixture(scope="module")
def builder(engine, trixie_arm64_base, cache):
    out = invoke(cache, "builder", "--repository", BUILDER_REPO, "--flavor", "debian13", "--retest", *COMMON)
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def torch_npu_wheel(builder, cache, src) -> Path:
    out = invoke(cache, "torch-npu", "--repository", BUILDER_REPO, "--flavor", "debian13", "--src", str(src), *COMMON)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    wheel = Path(out.stdout.strip().splitlines()[-1])
    assert wheel.is_file() and wheel.name.startswith("torch_npu-2.10.0-cp313-cp313-linux_aarch64"), wheel
    assert "runs as x86_64, no qemu, makes aarch64-linux-gnu code" in out.stdout
    return wheel


def test_the_trixie_builder_was_tested_then_tagged(engine, builder):
    # built and tested now, or (an engine that kept it) tested again now: its suite ran in this run
    assert "tests/builder_image" in builder.stdout and " passed" in builder.stdout
    assert "tested and tagged" in builder.stdout or "--retest: running its suite again" in builder.stdout
    assert " failed" not in builder.stdout
    assert image_exists(engine, BUILDER)


def test_the_wheel_was_built_against_torch_2_10_with_gcc_13(torch_npu_wheel):
    meta = (torch_npu_wheel.parent / "meta.json").read_text()
    assert '"python": "3.13"' in meta and '"gcc": 13' in meta and '"torch": "2.10.0"' in meta


@pytest.fixture(scope="module")
def runtime(engine, torch_npu_wheel, zipped_packages, matrix_900, cache, src):
    out = invoke(cache, "build", "--builder-repository", BUILDER_REPO, "--os", "debian13", "--builder-flavor", "debian13", "--torch-npu-src", str(src),
                 "--packages", str(zipped_packages), "--offline", "--require-pins", "--repository", REPO,
                 "--matrix", str(matrix_900), *COMMON)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    tag = f"{REPO}:cann9.0.0-910b-debian13-py3.13-torch2.10.0-arm64"
    assert image_exists(engine, tag)
    return out, tag


def test_the_runtime_took_the_source_built_wheel_and_passed_its_suite(runtime):
    out, _ = runtime
    assert "reusing" in out.stdout, "torch_npu came from the wheel cache"
    suite = out.stdout.split("tests/image", 1)[1].split("tested and tagged")[0]
    assert " passed" in suite and " failed" not in suite and " error" not in suite.lower()


def test_the_extension_in_the_image_was_compiled_by_the_builders_gcc_13(engine, runtime):
    _, tag = runtime
    gcc = subprocess.run(engine.command("run", "--rm", "--platform", "linux/arm64", BUILDER, "bash", "-c",
                                        "$CC -dumpfullversion"), capture_output=True, text=True)
    assert gcc.returncode == 0, gcc.stderr
    got = subprocess.run(engine.command("run", "--rm", "--platform", "linux/arm64", tag, "python", "-c",
                                        "import torch_npu._standin as t; print(t.compiler())"),
                         capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    assert gcc.stdout.strip().startswith("13.")
    assert got.stdout.split()[0] == gcc.stdout.strip()


def test_the_2_10_line_on_cann_9_builds_from_the_published_zips_and_passes_its_suite(engine, runtime, matrix_900,
                                                                                       cache):
    from ascend_build.matrix import load_matrix
    out, tag = runtime
    cell = load_matrix(matrix_900).cell("2.10.0", "debian13", "3.13", None, "linux/arm64")
    assert cell.cann.era.name == "9" and cell.kernels.file == "Ascend-cann-910b-ops_9.0.0_linux-aarch64.run"
    # Both installers came out of their .zip after its sum was checked.
    assert out.stdout.count("sha256 matches Huawei's published sum; took") == 2, out.stdout[-3000:]
    assert not any(p.suffix == ".run" for p in (cache / "cann").glob("*")), "only the verified .run copies are kept"
    labels = subprocess.run(engine.command("image", "inspect", "--format", "{{json .Config.Labels}}", tag),
                            capture_output=True, text=True).stdout
    assert '"io.ascend-build.driver":"26.0.RC1"' in labels and '"io.ascend-build.cann":"9.0.0"' in labels
    env = subprocess.run(engine.command("image", "inspect", "--format", "{{json .Config.Env}}", tag),
                         capture_output=True, text=True).stdout
    assert "ASCEND_TOOLKIT_HOME=/usr/local/Ascend/cann-9.0.0" in env


def test_doctor_reads_the_built_image_and_matches_it_to_a_host(engine, runtime, tmp_path):
    """`invoke doctor --image` on the image built above: CANN 9.0.0's image carries the drivers
    its release notes say it runs on (25.0.x to 26.1.0); a host on 24.1.0 is refused and told
    which line would run; 25.5.0 (in the 25.5 series) can."""
    import sys

    from tests.doubles.host_roots import make_host
    from tests.integration.conftest import ROOT
    _, tag = runtime
    task = [sys.executable, "-m", "invoke", "doctor", "--image", tag, "--user", "alice", "--root"]
    old = subprocess.run(task + [str(make_host(tmp_path / "old", driver="24.1.0"))], cwd=ROOT,
                         capture_output=True, text=True)
    assert old.returncode == 1, old.stdout + old.stderr
    assert "CANN 9.0.0's release notes list the drivers it runs on, and 24.1.0 is not one of them" in old.stdout
    assert "or use the 2.4.0 on CANN 8.0.0 image" in old.stdout
    new = subprocess.run(task + [str(make_host(tmp_path / "new", driver="25.5.0"))], cwd=ROOT,
                         capture_output=True, text=True)
    assert new.returncode == 0, new.stdout + new.stderr
    assert "CANN 9.0.0 runs on 25.5.0 (its release notes:" in new.stdout
