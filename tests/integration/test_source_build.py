"""Source builds for real (issue: the builder; issue: real sources): the Debian 11 builder
(gcc 10) is built and tested, with its cross compiler (the default on this x86_64 machine)
and without (--emulated: the image's gcc under qemu); the stand-in torch_npu tree, shaped
after the real one (codegen, an op-plugin submodule, stubs from a hard-coded gcc, CMake,
offline flags), and the stand-in apex (its build script clones NVIDIA apex) are compiled
in it into cached wheels, and a linux/arm64 runtime image installs them; inside that
image the extensions report that gcc 10 from the builder compiled them."""
from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest

from ascend_build.images.wheel_arch import foreign_in_wheel
from ascend_build.upstream import pytorch_git
from tests.conftest import copy_matrix
from tests.doubles import standin_repos as sr
from tests.integration.conftest import BULLSEYE, CA, REPO, image_exists
from tests.integration.conftest import invoke_cached as invoke

BUILDER_REPO = "ascend-build-test/builder"
BUILDER = f"{BUILDER_REPO}:torch2.1.0-debian11-gcc10-py3.9-cross-arm64"
EMULATED = f"{BUILDER_REPO}:torch2.1.0-debian11-gcc10-py3.9-arm64"
COMMON = ["--torch", "2.1.0", "--python", "3.9", "--platform", "linux/arm64",
          "--base-image", f"debian:bullseye={BULLSEYE}"] + (["--ca-bundle", str(CA)] if CA.exists() else [])


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ascend-cache")


@pytest.fixture(scope="module")
def standin(tmp_path_factory) -> Path:
    """The stand-in torch_npu as a plain tree with its op-plugin submodule in place."""
    return sr.plain_tree(tmp_path_factory.mktemp("standin") / "torch_npu_src")


@pytest.fixture(scope="module")
def apex_tree(tmp_path_factory) -> sr.Apex:
    return sr.make_apex(tmp_path_factory.mktemp("apex"))


@pytest.fixture(scope="module")
def builder(engine, bullseye_arm64_base, cache):
    out = invoke(cache, "builder", "--repository", BUILDER_REPO, "--flavor", "debian11", "--retest", *COMMON)
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def torch_npu_build(builder, cache, standin):
    out = invoke(cache, "torch-npu", "--repository", BUILDER_REPO, "--flavor", "debian11", "--src", str(standin), *COMMON)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def torch_npu_wheel(torch_npu_build) -> Path:
    wheel = Path(torch_npu_build.stdout.strip().splitlines()[-1])
    assert wheel.is_file() and wheel.name.startswith("torch_npu-2.1.0.post8-cp39-cp39-linux_aarch64"), wheel
    return wheel


def test_the_default_build_cross_compiles_outside_qemu(torch_npu_build, torch_npu_wheel):
    out = torch_npu_build.stdout
    assert "runs as x86_64, no qemu, makes aarch64-linux-gnu code" in out, out[-3000:]
    # the offline build's flags, said in the output; the stand-in's CMake stops without them
    assert "offline build: ci/build.sh --disable_torchair --disable_rpc; BUILD_WITHOUT_SHA=1" in out
    assert "torch_npu: source" in out and "(checked)" in out
    tags, foreign = foreign_in_wheel(str(torch_npu_wheel), "aarch64")
    assert foreign == [] and tags == ["cp39-cp39-linux_aarch64"]


def test_the_extension_keeps_its_origin_path_ahead_of_ld_library_path(torch_npu_wheel, tmp_path):
    """DT_RPATH, as upstream's manylinux toolchain writes it: with DT_RUNPATH the image's
    LD_LIBRARY_PATH (CANN's lib64, with its own libnpu_profiler.so) would win, and the real
    source-built torch_npu failed to import for that reason."""
    with zipfile.ZipFile(torch_npu_wheel) as whl:
        name = next(n for n in whl.namelist() if n.startswith("torch_npu/_standin") and n.endswith(".so"))
        whl.extract(name, tmp_path)
    out = subprocess.run(["readelf", "-d", str(tmp_path / name)], capture_output=True, text=True)
    assert "(RPATH)" in out.stdout and "$ORIGIN/lib" in out.stdout and "(RUNPATH)" not in out.stdout, out.stdout


