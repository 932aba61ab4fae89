"""Fixtures shared by the real-engine tests: Debian base images made by debootstrap,
the CANN test double's installers, and a matrix copy with the doubles pinned."""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
import zipfile
from pathlib import Path

import pytest

from ascend_build.hashing import sha256_of
from ascend_build.inputs.baseimage import debian_base
from ascend_build.locking.torch_index import TEST_ONLY_SWITCH
from tests.conftest import committed_imported_text, copy_matrix, in_ci, link_locks, once
from tests.doubles.cann_double import make_packages, make_run
from tests.doubles.net_doubles import IndexDouble, ProxyDouble

ROOT = Path(__file__).resolve().parents[2]
BOOKWORM = "ascend-build-test/debian:bookworm-{arch}"
BULLSEYE = "ascend-build-test/debian:bullseye-{arch}"
TRIXIE = "ascend-build-test/debian:trixie-{arch}"
REPO = "ascend-build-test/runtime"
CA = Path("/etc/ssl/certs/ca-certificates.crt")
DOUBLES = ROOT / "tests" / "doubles"
# The 26.x train's image (test_build_train_26.py), which the serving image (test_serving.py)
# is built on in the same lane: torch from PyPI in place of PyTorch's CPU index, by the named
# test-only switch (said in its labels: not an image to ship).
STACK_26 = dict(stack="2.10.0-26.1.0", os="debian13", python="3.13", platform="linux/arm64")
SWITCHED = {**os.environ, TEST_ONLY_SWITCH: "1"}


def invoke_cached(cache: Path, *args: str) -> subprocess.CompletedProcess:
    """`invoke ARGS` from the checkout, with a package and wheel cache of its own."""
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "ASCEND_BUILD_CACHE": str(cache)})


def image_exists(engine, ref: str) -> bool:
    return subprocess.run(engine.command("image", "inspect", ref), capture_output=True).returncode == 0


def _base(engine, tmp_path_factory, pattern: str, suite: str, platform: str = "linux/arm64") -> str:
    """The base image for `platform`, and for the build machine's platform too: a cross
    build installs its Python packages there (the fast path), from the same release.
    Each is made once per run, whichever lane asks first (the other waits for it)."""
    from ascend_build.platforms import PLATFORMS, host
    wanted = [PLATFORMS[platform]] + [p for p in [host()] if p and p.docker != platform]
    for target in wanted:
        ref = pattern.format(arch=target.suffix)

        def make(ref=ref, target=target):
            if not image_exists(engine, ref):
                debian_base(engine, suite, target.docker, ref)
            return ref
        once(tmp_path_factory, ref.replace("/", "_").replace(":", "_"), make)
    return pattern.format(arch=PLATFORMS[platform].suffix)


@pytest.fixture(scope="session")
def arm64_base(engine, tmp_path_factory):
    return _base(engine, tmp_path_factory, BOOKWORM, "bookworm")


@pytest.fixture(scope="session")
def amd64_base(engine, tmp_path_factory):
    return _base(engine, tmp_path_factory, BOOKWORM, "bookworm", platform="linux/amd64")


@pytest.fixture(scope="session")
def bullseye_arm64_base(engine, tmp_path_factory):
    return _base(engine, tmp_path_factory, BULLSEYE, "bullseye")


@pytest.fixture(scope="session")
def trixie_arm64_base(engine, tmp_path_factory):
    return _base(engine, tmp_path_factory, TRIXIE, "trixie")


@pytest.fixture(scope="session")
def packages(tmp_path_factory) -> Path:
    return make_packages(tmp_path_factory.mktemp("cann-double"))


