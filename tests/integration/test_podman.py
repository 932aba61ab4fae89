"""The podman path, for real (root here; see the README for rootless): the 2.1.0 arm64
image built by `invoke build --engine podman` from the same Dockerfile (bind, secret and
cache mounts, the build machine's stages, the same build context), its image suite run
through testinfra's podman backend before the tag, the secrets scan on podman's own image,
`invoke test --image`, push and join to the local registry, and `invoke run --dry` on a
910B host's layout.

podman and docker share no image store and no layer cache. So that this module proves
what differs with podman without installing the OS packages under qemu a second time,
podman starts FROM docker's image of the same Dockerfile's first stage (the OS packages
and Python, which docker built for the main image), moved over with `docker save | podman
load`; every later stage (the venv, CANN, torch, torch_npu, the project's files) podman
builds itself."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from ascend_build.images.registry import platforms_of
from ascend_build.matrix import load_matrix
from tests.conftest import usable_engine
from tests.integration.conftest import BOOKWORM, ROOT, SECRET_MARKER, STACK, image_exists, scan_saved

REPO = "ascend-build-test/podman-runtime"


@pytest.fixture(scope="module")
def podman():
    return usable_engine("podman")


@pytest.fixture(scope="module", autouse=True)
def podman_store_tidied(podman):
    """When the module ends, podman's store gives back what it took: the images this
    module made or loaded (ascend-build-test/...) and the untagged stage images of its
    --no-cache build. docker's store and every other podman image stay."""
    yield
    listed = subprocess.run(podman.command("images", "--format", "{{.Repository}}:{{.Tag}}"),
                            capture_output=True, text=True).stdout.split()
    # podman may prefix local names (localhost/, docker.io/); 127.0.0.1: pushed to the test registry
    ours = [ref for ref in listed if "ascend-build-test/" in ref or ref.startswith("127.0.0.1:")]
    if ours:
        subprocess.run(podman.command("rmi", "--force", *ours), capture_output=True)
    subprocess.run(podman.command("image", "prune", "--force"), capture_output=True)


OS_BASE = "ascend-build-test/podman-os:bookworm-{arch}"


@pytest.fixture(scope="module")
def podman_base(podman, engine, built, arm64_base, amd64_base, pinned_matrix, ca_bundle):
    """OS_BASE in podman's store: for arm64 docker's `python-distro` stage of the cell's
    Dockerfile (from the main build's layer cache), for the build machine's arch the
    plain Debian base its native stages start from."""
    from ascend_build import engine as eng
    from ascend_build.matrix import load_matrix
    cell = load_matrix(pinned_matrix).cell(**STACK)
    arm64 = OS_BASE.format(arch="arm64")
    req = eng.BuildRequest(dockerfile=ROOT / cell.dockerfile, context=ROOT / "images", platform="linux/arm64",
                           target="python-distro", tags=[arm64], network="host",
                           build_args={"BASE_IMAGE": arm64_base, "PYTHON_FROM": "distro"},
                           secrets={"ca-bundle": ca_bundle} if ca_bundle else {})
    cmd, env = engine.build_command(req)
    assert subprocess.run(cmd, env={**os.environ, **env}, capture_output=True).returncode == 0
    refs = [arm64]
    from ascend_build.platforms import host
    if host() and host().suffix != "arm64":
        native = OS_BASE.format(arch=host().suffix)
        subprocess.run(engine.command("tag", BOOKWORM.format(arch=host().suffix), native), check=True)
        refs.append(native)
    for ref in refs:
        saved = subprocess.Popen(engine.command("save", ref), stdout=subprocess.PIPE)
        loaded = subprocess.run(podman.command("load"), stdin=saved.stdout, capture_output=True, text=True)
        assert saved.wait() == 0 and loaded.returncode == 0, loaded.stderr
    return OS_BASE


