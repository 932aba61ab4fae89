"""A newcomer's first hour, from the README's and the docs' own commands: the README's
first build (the 2.1.0 image, its Debian base made here), the same build again, `invoke
verify` of that image, then MindSpore as docs/mindspore.md builds it. Each command is read
from the page a newcomer reads it on, so a page that shows a command that no longer works
fails here.

What this machine lacks is handed in beside each command, the same for every command: the
CANN test doubles (--packages, --offline), the matrix copy that pins their sums, the
debootstrap base the suite made (under --base-image, which --debootstrap then takes as
made), and the suite's repository. Nothing is built: the suite's other modules built these
images, and the walk's commands find them by their content tags, tested (the proof that the
README's command makes the very image the suite tested). verify's rebuild is test_podman's:
the README's image is not built with --reproducible, so verify refuses it and names the
build that makes one, which is planned here."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.integration.conftest import BOOKWORM, REPO, ROOT

# the pages' commands: `invoke TASK` or the project's own `ascend-build TASK` (the README's first lines)
COMMAND = r"(?:\binvoke|\bascend-build)"
PAGES = {"README.md": COMMAND + r" build --torch 2\.1\.0\b", "docs/mindspore.md": COMMAND + r" build --mindspore\b"}


def shown(page: str) -> list[str]:
    """The first command of `page` that matches its pattern, as the page shows it: the words
    after `invoke` (or `ascend-build`) up to a comment."""
    pattern = PAGES[page]
    for line in (ROOT / page).read_text().splitlines():
        if re.search(pattern, line):
            return shlex.split(re.search(r"(?:^|\s|/)(?:invoke|ascend-build) (.*)", line.split("#", 1)[0]).group(1))
    raise AssertionError(f"{page} shows no command matching {pattern}: the walk has nothing to follow")


def run(args: list[str], cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ascend_build", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=1800, env={**os.environ, "ASCEND_BUILD_CACHE": str(cache)})


def here(packages: Path, matrix: Path) -> list[str]:
    """What this machine hands in beside a page's command (see the module's docstring)."""
    return ["--packages", str(packages), "--offline", "--matrix", str(matrix),
            "--base-image", f"debian:bookworm={BOOKWORM}", "--repository", REPO]


def reused(out: subprocess.CompletedProcess) -> bool:
    """Found by its content tag, tested when it was tagged: no build, no suite."""
    said = out.stdout + out.stderr
    return out.returncode == 0 and "is here, tested when it was tagged from these same inputs: reused" in said \
        and "docker build" not in said and "tests/image" not in said


def test_the_readme_build_then_again_then_verify_then_mindspore(built, packages, pinned_matrix, built_mindspore,
                                                                 zipped_packages, matrix_900, tmp_path):
    readme = shown("README.md")
    assert readme[:3] == ["build", "--torch", "2.1.0"] and "--debootstrap" in readme, readme
    assert built.returncode == 0        # the suite's build of that image (test_build_arm64.py), done first
    first = run(readme + here(packages, pinned_matrix), tmp_path / "cache")
    assert reused(first), first.stdout[-3000:] + first.stderr[-3000:]
    tag = f"{REPO}:cann8.0.rc3-910b-debian12-py3.11-torch2.1.0-arm64"
    assert tag in first.stdout + first.stderr, first.stdout[-2000:]

    again = run(readme + here(packages, pinned_matrix), tmp_path / "cache")
    assert reused(again), again.stdout[-3000:] + again.stderr[-3000:]

    verify = run(["verify", "--image", tag, "--matrix", str(pinned_matrix)], tmp_path / "cache")
    assert verify.returncode == 2 and "was not built with --reproducible" in verify.stderr, verify.stderr[-3000:]
    # the build it names is on the base the image records (the suite's debootstrap base)
    suggested = re.search(r"`(?:\S*/)?(?:invoke|ascend-build) (build [^`]*--reproducible[^`]*)`", verify.stderr)
    assert suggested and f"--base-image debian:bookworm={BOOKWORM}" in suggested.group(1), verify.stderr
    plan = run(shlex.split(suggested.group(1)) + ["--dry", "--packages", str(packages), "--offline", "--matrix",
                                                  str(pinned_matrix), "--repository", REPO], tmp_path / "cache")
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-3000:]
    assert "SOURCE_DATE_EPOCH=" in plan.stdout and f"BASE_IMAGE={BOOKWORM.format(arch='arm64')}" in plan.stdout

    mindspore = shown("docs/mindspore.md")
    assert mindspore[:3] == ["build", "--mindspore", "2.9.0"], mindspore
    ms = run(mindspore + here(zipped_packages, matrix_900), tmp_path / "cache")
    assert reused(ms), ms.stdout[-3000:] + ms.stderr[-3000:]
    assert "cann9.0.0-910b-debian12-py3.11-mindspore2.9.0-arm64" in ms.stdout + ms.stderr
