"""Source builds for real (issue: the builder): the Debian 11 builder (gcc 10) is built
and tested, the stand-in torch_npu and apex trees (tests/doubles) are compiled in it
into cached wheels, and a linux/arm64 runtime image installs them; inside that image
the extension reports that gcc 10 from the builder compiled it."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.conftest import BULLSEYE, CA, DOUBLES, REPO, image_exists
from tests.integration.conftest import invoke_cached as invoke

BUILDER_REPO = "ascend-build-test/builder"
BUILDER = f"{BUILDER_REPO}:torch2.1.0-debian11-gcc10-py3.9-arm64"
COMMON = ["--torch", "2.1.0", "--python", "3.9", "--platform", "linux/arm64",
          "--base-image", f"debian:bullseye={BULLSEYE}"] + (["--ca-bundle", str(CA)] if CA.exists() else [])


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ascend-cache")


@pytest.fixture(scope="module")
def builder(engine, bullseye_arm64_base, cache):
    out = invoke(cache, "builder", "--repository", BUILDER_REPO, "--flavor", "debian11", *COMMON)
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def torch_npu_wheel(builder, cache) -> Path:
    out = invoke(cache, "torch-npu", "--repository", BUILDER_REPO, "--flavor", "debian11", "--src", str(DOUBLES / "torch_npu_src"), *COMMON)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    wheel = Path(out.stdout.strip().splitlines()[-1])
    assert wheel.is_file() and wheel.name.startswith("torch_npu-2.1.0.post8+standin-cp39-cp39-linux_aarch64")
    return wheel


def test_builder_was_tested_then_tagged(engine, builder):
    assert "tests/builder_image" in builder.stdout and "tested and tagged" in builder.stdout
    assert " failed" not in builder.stdout
    assert image_exists(engine, BUILDER)


def test_wheel_cache_is_keyed_and_reused(torch_npu_wheel, cache):
    meta = (torch_npu_wheel.parent / "meta.json").read_text()
    assert '"python": "3.9"' in meta and '"gcc": 10' in meta and '"revision": "tree-' in meta
    again = invoke(cache, "torch-npu", "--repository", BUILDER_REPO, "--flavor", "debian11", "--src", str(DOUBLES / "torch_npu_src"), *COMMON)
    assert again.returncode == 0
    assert "reusing" in again.stdout and Path(again.stdout.strip().splitlines()[-1]) == torch_npu_wheel


def test_failed_compile_keeps_its_log_and_caches_nothing(builder, cache, tmp_path):
    broken = tmp_path / "torch_npu_src"
    shutil.copytree(DOUBLES / "torch_npu_src", broken)
    (broken / "csrc" / "standin.c").write_text("this is not C;\n")
    before = set((cache / "wheels" / "torch_npu").glob("*")) if (cache / "wheels" / "torch_npu").exists() else set()
    out = invoke(cache, "torch-npu", "--repository", BUILDER_REPO, "--flavor", "debian11", "--src", str(broken), *COMMON)
    assert out.returncode == 4 and "Traceback" not in out.stderr     # BuildFailed
    assert "torch_npu build failed" in out.stderr and "nothing was cached" in out.stderr
    log = Path(out.stderr.split("Log: ")[1].split()[0])
    assert log.is_file() and "error" in log.read_text()
    assert set((cache / "wheels" / "torch_npu").glob("*")) == before


@pytest.fixture(scope="module")
def runtime(engine, torch_npu_wheel, packages, pinned_matrix, cache):
    apex = invoke(cache, "apex", "--repository", BUILDER_REPO, "--flavor", "debian11", "--src", str(DOUBLES / "apex_src"), *COMMON)
    assert apex.returncode == 0, apex.stdout[-3000:] + apex.stderr[-2000:]
    out = invoke(cache, "build", "--builder-repository", BUILDER_REPO, "--os", "debian11", "--builder-flavor", "debian11",
                 "--torch-npu-src", str(DOUBLES / "torch_npu_src"), "--packages", str(packages), "--offline",
                 "--require-pins", "--repository", REPO, "--matrix", str(pinned_matrix), *COMMON)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    tag = f"{REPO}:cann8.0.rc3-910b-debian11-py3.9-torch2.1.0-arm64"
    assert image_exists(engine, tag)
    return out, tag


def test_runtime_took_the_source_built_wheels(runtime, torch_npu_wheel):
    out, _ = runtime
    assert "reusing" in out.stdout, "torch_npu came from the wheel cache"
    assert "apex: using the built wheel" in out.stdout
    assert "tested and tagged" in out.stdout


def test_extension_in_the_image_was_compiled_by_the_builders_gcc(engine, runtime):
    _, tag = runtime
    gcc = subprocess.run(engine.command("run", "--rm", "--platform", "linux/arm64", BUILDER, "bash", "-c",
                                        "$CC -dumpfullversion"), capture_output=True, text=True)
    assert gcc.returncode == 0, gcc.stderr
    code = ("import torch_npu._standin as t, apex_standin._standin as a; "
            "print(t.compiler()); print(a.compiler())")
    got = subprocess.run(engine.command("run", "--rm", "--platform", "linux/arm64", tag, "python", "-c", code),
                         capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    torch_npu_cc, apex_cc = got.stdout.strip().splitlines()
    assert gcc.stdout.strip().startswith("10.")
    assert torch_npu_cc.split()[0] == gcc.stdout.strip() and apex_cc.split()[0] == gcc.stdout.strip()


def test_a_source_built_wheel_does_not_leak_into_a_later_stock_build(engine, runtime, packages, pinned_matrix, cache):
    """The source-built torch_npu (2.1.0.post8+standin) went through the engine's shared
    wheel cache; the same cell built afterwards from the lock (the release wheel, by sha256)
    must not be offered it: `==2.1.0.post8` matches any local label, and pip would stop on
    its hash."""
    stock = f"{REPO}-stock"
    out = invoke(cache, "build", "--builder-repository", BUILDER_REPO, "--os", "debian11", "--packages", str(packages), "--offline", "--require-pins",
                 "--repository", stock, "--matrix", str(pinned_matrix), *COMMON)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    got = subprocess.run(engine.command("run", "--rm", "--platform", "linux/arm64",
                                        f"{stock}:cann8.0.rc3-910b-debian11-py3.9-torch2.1.0-arm64",
                                        "pip", "show", "torch_npu"), capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    assert "Version: 2.1.0.post8\n" in got.stdout, got.stdout
