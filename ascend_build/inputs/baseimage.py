"""Base images for sites that cannot pull from a registry: a Debian root file system
made by debootstrap from a Debian mirror, turned into an image for one platform.
`docker import` would record the host's architecture, so the image is built
FROM scratch with the platform given explicitly.

A cross build needs the base for two arches: the image's, and the build machine's for
the stages where pip runs natively (the fast path). So the bases are made per platform,
named by one tag pattern with `{arch}` in it, which `--base-image FROM=PATTERN` maps."""
from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Callable

from .. import console
from .. import engine as eng
from ..engine import emulation
from ..errors import UserError
from ..matrix import Matrix, Stack
from ..platforms import PLATFORMS, host
from ..platforms import get as get_platform
from .durations import said, takes_minutes
from .options import Site

# What debootstrap leaves that a base image should not carry (the official Debian images
# ship without it): package lists and caches, which every image step would otherwise
# delete or rewrite in a layer of its own, as dead bytes on top of the base.
JUNK = ("var/lib/apt/lists/*", "var/cache/apt/*.bin", "var/cache/apt/archives/*.deb", "var/log/bootstrap.log")
SCRIPTS = Path("/usr/share/debootstrap/scripts")
# A docker image reference: lowercase repository path, an optional tag ({arch} allowed).
_REFERENCE = re.compile(r"[a-z0-9]+([._/:-][a-z0-9]+)*(:[A-Za-z0-9_.{}-]{1,128})?")


def local_pattern(suite: str) -> str:
    """Where `invoke build --debootstrap` keeps the bases it makes."""
    return f"ascend-build/debian:{suite}-{{arch}}"


def on_local_base(site: Site, image: str, suite: str) -> Site:
    """The site building on the base debootstrap makes of `suite` here in place of `image`
    (under local_pattern: both arches a cross build needs), unless it maps `image` itself:
    its --base-image wins."""
    if image in site.base_images:
        return site
    return dataclasses.replace(site, base_images={**site.base_images, image: local_pattern(suite)})


def default_platforms(target: str = "linux/arm64") -> list[str]:
    """The image's platform and, when it is another, the build machine's (the fast path)."""
    here = host()
    return [target] + ([here.docker] if here and here.docker != target else [])


def check_request(suite: str, platforms: list[str], tag: str | None, mirror: str) -> None:
    """Everything about a base-image request that can be wrong, before debootstrap runs."""
    if not tag:
        raise UserError("--tag is required: the image to make, e.g. --tag mirror.local/debian:bookworm-{arch}")
    if not _REFERENCE.fullmatch(tag):
        raise UserError(f"--tag {tag!r} is not an image reference like mirror.local/debian:bookworm-{{arch}}")
    for p in platforms:
        get_platform(p)
    if len(set(platforms)) > 1 and "{arch}" not in tag:
        raise UserError(f"--tag {tag} names one image for {len(set(platforms))} platforms; put {{arch}} in it "
                        f"(e.g. {tag}-{{arch}}), or pass one --platform")
    if not re.fullmatch(r"[a-z]+", suite or ""):
        raise UserError(f"--suite {suite!r}: expected a Debian suite name like bookworm, bullseye or trixie")
    if SCRIPTS.is_dir() and not (SCRIPTS / suite).exists():
        known = sorted(p.name for p in SCRIPTS.iterdir() if p.name in ("bullseye", "bookworm", "trixie", "sid"))
        raise UserError(f"--suite {suite}: debootstrap has no script for it; it knows {', '.join(known)} (and more)")
    parts = urllib.parse.urlsplit(mirror or "")
    if parts.scheme not in ("http", "https", "file") or not (parts.netloc or parts.scheme == "file"):
        raise UserError(f"--mirror {mirror!r} is not a URL like http://deb.debian.org/debian")


def make_bases(engine: eng.Engine, suite: str, platforms: list[str], tag: str,
               mirror: str = "http://deb.debian.org/debian", dry: bool = False) -> list[str]:
    """One base image per platform, each tagged with `{arch}` filled in; returns the tags."""
    check_request(suite, platforms, tag, mirror)
    made = []
    for p in dict.fromkeys(platforms):
        ref = tag.replace("{arch}", PLATFORMS[p].suffix)
        debian_base(engine, suite, p, ref, mirror, dry)
        made.append(ref)
    return made


