"""Fixtures for the image suite: the image under test, the matrix cell it was built
for (from its labels + matrix.yaml, so expectations come from the matrix), and a
testinfra host per running container."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import testinfra

from ascend_build import engine as eng
from ascend_build.build import LABEL_PREFIX
from ascend_build.matrix import Cell, load_matrix


@pytest.fixture(scope="session")
def client(pytestconfig) -> str:
    chosen = pytestconfig.getoption("--engine-client")
    engine = eng.detect("docker", chosen)
    # testinfra's docker backend calls `docker` from PATH: make it this client.
    os.environ["PATH"] = os.path.dirname(os.path.abspath(engine.client)) + os.pathsep + os.environ["PATH"]
    return engine.client


@pytest.fixture(scope="session")
def image(pytestconfig) -> str:
    return pytestconfig.getoption("--image")


@pytest.fixture(scope="session")
def inspect(client, image) -> dict:
    out = subprocess.run([client, "image", "inspect", image], capture_output=True, text=True)
    assert out.returncode == 0, f"image {image} not found: {out.stderr}"
    return json.loads(out.stdout)[0]


@pytest.fixture(scope="session")
def labels(inspect) -> dict[str, str]:
    return inspect["Config"].get("Labels") or {}


@pytest.fixture(scope="session")
def image_env(inspect) -> dict[str, str]:
    return dict(item.split("=", 1) for item in inspect["Config"]["Env"])


@pytest.fixture(scope="session")
def cell(pytestconfig, labels) -> Cell:
    missing = [k for k in ("stack", "os", "python", "chip", "platform") if f"{LABEL_PREFIX}.{k}" not in labels]
    assert not missing, f"image lacks the labels that tie it to the matrix: {missing}"
    matrix = load_matrix(pytestconfig.getoption("--matrix"))
    get = lambda k: labels[f"{LABEL_PREFIX}.{k}"]
    return matrix.cell(get("stack"), get("os"), get("python"), get("chip"), get("platform"))


@pytest.fixture(scope="module")
def host(client, image, cell):
    """A container of the image, kept running for the module, as a testinfra host."""
    started = subprocess.run([client, "run", "-d", "--platform", cell.platform, "--entrypoint", "sleep", image,
                              "infinity"], capture_output=True, text=True)
    assert started.returncode == 0, started.stderr
    cid = started.stdout.strip()
    try:
        yield testinfra.get_host(f"docker://{cid}")
    finally:
        subprocess.run([client, "rm", "-f", cid], capture_output=True)


@pytest.fixture(scope="session")
def docker_run(client, image, cell):
    """`docker run --rm IMAGE ARGS...`: no login shell, no profile, only image ENV."""
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([client, "run", "--rm", "--platform", cell.platform, image, *args],
                              capture_output=True, text=True)
    return run
