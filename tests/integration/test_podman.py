"""The podman path, for real (root here; see the README for rootless): the CANN-only image
of CANN 8.0.RC3 (Debian 12, Python 3.11, the 910b kernels) for the build machine's own
arch, built by `invoke build --engine podman --cann 8.0.RC3` from its rendered Dockerfile
(bind, secret and cache mounts, the same build context), its image suite run through
testinfra's podman backend before the tag, the secrets scan on podman's own image,
`invoke test --image`, push and join to the local registry, and `invoke run --dry` on a
910B host's layout; its devel image (`--devel`) is built on it, natively too. It is built
--reproducible: `invoke verify` builds it again from its labels and finds the same image ID,
names the layer and file planted in a copy, and the rebuild's push to the registry uploads no
layer.

Why the CANN-only image: what differs with podman is the engine, not the framework. The
runtime Dockerfile's steps up to CANN are every image's; torch and torch_npu are two more pip
layers of the same kind as CANN's own, which docker builds in the lane's 2.1.0 image.

Why the build machine's arch: podman users build on their Kunpeng (arm64) servers, where
podman builds natively, as here; the cross-arch steps (qemu, the fast path's native pip
stages) are docker's in the lane's 2.1.0 arm64 image, and podman's command lines for them
are held against the fake engine (tests/unit/test_engine.py). Until 2026-11-27 this module
built the arm64 image under qemu, twice with verify (560-700 s of every run).

podman and docker share no image store and no layer cache. So that this module proves what
differs with podman without installing the OS packages a second time, podman starts FROM
docker's image of the same Dockerfile's first stage (the OS packages and Python), moved over
with `docker save | podman load`; every later stage (the venv, CANN's Python packages, CANN,
the project's files) podman builds itself."""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import time

import pytest

from ascend_build.images.registry import platforms_of
from ascend_build.matrix import load_matrix
from ascend_build.platforms import host
from tests.conftest import copy_matrix, link_locks, usable_engine
from tests.doubles.cann_double import make_run
from tests.integration.conftest import ROOT, SECRET_MARKER, image_exists, scan_saved

# The CANN-only image of the lane's CANN release, for the build machine's arch: no qemu.
HOST = host()
PLATFORM = HOST.docker if HOST else "linux/arm64"
ARCH = HOST.suffix if HOST else "arm64"
CANN_ONLY = dict(stack="cann8.0.RC3", os="debian12", python="3.11", platform=PLATFORM)
SELECT = ["--cann", "8.0.RC3", "--os", "debian12", "--python", "3.11", "--platform", PLATFORM]

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
def host_packages(tmp_path_factory):
    """The CANN 8.0.RC3 doubles of the lane's `packages`, for the build machine's arch."""
    folder = tmp_path_factory.mktemp("cann-double-host")
    machine = HOST.arch if HOST else "aarch64"
    make_run(folder, "toolkit", "8.0.RC3", machine)
    make_run(folder, "kernels", "8.0.RC3", machine, chip="910b")
    return folder


@pytest.fixture(scope="module")
def host_matrix(tmp_path_factory, host_packages):
    """A copy of matrix.yaml with those doubles pinned by `invoke pin`."""
    path = link_locks(copy_matrix(tmp_path_factory.mktemp("matrix-host")))
    out = invoke("pin", "--matrix", str(path), "--packages", str(host_packages))
    assert out.returncode == 0 and out.stdout.count("pinned ") == 2, out.stdout + out.stderr
    return path


