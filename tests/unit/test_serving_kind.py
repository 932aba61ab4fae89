"""The serving kind (images/serving.py), in milliseconds: built FROM the tested runtime image
(its layers beneath, unchanged), its suite and then the runtime's before any tag, nothing
tagged when they fail; its release files fetched from the index and checked; the lock's
lines read from the files themselves; the plan and every refusal of `build --vllm`. The
kinds as modules (images/catalog.py): each gives its kind and its Dockerfiles."""
from __future__ import annotations

import hashlib
import io
import os
import re
import tarfile
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from ascend_build.engine.network import Network
from ascend_build.errors import TestsFailed as SuiteFailed
from ascend_build.errors import UserError
from ascend_build.images import batch, catalog, serving
from ascend_build.images import build as runtime_build
from ascend_build.images.kinds import label, readable_tag, suites
from ascend_build.inputs.options import Inputs, Site
from ascend_build.locking import serving_lock
from ascend_build.locking.layerlock import LayerLock
from ascend_build.matrix import load_matrix
from ascend_build.platforms import host as host_platform
from tests import forked
from tests.conftest import ROOT, copy_matrix
from tests.doubles.engine_double import EngineDouble
from tests.doubles.net_doubles import PackageIndexDouble
from tests.doubles.suite_double import SuiteDouble

CELL = dict(stack="2.1.0", os="debian12", python="3.11", platform="linux/arm64")
BASE = "debian:bookworm"


