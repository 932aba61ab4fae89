"""Base images for sites that cannot pull from a registry: a Debian root file system
made by debootstrap from a Debian mirror, turned into an image for one platform.
`docker import` would record the host's architecture, so the image is built
FROM scratch with the platform given explicitly."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .. import engine as eng
from ..engine import emulation
from ..errors import UserError
from ..platforms import get as get_platform

# What debootstrap leaves that a base image should not carry (the official Debian images
# ship without it): package lists and caches, which every image step would otherwise
# delete or rewrite in a layer of its own, as dead bytes on top of the base.
JUNK = ("var/lib/apt/lists/*", "var/cache/apt/*.bin", "var/cache/apt/archives/*.deb", "var/log/bootstrap.log")


def debian_base(engine: eng.Engine, suite: str, platform: str, tag: str,
                mirror: str = "http://deb.debian.org/debian", dry: bool = False) -> None:
    target = get_platform(platform)
    if not shutil.which("debootstrap") and not dry:
        raise UserError("debootstrap is not installed (Debian: apt-get install debootstrap)")
    with tempfile.TemporaryDirectory(prefix="ascend-base-") as tmp:
        root, ctx = Path(tmp) / "root", Path(tmp) / "ctx"
        boot = ["debootstrap", "--variant=minbase", f"--arch={target.suffix}", suite, str(root), mirror]
        ctx.mkdir()
        (ctx / "Dockerfile").write_text(
            f"# Debian {suite} root file system from debootstrap ({mirror})\n"
            "FROM scratch\nADD rootfs.tar /\nCMD [\"bash\"]\n")
        req = eng.BuildRequest(dockerfile=ctx / "Dockerfile", context=ctx, platform=platform, tags=[tag])
        cmd, env = engine.build_command(req)
        # debootstrap is quiet for a minute or more (longer under qemu): say what runs, and
        # stream its progress on a terminal (plain logs stay short).
        print(f"base image {tag}: debootstrap {suite} ({target.suffix}) from {mirror}"
              + (" under qemu, a few minutes" if target.emulated() else ", about a minute"), flush=True)
        if dry:
            print(eng.show(boot))
            print(f"# remove from it: {', '.join(JUNK)}")
            print(eng.show(["tar", "-C", str(root), "-cf", str(ctx / "rootfs.tar"), "."]))
            print(eng.show(cmd, env))
            return
        started = time.monotonic()
        # Its second stage runs the target's binaries under qemu: the same faster CPU
        # setting as for builds (engine/emulation.py).
        env = {**os.environ, **emulation.build_args(target)}
        if subprocess.run(boot, env=env, stdout=None if sys.stdout.isatty() else subprocess.DEVNULL).returncode != 0:
            raise UserError(f"debootstrap of {suite} ({platform}) from {mirror} failed "
                            f"(for a foreign arch, qemu-user-static and binfmt must be set up)")
        print(f"base image {tag}: root file system ready in {time.monotonic() - started:.0f} s; building the image",
              flush=True)
        _tidy(root)
        subprocess.run(["tar", "-C", str(root), "-cf", str(ctx / "rootfs.tar"), "."], check=True)
        shutil.rmtree(root, ignore_errors=True)
        if eng.run(cmd, env) != 0:
            raise UserError(f"building the base image {tag} failed")


def _tidy(root: Path) -> None:
    # Files only: apt expects its folders (lists/partial) to be there.
    for pattern in JUNK:
        for path in root.glob(pattern):
            if path.is_file() or path.is_symlink():
                path.unlink()