@pytest.fixture(scope="module")
def podman_base(request, podman, engine, host_matrix, ca_bundle):
    """OS_BASE in podman's store: docker's `python-distro` stage of the cell's Dockerfile
    (the OS packages and Python; docker's layer cache keeps it from run to run)."""
    from ascend_build import engine as eng
    base = request.getfixturevalue("arm64_base" if ARCH == "arm64" else "amd64_base")
    from ascend_build.images.render import runtime_dockerfile
    m = load_matrix(host_matrix)
    cell = m.cell(**CANN_ONLY)
    ref = OS_BASE.format(arch=ARCH)
    req = eng.BuildRequest(dockerfile=ROOT / runtime_dockerfile(m, cell.stack, cell.os).path, context=ROOT / "images",
                           platform=PLATFORM, target="python-distro", tags=[ref], network="host",
                           build_args={"BASE_IMAGE": base, "PYTHON_FROM": "distro"},
                           secrets={"ca-bundle": ca_bundle} if ca_bundle else {})
    cmd, env = engine.build_command(req)
    made = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True)
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    saved = subprocess.Popen(engine.command("save", ref), stdout=subprocess.PIPE)
    loaded = subprocess.run(podman.command("load"), stdin=saved.stdout, capture_output=True, text=True)
    assert saved.wait() == 0 and loaded.returncode == 0, loaded.stderr
    return OS_BASE


def invoke(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=ROOT, capture_output=True, text=True, **kw)


def site_args(podman_base, host_matrix, ca_bundle) -> list[str]:
    return ["--base-image", f"debian:bookworm={podman_base}", "--matrix", str(host_matrix),
            *(["--ca-bundle", str(ca_bundle)] if ca_bundle else [])]


@pytest.fixture(scope="module")
def podman_built(podman, podman_base, host_packages, host_matrix, ca_bundle):
    started = time.monotonic()
    out = invoke("build", "--engine", "podman", *SELECT, "--packages", str(host_packages), "--offline",
                 "--require-pins", *site_args(podman_base, host_matrix, ca_bundle), "--repository", REPO,
                 "--reproducible", env={**os.environ, "ASCEND_BUILD_CACHE": str(host_packages / "cache")})
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert f"pip runs in the image ({PLATFORM})" in out.stdout, "a native build: pip in the image, no qemu"
    print(f"podman build of the CANN-only {ARCH} image (every stage after the OS one): {time.monotonic() - started:.0f} s")
    return out, f"{REPO}:{load_matrix(host_matrix).cell(**CANN_ONLY).name}-{ARCH}"


def test_podman_builds_tests_then_tags(podman, podman_built):
    out, tag = podman_built
    assert f"engine: {podman.client}" in out.stdout and "podman build" in out.stdout
    suite = out.stdout.split("tests/image", 1)[1].split("tested and tagged")[0]
    assert " passed" in suite and " failed" not in suite
    assert image_exists(podman, tag)
    arch = subprocess.run(podman.command("image", "inspect", "--format", "{{.Architecture}}", tag),
                          capture_output=True, text=True).stdout.strip()
    assert arch == ARCH


def test_devel_image_on_the_tested_cann_only_image(podman, podman_built, podman_base, host_packages, host_matrix,
                                                   ca_bundle):
    """`invoke build --cann 8.0.RC3 --devel` (images/devel.py): the CANN-only image above
    reused by its content tag (not built again), the devel image FROM it natively (its OS tools
    from the Debian mirror, its Python pins from its lock), its suite and then the CANN-only
    image's run on it before its tag; its layers are the CANN-only image's and its own."""
    started = time.monotonic()
    out = invoke("build", "--engine", "podman", *SELECT, "--devel", "--packages", str(host_packages), "--offline",
                 "--require-pins", *site_args(podman_base, host_matrix, ca_bundle), "--repository", REPO, "--reproducible",
                 env={**os.environ, "ASCEND_BUILD_CACHE": str(host_packages / "cache")})
    print(f"podman build of the devel image on the CANN-only {ARCH} image, its suites included: "
          f"{time.monotonic() - started:.0f} s")
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert "tested when it was tagged from these same inputs: reused" in out.stdout, "the CANN-only image is reused"
    suites = out.stdout.split("tests/devel_image", 1)[1].split("tested and tagged")[0]
    assert "tests/image" in suites and " passed" in suites and " failed" not in suites
    tag = f"{podman_built[1].rsplit('-', 1)[0]}-devel-{ARCH}"
    assert image_exists(podman, tag)

    def inspect(ref: str) -> dict:
        shown = subprocess.run(podman.command("image", "inspect", ref), capture_output=True, text=True)
        assert shown.returncode == 0, shown.stderr
        return json.loads(shown.stdout)[0]
    cann_only, built = inspect(podman_built[1]), inspect(tag)
    layers = cann_only["RootFS"]["Layers"]
    assert built["RootFS"]["Layers"][:len(layers)] == layers and len(built["RootFS"]["Layers"]) > len(layers)
    assert built["Config"]["Labels"]["io.ascend-build.kind"] == "devel"
    assert built["Config"]["WorkingDir"] == "/opt"
    print(f"devel image {built['Size'] / 1e6:.0f} MB, the CANN-only image {cann_only['Size'] / 1e6:.0f} MB; suites: "
          + "; ".join(line.strip("= ") for line in suites.splitlines() if " passed" in line))