def test_the_emulated_build_compiles_under_qemu_and_makes_the_same_wheel(engine, builder, cache, standin,
                                                                         torch_npu_wheel, tmp_path):
    out = invoke(cache, "torch-npu", "--repository", BUILDER_REPO, "--flavor", "debian11", "--emulated",
                 "--src", str(standin), *COMMON)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "runs as aarch64, makes aarch64-linux-gnu code" in out.stdout
    assert image_exists(engine, EMULATED)
    wheel = Path(out.stdout.strip().splitlines()[-1])
    assert wheel.name == torch_npu_wheel.name and wheel.parent != torch_npu_wheel.parent   # its own cache key
    assert foreign_in_wheel(str(wheel), "aarch64")[1] == []


def test_the_release_branch_and_a_missing_submodule_are_refused_before_compiling(builder, cache, tmp_path):
    repos = sr.make_repos(tmp_path / "up")
    tags = copy_matrix(tmp_path / "m")
    imported, _, text, _ = pytorch_git.update(tags, str(repos.torch_npu))
    imported.write_text(text)
    branch = sr.checkout(repos, tmp_path / "branch", ref=sr.BRANCH)
    out = invoke(cache, "torch-npu", "--repository", BUILDER_REPO, "--flavor", "debian11", "--src", str(branch),
                 "--matrix", str(tags), *COMMON)
    assert out.returncode == 2 and f"not torch_npu 2.1.0.post8 (tag {sr.TAG})" in out.stderr, out.stderr
    bare = sr.checkout(repos, tmp_path / "nosub", submodules=False)
    out = invoke(cache, "torch-npu", "--repository", BUILDER_REPO, "--flavor", "debian11", "--src", str(bare),
                 "--matrix", str(tags), *COMMON)
    assert out.returncode == 2 and f"needs it at commit {repos.op_plugin_commit}" in out.stderr, out.stderr
    assert "building from" not in out.stdout


def test_builder_was_tested_then_tagged(engine, builder):
    # built and tested now, or (an engine that kept it) tested again now: its suite ran in this run
    assert "tests/builder_image" in builder.stdout and " passed" in builder.stdout
    assert "tested and tagged" in builder.stdout or "--retest: running its suite again" in builder.stdout
    assert "compilers: gcc-10 for aarch64 on the build machine (linux/amd64), from debian:bullseye" in builder.stdout
    assert " failed" not in builder.stdout
    assert image_exists(engine, BUILDER)


def test_wheel_cache_is_keyed_and_reused(torch_npu_wheel, cache, standin):
    meta = (torch_npu_wheel.parent / "meta.json").read_text()
    assert '"python": "3.9"' in meta and '"gcc": 10' in meta and '"revision": "tree-' in meta
    again = invoke(cache, "torch-npu", "--repository", BUILDER_REPO, "--flavor", "debian11", "--src", str(standin), *COMMON)
    assert again.returncode == 0
    assert "reusing" in again.stdout and Path(again.stdout.strip().splitlines()[-1]) == torch_npu_wheel


def test_failed_compile_keeps_its_log_and_caches_nothing(builder, cache, tmp_path):
    broken = sr.plain_tree(tmp_path / "torch_npu_src")
    (broken / "csrc" / "npu.cpp").write_text("this is not C++;\n")
    before = set((cache / "wheels" / "torch_npu").glob("*")) if (cache / "wheels" / "torch_npu").exists() else set()
    out = invoke(cache, "torch-npu", "--repository", BUILDER_REPO, "--flavor", "debian11", "--src", str(broken), *COMMON)
    assert out.returncode == 4 and "Traceback" not in out.stderr     # BuildFailed
    assert "torch_npu build failed" in out.stderr and "nothing was cached" in out.stderr
    log = Path(out.stderr.split("Log: ")[1].split()[0])
    assert log.is_file() and "error" in log.read_text()
    # the first compiler error, quoted
    assert "First error:" in out.stderr and "npu.cpp:1" in out.stderr.split("First error:")[1]
    assert set((cache / "wheels" / "torch_npu").glob("*")) == before


