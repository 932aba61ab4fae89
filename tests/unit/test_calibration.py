"""The whole suite's last line: the machine's calibration beside the run's wall time
(tests/conftest.py machine_calibration), on the engine double with a stand-in clock."""
from __future__ import annotations

import pytest

from ascend_build import platforms
from tests.conftest import CALIBRATION_IMAGE, machine_calibration
from tests.doubles.engine_double import EngineDouble


@pytest.fixture(autouse=True)
def x86_64_host(monkeypatch):
    monkeypatch.setattr(platforms._host, "machine", lambda: "x86_64")


def test_the_figure_names_the_image_and_the_setting():
    engine = EngineDouble()
    engine.add(CALIBRATION_IMAGE)
    seen = []

    def timed(engine, image):
        seen.append(image)
        return 15.349
    line = machine_calibration(engine, timed)
    assert seen == [CALIBRATION_IMAGE]
    assert line.startswith("machine calibration: `import torch` under qemu (QEMU_CPU=")
    assert line.endswith(f"in {CALIBRATION_IMAGE}: 15.3 s (benchmarks/emulation.py --image measures the same)")


def test_without_the_image_there_is_no_figure_and_it_says_why():
    line = machine_calibration(EngineDouble(), lambda engine, image: pytest.fail("timed without an image"))
    assert line == f"machine calibration: none ({CALIBRATION_IMAGE} is not in /usr/bin/docker-double's store)"


def test_a_failed_measure_is_said_not_raised():
    engine = EngineDouble()
    engine.add(CALIBRATION_IMAGE)

    def timed(engine, image):
        raise SystemExit(f"{image}: import torch: no module named torch")
    assert machine_calibration(engine, timed) == (f"machine calibration: none ({CALIBRATION_IMAGE}: import torch: "
                                                  "no module named torch)")


def test_on_an_arm64_machine_nothing_is_emulated(monkeypatch):
    monkeypatch.setattr(platforms._host, "machine", lambda: "aarch64")
    assert machine_calibration(EngineDouble(), lambda engine, image: pytest.fail("timed")) == \
        "machine calibration: none (arm64 runs natively here, so nothing is emulated)"
