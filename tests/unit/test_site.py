"""The documentation site (mkdocs.yml, docs/): it builds with `mkdocs build --strict`,
every page of docs/ is in the navigation, every link and anchor between pages resolves,
and a broken one fails the build (the check can fail)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
                          capture_output=True, text=True, env=ENV)


def test_the_site_builds_strictly_with_every_page_in_the_navigation(tmp_path):
    out = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    nav = {next(iter(item.values())) for item in yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]}
    assert nav == {p.name for p in (ROOT / "docs").glob("*.md")}
    for page in nav:
        built = tmp_path / "site" / f"{page[:-3]}.html"      # the offline plugin: one file per page
        assert built.is_file(), page


def test_a_broken_anchor_between_pages_fails_the_build(tmp_path):
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page = tmp_path / "docs" / "locks.md"
    page.write_text(page.read_text() + "\nSee [the eras](eras.md#no-such-heading).\n")
    out = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert out.returncode != 0 and "no-such-heading" in out.stdout + out.stderr, out.stdout + out.stderr