def test_invoke_test_runs_the_suite_on_an_image_in_podmans_store(podman, podman_built, host_matrix):
    """`invoke test --image REF`: the image suite on its own, on the tagged image (the same
    function the gate ran above, steps.run_image_tests, here through the task: its exit
    code and its output). The task asks podman's store, not docker's: an image only
    docker has is not found. (A native image: its suite runs without qemu.)"""
    _, tag = podman_built
    out = invoke("test", "--image", tag, "--engine", "podman", "--matrix", str(host_matrix))
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and " failed" not in out.stdout
    assert "tests/image" in out.stdout
    out = invoke("test", "--image", "ascend-build-test/debian:bookworm-arm64", "--engine", "podman",
                 "--matrix", str(host_matrix))
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    assert f"in {podman.client}'s store" in out.stderr


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


def test_push_and_join_with_podman(podman, podman_built, registry, host_matrix):
    cell = load_matrix(host_matrix).cell(**CANN_ONLY)
    assert cell.name == "cann8.0.rc3-910b-debian12-py3.11", cell.name
    remote = f"{registry}/podman-runtime"
    select = [*SELECT, "--matrix", str(host_matrix)]
    out = invoke("push", "--engine", "podman", "--registry", remote, "--repository", REPO, *select)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"pushed {remote}:{cell.name}-{ARCH}" in out.stdout
    assert f"manifest list {remote}:{cell.name}" in out.stdout
    assert platforms_of(podman, f"{remote}:{cell.name}", registry) == [PLATFORM]
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


@pytest.fixture(scope="module")
def verified(podman, podman_built, podman_base, host_packages, host_matrix, ca_bundle):
    """`invoke verify` of the reproducible image: rebuilt from its labels, every step,
    and compared; the rebuild kept (--keep) for the tests below."""
    started = time.monotonic()
    out = invoke("verify", "--image", podman_built[1], "--engine", "podman", "--packages", str(host_packages),
                 "--offline", *site_args(podman_base, host_matrix, ca_bundle), "--keep",
                 env={**os.environ, "ASCEND_BUILD_CACHE": str(host_packages / "cache")})
    print(f"invoke verify (rebuild and compare): {time.monotonic() - started:.0f} s")
    kept = next((line.split()[-1] for line in out.stdout.splitlines() if line.startswith("the rebuild is kept as ")),
                None)
    return out, kept


def test_verify_rebuilds_the_same_image(podman, podman_built, verified):
    out, kept = verified
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-3000:]
    image_id = subprocess.run(podman.command("image", "inspect", "--format", "{{.Id}}", podman_built[1]),
                              capture_output=True, text=True).stdout.strip()
    assert f"image ID: the same, sha256:{image_id}" in out.stdout
    assert f"verified: {podman_built[1]} is the same bytes, layer for layer" in out.stdout
    rows = [line for line in out.stdout.splitlines() if re.match(r"\s+\d+  sha256:", line)]
    assert len(rows) > 5 and all(" same: " in row for row in rows), rows
    assert kept and image_exists(podman, kept)


