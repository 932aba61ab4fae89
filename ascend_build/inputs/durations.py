"""How long the steps that take minutes take here, in one table: a dry run's plan names each
one it would run with its time (and debootstrap says its own as it starts). "Here" is this
project's build machines: 2 cores, x86_64, an arm64 image's own steps under qemu; each figure
beside the page that measured it."""
from __future__ import annotations

TIMES: dict[str, str] = {
    # A Debian base made by debootstrap (`--debootstrap`, `invoke base-image`): timed for
    # issue #51 (commit 09d2b32); docs/results.md's cold runs count the bases inside their
    # modules ("bookworm bases + the 2.1.0 image").
    "debootstrap": "about 2-3 min here",
    "debootstrap under qemu": "about 5-10 min here, under qemu",
    # CPython compiled from its tarball (a Python the distro lacks): docs/results.md, "A cold
    # CI run", test_python_source: 145-365 s for linux/amd64, its test included. Under qemu
    # not timed; compiling there took 6.4-7.8 times as long as natively ("A real torch_npu
    # from its release tag", cross against qemu).
    "cpython": "about 3-6 min here",
    "cpython under qemu": "about 3-6 min here natively; under qemu untimed, some 6-8 times that",
    # A builder image (gcc, torch per Python): docs/results.md, "A cold CI run": the Debian 13
    # builder 722-1,008 s; Debian 11's OS step alone 308 s.
    "builder": "about 12-17 min here",
    # A real torch_npu tree (896 files): docs/results.md, "A real torch_npu from its release
    # tag": 75-85 min cross-compiled alone on the machine; 8-10 h under qemu.
    "torch_npu": "about 75-85 min here for a real tree",
    "torch_npu under qemu": "about 8-10 h here for a real tree",
    # Ascend apex in the cross builder: the same section, 2 min 40 s; under qemu not timed.
    "apex": "about 3 min here",
    "apex under qemu": "about 3 min here cross-compiled; under qemu untimed, some 6-8 times that",
    # The 2.1.0 arm64 image, cold, to its tests: docs/results.md, "Cross-arch builds at native
    # speed": 170 s with pip on the build machine, 409 s with pip in the image under qemu.
    "image": "about 3 min here",
    "image, pip under qemu": "about 7 min here, pip under qemu",
}


def takes_minutes(what: str, step: str, then: str = "") -> str:
    """The plan's line for a long step: what runs, its time here, and what saves the next run."""
    return f"# takes minutes: {what} ({TIMES[step]}" + (f"; {then}" if then else "") + ")"
