"""`invoke build --all`: a cell that fails to build (its base image cannot be pulled
here) does not stop the next one, which is built, tested and tagged; the summary lists
each image with its status and log; the exit code is non-zero."""
from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.conftest import link_locks
from tests.integration.conftest import BOOKWORM, ROOT, image_exists
from tests.integration.conftest import REPO as MAIN_REPO

IMAGES = '''images:
  - stack: "2.1.0"
    os: [ubuntu22.04]
    python: "3.10"
    platforms: [linux/arm64]
  - stack: "2.1.0"
    os: [debian12]
    python: "3.11"
    platforms: [linux/arm64]
'''


def test_one_failing_cell_does_not_stop_the_others(engine, built, packages, pinned_matrix, ca_bundle, tmp_path):
    text = pinned_matrix.read_text()
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(text[:text.index("\nimages:\n") + 1] + IMAGES)
    (tmp_path / "imported.yaml").write_text((pinned_matrix.parent / "imported.yaml").read_text())
    link_locks(matrix)
    # The main image's repository and the host network, as its build: the Debian cell is the
    # tested image with the same inputs, taken as it is.
    cmd = [sys.executable, "-m", "invoke", "build", "--all", "--packages", str(packages), "--offline",
           "--require-pins", "--base-image", f"debian:bookworm={BOOKWORM}", "--repository", MAIN_REPO,
           "--network", "host", "--matrix", str(matrix)] + (["--ca-bundle", str(ca_bundle)] if ca_bundle else [])
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "ASCEND_BUILD_CACHE": str(packages / "cache")})
    assert out.returncode == 4, out.stdout[-3000:] + out.stderr[-3000:]
    assert "1 of 2 images failed" in out.stderr and "Traceback" not in out.stderr
    rows = {line.split()[0]: line for line in out.stdout.splitlines()
            if re.match(r"cann8\.0\.rc3-910b-(ubuntu22\.04|debian12)-", line)}
    ubuntu = rows["cann8.0.rc3-910b-ubuntu22.04-py3.10-torch2.1.0"]
    debian = rows["cann8.0.rc3-910b-debian12-py3.11-torch2.1.0"]
    assert " failed " in ubuntu and " tagged " in debian
    # No registry here: the ubuntu base is refused before its build, by name, with the ways out.
    assert "base image ubuntu:22.04 is not here and cannot be pulled" in ubuntu
    assert "--base-image ubuntu:22.04=MIRROR/ubuntu:22.04" in out.stderr
    assert "build --torch 2.1.0 --os debian12 --debootstrap" in out.stderr
    assert "tested when it was tagged from these same inputs: reused" in out.stdout
    assert image_exists(engine, f"{MAIN_REPO}:cann8.0.rc3-910b-debian12-py3.11-torch2.1.0-arm64")
    assert not image_exists(engine, f"{MAIN_REPO}:cann8.0.rc3-910b-ubuntu22.04-py3.10-torch2.1.0-arm64")
