"""Shared pytest set-up. The image suite (tests/image) runs only against an image given
with --image (as `invoke build` and `invoke test --image` do); the rest always runs."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser):
    parser.addoption("--image", default=None, help="image id or tag for the image suite (tests/image)")
    parser.addoption("--matrix", default=str(ROOT / "matrix.yaml"), help="matrix file the image was built from")
    parser.addoption("--engine-client", default=None, help="container client for the image suite")
    parser.addoption("--engine", default="docker", help="docker or podman: the engine the image is in")


from ascend_build.images.kinds import KINDS  # noqa: E402

IMAGE_SUITES = tuple(kind.suite for kind in KINDS.values())     # one testinfra suite per image kind


def pytest_ignore_collect(collection_path, config):
    if collection_path.name in IMAGE_SUITES and collection_path.parent == ROOT / "tests":
        return not config.getoption("--image")
    return None


def committed_matrix_text() -> str:
    """The committed matrix.yaml as tests start from it: with every bare-.run sha256 a site
    pinned in its checkout (`invoke pin`) reset to null, so the unit tests do not depend on
    what was pinned there."""
    import re
    return re.sub(r"(file: [^,]+\.run, sha256: )[0-9a-f]{64}", r"\1null", (ROOT / "matrix.yaml").read_text())


def link_locks(matrix_path: Path) -> Path:
    """A matrix copy finds its locks beside it, as the committed one does (locks/)."""
    link = matrix_path.parent / "locks"
    if not link.exists():
        link.symlink_to(ROOT / "locks", target_is_directory=True)
    return matrix_path


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def usable_engine(kind: str):
    """A running engine of this kind. On a laptop without one the engine tests skip; with
    CI=true a missing engine fails them."""
    from ascend_build import engine as eng
    from ascend_build.errors import EngineError
    try:
        return eng.detect(kind)
    except EngineError as exc:
        if in_ci():
            pytest.fail(f"CI=true but no usable {kind} engine: {exc}")
        pytest.skip(f"no usable {kind} engine: {exc}")


@pytest.fixture(scope="session")
def engine():
    """A running, BuildKit-capable docker engine."""
    return usable_engine("docker")


# ---------------------------------------------------------------- image suites (--image)
# Shared by tests/image (runtime) and tests/builder_image: one container per module.

@pytest.fixture(scope="session")
def suite_engine(pytestconfig):
    from ascend_build import engine as eng
    engine = eng.detect(pytestconfig.getoption("--engine"), pytestconfig.getoption("--engine-client"))
    # testinfra's docker and podman backends call the client from PATH: make it this one.
    os.environ["PATH"] = os.path.dirname(os.path.abspath(engine.client)) + os.pathsep + os.environ["PATH"]
    return engine


@pytest.fixture(scope="session")
def client(suite_engine) -> str:
    return suite_engine.client


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


def label(labels: dict[str, str], key: str) -> str:
    from ascend_build.images.kinds import LABEL_PREFIX
    full = f"{LABEL_PREFIX}.{key}"
    assert full in labels, f"image lacks the label {full} that ties it to the matrix"
    return labels[full]


@pytest.fixture(scope="session")
def image_env(inspect) -> dict[str, str]:
    return dict(item.split("=", 1) for item in inspect["Config"]["Env"])


@pytest.fixture(scope="session")
def platform(labels) -> str:
    return label(labels, "platform")


@pytest.fixture(scope="module")
def host(client, suite_engine, image, platform):
    """A container of the image, kept running for the module, as a testinfra host."""
    import testinfra
    started = subprocess.run(suite_engine.command("run", "-d", "--platform", platform, "--entrypoint", "sleep", image,
                                                  "infinity"), capture_output=True, text=True)
    assert started.returncode == 0, started.stderr
    cid = started.stdout.strip()
    try:
        yield testinfra.get_host(f"{suite_engine.testinfra_backend}://{cid}")
    finally:
        subprocess.run([client, "rm", "-f", cid], capture_output=True)


@pytest.fixture(scope="session")
def docker_run(suite_engine, image, platform):
    """`docker run --rm IMAGE ARGS...`: no login shell, no profile, only image ENV."""
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(suite_engine.command("run", "--rm", "--platform", platform, image, *args),
                              capture_output=True, text=True)
    return run
