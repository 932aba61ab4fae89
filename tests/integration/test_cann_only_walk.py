"""A new user's CANN-only walk (issue 78), from README's own command: a release with no
`cann_stacks:` entry and no Debian official image (CANN 8.5.0), on Debian 12 as a site without a
registry builds it, with its devel image, without editing a file by hand. The CANN packages
are the test doubles in the form Huawei publishes them (.zip around the .run, NNAL bare, pinned
as the README says: `invoke pin --packages DIR`); the matrix is a copy, so that the pin and the
devel lock the build writes stay out of the checkout. Then the Done-when of the issue: a login
shell in the built image has the venv's Python and its numpy, and CANN's atc.

Built for the build machine's arch (README's --platform replaced by it), as test_podman.py
builds its CANN-only image: what this walk proves is the derived line, the pin, the login
shell and the devel image, not the cross build, which test_build_arm64.py and
test_fast_path.py hold. After test_podman.py in the lane, docker's layer cache has this
Dockerfile's OS stage for the build machine (under qemu the walk took 262 s of a cold run)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ascend_build.platforms import host
from tests.integration.conftest import BOOKWORM, CA, REPO, ROOT, zipped_doubles, zipped_matrix

RELEASE = "8.5.0"
HOST = host()
PLATFORM = HOST.docker if HOST else "linux/arm64"
ARCH, MACHINE = (HOST.suffix, HOST.arch) if HOST else ("arm64", "aarch64")


def readme_command() -> list[str]:
    """README's CANN-only command as printed, with this walk's release."""
    found = re.search(r"`invoke build (--cann \S+ [^`]*)`", (ROOT / "README.md").read_text())
    assert found, "README prints no CANN-only command"
    words = found[1].split()
    given = {"--cann": RELEASE, "--platform": PLATFORM}
    return ["build", *[given.get(words[i - 1], w) if i else w for i, w in enumerate(words)]]


@pytest.fixture(scope="module")
def walk(tmp_path_factory) -> tuple[Path, Path]:
    """The 8.5.0 doubles as Huawei publishes them, and a matrix copy that holds their sums as
    `invoke update` would, its locks a copy of the project's (the build writes the devel
    lock), NNAL pinned by `invoke pin --packages` as README says."""
    folder = zipped_doubles(tmp_path_factory.mktemp("made-850"), tmp_path_factory.mktemp("cann-850"), RELEASE, MACHINE)
    return folder, zipped_matrix(tmp_path_factory.mktemp("matrix-850"), folder, copy_locks=True)


def test_readmes_cann_only_command_builds_a_derived_release_and_its_devel_image_on_debian(engine, request, walk,
                                                                                           tmp_path):
    request.getfixturevalue("arm64_base" if ARCH == "arm64" else "amd64_base")     # the Debian 12 base it names
    packages, matrix = walk
    command = readme_command()
    assert command[command.index("--os") + 1] == "debian12" and "--platform" in command, command
    here = ["--devel", "--packages", str(packages), "--offline", "--matrix", str(matrix), "--base-image",
            f"debian:bookworm={BOOKWORM}", "--repository", REPO, "--network", "host",
            *(["--ca-bundle", str(CA)] if CA.exists() else [])]
    out = subprocess.run([sys.executable, "-m", "ascend_build", *command, *here], cwd=ROOT, capture_output=True,
                         text=True, timeout=3600, env={**os.environ, "ASCEND_BUILD_CACHE": str(tmp_path / "cache")})
    said = out.stdout + out.stderr
    assert out.returncode == 0, said[-8000:]
    name = f"cann{RELEASE}-910b-debian12-py3.11"
    runtime, devel = f"{REPO}:{name}-{ARCH}", f"{REPO}:{name}-devel-{ARCH}"
    assert "tests/image" in said and "tests/devel_image" in said, "both suites ran"
    for tag, kind in ((runtime, "runtime"), (devel, "devel")):
        found = engine.image(tag)
        assert found is not None, f"{tag} not tagged: {said[-3000:]}"
        assert found["Config"]["Labels"]["io.ascend-build.kind"] == kind
    # the Done-when, as a user runs it
    login = subprocess.run([engine.client, "run", "--rm", "--platform", PLATFORM, runtime, "bash", "-lc",
                            'python3 -c "import numpy, sys; print(sys.prefix)"; command -v atc'],
                           capture_output=True, text=True, timeout=900)
    assert login.returncode == 0, login.stdout + login.stderr
    prefix, atc = login.stdout.split()
    assert prefix == "/opt/venv" and atc.endswith("/bin/atc"), login.stdout