def made_here(engine: eng.Engine, site: Site, suite: str | None) -> Callable[[str, str], None] | None:
    """What makes a missing base of this Debian suite here (debootstrap), where the site asked
    for it (--debootstrap); None: a missing base is pulled."""
    if not (site.debootstrap and suite):
        return None
    return lambda ref, platform: debian_base(engine, suite, platform, ref)


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
        # debootstrap is quiet for a minute or more (longer under qemu): say what runs, and
        # stream its progress on a terminal (plain logs stay short).
        console.say(f"base image {tag}: debootstrap {suite} ({target.suffix}) from {mirror}"
                    + (f" under qemu: {said('debootstrap under qemu')} on 2 cores" if target.emulated()
                       else f": {said('debootstrap')}"))
        if dry:
            console.show(eng.show(boot))
            console.show(f"# remove from it: {', '.join(JUNK)}")
            console.show(eng.show(["tar", "-C", str(root), "-cf", str(ctx / "rootfs.tar"), "."]))
            console.show(eng.show(*engine.build_command(req)))
            return
        started = time.monotonic()
        # Its second stage runs the target's binaries under qemu: the same faster CPU
        # setting as for builds (engine/emulation.py).
        # (Its own name: `env` is the build's, DOCKER_BUILDKIT=1 in it, else docker 20.10 falls
        # back to the legacy builder.)
        boot_env = {**os.environ, **emulation.build_args(target)}
        if subprocess.run(boot, env=boot_env, stdout=None if sys.stdout.isatty() else subprocess.DEVNULL).returncode != 0:
            raise UserError(f"debootstrap of {suite} ({platform}) from {mirror} failed "
                            f"(for a foreign arch, qemu-user-static and binfmt must be set up)")
        console.say(f"base image {tag}: root file system ready in {time.monotonic() - started:.0f} s; building the image")
        _tidy(root)
        subprocess.run(["tar", "-C", str(root), "-cf", str(ctx / "rootfs.tar"), "."], check=True)
        shutil.rmtree(root, ignore_errors=True)
        if engine.build(req) != 0:
            raise UserError(f"building the base image {tag} failed")


def plan_line(image: str, platform: str, ref: str) -> str:
    """A dry run's line for a base that debootstrap would make: the longest step of a first
    build without a registry, and made once."""
    target = get_platform(platform)
    return takes_minutes(f"debootstrap of {image} {target.suffix}",
                         "debootstrap under qemu" if target.emulated() else "debootstrap",
                         f"once: later builds reuse {ref}")


def _tidy(root: Path) -> None:
    # Files only: apt expects its folders (lists/partial) to be there.
    for pattern in JUNK:
        for path in root.glob(pattern):
            if path.is_file() or path.is_symlink():
                path.unlink()


def cell_flags(matrix: Matrix, platform: str | None, chip: str | None) -> str:
    """The options a suggested command needs to name the same arch and chip (none: the defaults)."""
    return ((f" --platform {platform}" if platform and platform != matrix.defaults.platform else "")
            + (f" --chip {chip}" if chip and chip.lower() != matrix.defaults.chip.lower() else ""))


def advice(matrix: Matrix, image: str, stack: Stack | None = None, platform: str | None = None,
           task: str = "build", chip: str | None = None) -> str:
    """What to do when `image` can be neither found nor pulled: for a Debian release,
    make it here; for any other, a mirror, or the Debian cell (or flavor) of this line."""
    name = image.split("/")[-1]
    mirror = (f"a registry mirror: --base-image {image}=MIRROR/{name} ({{arch}} in it where the mirror keeps one "
              f"tag per arch)")
    suite = matrix.debootstrap_suite(image)
    if suite:
        return (f"Make it here from the Debian mirror: add --debootstrap (it makes this arch's base and, for a cross "
                f"build, the build machine's; {said('debootstrap under qemu')} under qemu on 2 cores, once: later builds "
                f"reuse it). Or once, for every build: `invoke base-image "
                f"--suite {suite} --tag MIRROR/debian:{suite}-{{arch}}` and --base-image {image}=MIRROR/debian:"
                f"{suite}-{{arch}}. Or {mirror}.")
    where = cell_flags(matrix, platform, chip)
    if task == "builder" and stack is not None and stack.torch is not None:
        gcc = stack.torch.gcc
        offline = [n for n, b in matrix.builders.items() if matrix.debootstrap_suite(b.image) and b.offers(gcc)]
        other = (f" Without a registry, an offline builder flavor with gcc {gcc}: `invoke builder --torch "
                 f"{stack.name} --flavor {offline[0]}{where} --debootstrap`." if offline else "")
        return f"{image} is not a Debian release debootstrap can make. Use {mirror}.{other}"
    debian = matrix.offline_os(stack) if stack is not None else None
    other = (f" Without a registry, the Debian cell of this line builds: `invoke build {stack.flag} --os "
             f"{debian.name}{where} --debootstrap` (Python {stack.python_for(debian)})."
             if stack is not None and debian else "")
    return f"{image} is not a Debian release debootstrap can make. Use {mirror}.{other}"
