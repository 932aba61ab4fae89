"""Shared pytest set-up. The image suite (tests/image) runs only against an image given
with --image (as `invoke build` and `invoke test --image` do); the rest always runs."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser):
    parser.addoption("--image", default=None, help="image id or tag for the image suite (tests/image)")
    parser.addoption("--matrix", default=str(ROOT / "matrix.yaml"), help="matrix file the image was built from")
    parser.addoption("--engine-client", default=None, help="container client for the image suite")


def pytest_ignore_collect(collection_path, config):
    if collection_path.name == "image" and collection_path.parent == ROOT / "tests":
        return not config.getoption("--image")
    return None


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def engine():
    """A running, BuildKit-capable engine. On a laptop without one the engine tests
    skip; with CI=true a missing engine fails them."""
    from ascend_build import engine as eng
    from ascend_build.errors import EngineError
    try:
        return eng.detect("docker")
    except EngineError as exc:
        if in_ci():
            pytest.fail(f"CI=true but no usable container engine: {exc}")
        pytest.skip(f"no usable container engine: {exc}")
