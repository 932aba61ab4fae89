"""How long the steps that take minutes take here, in one table of measured figures: a dry
run's plan names each step it would run with its time (and debootstrap says its own as it
starts), every line made from this table, so that a new measurement is written once, here.
"Here" is this project's build machines: 2 cores, x86_64, an arm64 image's own steps under
qemu; each figure beside the run that measured it."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Took:
    """What one step took here: each measured figure, in minutes, and where it was measured."""
    minutes: tuple[float, ...]
    measured: str
    under_qemu: bool = False                 # measured with the image's own steps under qemu
    qemu_factor: tuple[int, int] | None = None     # untimed under qemu: some this many times the figures


TOOK: dict[str, Took] = {
    # A Debian base made by debootstrap (`--debootstrap`, `invoke base-image`).
    "debootstrap": Took((2, 3), "issue #51 (commit 09d2b32); docs/results.md counts the bases in their modules"),
    "debootstrap under qemu": Took((5, 10), "issue #51 (commit 09d2b32), arm64 on x86_64", under_qemu=True),
    # CPython compiled from its tarball (a Python the distro lacks): 145-365 s for linux/amd64,
    # its test included; under qemu compiling took 6.4-7.8 times as long as natively.
    "cpython": Took((2.4, 6.1), "docs/results.md, \"A cold CI run\", test_python_source"),
    "cpython under qemu": Took((2.4, 6.1), "docs/results.md, test_python_source (natively); \"A real torch_npu "
                               "from its release tag\" (qemu against cross: 6.4-7.8 times)", qemu_factor=(6, 8)),
    # A builder image (gcc, torch per Python): the Debian 13 builder 722-1,008 s.
    "builder": Took((12, 16.8), "docs/results.md, \"A cold CI run\""),
    # A real torch_npu tree (896 files): cross-compiled alone on the machine; under qemu.
    "torch_npu": Took((75, 85), "docs/results.md, \"A real torch_npu from its release tag\""),
    "torch_npu under qemu": Took((480, 600), "docs/results.md, \"A real torch_npu from its release tag\"",
                                 under_qemu=True),
    # Ascend apex in the cross builder: 2 min 40 s; under qemu not timed.
    "apex": Took((2.7,), "docs/results.md, \"A real torch_npu from its release tag\" (apex)"),
    "apex under qemu": Took((2.7,), "docs/results.md (cross-compiled)", qemu_factor=(6, 8)),
    # An arm64 image with a framework, cold, to its tests, pip on the build machine (the fast
    # path): the 2.1.0 image 170 s and the 2.10.0 image 184 s (docs/results.md, "Cross-arch
    # builds at native speed"); the 2.10.0-26.1.0 runtime 16.6 min, 13.5 of them the OS
    # packages under qemu (issue 78). The OS step is most of the spread.
    "image": Took((2.8, 3.1, 16.6), "docs/results.md (2.1.0, 2.10.0) and issue 78 (2.10.0-26.1.0)", under_qemu=True),
    # The same, pip in the image under qemu (the plain path): 409 s and 432 s.
    "image, pip under qemu": Took((6.8, 7.2), "docs/results.md, \"Cross-arch builds at native speed\"",
                                  under_qemu=True),
    # A CANN-only arm64 image, cold (issue 78's walk: 13 min on a machine of this kind).
    "cann-only image": Took((13,), "issue 78 (a CANN-only arm64 image, cold)", under_qemu=True),
    # The OS packages step under qemu (apt: the packages and the distro's Python): 148-163 s in
    # the 2.1.0 and 2.10.0 builds above, 13.5 min in the 2.10.0-26.1.0 runtime's.
    "os packages under qemu": Took((2.5, 2.7, 13.5), "docs/results.md and issue 78", under_qemu=True),
}


def _span(low: float, high: float) -> str:
    """A range of minutes as a plan says it: whole minutes, hours from 90 minutes on."""
    def whole(x: float) -> int:
        return max(1, int(x + 0.5))
    if high >= 90:
        lo, hi = whole(low / 60), whole(high / 60)
        return f"{lo} h" if lo == hi else f"{lo}-{hi} h"
    lo, hi = whole(low), whole(high)
    return f"{lo} min" if lo == hi else f"{lo}-{hi} min"


def said(step: str, emulated: bool | None = None) -> str:
    """What a plan says of a step's time: "about 3-17 min here" from the table's figures, with
    what stands behind them where that matters (untimed under qemu, measured under qemu for
    a build that runs natively)."""
    took = TOOK[step]
    span = _span(min(took.minutes), max(took.minutes))
    if took.qemu_factor:
        low, high = took.qemu_factor
        return f"about {span} here natively; under qemu untimed, some {low}-{high} times that"
    if took.under_qemu and emulated is False:
        return f"at most about {span} here: measured with the image's steps under qemu, which this build runs natively"
    return f"about {span} here"


def takes_minutes(what: str, step: str, then: str = "", emulated: bool | None = None) -> str:
    """The plan's line for a long step: what runs, its time here, and what saves the next run."""
    return f"# takes minutes: {what} ({said(step, emulated)}" + (f"; {then}" if then else "") + ")"