@pytest.fixture(scope="session")
def pinned_matrix(tmp_path_factory, packages) -> Path:
    """A copy of matrix.yaml with the doubles pinned by `invoke pin`, as a user would."""
    path = copy_matrix(tmp_path_factory.mktemp("matrix"))
    link_locks(path)
    out = subprocess.run([sys.executable, "-m", "invoke", "pin", "--matrix", str(path), "--packages", str(packages)],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("pinned ") == 2
    return path


STACK = dict(stack="2.1.0", os="debian12", python="3.11", platform="linux/arm64")
SECRET_MARKER = "ascend-build-secret-marker-" + uuid.uuid4().hex


@pytest.fixture(scope="session")
def ca_bundle(tmp_path_factory) -> Path | None:
    """The host's CA bundle (pip needs it behind a TLS proxy) plus a unique marker line,
    which PEM readers skip, so a scan of the image can prove no byte of it stayed."""
    if not CA.exists():
        return None
    path = tmp_path_factory.mktemp("secrets") / "ca-bundle.pem"
    path.write_text(CA.read_text() + f"\n# {SECRET_MARKER}\n")
    return path


@pytest.fixture(scope="session")
def site():
    """A site's proxy and private index, each with a password of this run (doubles on
    127.0.0.1, so the build uses the host network, as with a local cntlm)."""
    with ProxyDouble("proxy-user", "proxy-pw-" + uuid.uuid4().hex) as proxy, \
            IndexDouble("index-user", "index-pw-" + uuid.uuid4().hex) as index:
        yield proxy, index


def build_2_1_0(packages: Path, matrix: Path, ca_bundle: Path | None, *more: str,
                cache: Path | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`invoke build` of the lane's 2.1.0 Debian 12 cell, with the flags every build of it
    here shares (the build network is part of BuildKit's cache key: all use the host's,
    which the main build's proxy on 127.0.0.1 needs)."""
    cmd = [sys.executable, "-m", "invoke", "--search-root", str(ROOT), "build", "--torch", "2.1.0", "--os",
           "debian12", "--python", "3.11", "--platform", "linux/arm64", "--packages", str(packages), "--offline",
           "--base-image", f"debian:bookworm={BOOKWORM}", "--matrix", str(matrix), "--network", "host",
           *(["--ca-bundle", str(ca_bundle)] if ca_bundle else []), *more]
    if "--repository" not in more:
        cmd += ["--repository", REPO]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "ASCEND_BUILD_CACHE": str(cache or packages / "cache")})


@pytest.fixture(scope="session")
def built(engine, arm64_base, packages, pinned_matrix, ca_bundle, site, tmp_path_factory):
    """The lane's one build of its 2.1.0 image, as a site behind a proxy with a private
    index and a private CA runs it: every layer is made with those secrets (--no-cache, so
    also on a machine whose layer cache has seen this build before), and every other build
    of the lane takes these layers (or this tested image) as they are. Once per run: a
    module of the other lane that asks for it (the newcomer's walk) waits for this one."""
    def make():
        proxy, index = site
        out = build_2_1_0(packages, pinned_matrix, ca_bundle, "--require-pins", "--no-cache", "--proxy", proxy.url,
                          "--pip-index-url", index.url)
        return {"args": [str(a) for a in out.args], "code": out.returncode, "out": out.stdout, "err": out.stderr}
    made = once(tmp_path_factory, "built-2.1.0", make)
    out = subprocess.CompletedProcess(made["args"], made["code"], made["out"], made["err"])
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    return out


def zipped_doubles(made: Path, folder: Path, release: str, machine: str) -> Path:
    """A release's CANN doubles in `folder` in the form Huawei publishes them: .zip files
    around the toolkit's and the kernels' .run installers (made in `made`); and NNAL, which
    no deployer data lists (imported from the official images), as the bare .run they take."""
    for run in (make_run(made, "toolkit", release, machine), make_run(made, "kernels", release, machine)):
        with zipfile.ZipFile(folder / (run.name[:-4] + ".zip"), "w") as archive:
            archive.write(run, run.name)
    make_run(folder, "nnal", release, machine)
    return folder


def zipped_matrix(folder: Path, packages: Path, copy_locks: bool = False) -> Path:
    """A matrix copy in `folder` whose imported facts hold the doubles' .zip sums in place of
    Huawei's (`zip_sha256`, what `invoke update` would hold for them), its locks beside it (a
    copy where a build writes one, else a link), and the NNAL double pinned by `invoke pin
    --packages`, as README says (imported NNAL carries no sum of its own)."""
    imported = committed_imported_text()
    for archive in packages.glob("*.zip"):
        run = archive.name[:-4] + ".run"
        imported, count = re.subn(rf"(\{{file: {re.escape(run)}, zip_sha256: )[0-9a-f]{{64}}",
                                  rf"\g<1>{sha256_of(archive)}", imported)
        assert count == 1, run
    matrix = copy_matrix(folder, imported=imported)
    if copy_locks:
        shutil.copytree(ROOT / "locks", folder / "locks")
    else:
        link_locks(matrix)
    pin = subprocess.run([sys.executable, "-m", "ascend_build", "pin", "--matrix", str(matrix), "--packages",
                          str(packages)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    nnal = next(packages.glob("Ascend-cann-nnal_*.run")).name
    assert pin.returncode == 0 and f"pinned {nnal}" in pin.stdout, pin.stdout + pin.stderr
    return matrix


@pytest.fixture(scope="session")
def zipped_packages(tmp_path_factory) -> Path:
    """The CANN 9.0.0 doubles (9.x era: operator package, cann-9.0.0 tree, cann/set_env.sh)
    as Huawei publishes them (zipped_doubles)."""
    return zipped_doubles(tmp_path_factory.mktemp("made-900"), tmp_path_factory.mktemp("cann-900-zips"), "9.0.0",
                          "aarch64")


@pytest.fixture(scope="session")
def matrix_900(tmp_path_factory, zipped_packages) -> Path:
    return zipped_matrix(tmp_path_factory.mktemp("matrix-900"), zipped_packages)


MINDSPORE_CELL = dict(stack="mindspore2.9.0", os="debian12", python="3.11", platform="linux/arm64")


@pytest.fixture(scope="session")
def mindspore_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache-mindspore")


@pytest.fixture(scope="session")
def built_mindspore(engine, arm64_base, zipped_packages, matrix_900, mindspore_cache):
    """MindSpore 2.9.0 on the CANN 9.0.0 doubles (test_mindspore.py; the newcomer's walk takes
    it as it is)."""
    cmd = [sys.executable, "-m", "invoke", "build", "--mindspore", "2.9.0", "--os", "debian12", "--python", "3.11",
           "--platform", "linux/arm64", "--packages", str(zipped_packages), "--offline", "--require-pins",
           "--base-image", f"debian:bookworm={BOOKWORM}", "--repository", REPO, "--matrix", str(matrix_900),
           "--network", "host"]
    if CA.exists():
        cmd += ["--ca-bundle", str(CA)]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "ASCEND_BUILD_CACHE": str(mindspore_cache)})
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    return out


@pytest.fixture(scope="session")
def registry(tmp_path_factory):
    exe = shutil.which("docker-registry")
    if exe is None:
        message = "docker-registry is not installed (Debian: apt-get install docker-registry)"
        pytest.fail(message) if in_ci() else pytest.skip(message)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    folder = tmp_path_factory.mktemp("registry")
    config = folder / "config.yml"
    config.write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {folder / 'data'}\n"
                      f"  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n")
    with open(folder / "registry.log", "w") as log:
        proc = subprocess.Popen([exe, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2)
                break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail(f"registry did not start: {(folder / 'registry.log').read_text()[-2000:]}")
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def scan_saved(engine, tag: str, needles: dict[str, str]) -> tuple[int, set[str]]:
    """(bytes read, needles found) in `save` of an image: every layer, byte for byte."""
    saved = subprocess.Popen(engine.command("save", tag), stdout=subprocess.PIPE)
    assert saved.stdout is not None
    raw = {what: needle.encode() for what, needle in needles.items()}
    longest = max(len(n) for n in raw.values())
    total, tail, found = 0, b"", set()
    for block in iter(lambda: saved.stdout.read(1 << 20), b""):
        total += len(block)
        window = tail + block
        found |= {what for what, needle in raw.items() if needle in window}
        tail = block[-longest:]
    assert saved.wait() == 0
    return total, found


def build_stage(engine, matrix_path: Path, cell: dict, site, stage: str, tag: str, log: Path) -> str:
    """One stage of a cell's runtime Dockerfile (`stage` with {pip} for where pip runs),
    built by the engine with what `invoke build` would give it, tagged `tag`: a check of
    one step that needs no whole image (no project files, no suite, no tag of the cell)."""
    import dataclasses

    from ascend_build.images import build as runtime_build
    from ascend_build.images import steps
    from ascend_build.inputs.options import Inputs
    from ascend_build.matrix import load_matrix
    m = load_matrix(matrix_path)
    p = runtime_build.prepare(m, m.cell(**cell), site, Inputs(repository=tag.split(":")[0]), engine)
    target = stage.format(pip=p.plan.host_args["PIP_ON"])
    ctx = log.parent / f"context-{target}"
    runtime_build._stage(p.plan, ctx)
    with steps.secrets(site.net) as secrets:
        req = dataclasses.replace(runtime_build._request(p, secrets, ctx), target=target, tags=[tag], iidfile=None,
                                  labels={})
        assert engine.build(req, log) == 0, log.read_text()[-4000:]
    shutil.rmtree(ctx, ignore_errors=True)
    return target


# The 2.10.0 line's source build on the new toolchain (test_source_build_trixie.py): the
# offline Debian 13 builder (gcc 13, Python 3.13) and the stand-in torch_npu compiled in it.
# A session's, so that test_build_train_26.py (the same lane, the same OS and Python) can load
# that wheel's extension in its image instead of a second runtime image being built for it.
TRIXIE_BUILDER_REPO = "ascend-build-test/builder"
TRIXIE_BUILDER = f"{TRIXIE_BUILDER_REPO}:torch2.10.0-debian13-gcc13-py3.13-cross-arm64"   # trixie's gcc-13 cross compiler
TRIXIE_COMMON = ["--torch", "2.10.0", "--python", "3.13", "--platform", "linux/arm64",
                 "--base-image", f"debian:trixie={TRIXIE}"] + (["--ca-bundle", str(CA)] if CA.exists() else [])


@pytest.fixture(scope="session")
def trixie_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ascend-cache-trixie")


@pytest.fixture(scope="session")
def trixie_src(tmp_path_factory) -> Path:
    """The stand-in torch_npu tree, versioned for the 2.10.0 line (its tag's submodules:
    op-plugin and nlohmann)."""
    from tests.doubles import standin_repos as sr
    return sr.plain_tree(tmp_path_factory.mktemp("standin-2100") / "torch_npu_src", version="2.10.0", nlohmann=True)


@pytest.fixture(scope="session")
def trixie_builder(engine, trixie_arm64_base, trixie_cache):
    out = invoke_cached(trixie_cache, "builder", "--repository", TRIXIE_BUILDER_REPO, "--flavor", "debian13",
                        "--retest", *TRIXIE_COMMON)
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-2000:]
    return out


