"""A line users run today, built for real: torch 2.10.0 + torch_npu 2.10.0 (real aarch64
wheels from PyPI) on CANN 9.0.0, linux/arm64, Debian 13 with its Python 3.13 (a Python
Huawei's list stops short of and PyPI's wheels reach: pypi_pythons). The CANN
installers are the test double of the 9.x era (operator package, cann-9.0.0 tree,
cann/set_env.sh), handed in the form Huawei publishes them: .zip files, checked against
the sums in a matrix copy where the doubles' sums stand in for Huawei's."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ascend_build.matrix import load_matrix
from tests.integration.conftest import CA, REPO, ROOT, TRIXIE, image_exists

STACK = dict(stack="2.10.0", os="debian13", python="3.13", platform="linux/arm64")


@pytest.fixture(scope="module")
def built_2100(engine, trixie_arm64_base, zipped_packages, matrix_900, tmp_path_factory):
    cmd = [sys.executable, "-m", "invoke", "build", "--torch", "2.10.0", "--os", "debian13", "--python", "3.13",
           "--platform", "linux/arm64", "--packages", str(zipped_packages), "--offline", "--require-pins",
           "--base-image", f"debian:trixie={TRIXIE}", "--repository", REPO, "--matrix", str(matrix_900)]
    if CA.exists():
        cmd += ["--ca-bundle", str(CA)]
    cache = tmp_path_factory.mktemp("cache-900")
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "ASCEND_BUILD_CACHE": str(cache)})
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    return out, cache


def test_the_2_10_line_on_cann_9_builds_from_the_published_zips_and_passes_its_suite(engine, built_2100, matrix_900):
    out, cache = built_2100
    cell = load_matrix(matrix_900).cell(**STACK)
    assert cell.cann.era.name == "9" and cell.kernels.file == "Ascend-cann-910b-ops_9.0.0_linux-aarch64.run"
    # Both installers came out of their .zip after its sum was checked.
    assert out.stdout.count("sha256 matches Huawei's published sum; took") == 2, out.stdout[-3000:]
    assert not any(p.suffix == ".run" for p in (cache / "cann").glob("*")), "only the verified .run copies are kept"
    suite = out.stdout.split("tests/image", 1)[1].split("tested and tagged")[0]
    assert " passed" in suite and " failed" not in suite and " error" not in suite.lower()
    tag = f"{REPO}:{cell.name}-arm64"
    assert image_exists(engine, tag)
    labels = subprocess.run(engine.command("image", "inspect", "--format", "{{json .Config.Labels}}", tag),
                            capture_output=True, text=True).stdout
    assert '"io.ascend-build.driver":"26.0.RC1"' in labels and '"io.ascend-build.cann":"9.0.0"' in labels
    env = subprocess.run(engine.command("image", "inspect", "--format", "{{json .Config.Env}}", tag),
                         capture_output=True, text=True).stdout
    assert "ASCEND_TOOLKIT_HOME=/usr/local/Ascend/cann-9.0.0" in env


def test_doctor_reads_the_built_image_and_matches_it_to_a_host(engine, built_2100, matrix_900, tmp_path):
    """`invoke doctor --image` on the image built above: CANN 9.0.0's image carries the drivers
    its release notes say it runs on (25.0.x to 26.1.0); a host on 24.1.0 is refused and told
    which line would run; 25.5.0 (in the 25.5 series) can."""
    from tests.doubles.host_roots import make_host
    tag = f"{REPO}:{load_matrix(matrix_900).cell(**STACK).name}-arm64"
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