def _tar_gz(top: str, files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


# vLLM's bench extra as its PKG-INFO states it (vllm-0.23.0 sdist: pandas, datasets, ... of extra "bench")
VLLM_PKG_INFO = ("Metadata-Version: 2.4\nName: vllm\nVersion: 0.23.0\nRequires-Dist: torch==2.11.0\n"
                 "Requires-Dist: numpy; sys_platform == \"linux\"\n"
                 "Provides-Extra: bench\nRequires-Dist: pandas; extra == \"bench\"\n"
                 "Requires-Dist: datasets; extra == \"bench\"\n"
                 "Requires-Dist: pywin32; extra == \"bench\" and sys_platform == \"win32\"\n"
                 "Provides-Extra: audio\nRequires-Dist: soundfile; extra == \"audio\"\n")
VLLM_SDIST = _tar_gz("vllm-0.23.0", {
    "PKG-INFO": VLLM_PKG_INFO,
    "requirements/common.txt": "regex # fast\n-r extra.txt\n\nprotobuf >= 5.29.6\n--extra-index-url x\n",
    "requirements/extra.txt": "fastapi[standard] >= 0.115.0\n",
    "requirements/cuda.txt": "torch==2.11.0\n"})
PLUGIN_SDIST = _tar_gz("vllm_ascend-0.23.0", {
    "PKG-INFO": "Metadata-Version: 2.4\nName: vllm_ascend\nVersion: 0.23.0\nRequires-Dist: torch==2.10.0\n"
                "Requires-Dist: torch-npu==2.10.0.post4\nRequires-Dist: fastapi<0.124.0\n"
                "Requires-Dist: pytest; extra == \"test\"\n",
    "setup.py": "raise SystemExit('not run: the metadata is read, never executed')\n"})


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------ the kinds as modules
def test_every_kind_is_a_module_with_its_kind_and_its_dockerfiles():
    assert serving in catalog.MODULES and catalog.KINDS["serving"] is serving.KIND
    matrix = load_matrix(ROOT / "matrix.yaml")
    for module in catalog.MODULES:
        rendered = module.render(matrix)
        assert rendered and all(r.path.parts[0] == "images" for r in rendered), module.KIND.name
    assert [r.path.as_posix() for r in serving.render(matrix)] == [f"images/serving/{o}/Dockerfile" for o in matrix.os]
    assert suites(serving.KIND) == ["serving_image", "image"]    # its own first, then the runtime's


# ------------------------------------------------------------------ the build, on the engine double
def _request(plugin_sha: str, vllm_sha: str) -> serving.ServingRequest:
    return serving.ServingRequest(release="0.23.0", vllm="0.23.0", soc_version="ascend910b1", kernels=False,
                                  plugin_file=None, plugin_sdist="vllm_ascend-0.23.0.tar.gz",
                                  plugin_sdist_sha256=plugin_sha, vllm_sdist="vllm-0.23.0.tar.gz",
                                  vllm_sdist_sha256=vllm_sha, torch="2.1.0", torch_npu="2.1.0.post8")


def _serving_build(matrix, site, engine, tmp_path, suite):
    cell = matrix.cell(**CELL)
    inputs = Inputs(repository="ascend-runtime")
    runtime = runtime_build.build(matrix, cell, site, inputs, engine, SuiteDouble(0))
    (tmp_path / "rel").mkdir(exist_ok=True)
    vllm, plugin = tmp_path / "rel" / "vllm-0.23.0.tar.gz", tmp_path / "rel" / "vllm_ascend-0.23.0.tar.gz"
    vllm.write_bytes(VLLM_SDIST)
    plugin.write_bytes(PLUGIN_SDIST)
    lock = LayerLock(tmp_path / "serving.txt", "--require-hashes\n# held: torch==2.1.0\nregex==2024.1.1 \\\n"
                                               "    --hash=sha256:" + "a" * 64 + "\n")
    req = _request(_sha(PLUGIN_SDIST), _sha(VLLM_SDIST))
    release = serving.Release(vllm, plugin, _sha(PLUGIN_SDIST))
    built = batch.build_on_runtime(matrix, cell, site, inputs, batch.Extension(serving, serving.Ready(req, lock, release)),
                                   runtime, engine, suite)
    return runtime, built, req


def test_a_serving_image_stands_on_the_tested_runtime_and_is_tagged_after_its_suite(matrix, site, tmp_path):
    staged: dict[str, str] = {}
    args: dict[str, str] = {}

    def look(req) -> bool:        # what the build's context holds, as the engine gets it
        if "RUNTIME_IMAGE" in req.build_args:
            staged.update({p.relative_to(req.context).as_posix(): p.read_text(errors="replace")
                           for p in Path(req.context).rglob("*") if p.is_file()})
            args.update(req.build_args, DOCKERFILE=str(req.dockerfile))
        return False
    engine = EngineDouble(fail_build=look)
    engine.add(BASE, platform="linux/arm64")
    suite = SuiteDouble(0)
    runtime, built, req = _serving_build(matrix, site, engine, tmp_path, suite)
    cell = matrix.cell(**CELL)
    # FROM the runtime's content tag: one tested image, whose layers are all beneath, unchanged
    assert staged["release/SHA256SUMS"] == (f"{_sha(VLLM_SDIST)}  vllm-0.23.0.tar.gz\n"
                                            f"{_sha(PLUGIN_SDIST)}  vllm_ascend-0.23.0.tar.gz\n")
    assert "requirements/serving.txt" in staged and "release/vllm-0.23.0.tar.gz" in staged
    assert {"serving_check.py", "wheel_arch.py", "pip_for_target.py"} <= set(staged)    # the scripts the steps run
    # arm64 on this machine: the lock's packages installed by pip on the build machine, for the
    # image's (the runtime's fast path), FROM the same OS release for the build machine
    if host_platform() is not None and host_platform().arch != "aarch64":
        assert args["PIP_ON"] == "native" and args["TARGET_MACHINE"] == "aarch64"
        assert args["BUILD_BASE_IMAGE"] == site.base(cell.os.image, host_platform())
    assert args["DOCKERFILE"].endswith(f"images/serving/{cell.os.name}/Dockerfile")       # its OS's
    runtime_layers = engine.images[runtime.image_id].layers
    assert engine.images[built.image_id].layers[:len(runtime_layers)] == runtime_layers
    labels = engine.images[built.image_id].config["config"]["Labels"]
    assert labels[label("kind")] == "serving" and labels[label("kernels")] == "no"
    assert labels[label("runtime")] == readable_tag("ascend-runtime", runtime.content_tag, cell.target)
    assert labels[label("soc-version")] == "ascend910b1" and labels[label("vllm-ascend-from")] == "sdist"
    # its suite ran on the candidate, then every tag; the runtime's stay where they were
    assert len(suite.ran) == 1
    assert built.tags.readable == f"ascend-runtime:{cell.name}-vllm0.23.0-arm64"
    assert all(engine.tags[t] == built.image_id for t in built.tags)
    assert all(engine.tags[t] == runtime.image_id for t in runtime.tags)
    assert catalog.kind_of(engine, built.tags.readable) is serving.KIND


def test_a_failing_serving_suite_tags_nothing(matrix, site, tmp_path):
    engine = EngineDouble()
    engine.add(BASE, platform="linux/arm64")
    with pytest.raises(SuiteFailed, match="nothing was tagged"):
        _serving_build(matrix, site, engine, tmp_path, SuiteDouble(1))
    assert not [t for t in engine.tags if "-vllm0.23.0-" in t]
    assert engine.untagged() == set()


def test_a_reused_serving_image_needs_no_build_machine_base(matrix, site, tmp_path):
    """The build machine's base is checked (pulled, or made) only when the image is built:
    once it is here and tested, a second build takes it as it is, base gone or not (an
    air-gapped host that was sent the images, not the bases)."""
    engine = EngineDouble()
    engine.add(BASE, platform="linux/arm64")
    _, first, _ = _serving_build(matrix, site, engine, tmp_path, SuiteDouble(0))
    assert engine.remove(BASE, force=True) and not engine.exists(BASE)
    pulls = len(engine.called("pull"))
    _, again, _ = _serving_build(matrix, site, engine, tmp_path, SuiteDouble(0))
    assert again.image_id == first.image_id and again.log is None     # reused, not built
    assert len(engine.called("pull")) == pulls


# ------------------------------------------------------------------ the lock's lines and the release files
def test_the_lock_lines_come_from_the_files_themselves(tmp_path):
    vllm = tmp_path / "vllm-0.23.0.tar.gz"
    vllm.write_bytes(VLLM_SDIST)
    sdist = tmp_path / "vllm_ascend-0.23.0.tar.gz"
    sdist.write_bytes(PLUGIN_SDIST)
    # vLLM's common requirements (the -r one followed), never its CUDA build's PKG-INFO
    assert serving_lock.vllm_requirements(vllm) == ["regex", "fastapi[standard] >= 0.115.0", "protobuf >= 5.29.6"]
    assert serving_lock.plugin_requirements(sdist) == ["torch==2.10.0", "torch-npu==2.10.0.post4", "fastapi<0.124.0"]
    wheel = tmp_path / "vllm_ascend-0.23.0-cp311-cp311-manylinux_2_34_aarch64.whl"
    with zipfile.ZipFile(wheel, "w") as whl:
        whl.writestr("vllm_ascend-0.23.0.dist-info/METADATA",
                     "Metadata-Version: 2.1\nName: vllm_ascend\nVersion: 0.23.0\nRequires-Dist: numba\n"
                     "Requires-Dist: sphinx; extra == 'docs'\n")
    assert serving_lock.plugin_requirements(wheel) == ["numba"]
    lines = serving_lock.requirement_lines(["regex", "numba", "fastapi  <0.124.0"], ["fastapi <0.124.0", "numba"],
                                           ("wheel",), extras=("ray>=2.47.1,<=2.48.0", "pandas"))
    # the plugin's first, then vLLM's, then what the image adds, then the builds' needs; each once
    assert lines == ["fastapi <0.124.0", "numba", "regex", "ray>=2.47.1,<=2.48.0", "pandas", "wheel"]
    # `vllm bench serve`'s packages: vLLM's own bench extra, on Linux, its marker dropped
    assert serving_lock.vllm_extra(vllm, "bench") == ["pandas", "datasets"]
    with pytest.raises(UserError, match="states no extra 'benchmark'"):
        serving_lock.vllm_extra(vllm, "benchmark")


def test_release_files_are_fetched_once_and_checked_against_the_index(tmp_path):
    with PackageIndexDouble({"vllm": {"vllm-0.23.0.tar.gz": (VLLM_SDIST, "")}}) as index:
        net = Network(pip_index_url=index.url)
        cache = tmp_path / "cache"
        got = serving_lock.release_file(net, "vllm", "vllm-0.23.0.tar.gz", _sha(VLLM_SDIST), cache)
        assert got.read_bytes() == VLLM_SDIST
        serving_lock.release_file(net, "vllm", "vllm-0.23.0.tar.gz", _sha(VLLM_SDIST), cache)
        assert index.asked["file vllm-0.23.0.tar.gz"] == 1, "a file in the cache with its sum is not fetched again"
        with pytest.raises(UserError, match=r"not on .* \(the index lists 1 files of vllm\)"):
            serving_lock.release_file(net, "vllm", "vllm-0.24.0.tar.gz", "b" * 64, cache)
    # a name that is not a file's (from a tampered import): refused before any path is made of it
    for bad in ("../vllm-0.23.0.tar.gz", "a\nb.tar.gz", ""):
        with pytest.raises(UserError, match="not a release file's name"):
            serving_lock.release_file(Network(pip_index_url="http://127.0.0.1:9/simple"), "vllm", bad, "b" * 64,
                                      tmp_path / "cache")
    # an index that serves another file than the import recorded: refused, nothing kept
    with PackageIndexDouble({"vllm": {"vllm-0.23.0.tar.gz": (VLLM_SDIST + b"x", "")}}) as index:
        with pytest.raises(UserError, match=f"has sha256 [0-9a-f]{{64}}, not {_sha(VLLM_SDIST)}"):
            serving_lock.release_file(Network(pip_index_url=index.url), "vllm", "vllm-0.23.0.tar.gz",
                                      _sha(VLLM_SDIST), tmp_path / "other")
        assert not (tmp_path / "other" / "vllm-0.23.0.tar.gz").exists()


# ------------------------------------------------------------------ `build --vllm` as a user runs it
def invoke(*args: str):
    return forked.invoke(*args, env=dict(os.environ))


def test_the_dry_plan_names_the_runtime_it_stands_on_the_releases_the_pins_and_the_chip():
    out = invoke("build", "--vllm", "0.23.0", "--chip", "a3", "--os", "debian13", "--python", "3.13", "--dry")
    # the committed checkout has no lock of this runtime: the plan is shown whole, then the real run's stop
    assert out.returncode == 2 and "has no lock" in out.stderr, out.stderr
    # no packages here, no release files fetched: the content tags are unknown (sha-unknown), and named so
    runtime = re.search(r"tag '<built id>' (ascend-runtime:sha-(?:[0-9a-f]{16}|unknown)-arm64)", out.stdout)
    assert runtime, out.stdout
    assert f"--build-arg RUNTIME_IMAGE={runtime[1]} " in out.stdout
    assert "--build-arg SOC_VERSION=ascend910_9391 " in out.stdout
    assert "vLLM 0.23.0 from its sdist vllm-0.23.0.tar.gz (VLLM_TARGET_DEVICE=empty)" in out.stdout
    assert "vLLM-Ascend 0.23.0 from its sdist vllm_ascend-0.23.0.tar.gz, built here with its custom kernels" \
           in out.stdout         # no cp313 wheel
    assert "torch 2.10.0, torch_npu 2.10.0.post4" in out.stdout
    assert "tests/serving_image tests/image" in out.stdout
    assert "-vllm0.23.0-arm64" in out.stdout


@pytest.mark.parametrize("args, said", [
    (("--vllm", "0.23.0", "--torch", "2.1.0"), "build it with --torch 2.10.0-26.1.0"),
    (("--vllm", "9.9.9"), "unknown vllm-ascend release '9.9.9'"),
    (("--no-kernels",), "--no-kernels is for a serving image: give --vllm RELEASE"),
    (("--serving-wheelhouse", "."), "--serving-wheelhouse is for a serving image: give --vllm RELEASE"),
    (("--vllm", "0.23.0", "--serving-wheelhouse", "/nonexistent"), "--serving-wheelhouse /nonexistent: no such folder"),
    (("--vllm", "0.23.0", "--python", "3.11", "--os", "debian12", "--no-kernels"),
     "has a wheel for Python 3.11 on aarch64, kernels included"),
    (("--vllm", "0.23.0", "--all"), "--vllm builds on one runtime image: drop --all"),
])
def test_build_vllm_refuses_before_anything_runs(args, said):
    out = invoke("build", *args, "--dry")
    assert out.returncode == 2 and said in out.stderr, out.stderr
    assert "docker build" not in out.stdout and "Traceback" not in out.stderr


# ------------------------------------------------------------------ prepare: files, lines, lock
class UvDouble:
    """Stands in for uv: each line resolves to version 1.0 of its name; records what it was asked."""
    def __init__(self):
        self.asked: list[list[str]] = []

    def __call__(self, ins, python, arch, net, *, constraints=(), prefer=None, extra_index=None, find_links=None,
                 glibc=None):
        self.asked.append(list(ins["layer"]))
        return {serving_lock.named(line): ("1.0", ["-r layer.in"]) for line in ins["layer"]}


def _plugin_sdist(requires: list[str]) -> bytes:
    return _tar_gz("vllm_ascend-0.23.0", {"PKG-INFO": "Metadata-Version: 2.4\nName: vllm_ascend\nVersion: 0.23.0\n"
                                          + "".join(f"Requires-Dist: {r}\n" for r in requires)})


@pytest.fixture
def uv(monkeypatch):
    from ascend_build.locking import layer_resolve, resolve
    double = UvDouble()
    monkeypatch.setattr(layer_resolve, "uv_compile", double)
    monkeypatch.setattr(layer_resolve, "uv_version", lambda: "uv (double)")
    monkeypatch.setattr(resolve.Index, "files", lambda self, project: [
        (f"{project.replace('-', '_')}-1.0-py3-none-any.whl", "7" * 64)])
    return double


VLLM_SDIST_NO_PROTOBUF = _tar_gz("vllm-0.23.0", {"PKG-INFO": VLLM_PKG_INFO,
                                                "requirements/common.txt": "regex\nfastapi[standard] >= 0.115.0\n"})


def _prepare(tmp_path, plugin: bytes, vllm: bytes = VLLM_SDIST_NO_PROTOBUF):
    m = load_matrix(copy_matrix(tmp_path / "m"))       # no locks/ beside it: the project's fitting lock is held
    cell = m.cell(**CELL)
    req = _request(_sha(plugin), _sha(vllm))
    with PackageIndexDouble({"vllm": {"vllm-0.23.0.tar.gz": (vllm, "")},
                             "vllm-ascend": {"vllm_ascend-0.23.0.tar.gz": (plugin, "")}}) as index:
        site = Site(cache=tmp_path / "cache", work=tmp_path / "work", net=Network(pip_index_url=index.url))
        return m, serving.prepare(m, cell, site, req)


def test_prepare_fetches_both_files_and_locks_what_they_need_holding_the_runtime(tmp_path, uv):
    m, ready = _prepare(tmp_path, _plugin_sdist(["numba", "vllm==0.23.0", "regex"]))
    lock, release = ready.lock, ready.release
    assert release is not None and release.vllm.read_bytes() == VLLM_SDIST_NO_PROTOBUF
    written = m.path.parent / "locks" / "serving" / "vllm-ascend-0.23.0.in"
    lines = [line for line in written.read_text().splitlines() if not line.startswith("#")]
    # the plugin's lines first, then vLLM's common ones, Ray and vLLM's bench extra, then what the builds
    # import; never the two themselves
    assert lines[:6] == ["numba", "regex", "fastapi[standard] >= 0.115.0", "ray", "pandas", "datasets"]
    assert "setuptools-scm>=8" in lines and not any(serving_lock.named(t) in ("vllm", "vllm-ascend") for t in lines)
    assert uv.asked == [lines]
    assert lock.path == m.path.parent / "locks" / "serving" / "vllm-ascend-0.23.0.lock" / "2.1.0-py3.11-aarch64.txt"
    assert "# held: torch==2.1.0" in lock.text and "numba==1.0" in lock.text
    # a serving lock says so, and which command remakes it (not a user layer's --requirements)
    assert lock.text.startswith("# GENERATED by `invoke build --vllm`")
    assert "# serving layer 'vllm-ascend 0.23.0' on stack 2.1.0" in lock.text


def test_a_plugin_that_would_move_torch_is_refused_before_any_build(tmp_path, uv):
    with pytest.raises(UserError, match=r"would move torch away from 2\.1\.0: it asks for torch==2\.10\.0"):
        _prepare(tmp_path, PLUGIN_SDIST)
    assert uv.asked == [], "refused before the resolver runs"


def test_vllms_protobuf_floor_on_a_runtime_holding_protobuf_3_is_refused_naming_the_pin(tmp_path, uv):
    """vLLM 0.23 asks protobuf >= 5.29.6; the 2.1.0 line holds 3.20.3 (its matrix pin)."""
    with pytest.raises(UserError, match=r"`protobuf >= 5\.29\.6` would move protobuf away from 3\.20\.3.*"
                                        r"from matrix.yaml stacks.\"2\.1\.0\".pins \(protobuf==3\.20\.3\)"):
        _prepare(tmp_path, _plugin_sdist(["numba"]), VLLM_SDIST)
    assert uv.asked == []


@pytest.mark.parametrize("task", ["builder", "torch-npu", "apex"])
def test_only_build_takes_the_serving_options(task):
    """They were once declared on the builder's record too, where nothing read them."""
    out = invoke(task, "--vllm", "0.23.0", "--dry")
    assert out.returncode == 2 and "--vllm" in out.stderr and "Traceback" not in out.stderr, out.stderr


# ------------------------------------------------------------------ the build's own refusals
def _site_packages(tmp_path, monkeypatch, dists: dict[str, str], plugin: str | None = "vllm_ascend:register"):
    """A site-packages of dist-info folders only, as serving_check.py reads an image's."""
    sp = tmp_path / "site-packages"
    for name, version in dists.items():
        info = sp / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        if name == "vllm-ascend" and plugin:
            (info / "entry_points.txt").write_text(f"[vllm.platform_plugins]\nascend = {plugin}\n")
    monkeypatch.setattr("site.getsitepackages", lambda: [str(sp)])
    monkeypatch.setattr("sys.path", [str(sp)])
    return sp


@pytest.mark.parametrize("dists, plugin, said", [
    ({"torch": "2.10.0+cpu", "torch-npu": "2.10.0.post4", "vllm-ascend": "0.23.0"}, "vllm_ascend:register", []),
    ({"torch": "2.9.1", "torch-npu": "2.10.0.post4", "vllm-ascend": "0.23.0"}, "vllm_ascend:register",
     ["refused: the serving layers moved torch to 2.9.1, not the stack's 2.10.0"]),
    ({"torch": "2.10.0", "torch-npu": "2.10.0.post4", "vllm-ascend": "0.23.0", "triton": "3.5.0"},
     "vllm_ascend:register", ["refused: CUDA's triton 3.5.0 is in the image (vLLM-Ascend runs on triton-ascend)"]),
    ({"torch": "2.10.0", "torch-npu": "2.10.0.post4", "vllm-ascend": "0.23.0"}, None,
     ["refused: vLLM's platform entry point vllm.platform_plugins:ascend is missing, not vllm_ascend:register: "
      "vLLM would find no NPU platform"]),
])
def test_the_builds_own_check_refuses_a_moved_torch_cuda_triton_and_a_missing_entry_point(
        tmp_path, monkeypatch, dists, plugin, said):
    from ascend_build.images import serving_check
    _site_packages(tmp_path, monkeypatch, dists, plugin)
    assert serving_check.refusals("2.10.0", "2.10.0.post4") == said
    assert serving_check.main(["serving_check.py", "2.10.0", "2.10.0.post4"]) == (1 if said else 0)


def test_the_lock_installs_on_the_build_machine_only_where_the_runtimes_python_is_the_distros(matrix, site):
    """A runtime whose Python is built from source would need it built again for the build
    machine: its serving lock installs in the image (PIP_ON=target); a distro Python's on the
    build machine when the image is another arch's (as the runtime's fast path)."""
    from ascend_build.images.serving import _pip_args
    source = matrix.cell("2.10.0-26.1.0", "ubuntu22.04", "3.11", platform="linux/arm64")
    distro = matrix.cell("2.10.0-26.1.0", "debian13", "3.13", platform="linux/arm64")
    assert source.python_source and not distro.python_source
    assert _pip_args(site, source) == {"PIP_ON": "target"}
    native = host_platform() is not None and host_platform().arch != "aarch64"
    assert _pip_args(site, distro)["PIP_ON"] == ("native" if native else "target")
    assert _pip_args(replace(site, pip_on="target"), distro) == {"PIP_ON": "target"}


def test_the_release_is_looked_up_once_for_its_stack_and_its_request(monkeypatch, capsys):
    """`build --vllm` without --torch builds the stack the release pins, and its request is
    made from the same record: the data is asked once (it was asked twice, by the command
    line and by the request)."""
    from ascend_build import engine as eng
    from ascend_build.cli import building
    from ascend_build.matrix.model import Matrix
    asked: list[str] = []
    real = Matrix.serving
    monkeypatch.setattr(Matrix, "serving", lambda self, version: asked.append(version) or real(self, version))
    monkeypatch.setattr(eng, "for_task", lambda kind="docker", client=None, dry=False: eng.Engine(
        "docker", "docker", "buildx", "?"))
    options = building.BuildOptions(
        choice=building.Choice(os="debian13", python="3.13", chip="a3"), dry=True, unlocked=True,
        kinds=building.KindOptions(**{k.KIND.name: k.Options(**({"vllm": "0.23.0"} if k is serving else {}))
                                      for k in catalog.ON_RUNTIME}))
    building.build(options)
    assert "-vllm0.23.0-arm64" in capsys.readouterr().out
    assert asked == ["0.23.0"]


@pytest.mark.parametrize("release, asked, built", [
    ("0.23.0", None, "py3.12"),          # its images' Python (cann:9.1.0-*-py3.12), not the stack's default 3.10
    ("0.13.0", None, "py3.11"),          # cann:8.5.0-*-py3.11
    ("0.23.0", "3.13", "py3.13"),        # asked for: taken as asked
])
def test_without_python_the_release_is_built_on_its_own_images_python(monkeypatch, capsys, release, asked, built):
    from ascend_build import engine as eng
    from ascend_build.cli import building
    monkeypatch.setattr(eng, "for_task", lambda kind="docker", client=None, dry=False: eng.Engine(
        "docker", "docker", "buildx", "?"))
    options = building.BuildOptions(
        choice=building.Choice(python=asked), dry=True, unlocked=True,
        kinds=building.KindOptions(**{k.KIND.name: k.Options(**({"vllm": release} if k is serving else {}))
                                      for k in catalog.ON_RUNTIME}))
    building.build(options)
    names = set(re.findall(r"-(py3\.\d+)-torch", capsys.readouterr().out))
    assert names == {built}, names


def test_a_releases_images_python_is_one_a_serving_image_of_it_can_have():
    m = load_matrix(ROOT / "matrix.yaml")
    rel = m.serving("0.23.0")
    assert rel.images_python() == "3.12" and all(i.python == "3.12" for i in rel.images)
    narrow = replace(rel, requires_python=">=3.13")     # its images' 3.12 no longer fits: none
    assert narrow.images_python() is None
