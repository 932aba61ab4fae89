"""User layers on the real arm64 2.1.0 image: a team's requirements locked with the
runtime held, built, tested (runtime suite + layer suite) and tagged; one that would move
protobuf or torch refused before any build; one whose import fails never tagged."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ascend_build.matrix import load_matrix
from tests.doubles.wheel_double import make_wheel
from tests.integration.conftest import CA, REPO, STACK, build_2_1_0, image_exists


def build_layer(pinned_matrix: Path, packages: Path, requirements: Path, *more: str) -> subprocess.CompletedProcess:
    return build_2_1_0(packages, pinned_matrix, CA if CA.exists() else None, "--require-pins",
                       "--requirements", str(requirements), *more)


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    return tmp_path_factory.mktemp("team")


def test_a_layer_that_would_move_a_held_package_is_refused_before_any_build(engine, pinned_matrix, packages, team):
    direct = team / "protobuf.txt"
    direct.write_text("einops\nprotobuf>=4\n")
    out = build_layer(pinned_matrix, packages, direct)
    assert out.returncode == 2, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"{direct} line 2: `protobuf>=4` would move protobuf away from 3.20.3" in out.stderr
    assert 'stacks."2.1.0".pins (protobuf==3.20.3)' in out.stderr
    # Through a dependency: torchaudio 2.2.0 is made for torch 2.2.0 (its own metadata).
    moved = team / "torch.txt"
    moved.write_text("einops\ntorchaudio==2.2.0\n")
    out = build_layer(pinned_matrix, packages, moved)
    assert out.returncode == 2, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"{moved} line 2: `torchaudio==2.2.0` would move torch from 2.1.0 to 2.2.0" in out.stderr
    assert "`einops`" not in out.stderr
    # A companion is held like the rest: torchvision is the one made for this torch.
    companion = team / "vision.txt"
    companion.write_text("torchvision==0.17.0\n")
    out = build_layer(pinned_matrix, packages, companion)
    assert out.returncode == 2 and "would move torchvision away from 0.16.0" in out.stderr
    for said in (out.stdout, out.stderr):
        assert "building " not in said and "docker" not in said.lower().split("error:")[0][-200:]
    assert not (team / "torch.lock").exists() and not (team / "protobuf.lock").exists()


def test_a_layer_is_locked_tested_and_tagged_then_reused(engine, pinned_matrix, packages, team, built):
    reqs = team / "team.txt"
    reqs.write_text("einops==0.8.1\n")
    out = build_layer(pinned_matrix, packages, reqs)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    cell = load_matrix(pinned_matrix).cell(**STACK)
    tag = f"{REPO}:{cell.name}-team-arm64"
    assert image_exists(engine, tag)
    lock = team / "team.lock" / "2.1.0-py3.11-aarch64.txt"
    assert "einops==0.8.1" in lock.read_text() and "# held: torch==2.1.0" in lock.read_text()
    layer_part = out.stdout.split("building user layer team", 1)[1]
    # Both suites ran on the layer candidate, before its tag.
    assert "tests/image" in layer_part and "tests/layer_image" in layer_part
    assert layer_part.index("tests/layer_image") < layer_part.index("tested and tagged")
    assert "test_each_requirement_imports PASSED" in layer_part
    # The same requirements and runtime again: the lock is reused as it is, nothing resolved,
    # and both images are the tested ones with the same inputs: taken, not built again.
    again = build_layer(pinned_matrix, packages, reqs)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert f"{lock} is current (1 packages), reused" in again.stdout
    assert again.stdout.count("tested when it was tagged from these same inputs: reused") == 2
    assert "; log: " not in again.stdout and "tests/layer_image" not in again.stdout     # no "building X; log: ..."


def test_a_layer_whose_import_fails_is_not_tagged(engine, pinned_matrix, packages, team, built):
    house = team / "wheels"
    make_wheel(house, "ascend-layer-import-double", "1.0", fails_on_import=True)
    reqs = team / "broken.txt"
    reqs.write_text("ascend-layer-import-double==1.0\n")
    out = build_layer(pinned_matrix, packages, reqs, "--layer-wheelhouse", str(house))
    assert out.returncode != 0
    assert "test_each_requirement_imports FAILED" in out.stdout
    assert "nothing was tagged" in out.stderr
    cell = load_matrix(pinned_matrix).cell(**STACK)
    assert not image_exists(engine, f"{REPO}:{cell.name}-broken-arm64")
