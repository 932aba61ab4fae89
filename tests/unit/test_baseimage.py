"""The debootstrap base: what is left out of its root file system."""
from __future__ import annotations

from ascend_build.images.baseimage import _tidy


def test_package_lists_and_caches_are_left_out_but_apt_folders_stay(tmp_path):
    lists = tmp_path / "var/lib/apt/lists"
    (lists / "partial").mkdir(parents=True)
    (lists / "deb.debian.org_debian_dists_bookworm_main_binary-arm64_Packages").write_text("x" * 1000)
    (tmp_path / "var/cache/apt/archives").mkdir(parents=True)
    (tmp_path / "var/cache/apt/pkgcache.bin").write_bytes(b"\0" * 100)
    (tmp_path / "var/cache/apt/archives/bash.deb").write_bytes(b"!<arch>")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/os-release").write_text("ID=debian\n")
    _tidy(tmp_path)
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert left == ["etc/os-release"]
    assert (lists / "partial").is_dir() and (tmp_path / "var/cache/apt/archives").is_dir()


def test_base_image_says_what_it_runs_before_the_quiet_minute():
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-m", "invoke", "base-image", "--tag", "t", "--platform", "linux/arm64",
                          "--dry"], cwd=root, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()[0]
    assert first.startswith("base image t: debootstrap bookworm (arm64) from http://deb.debian.org/debian")
