"""The debootstrap base: what is left out of its root file system."""
from __future__ import annotations

from ascend_build.inputs.baseimage import _tidy
from tests import forked


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
    out = forked.invoke("base-image", "--tag", "t", "--platform", "linux/arm64", "--dry")
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()[0]
    assert first.startswith("base image t: debootstrap bookworm (arm64) from http://deb.debian.org/debian")


def test_the_base_image_is_built_with_the_engines_buildkit_not_the_legacy_builder(tmp_path, monkeypatch):
    """debootstrap and tar stand in by a recorder; the build command and its environment
    are what reaches the engine. docker 20.10 without DOCKER_BUILDKIT=1 falls back to the
    legacy builder, silently."""
    import subprocess

    from ascend_build import engine as eng
    from ascend_build.inputs import baseimage
    ran: list[tuple[list[str], dict[str, str] | None]] = []
    real_run = subprocess.run

    def fake_subprocess_run(cmd, env=None, **kw):
        if cmd[0] not in ("debootstrap", "tar"):
            return real_run(cmd, env=env, **kw)      # qemu's version, asked by the emulation settings
        if cmd[0] == "debootstrap":
            (tmp_path / "done").write_text("")
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(baseimage.shutil, "which", lambda name: "/usr/sbin/" + name)
    monkeypatch.setattr(baseimage.subprocess, "run", fake_subprocess_run)
    from ascend_build.engine import engine as room
    monkeypatch.setattr(room, "run", lambda cmd, env=None, *a, **kw: ran.append((cmd, env)) or 0)
    docker = eng.Engine(kind="docker", client="/usr/bin/docker", mode="classic-buildkit", version="20.10.24")
    baseimage.debian_base(docker, "bookworm", "linux/arm64", "t")
    assert (tmp_path / "done").exists()
    [(cmd, env)] = ran
    assert cmd[:3] == ["/usr/bin/docker", "build", "--progress=plain"]
    assert env is not None and env.get("DOCKER_BUILDKIT") == "1"
