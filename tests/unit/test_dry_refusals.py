"""A dry run checks what a real run checks (a hostile tester's findings): an explicitly
empty value is bad input, never the option's default (`--like ''` planned the 2.1.0 image);
a wheel's source that the real run refuses (`--torch-npu-src '--upload-pack=...@v1'`) is
refused by `--dry` with the same code; and `build --all --dry`, which builds nothing, ends
with its refusals' code, not 4 (a build failed). Each case runs the task as a user types
it (tests/forked.py)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from ascend_build.cli.options import opt
from tests.conftest import copy_matrix, link_locks
from tests.forked import invoke

CELL = ["--torch", "2.1.0", "--os", "debian12", "--platform", "linux/arm64"]


@pytest.fixture(scope="module")
def where(tmp_path_factory) -> tuple[Path, list[str]]:
    """A folder to run in (its own HOME: no user's ~/.invoke.yaml) and the options every case
    shares: a copy of the matrix, and an empty packages folder with --offline, so a real run
    that got past a refusal would stop at its missing CANN files (3), before any engine command."""
    folder = tmp_path_factory.mktemp("dry-refusals")
    matrix = link_locks(copy_matrix(folder / "matrix"))
    packages = folder / "packages"
    packages.mkdir()
    return folder, ["--matrix", str(matrix), "--packages", str(packages)]


def run(where: tuple[Path, list[str]], *argv: str):
    folder, _ = where
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("INVOKE_")}, "HOME": str(folder),
           "ASCEND_BUILD_CACHE": str(folder / "cache")}
    return invoke(*argv, cwd=folder, env=env)


def refused(out, code: int, message: str) -> None:
    said = out.stdout + out.stderr
    assert out.returncode == code, f"{out.args}: exit {out.returncode}, not {code}\n{said[-2000:]}"
    assert message in out.stderr, f"{out.args}: {message!r} not said\n{out.stderr[-2000:]}"
    assert "Traceback" not in said, said[-3000:]


# ------------------------------------------------------------------ an explicitly empty value

@pytest.mark.parametrize("argv, said", [
    (["--like", ""], "--like ''"),                   # $TAG unset in a script: was the default 2.1.0 image
    (["--like", "  "], "--like '  '"),
    (["--like="], "--like ''"),
    (["--torch", ""], "--torch ''"),                 # was the matrix's default stack
    (["--cann", ""], "--cann ''"),
    (["--torch", "2.1.0", "--os", ""], "--os ''"),   # was the stack's default OS
    ([*CELL, "--run-as", ""], "--run-as ''"),
    ([*CELL, "--ca-bundle", ""], "--ca-bundle ''"),  # was the host's own setting, unseen
    ([*CELL, "--base-image", ""], "--base-image ''"),    # a repeatable option: one of its values empty
])
@pytest.mark.parametrize("dry", [True, False], ids=["dry", "real"])
def test_an_explicitly_empty_value_is_bad_input_dry_or_not(where, argv, said, dry):
    out = run(where, "build", *argv, *where[1], "--offline", *(["--dry"] if dry else []))
    refused(out, 2, f"{said}: an empty value")
    assert "docker build" not in out.stdout


@pytest.mark.parametrize("argv", [
    ["verify", "--image", ""],          # was "--image REF: the image to verify", not what was wrong
    ["sbom", "--image", ""],
    ["doctor", "--image", ""],         # was the host's checks without the image
])
def test_other_tasks_refuse_an_empty_value_too(where, argv):
    refused(run(where, *argv), 2, "--image '': an empty value")


def test_options_left_out_still_take_their_defaults_and_no_proxy_may_be_empty(where):
    """The rule holds by the value alone: invoke hands an option not given its default (None,
    [] or a non-empty text), never ''. --no-proxy '' is a value of its own: no host."""
    out = run(where, "build", *CELL, *where[1], "--dry", "--no-proxy", "")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "ascend-runtime:cann8.0.rc3-910b-debian12-py3.11-torch2.1.0-arm64" in out.stdout
    with pytest.raises(TypeError, match="never empty text"):
        opt("", "an option whose default would be indistinguishable from `--x ''`")


# ------------------------------------------------------------------ a wheel's source

@pytest.mark.parametrize("value, said", [
    ("--upload-pack=touch pwned@v1",
     "'--upload-pack=touch pwned@v1': '--upload-pack=touch pwned' is not a source URL: a value that begins with -"),
    ("https://gitee.com/ascend/pytorch@--upload-pack=x",
     "'https://gitee.com/ascend/pytorch@--upload-pack=x': '--upload-pack=x' is not a ref"),
    ("https://gitee.com/ascend/pytorch@", "'https://gitee.com/ascend/pytorch@': no ref after the URL"),  # was HEAD
    ("no-such-tree", "'no-such-tree': no such file or folder, and not a URL"),
    # a token in the URL is not said back
    ("https://reader:s3cret@gitee.com/ascend/pytorch@", "'https://reader:***@gitee.com/ascend/pytorch@': no ref"),
])
@pytest.mark.parametrize("dry", [True, False], ids=["dry", "real"])
def test_a_source_the_real_run_refuses_is_refused_by_dry_with_the_same_code(where, value, said, dry):
    # Before the fix a dry run printed a clean plan (0); the real one stops before its packages (3).
    out = run(where, "build", *CELL, *where[1], "--offline", f"--torch-npu-src={value}", *(["--dry"] if dry else []))
    refused(out, 2, f"--torch-npu-src {said}")
    assert "docker build" not in out.stdout and "s3cret" not in out.stdout + out.stderr


def test_a_source_that_is_neither_tree_bundle_nor_tarball_and_the_wheel_tasks_own(where, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("not a source\n")
    refused(run(where, "build", *CELL, *where[1], "--offline", "--dry", "--apex-src", str(readme)), 2,
            f"--apex-src '{readme}': a source is a folder (a checkout or a plain tree), a git bundle")
    matrix = where[1][:2]       # the wheels' tasks take no --packages
    refused(run(where, "torch-npu", "--torch", "2.1.0", *matrix, "--dry", "--src=--upload-pack=x@v1"), 2,
            "--src '--upload-pack=x@v1': '--upload-pack=x' is not a source URL")
    refused(run(where, "apex", "--torch", "2.1.0", *matrix, "--dry", "--submodule-src", str(tmp_path / "nope.bundle")),
            2, f"--submodule-src '{tmp_path / 'nope.bundle'}': no such file or folder")


# ------------------------------------------------------------------ build --all --dry

def test_all_dry_ends_with_its_refusals_code_not_a_build_failed(where):
    """README: 4 is "a build failed"; a dry run builds nothing. Its refusals here: the amd64
    cells have no lock (2) and, offline, every cell's CANN files are missing (3): the highest, 3.
    Online the files would be downloaded: only the locks' refusals remain, 2."""
    offline = run(where, "build", "--all", "--dry", *where[1], "--offline")
    refused(offline, 3, "images would be refused (above): a real build of each stops before it starts")
    assert "package not found" in offline.stderr and "has no lock" in offline.stderr
    online = run(where, "build", "--all", "--dry", *where[1])
    refused(online, 2, "images would be refused (above)")
    assert "has no lock" in online.stderr and "package not found" not in online.stderr
