"""The registry round trip on a real registry (Debian's docker-registry) on 127.0.0.1:
push the tested arm64 runtime image, push again (skipped: the content is there), delete
the local image, pull it back through its manifest list and find the same image (the same
id: the same config and layers, so the image whose suite passed before its tag); and join
two arches into one manifest list."""
from __future__ import annotations

import subprocess
import sys

from ascend_build.images.registry import join, platforms_of
from ascend_build.inputs.baseimage import debian_base
from ascend_build.matrix import load_matrix
from tests.integration.conftest import BOOKWORM, REPO, ROOT, STACK, image_exists


def invoke(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=ROOT, capture_output=True, text=True)


def test_push_pull_round_trip(engine, built, registry, pinned_matrix):
    cell = load_matrix(pinned_matrix).cell(**STACK)
    remote = f"{registry}/ascend-runtime"
    select = ["--torch", "2.1.0", "--os", "debian12", "--python", "3.11", "--platform", "linux/arm64",
              "--repository", REPO, "--matrix", str(pinned_matrix)]
    first = invoke("push", "--registry", remote, *select)
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"pushed {remote}:{cell.name}-arm64" in first.stdout
    assert f"manifest list {remote}:{cell.name}" in first.stdout
    again = invoke("push", "--registry", remote, *select)
    assert again.returncode == 0 and "skipped" in again.stdout and "pushed" not in again.stdout

    # Drop every local tag of the image, so the pull must fetch it.
    local = f"{REPO}:{cell.name}-arm64"
    image_id = subprocess.run(engine.command("image", "inspect", "--format", "{{.Id}}", local),
                              capture_output=True, text=True).stdout.strip()
    tags = subprocess.run(engine.command("image", "inspect", "--format", "{{join .RepoTags \" \"}}", image_id),
                          capture_output=True, text=True).stdout.split()
    assert subprocess.run(engine.command("rmi", *tags), capture_output=True).returncode == 0
    assert not image_exists(engine, image_id)

    pulled = f"{remote}:{cell.name}"          # the manifest list: the engine picks arm64
    out = subprocess.run(engine.command("pull", "--platform", "linux/arm64", pulled), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    # The same image, bit for bit: its id is the digest of its config, which names every
    # layer's digest. So what was pulled is the image that passed its suite before its tag
    # (running the suite on it again would run it on the same bytes).
    assert engine.image_id(pulled) == image_id
    assert engine.labels(pulled) == engine.labels(image_id)
    # Put every tag back for whatever runs next: the content tag is how a later build of the
    # same inputs finds this tested image (test_act.py's pipeline run reuses it).
    for tag in tags:
        if tag.startswith(f"{REPO}:"):
            subprocess.run(engine.command("tag", pulled, tag), check=True)


def test_manifest_list_joins_both_arches(engine, registry, arm64_base):
    amd64 = BOOKWORM.format(arch="amd64")
    if not image_exists(engine, amd64):
        debian_base(engine, "bookworm", "linux/amd64", amd64)
    target = f"{registry}/debian:bookworm"
    parts = []
    for arch in ("arm64", "amd64"):
        ref = f"{target}-{arch}"
        subprocess.run(engine.command("tag", BOOKWORM.format(arch=arch), ref), check=True)
        assert subprocess.run(engine.command("push", ref), capture_output=True).returncode == 0
        parts.append(ref)
    try:
        join(engine, target, parts, registry)
        assert platforms_of(engine, target, registry) == ["linux/amd64", "linux/arm64"]
    finally:
        # The registry's port is this run's: its tags would pile up in the engine.
        subprocess.run(engine.command("rmi", *parts), capture_output=True)


def test_verify_refuses_an_image_not_built_reproducibly(built, pinned_matrix):
    """The lane's main image was built without --reproducible: nothing to compare against."""
    tag = f"ascend-build-test/runtime:{load_matrix(pinned_matrix).cell(**STACK).name}-arm64"
    assert built.returncode == 0
    out = invoke("verify", "--image", tag, "--matrix", str(pinned_matrix))
    assert out.returncode == 2, out.stdout + out.stderr
    assert "was not built with --reproducible" in out.stderr and "--reproducible`, then verify" in out.stderr
