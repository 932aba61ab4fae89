"""Source builds on the new toolchain, and the line users run today (issue: the lines users
run today): the offline Debian 13 builder (gcc 13 as the 26.x wheels are built, Python 3.13)
of the torch 2.10.0 line is built and tested, and the stand-in torch_npu tree (tests/doubles)
is compiled in it against the real torch 2.10.0, by the cross compiler (no qemu).

The builder and the wheel are session fixtures (tests/integration/conftest.py): the lane's
26.1.0 image (test_build_train_26.py, the same Debian 13 and Python 3.13) loads the wheel's
extension and finds gcc 13 from this builder compiled it.

(Until 2026-11-27 this module also built a runtime image of the 2.10.0 stack on CANN 9.0.0
with this wheel: 650 s of a cold run for what other modules show. Where its checks are now:
a runtime taking a source-built wheel from the wheel cache and passing its suite,
test_source_build.py (the 2.1.0 line, Debian 11); the extension compiled by the builder's
gcc 13 loading in a Debian 13 image, test_build_train_26.py; the CANN 9.0.0 .zip files checked
against their sums, its layout, driver labels and ENV, test_mindspore.py (the CANN 9.0.0
image); `invoke doctor --image` matching an image to hosts by its CANN's drivers,
test_build_train_26.py on CANN 9.1.0.)"""
from __future__ import annotations

from tests.integration.conftest import TRIXIE_BUILDER, image_exists


def test_the_trixie_builder_was_tested_then_tagged(engine, trixie_builder):
    # built and tested now, or (an engine that kept it) tested again now: its suite ran in this run
    out = trixie_builder.stdout
    assert "tests/builder_image" in out and " passed" in out
    assert "tested and tagged" in out or "--retest: running its suite again" in out
    assert " failed" not in out
    assert image_exists(engine, TRIXIE_BUILDER)


def test_the_wheel_was_built_against_torch_2_10_with_gcc_13_outside_qemu(trixie_wheel):
    wheel, out = trixie_wheel
    assert "runs as x86_64, no qemu, makes aarch64-linux-gnu code" in out
    meta = (wheel.parent / "meta.json").read_text()
    assert '"python": "3.13"' in meta and '"gcc": 13' in meta and '"torch": "2.10.0"' in meta
