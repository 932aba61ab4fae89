"""The fast path of a cross-arch build against the plain one, for real: the 2.1.0 arm64
image built by `invoke build` as CI builds it (pip on the build machine, for aarch64:
`--pip-on auto` picks it on an x86_64 host) and the same cell with `--pip-on target`
(pip under qemu in the image), both tested by the image suite before their tags. Their
Python environments must be the same: `pip freeze --all` to the byte, and the venv's
file list with every file's type, mode and size, the content of every file but the byte
code, and the byte code's target interpreter (its magic number)."""
from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile

import pytest

from ascend_build.platforms import PLATFORMS, host
from tests.integration.conftest import BOOKWORM, CA, ROOT

REPO = "ascend-build-test/plain-path"


@pytest.fixture(scope="module")
def plain(engine, built, arm64_base, packages, pinned_matrix, tmp_path_factory):
    """The same cell, pip run in the image (under qemu on this machine). From another
    folder, so that its log, manifest and SBOM (.build/) do not replace the CI build's."""
    cmd = [sys.executable, "-m", "invoke", "--search-root", str(ROOT), "build", "--torch", "2.1.0", "--os", "debian12", "--python", "3.11",
           "--platform", "linux/arm64", "--packages", str(packages), "--offline", "--require-pins",
           "--base-image", f"debian:bookworm={BOOKWORM}", "--repository", REPO, "--matrix", str(pinned_matrix),
           "--pip-on", "target", "--network", "host"]
    if CA.exists():
        cmd += ["--ca-bundle", str(CA)]
    out = subprocess.run(cmd, cwd=tmp_path_factory.mktemp("plain-path"), capture_output=True, text=True,
                         env={**os.environ, "ASCEND_BUILD_CACHE": str(packages / "cache")})
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert "pip runs in the image (linux/arm64)" in out.stdout
    return out


def _tag(out: subprocess.CompletedProcess) -> str:
    return out.stdout.split("tested and tagged ", 1)[1].split("\n", 2)[1].strip()


def venv_listing(engine, image: str) -> dict[str, tuple]:
    """Every entry of /opt/venv, read natively from `docker cp` (no emulated process):
    path -> (type, mode, size, sha256 of the content or, for byte code, its magic number)."""
    cid = subprocess.run(engine.command("create", "--platform", "linux/arm64", image), capture_output=True,
                         text=True, check=True).stdout.strip()
    try:
        raw = subprocess.run(engine.command("cp", f"{cid}:/opt/venv", "-"), capture_output=True, check=True).stdout
    finally:
        subprocess.run(engine.command("rm", cid), capture_output=True)
    listing = {}
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        for m in tar:
            if m.isdir():
                listing[m.name] = ("dir", m.mode)
            elif m.issym():
                listing[m.name] = ("link", m.linkname)
            else:
                data = tar.extractfile(m).read()
                # .pyc: header + marshal data, whose bytes depend on reference counts
                # at compile time; what matters is which interpreter it is for.
                what = data[:4].hex() if m.name.endswith(".pyc") else hashlib.sha256(data).hexdigest()
                listing[m.name] = ("file", m.mode, m.size if not m.name.endswith(".pyc") else None, what)
    return listing


def freeze(engine, image: str) -> str:
    out = subprocess.run(engine.command("run", "--rm", "--platform", "linux/arm64", "--entrypoint", "pip", image,
                                        "freeze", "--all"), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.skipif(host() is None or not PLATFORMS["linux/arm64"].emulated(),
                    reason="the fast path is for cross-arch builds; this machine builds arm64 natively")
def test_fast_path_installs_what_the_plain_path_installs(engine, built, plain):
    assert "pip runs on the build machine" in built.stdout, "CI's arm64 build must take the fast path"
    fast_tag, plain_tag = _tag(built), _tag(plain)
    assert freeze(engine, fast_tag) == freeze(engine, plain_tag)
    fast, slow = venv_listing(engine, fast_tag), venv_listing(engine, plain_tag)
    assert len(fast) > 5000, "the venv with torch has thousands of files"
    only_fast, only_plain = sorted(set(fast) - set(slow)), sorted(set(slow) - set(fast))
    assert (only_fast, only_plain) == ([], []), "files in one venv only"
    differ = {path: (fast[path], slow[path]) for path in fast if fast[path] != slow[path]}
    assert differ == {}, "files that differ (fast, plain)"
    assert sum(1 for v in fast.values() if v[0] == "file" and v[2] is None) > 1000, "byte code was compared"

