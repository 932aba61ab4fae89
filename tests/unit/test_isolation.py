"""The unit tests read only what they make (tests/unit/conftest.py). In a checkout where the
documented commands ran (`invoke pin` wrote a cann_pins block into matrix.yaml, a build left
files in ./packages and in the download cache) and with a user's own invoke config (a bad
key in ~/.invoke.yaml, an INVOKE_ variable in the shell), they find what a fresh clone
finds. Shown on a copy of this checkout made so; this checkout is left alone."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

# Unit tests that read each of those where nothing kept them from it: ./packages (the dry
# builds), the cache's kept files (a copied matrix), the pins (ci-matrix's plan, the text the
# tests start from), the user's config and the INVOKE_ variable (every command).
SAMPLE = (
    "tests/unit/test_lock.py::test_a_matrix_copied_elsewhere_takes_the_projects_lock_that_fits_it",
    "tests/unit/test_lock.py::test_the_plan_says_which_lock_with_its_package_count_also_when_quiet",
    "tests/unit/test_lock.py::test_committed_locks_are_current_and_cover_every_image",
    "tests/unit/test_matrix.py::test_site_pins_in_the_checkout_do_not_change_what_the_unit_tests_start_from",
    "tests/unit/test_siteconfig.py::test_a_site_file_fills_every_option_the_command_line_leaves_out",
    "tests/unit/test_cann.py::test_build_dry_plans_the_image_with_the_torch_images_cann_files_and_runs_no_engine_command",
    "tests/unit/test_workflows.py::test_the_image_pipeline_runs_whole_with_dry",
)
TOOLKIT = "Ascend-cann-toolkit_8.0.RC3_linux-aarch64"
KERNELS = "Ascend-cann-kernels-910b_8.0.RC3_linux-aarch64"
JUNK = b"#!/bin/sh\nnot a CANN installer\n"


def _copy_checkout(dest: Path) -> Path:
    """The files git knows in this checkout (committed or not, ignored ones aside), links kept."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, names):
        src, to = ROOT / name, dest / name
        if not src.is_symlink() and not src.is_file():
            continue            # deleted in the working tree
        to.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            to.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, to)
    for git in (["init", "-q"], ["add", "-A"]):        # git tracks them, as in a clone
        subprocess.run(["git", *git], cwd=dest, check=True)
    return dest


def _used(copy: Path, home: Path) -> None:
    """What the documented commands leave: pins in matrix.yaml (`invoke pin`: one line a file,
    and a hand-recorded .run's sum in its place), the cell's files in ./packages and in the
    cache (here junk: read, they would fail every plan), and the user's own config."""
    matrix = copy / "matrix.yaml"
    text = matrix.read_text()
    pinned = text.replace("cann_pins: {}\n", f"cann_pins:\n  {TOOLKIT}.run: {'c1' * 32}\n"
                                             f"  Ascend-cann-toolkit_8.0.0_linux-aarch64.run: {'a1' * 32}\n", 1)
    pinned = pinned.replace("{file: Ascend-cann-kernels-310b_8.0.0_linux-aarch64.run, sha256: null}",
                            "{file: Ascend-cann-kernels-310b_8.0.0_linux-aarch64.run, sha256: " + "e1" * 32 + "}", 1)
    assert pinned.count("c1" * 32) == pinned.count("e1" * 32) == 1, "the committed matrix changed its pins' places"
    matrix.write_text(pinned)
    cache = home / ".cache" / "ascend-build" / "cann"
    for folder in (copy / "packages", cache, cache / "kept" / ("0" * 24)):
        folder.mkdir(parents=True)
        for name in (f"{TOOLKIT}.run", f"{KERNELS}.run", f"{TOOLKIT}.zip", f"{KERNELS}.zip"):
            (folder / name).write_bytes(JUNK)
    (home / ".invoke.yaml").write_text("ascend_build:\n  prxy: http://proxy.user:3128\n")


def _hostile_env(home: Path) -> dict[str, str]:
    """The user's shell: their HOME, their cache (XDG_CACHE_HOME said, as some shells do), an
    INVOKE_ variable that names no setting; none of this test run's own (an xdist worker's,
    `invoke test`'s timings)."""
    leave = ("ASCEND_BUILD_CACHE", "XDG_CONFIG_HOME", "ASCEND_BUILD_TEST_TIMINGS")
    env = {k: v for k, v in os.environ.items() if k not in leave and not k.startswith(("PYTEST_", "INVOKE_"))}
    return {**env, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"), "INVOKE_ASCEND_BUILD_PROXI": "x"}


def test_a_used_checkout_and_the_users_own_config_change_no_unit_test(tmp_path):
    copy, home = _copy_checkout(tmp_path / "checkout"), tmp_path / "home"
    _used(copy, home)
    env = _hostile_env(home)
    # They do bite: the same command outside the tests is refused, first for the config...
    build = [sys.executable, "-c", "from ascend_build.cli.entry import main; main()", "build", "--torch", "2.1.0",
             "--os", "debian12", "--dry"]
    said = subprocess.run(build, cwd=copy, env={**env, "PYTHONPATH": str(copy)}, capture_output=True, text=True)
    assert said.returncode == 2 and "ascend_build.prxy in invoke's config" in said.stderr, said.stderr
    # ...then, with a config of the user's that is fine, for the files the build left.
    (home / ".invoke.yaml").write_text("ascend_build: {}\n")
    fine = {k: v for k, v in env.items() if k != "INVOKE_ASCEND_BUILD_PROXI"}
    said = subprocess.run(build, cwd=copy, env={**fine, "PYTHONPATH": str(copy)}, capture_output=True, text=True)
    assert said.returncode == 3 and f"{copy}/packages/{TOOLKIT}.run: sha256 mismatch" in said.stderr, said.stderr
    (home / ".invoke.yaml").write_text("ascend_build:\n  prxy: http://proxy.user:3128\n")
    # The unit tests in that checkout, with that shell, find what a fresh clone finds.
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "basetemp"), *SAMPLE], cwd=copy, env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0 and f"{len(SAMPLE)} passed" in out.stdout, out.stdout[-6000:] + out.stderr[-2000:]
    # and left the user's files as they were
    assert (copy / "packages" / f"{TOOLKIT}.run").read_bytes() == JUNK
    assert sorted(p.name for p in (home / ".cache" / "ascend-build" / "cann").iterdir()) == sorted(
        ["kept", f"{TOOLKIT}.run", f"{KERNELS}.run", f"{TOOLKIT}.zip", f"{KERNELS}.zip"])


def test_the_commands_read_a_machine_config_of_the_tests_own_not_etc(own_home):
    """tests/forked.py's commands take their machine-wide config file from the folder the unit
    conftest names, so a /etc/invoke.yaml of this machine changes no unit test: shown by a
    bad file there being read (and refused), then gone."""
    from tests.forked import invoke
    etc = own_home / "etc"
    etc.mkdir(exist_ok=True)
    (etc / "invoke.yaml").write_text("ascend_build:\n  prxy: http://proxy.site:3128\n")
    try:
        out = invoke("site")
        assert out.returncode == 2 and "prxy" in out.stderr, out.stdout + out.stderr
        assert str(etc / "invoke.yaml") not in out.stdout
    finally:
        (etc / "invoke.yaml").unlink()
    assert invoke("site").returncode == 0
