"""What a newcomer reads in the first hour (issue #66, items 6 and 7): a dry plan names every
step that takes minutes with its time here, `invoke matrix` fits a terminal (the full table
behind --wide), and an alias says which OS its image is on."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ascend_build.inputs.durations import said as TIME
from ascend_build.matrix import load_matrix
from ascend_build.platforms import get as get_platform
from tests import forked

ROOT = Path(__file__).resolve().parents[2]
ARM64_STEP = "debootstrap under qemu" if get_platform("linux/arm64").emulated() else "debootstrap"


def invoke(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """The task in a clean environment: a home of its own, no INVOKE_ settings."""
    out = forked.invoke(*args, env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), **env})
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out


def minutes(out: subprocess.CompletedProcess) -> list[str]:
    return [line for line in out.stdout.splitlines() if line.startswith("# takes minutes: ")]


def test_the_readmes_dry_build_names_the_debootstrap_and_its_time(tmp_path):
    out = invoke(tmp_path, "build", "--torch", "2.1.0", "--os", "debian12", "--debootstrap", "--dry",
                 "--packages", str(tmp_path))
    said = minutes(out)
    base = next((line for line in said if "debootstrap of debian:bookworm arm64" in line), None)
    assert base is not None, out.stdout
    assert f"({TIME(ARM64_STEP)}; once: later builds reuse ascend-build/debian:bookworm-arm64)" in base
    # said before the build that needs it
    lines = out.stdout.splitlines()
    assert lines.index(base) < next(i for i, line in enumerate(lines) if " build " in line and "BASE_IMAGE" in line)
    assert any("the image cann8.0.rc3-910b-debian12-py3.11-torch2.1.0, cold" in line for line in said), said
    # no debootstrap asked, none said; and no CPython: Debian 12's own Python 3.11
    plain = minutes(invoke(tmp_path, "build", "--torch", "2.1.0", "--os", "debian12", "--dry",
                           "--packages", str(tmp_path)))
    assert not any("debootstrap" in line or "CPython" in line for line in plain), plain


def test_a_plan_that_compiles_cpython_says_so_with_its_time(tmp_path):
    version = load_matrix(ROOT / "matrix.yaml").pythons["3.9"].version
    said = minutes(invoke(tmp_path, "build", "--torch", "2.1.0", "--os", "debian12", "--python", "3.9", "--dry",
                          "--packages", str(tmp_path)))
    cpython = [line for line in said if f"compiling CPython {version}, which debian12 lacks" in line]
    step = "cpython under qemu" if get_platform("linux/arm64").emulated() else "cpython"
    assert len(cpython) == 1 and f"({TIME(step)};" in cpython[0], said


def test_a_plan_that_compiles_wheels_names_the_builder_and_each_compile(tmp_path):
    said = minutes(invoke(tmp_path, "build", "--torch", "2.1.0", "--os", "debian11", "--python", "3.9",
                          "--torch-npu-src", "upstream", "--apex-src", "upstream", "--dry",
                          "--packages", str(tmp_path)))
    builder = [line for line in said if line.startswith("# takes minutes: the builder image torch2.1.0-")]
    assert builder and all(f"({TIME('builder')}; once: later builds reuse ascend-builder:" in b for b in builder)
    for kind in ("torch_npu", "apex"):
        compiled = [line for line in said if line.startswith(f"# takes minutes: compiling {kind} in builder ")]
        assert len(compiled) == 1, said
        assert "once: the wheel cache keeps it" in compiled[0]
        assert TIME(kind) in compiled[0] or TIME(f"{kind} under qemu") in compiled[0]


def test_the_matrix_fits_the_terminal_and_wide_gives_every_column(tmp_path):
    for columns in (100, 80):
        narrow = invoke(tmp_path, "matrix", COLUMNS=str(columns)).stdout
        over = [line for line in narrow.splitlines() if len(line) > columns]
        assert not over, (columns, over[:3])
        # what other tools grep for is still there, whole
        for name in ("cann8.0.rc3-910b-ubuntu22.04-py3.10-torch2.1.0", "cann8.0.rc3-910b-debian12-py3.11-torch2.1.0"):
            assert any(line.split()[:1] == [name] for line in narrow.splitlines()), name
        assert narrow.rstrip().endswith("\n  invoke matrix --wide") and "sha256 pinned" not in narrow
    wide = invoke(tmp_path, "matrix", "--wide", COLUMNS="100").stdout
    head = next(line for line in wide.splitlines() if line.startswith("image "))
    assert head.split("  ")[0].strip() == "image" and all(
        col in head for col in ("platform", "python", "framework", "CANN (driver)", "pairing", "sha256 pinned", "apex"))
    assert "companions" in wide and "toolchain" in wide and "ascend-deployer 6.0.0: " in wide
    rows = [line for line in wide.splitlines() if line.startswith("cann8.0.rc3-910b-debian12-py3.11-torch2.1.0 ")]
    assert len(rows) == 2 and {"linux/arm64", "linux/amd64"} == {r.split()[1] for r in rows}, rows
    assert max(map(len, wide.splitlines())) > 100


def test_an_alias_says_the_os_of_its_image(tmp_path):
    # The tag users pull stays where it was: the Ubuntu image; the view says so.
    m = load_matrix(ROOT / "matrix.yaml")
    assert m.cell("2.1.0", "ubuntu22.04").alias == "torch2.1.0" and m.cell("2.1.0", "debian12").alias is None
    lines = invoke(tmp_path, "matrix", COLUMNS="100").stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("cann8.0.rc3-910b-ubuntu22.04-py3.10-torch2.1.0 "))
    assert lines[at + 1].strip() == "alias torch2.1.0 (ubuntu22.04)"
    debian = next(i for i, line in enumerate(lines) if line.startswith("cann8.0.rc3-910b-debian12-py3.11-torch2.1.0 "))
    assert not lines[debian + 1].strip().startswith("alias")
    said = " ".join(" ".join(lines).split())
    assert ("`torch2.1.0` is cann8.0.rc3-910b-ubuntu22.04-py3.10-torch2.1.0; "
            "cann8.0.rc3-910b-debian12-py3.11-torch2.1.0 (--os debian12) has no alias.") in said
    wide = invoke(tmp_path, "matrix", "--wide").stdout
    assert "cann8.0.rc3-910b-ubuntu22.04-py3.10-torch2.1.0 [alias torch2.1.0 (ubuntu22.04)]  linux/arm64" in wide
