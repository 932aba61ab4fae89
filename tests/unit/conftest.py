"""The unit tests read only what they make: not the user's invoke config (~/.invoke.yaml,
INVOKE_ variables), not the download cache (~/.cache/ascend-build, $ASCEND_BUILD_CACHE),
not what a build left in ./packages or `invoke pin` wrote into matrix.yaml (`checkout`).
A checkout where the documented commands ran runs them as a fresh clone does
(tests/unit/test_isolation.py). The container engines stay the machine's, with their own
config; the integration tests keep the real home: their builds share its cache."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest


def isolated_environ(home: str) -> dict[str, str | None]:
    """What the unit tests' process changes in its environment (None: removed): a home of
    their own (invoke reads ~/.invoke.yaml there) with the cache below it, and no INVOKE_
    variable (invoke takes each as a setting; INVOKE_ASCEND_BUILD_* are site settings every
    task checks). docker's and podman's config and storage stay where they were: the engine
    a dry run detects (buildx as a user's CLI plugin, a context) is the machine's."""
    real = os.path.expanduser("~")
    changes: dict[str, str | None] = {var: None for var in os.environ if var.upper().startswith("INVOKE_")}
    changes.update(DOCKER_CONFIG=os.environ.get("DOCKER_CONFIG") or os.path.join(real, ".docker"),
                   XDG_CONFIG_HOME=os.environ.get("XDG_CONFIG_HOME") or os.path.join(real, ".config"),
                   XDG_DATA_HOME=os.environ.get("XDG_DATA_HOME") or os.path.join(real, ".local", "share"),
                   HOME=home, XDG_CACHE_HOME=os.path.join(home, ".cache"),
                   # tests/forked.py's commands read the machine's config file from here, not /etc/
                   ASCEND_BUILD_TEST_SYSTEM_PREFIX=os.path.join(home, "etc", ""),
                   ASCEND_BUILD_CACHE=os.path.join(home, ".cache", "ascend-build"))
    return changes


@pytest.fixture(scope="package", autouse=True)
def own_home(tmp_path_factory):
    """For every unit test, before its first `invoke`: the forked server (tests/forked.py)
    and each command it runs without an env of its own take this process's environment, and
    tests that pass one build it from os.environ."""
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        for var, value in isolated_environ(str(home)).items():
            if value is None:
                mp.delenv(var, raising=False)
            else:
                mp.setenv(var, value)
        yield home


@pytest.fixture(scope="session")
def checkout(tmp_path_factory) -> Path:
    """This checkout as a fresh clone of it has it, for the commands that run in one (the
    default ./packages, matrix.yaml): each entry git tracks at its top, a link to this
    checkout's, but matrix.yaml as the tests start from it (no site pins: committed_matrix_text)
    and nothing a build or `invoke pin` left (no packages/, no .build/)."""
    from tests.conftest import ROOT, committed_matrix_text
    folder = tmp_path_factory.mktemp("checkout")
    # the files a clone has (git's index): no invoke.yaml or packages/ of the user's
    known = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode()
    for name in sorted({path.split("/")[0] for path in known.split("\0") if path} - {"matrix.yaml"}):
        (folder / name).symlink_to(ROOT / name)
    (folder / "matrix.yaml").write_text(committed_matrix_text())
    return folder


# ------------------------------------------- the gate's fixtures (test_gate, the kinds' tests)
@pytest.fixture(scope="module")
def packages(tmp_path_factory) -> Path:
    """The CANN 8.0.RC3 toolkit and 910B kernels doubles (aarch64): a module's own folder."""
    from tests.doubles.cann_double import make_packages
    return make_packages(tmp_path_factory.mktemp("cann"))


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    """matrix.yaml copied with the project's locks linked beside it, loaded: a module's own
    (a test may write a lock beside it)."""
    from ascend_build.matrix import load_matrix
    from tests.conftest import copy_matrix, link_locks
    return load_matrix(link_locks(copy_matrix(tmp_path_factory.mktemp("matrix"))))


@pytest.fixture
def site(tmp_path, packages):
    """Offline, on those packages, with a test's own cache and work folders."""
    from ascend_build.inputs.options import Site
    return Site(packages=(packages,), offline=True, cache=tmp_path / "cache", work=tmp_path / "work")