@pytest.fixture(scope="module")
def runtime(engine, torch_npu_wheel, packages, pinned_matrix, cache, standin, apex_tree):
    # offline: NVIDIA apex from the site's copy (its build script's clone reads it); as
    # Ascend apex 5.0.0's, the stand-in's setup.py compiles against torch alone: no torch_npu
    apex = invoke(cache, "apex", "--repository", BUILDER_REPO, "--flavor", "debian11", "--src", str(apex_tree.tree),
                  "--submodule-src", str(apex_tree.nvidia), *COMMON)
    assert apex.returncode == 0, apex.stdout[-3000:] + apex.stderr[-2000:]
    assert f"apex: NVIDIA apex {apex_tree.nvidia_commit} from" in apex.stdout
    assert "apex: its setup.py compiles against torch alone" in apex.stdout
    assert "torch_npu in the build venv:" not in apex.stdout
    assert "building apex against torch 2.1.0" in (Path(apex.stdout.split("log: ")[1].split()[0]).read_text()
                                                   if "log: " in apex.stdout else apex.stdout)
    with zipfile.ZipFile(apex.stdout.strip().splitlines()[-1]) as whl:
        # what the real 5.0.0 wheel holds: apex_C and change_data_ptr, no npu_float_status
        assert sorted(n.split(".")[0] for n in whl.namelist() if n.endswith(".so")) == ["apex_C", "change_data_ptr"]
    out = invoke(cache, "build", "--builder-repository", BUILDER_REPO, "--os", "debian11", "--builder-flavor", "debian11",
                 "--torch-npu-src", str(standin), "--packages", str(packages), "--offline",
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
    code = ("import torch_npu._standin as t, apex_C as a, change_data_ptr as d, apex.contrib as c; assert c.ASCEND; "
            "print(t.compiler()); print(a.compiler()); print(d.compiler())")
    got = subprocess.run(engine.command("run", "--rm", "--platform", "linux/arm64", tag, "python", "-c", code),
                         capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    compilers = got.stdout.strip().splitlines()
    assert gcc.stdout.strip().startswith("10.") and len(compilers) == 3
    assert all(cc.split()[0] == gcc.stdout.strip() for cc in compilers), compilers


def test_a_source_built_wheel_does_not_leak_into_a_later_stock_build(engine, runtime, packages, pinned_matrix, cache,
                                                                     tmp_path):
    """The source-built torch_npu (2.1.0.post8) went through the engine's shared wheel cache;
    the same cell built afterwards from the lock (the release wheel, by sha256) must not be
    offered it: `==2.1.0.post8` matches any local label, and pip would stop on its hash.
    Its torch_npu step (the stage that installs it) is built and asked what it holds: the
    release's torch_npu (the whole image would add nothing to this check)."""
    from ascend_build.engine import RunSpec
    from ascend_build.engine.network import Network
    from ascend_build.inputs.options import Site
    from tests.integration.conftest import BULLSEYE, build_stage
    site = Site(packages=(packages,), offline=True, require_pins=True, base_images={"debian:bullseye": BULLSEYE},
                net=Network(ca_bundle=CA if CA.exists() else None), cache=cache, work=tmp_path / "work")
    tag = f"{REPO}-stock-stage:torch_npu"
    cell = dict(stack="2.1.0", os="debian11", python="3.9", platform="linux/arm64")
    build_stage(engine, pinned_matrix, cell, site, "torch_npu-pip-{pip}", tag, tmp_path / "stock.log")
    try:
        got = engine.run_container(RunSpec(tag, ("show", "torch_npu"), platform="linux/arm64",
                                           entrypoint="/opt/venv/bin/pip"), timeout=600)
        assert got.returncode == 0, got.stderr
        assert "Version: 2.1.0.post8\n" in got.stdout, got.stdout
    finally:
        engine.remove(tag)