def invoke(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=ROOT, capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def podman_built(podman, podman_base, packages, pinned_matrix, ca_bundle):
    started = time.monotonic()
    out = invoke("build", "--engine", "podman", "--torch", "2.1.0", "--os", "debian12", "--python", "3.11",
                 "--platform", "linux/arm64", "--packages", str(packages), "--offline", "--require-pins",
                 "--base-image", f"debian:bookworm={podman_base}", "--repository", REPO, "--matrix", str(pinned_matrix),
                 *(["--ca-bundle", str(ca_bundle)] if ca_bundle else []),
                 env={**os.environ, "ASCEND_BUILD_CACHE": str(packages / "cache")})
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert "pip runs on the build machine" in out.stdout, "the fast path with podman too"
    print(f"podman build of the 2.1.0 arm64 image (every stage after the OS one): {time.monotonic() - started:.0f} s")
    return out, f"{REPO}:{load_matrix(pinned_matrix).cell(**STACK).name}-arm64"


def test_podman_builds_tests_then_tags(podman, podman_built):
    out, tag = podman_built
    assert f"engine: {podman.client}" in out.stdout and "podman build" in out.stdout
    suite = out.stdout.split("tests/image", 1)[1].split("tested and tagged")[0]
    assert " passed" in suite and " failed" not in suite
    assert image_exists(podman, tag)
    arch = subprocess.run(podman.command("image", "inspect", "--format", "{{.Architecture}}", tag),
                          capture_output=True, text=True).stdout.strip()
    assert arch == "arm64"


def test_invoke_test_runs_the_suite_in_podman(podman_built, pinned_matrix):
    out = invoke("test", "--image", podman_built[1], "--engine", "podman", "--matrix", str(pinned_matrix))
    assert out.returncode == 0, out.stdout[-4000:]
    assert " passed" in out.stdout and " failed" not in out.stdout


def test_no_secret_in_podmans_image(podman, podman_built, ca_bundle):
    """The CA bundle went in as a build secret: no byte of it in podman's layers, history or config."""
    if ca_bundle is None:
        pytest.skip("this machine has no CA bundle to pass as a secret")
    out, tag = podman_built
    assert SECRET_MARKER not in out.stdout + out.stderr
    for args in (("history", "--no-trunc", tag), ("image", "inspect", tag)):
        shown = subprocess.run(podman.command(*args), capture_output=True, text=True)
        assert shown.returncode == 0 and SECRET_MARKER not in shown.stdout and str(ca_bundle) not in shown.stdout
    total, found = scan_saved(podman, tag, {"CA bundle marker": SECRET_MARKER})
    assert total > 100 << 20, "podman save gave too little to be the image"
    assert not found


def test_push_and_join_with_podman(podman, podman_built, registry, pinned_matrix):
    cell = load_matrix(pinned_matrix).cell(**STACK)
    remote = f"{registry}/podman-runtime"
    select = ["--torch", "2.1.0", "--os", "debian12", "--python", "3.11", "--platform", "linux/arm64",
              "--matrix", str(pinned_matrix)]
    out = invoke("push", "--engine", "podman", "--registry", remote, "--repository", REPO, *select)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"pushed {remote}:{cell.name}-arm64" in out.stdout
    assert f"manifest list {remote}:{cell.name}" in out.stdout
    assert platforms_of(podman, f"{remote}:{cell.name}", registry) == ["linux/arm64"]
    again = invoke("push", "--engine", "podman", "--registry", remote, "--repository", REPO, *select)
    assert again.returncode == 0 and "skipped" in again.stdout, again.stdout + again.stderr


def test_run_dry_gives_podman_the_npus(podman_built, tmp_path):
    from tests.doubles.host_roots import make_host
    root = make_host(tmp_path / "host")
    out = invoke("run", "--engine", "podman", "--dry", "--force", "--image", podman_built[1],
                 "--host-root", str(root), "--devices", "0,1")
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip().splitlines()[-1]
    assert line.startswith(("podman run", "/usr/bin/podman run"))
    assert "--device /dev/davinci0" in line and "--device /dev/davinci1" in line and "/dev/davinci2" not in line
    assert "--device /dev/davinci_manager" in line and "--runtime" not in line
