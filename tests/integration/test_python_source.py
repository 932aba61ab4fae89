"""The CPython-from-source path of the runtime Dockerfile, built for real: the stage
that serves stacks whose Python the distro does not ship. The first URL in the matrix
(python.org) is unreachable here, so this also proves the fallback to the mirror URL
and the sha256 check. Built natively (linux/amd64) to keep CI time sane."""
from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

from ascend_build import engine as eng
from ascend_build.matrix import load_matrix

ROOT = Path(__file__).resolve().parents[2]
CA = Path("/etc/ssl/certs/ca-certificates.crt")


def build_stage(engine, base: str, tmp_path: Path, sha256: str, tag: str) -> int:
    # A refused loopback URL, unique per run, goes first: it makes the stage rebuild
    # (its URLs are part of the step) instead of coming from the layer cache.
    m = load_matrix(ROOT / "matrix.yaml")
    source = m.cell("2.1.0", "debian12", "3.9", platform="linux/amd64").python_source
    assert source is not None
    ctx = tmp_path / "ctx"
    ctx.mkdir(exist_ok=True)
    req = eng.BuildRequest(dockerfile=ROOT / "images/runtime/2.1.0/debian12/Dockerfile", context=ctx,
                           platform="linux/amd64", target="venv-target", tags=[tag],
                           # The source Python and the venv made with it, in the image.
                           build_args={"BASE_IMAGE": base, "PYTHON_FROM": "source", "PYTHON_VERSION": source.version,
                                       "PYTHON_SHA256": sha256,
                                       "PYTHON_URLS": " ".join((f"http://127.0.0.1:9/{uuid.uuid4().hex}.tar.xz",)
                                                               + source.urls)},
                           secrets={"ca-bundle": CA} if CA.exists() else {})
    cmd, env = engine.build_command(req)
    return eng.run(cmd, env, tmp_path / "build.log")


def test_cpython_from_pinned_tarball(engine, amd64_base, tmp_path):
    tag = "ascend-build-test/python-source:3.9"
    sha = load_matrix(ROOT / "matrix.yaml").pythons["3.9"].sha256
    assert build_stage(engine, amd64_base, tmp_path, sha, tag) == 0, (tmp_path / "build.log").read_text()[-3000:]
    log = (tmp_path / "build.log").read_text()
    for url in ("http://127.0.0.1:9/", "https://www.python.org/ftp/python/3.9.2/Python-3.9.2.tar.xz"):
        assert any(line.rstrip().endswith("not reachable, trying the next URL") and f"python source: {url}" in line
                   for line in log.splitlines()), url
    code = "import sys, ssl, sqlite3, ctypes, lzma, bz2, zlib, readline; print('%d.%d.%d' % sys.version_info[:3])"
    out = subprocess.run(engine.command("run", "--rm", tag, "/opt/venv/bin/python", "-c", code),
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "3.9.2"


def test_wrong_tarball_sum_fails_the_build(engine, amd64_base, tmp_path):
    assert build_stage(engine, amd64_base, tmp_path, "0" * 64, "ascend-build-test/python-source:bad") != 0
    assert "FAILED" in (tmp_path / "build.log").read_text()
