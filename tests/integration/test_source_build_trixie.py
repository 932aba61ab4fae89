"""Source builds on the new toolchain (issue: the lines users run today): the offline
Debian 13 builder (gcc 13 as the 26.x wheels are built, Python 3.13) of the torch 2.10.0 line is built and tested, the
stand-in torch_npu tree (tests/doubles) is compiled in it against the real torch 2.10.0,
and a linux/arm64 runtime image on Debian 13 (CANN 9.0.0 double, published .zip form)
installs that wheel; inside the image the extension reports that gcc 13 from the builder
compiled it."""
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