@pytest.fixture(scope="session")
def trixie_wheel(trixie_builder, trixie_cache, trixie_src) -> tuple[Path, str]:
    """(the wheel, `torch-npu`'s output)."""
    out = invoke_cached(trixie_cache, "torch-npu", "--repository", TRIXIE_BUILDER_REPO, "--flavor", "debian13",
                        "--src", str(trixie_src), *TRIXIE_COMMON)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    wheel = Path(out.stdout.strip().splitlines()[-1])
    assert wheel.is_file() and wheel.name.startswith("torch_npu-2.10.0-cp313-cp313-linux_aarch64"), wheel
    return wheel, out.stdout



# ------------------------------------------------------------------ the 26.x train's image
def _invoke(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env)


@pytest.fixture(scope="session")
def packages_910(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cann-910")
    for kind in ("toolkit", "kernels", "nnal"):
        make_run(folder, kind, "9.1.0", "aarch64", chip="910b")
    return folder


@pytest.fixture(scope="session")
def matrix_26(tmp_path_factory, packages_910):
    """A matrix copy (matrix.yaml as it is), the doubles pinned by `invoke pin`, and a lock
    made by `invoke lock` beside it (its own locks/ folder) under the test-only switch."""
    path = copy_matrix(tmp_path_factory.mktemp("matrix-26"))
    pinned = _invoke("pin", "--packages", str(packages_910), "--matrix", str(path))
    assert pinned.returncode == 0 and pinned.stdout.count("pinned ") == 3, pinned.stdout + pinned.stderr
    locked = _invoke("lock", "--torch", "2.10.0-26.1.0", "--python", "3.13", "--platform", "linux/arm64", "--matrix",
                     str(path), *(["--ca-bundle", str(CA)] if CA.exists() else []), env=SWITCHED)
    assert locked.returncode == 0, locked.stdout[-3000:] + locked.stderr[-3000:]
    return path


@pytest.fixture(scope="session")
def cache_26(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache-910")


def build_26_args(packages_910: Path, matrix_26: Path) -> list[str]:
    """`invoke build` of the 26.x train's image, as test_build_train_26.py builds it."""
    return ["--torch", "2.10.0-26.1.0", "--os", "debian13", "--python", "3.13", "--platform", "linux/arm64",
            "--packages", str(packages_910), "--offline", "--require-pins",
            "--base-image", f"debian:trixie={TRIXIE}", "--repository", REPO, "--matrix", str(matrix_26),
            *(["--ca-bundle", str(CA)] if CA.exists() else [])]


@pytest.fixture(scope="session")
def built_26(engine, trixie_arm64_base, packages_910, matrix_26, cache_26):
    # The default build network: the network is part of BuildKit's cache key.
    out = _invoke("build", *build_26_args(packages_910, matrix_26), env={**SWITCHED, "ASCEND_BUILD_CACHE": str(cache_26)})
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    return out


def image_tree(engine, image: str, platform: str = "linux/arm64") -> dict[str, tuple]:
    """An image's whole file system, read natively from `docker export` (no process of the
    image runs): path -> (type, mode, uid, gid, link target, sha256 of a file's content)."""
    import hashlib
    import tarfile
    cid = subprocess.run(engine.command("create", "--platform", platform, image, "true"), capture_output=True,
                         text=True, check=True).stdout.strip()
    tree = {}
    try:
        exported = subprocess.Popen(engine.command("export", cid), stdout=subprocess.PIPE)
        with tarfile.open(fileobj=exported.stdout, mode="r|") as tar:
            for m in tar:
                if m.name.split("/")[0] in ("proc", "sys", "dev", ".dockerenv"):
                    continue
                data = tar.extractfile(m) if m.isfile() else None
                tree[m.name] = (m.type, m.mode, m.uid, m.gid, m.linkname,
                                hashlib.sha256(data.read()).hexdigest() if data else None)
        assert exported.wait() == 0
    finally:
        subprocess.run(engine.command("rm", cid), capture_output=True)
    return tree
