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