def plant(podman, image: str, ref: str) -> tuple[int, str]:
    """A copy of `image` with one file of one layer changed (a byte appended), loaded as
    `ref`: (the layer's index, the file). The smallest layer with a file under
    usr/local/Ascend (the CANN toolkit's), so the copy costs little."""
    saved = subprocess.run(podman.command("save", image), capture_output=True, check=True).stdout
    outer = tarfile.open(fileobj=io.BytesIO(saved))
    manifest = json.load(outer.extractfile("manifest.json"))
    config = json.load(outer.extractfile(manifest[0]["Config"]))
    sizes = [(outer.getmember(name).size, i, name) for i, name in enumerate(manifest[0]["Layers"])]

    def cann_file(name: str):
        inner = tarfile.open(fileobj=io.BytesIO(outer.extractfile(name).read()))
        return inner, next((m for m in inner.getmembers() if m.isfile() and m.name.startswith("usr/local/Ascend/")),
                           None)
    index, inner, target = next((i, *found) for _, i, name in sorted(sizes) if (found := cann_file(name))[1])
    new = io.BytesIO()
    with tarfile.open(fileobj=new, mode="w", format=tarfile.PAX_FORMAT) as out:
        for m in inner.getmembers():
            data = inner.extractfile(m).read() if m.isfile() else None
            if m.name == target.name:
                data += b"# planted\n"
                m.size = len(data)
            out.addfile(m, io.BytesIO(data) if data is not None else None)
    layer = new.getvalue()
    config["rootfs"]["diff_ids"][index] = "sha256:" + hashlib.sha256(layer).hexdigest()
    text = json.dumps(config).encode()
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as out:
        for i, member in enumerate(manifest[0]["Layers"]):
            data = layer if i == index else outer.extractfile(member).read()
            info = tarfile.TarInfo(f"{i}.tar")
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))
        for name, data in (("config.json", text), ("manifest.json", json.dumps(
                [{"Config": "config.json", "RepoTags": [ref],
                  "Layers": [f"{i}.tar" for i in range(len(manifest[0]["Layers"]))]}]).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))
    loaded = subprocess.run(podman.command("load"), input=archive.getvalue(), capture_output=True)
    assert loaded.returncode == 0, loaded.stderr.decode()
    return index, target.name


def test_verify_names_the_layer_and_file_planted_in_a_copy(podman, podman_built, verified):
    kept = verified[1]
    assert kept, "the rebuild was not kept"
    planted = "ascend-build-test/podman-runtime:planted"
    index, path = plant(podman, podman_built[1], planted)
    out = invoke("verify", "--image", planted, "--against", kept, "--engine", "podman")
    assert out.returncode == 7, out.stdout[-3000:] + out.stderr[-3000:]     # Differs
    lines = out.stderr.splitlines()
    row = next(i for i, line in enumerate(lines) if re.match(rf"\s+{index}  sha256:", line))
    assert "DIFFERS" in lines[row] and "1 in their content: " in lines[row + 1] and path in lines[row + 1]
    others = [line for line in lines if re.match(r"\s+\d+  sha256:", line) and line is not lines[row]]
    assert others and all(" same: " in line for line in others)
    assert "image ID: sha256:" in out.stderr


def test_the_rebuilds_push_uploads_no_layer(podman, podman_built, verified, registry):
    """The image pushed, then its rebuild to another tag of the same repository, through a
    relay that counts what podman sends: the registry has every layer already, so the
    second push sends only its questions (HEAD per blob) and the manifest."""
    from tests.relay import Relay
    kept = verified[1]
    assert kept, "the rebuild was not kept"
    relay = Relay(int(registry.rsplit(":", 1)[1]))
    sent = []
    try:
        for image, tag in ((podman_built[1], "built"), (kept, "rebuilt")):
            before = relay.sent
            out = subprocess.run(podman.command("push", "--tls-verify=false", image,
                                                f"127.0.0.1:{relay.port}/podman-verify:{tag}"),
                                 capture_output=True, text=True)
            assert out.returncode == 0, out.stderr
            time.sleep(0.5)
            sent.append(relay.sent - before)
    finally:
        relay.close()
    print(f"bytes sent to the registry: the image {sent[0]:,}, its rebuild {sent[1]:,}")
    assert sent[0] > 100 << 20 and sent[1] < 64 << 10, sent
