"""Identical bits, without an engine: what `--reproducible` asks each engine for, the
stages that run Python see SOURCE_DATE_EPOCH, the archive rewrite that gives the config
only the image's own facts (restamp.py), and the layer-by-layer comparison behind
`invoke verify` (imagediff.py) on archives made here."""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tarfile
from pathlib import Path

import pytest

from ascend_build.engine import BuildRequest, Engine
from ascend_build.provenance import imagediff, restamp
from tests import forked

ROOT = Path(__file__).resolve().parents[2]
EPOCH = 1_700_000_000


def request(**kw) -> BuildRequest:
    return BuildRequest(dockerfile=Path("Dockerfile"), context=Path("."), platform="linux/arm64", **kw)


def test_each_engine_is_asked_for_the_epoch_its_own_way():
    podman = Engine("podman", "podman", "podman", "4.3.1")
    cmd, _ = podman.build_command(request(epoch=EPOCH))
    assert cmd[cmd.index("--timestamp") + 1] == str(EPOCH)
    assert f"SOURCE_DATE_EPOCH={EPOCH}" in cmd
    plain, _ = podman.build_command(request())
    assert "--timestamp" not in plain and not any(a.startswith("SOURCE_DATE_EPOCH") for a in plain)
    buildx = Engine("docker", "docker", "buildx", "27.0")
    cmd, _ = buildx.build_command(request(epoch=EPOCH))
    assert "type=docker,rewrite-timestamp=true" in cmd and "--load" not in cmd
    assert "--load" in buildx.build_command(request())[0]
    classic = Engine("docker", "docker", "classic-buildkit", "20.10.24")
    cmd, _ = classic.build_command(request(epoch=EPOCH))
    assert f"SOURCE_DATE_EPOCH={EPOCH}" in cmd and "--timestamp" not in cmd and "--output" not in cmd
    assert podman.reproducible() is None and buildx.reproducible() is None
    assert "cannot rewrite file times" in (classic.reproducible() or "")


def test_every_stage_that_runs_a_step_sees_source_date_epoch():
    """A stage without the ARG runs its steps without SOURCE_DATE_EPOCH: Python then
    stamps its .pyc files with the sources' times, which --timestamp then changes (the
    image suite found 20 stale ones when only the engine was told)."""
    checked = 0
    for dockerfile in sorted((ROOT / "images" / "runtime").glob("*/*/Dockerfile")):
        for stage in re.split(r"\n(?=FROM )", dockerfile.read_text())[1:]:
            if re.search(r"^RUN ", stage, re.M):
                checked += 1
                assert re.search(r"^ARG SOURCE_DATE_EPOCH$", stage, re.M), f"{dockerfile}: {stage.splitlines()[0]}"
    assert checked > 100


def test_dry_build_reproducible_puts_the_epoch_in_the_content_tag(tmp_path):
    from tests.doubles.cann_double import make_run
    env = {**os.environ, "ASCEND_BUILD_CACHE": str(tmp_path / "cache"), "SOURCE_DATE_EPOCH": str(EPOCH)}
    for kind in ("toolkit", "kernels"):     # the packages here, so the plan computes its content tag
        make_run(tmp_path / "packages", kind, "8.0.RC3", "aarch64")
    args = ["build", "--dry", "--packages", str(tmp_path / "packages"), "--engine", "podman", "--os", "debian12"]
    plain = forked.invoke(*args, env=env)
    same = forked.invoke(*args, "--reproducible", env=env)
    assert plain.returncode == 0 and same.returncode == 0, plain.stderr + same.stderr
    assert f"--timestamp {EPOCH}" in same.stdout and f"SOURCE_DATE_EPOCH={EPOCH}" in same.stdout
    assert f"io.ascend-build.source-date-epoch={EPOCH}" in same.stdout
    assert "--timestamp" not in plain.stdout and "source-date-epoch" not in plain.stdout
    tags = [re.findall(r"sha-[0-9a-f]{16}", out.stdout) for out in (plain, same)]
    assert tags[0] and tags[1] and set(tags[0]).isdisjoint(tags[1]), "the epoch is an input: its own content tag"


# ---------------------------------------------------------------- archives made here

def layer(files: dict[str, bytes], mtime: int) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), mtime, 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def diff_id(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def archive(layers: list[bytes], run: str, docker_names: bool = False) -> bytes:
    """An image archive as `save` writes one, with what a build writes of its own run
    (container id, hostname, parent, intermediate ids, the time) from `run`."""
    config = {"architecture": "arm64", "os": "linux", "created": f"2026-01-01T00:00:0{run}Z",
              "container": f"container-{run}", "parent": f"sha256:parent-{run}",
              "config": {"Hostname": f"host-{run}", "Env": ["PATH=/usr/bin"], "Labels": {"a": "b"}},
              "container_config": {"Hostname": f"host-{run}", "Image": f"sha256:img-{run}"},
              "rootfs": {"type": "layers", "diff_ids": [diff_id(x) for x in layers]},
              "history": [{"created": "2020-01-01T00:00:00Z", "created_by": "ADD base"}]
              + [{"created": f"2026-01-01T00:00:0{run}Z", "created_by": f"RUN step {i}", "comment": f"FROM {run}{i}"}
                 for i in range(1, len(layers))]}
    text = json.dumps(config).encode()
    names = [(f"{i}{run}/layer.tar" if docker_names else f"{diff_id(x)[7:]}.tar") for i, x in enumerate(layers)]
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in zip(names, layers):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        cfg = hashlib.sha256(text).hexdigest() + ".json"
        for name, data in ((cfg, text), ("manifest.json", json.dumps([{"Config": cfg, "Layers": names}]).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


BASE = layer({"etc/os-release": b"ID=debian\n"}, 1_600_000_000)


def rewritten(tmp_path: Path, raw: bytes, retime: bool, name: str) -> tuple[str, bytes]:
    out = tmp_path / name
    image_id = restamp.rewrite(imagediff.archive_members(io.BytesIO(raw)), out, layer({"sbom": b"{}"}, EPOCH),
                               EPOCH, frozenset({diff_id(BASE)}), retime)
    return image_id, out.read_bytes()


def test_two_runs_rewritten_are_one_image(tmp_path):
    """Two builds whose layers differ only in file times (docker 20.10's BuildKit) and
    whose configs hold their own run's ids and times give, rewritten with --reproducible,
    the same archive and image ID; the base's layer is left as it was."""
    run1 = archive([BASE, layer({"opt/venv/x.py": b"print(1)\n"}, 1_800_000_001)], "1", docker_names=True)
    run2 = archive([BASE, layer({"opt/venv/x.py": b"print(1)\n"}, 1_800_000_777)], "2", docker_names=True)
    id1, bytes1 = rewritten(tmp_path, run1, True, "one.tar")
    id2, bytes2 = rewritten(tmp_path, run2, True, "two.tar")
    assert id1 == id2 and bytes1 == bytes2
    saved = imagediff.read(imagediff.archive_members(io.BytesIO(bytes1)), "one", id1)
    assert id1 == "sha256:" + hashlib.sha256(json.dumps(saved.config, sort_keys=True,
                                                        separators=(",", ":")).encode()).hexdigest()
    assert saved.layers[0] == diff_id(BASE), "the base image's layer as it was"
    assert {e.mtime for e in saved.entries[saved.layers[1]].values()} == {EPOCH}
    config = saved.config
    assert "container" not in config and "parent" not in config and config["created"] == "2023-11-14T22:13:20Z"
    assert config["config"]["Hostname"] == "" and config["config"]["Labels"] == {"a": "b"}
    assert config["history"][0] == {"created": "2020-01-01T00:00:00Z", "created_by": "ADD base"}
    assert all("comment" not in h and h["created"] == "2023-11-14T22:13:20Z" for h in config["history"][1:])
    assert config["history"][-1]["created_by"] == restamp.STEP and len(saved.layers) == 3
    # Without retime (podman: --timestamp already set the times) the layers stay as built.
    kept_id, _ = rewritten(tmp_path, run1, False, "kept.tar")
    assert kept_id != id1
    assert rewritten(tmp_path, run2, False, "kept2.tar")[0] != kept_id, "their times differ, so do they"


def test_the_comparison_names_the_layer_and_the_file(tmp_path):
    """imagediff: equal layers are the same; in one that is not, a file changed in its
    content, one only in its time, one added are each named."""
    files = {"usr/lib/a.py": b"a\n", "usr/lib/__pycache__/a.cpython-311.pyc": b"pyc1", "etc/x": b"x"}
    top1 = layer(files, EPOCH)
    changed = {**files, "usr/lib/__pycache__/a.cpython-311.pyc": b"pyc2", "var/log/apt/history.log": b"log"}
    top2 = io.BytesIO()
    with tarfile.open(fileobj=top2, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in changed.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            info.mtime = EPOCH + 5 if name == "etc/x" else EPOCH
            tar.addfile(info, io.BytesIO(data))
    a = imagediff.read(imagediff.archive_members(io.BytesIO(archive([BASE, top1], "1"))), "a", "sha256:a")
    b = imagediff.read(imagediff.archive_members(io.BytesIO(archive([BASE, top2.getvalue()], "2"))), "b", "sha256:b")
    diffs = imagediff.compare(a, b)
    assert [d.same for d in diffs] == [True, False]
    top = diffs[1]
    assert top.step == "RUN step 1"
    assert dict(top.changed) == {"usr/lib/__pycache__/a.cpython-311.pyc": ("content",), "etc/x": ("time",)}
    assert top.only_b == ("var/log/apt/history.log",) and top.only_a == ()
    why = top.why()
    assert "1 file(s) differ in their time only (etc/x)" in why and "1 .pyc" in why
    assert "1 only in the second (var/log/apt/history.log)" in why
    assert imagediff.config_differences(a, b) == ["config.Hostname", "container", "container_config.Hostname",
                                                  "container_config.Image", "created", "history", "parent"]


def test_verify_refuses_an_image_it_cannot_check(tmp_path):
    """Before any rebuild: an image not built by this project, or not with
    --reproducible, is refused with what to do (a client double answers `inspect`)."""
    from ascend_build.errors import UserError
    from ascend_build.images import verify
    fake = tmp_path / "podman"
    labels = {"io.ascend-build.stack": "2.1.0", "io.ascend-build.os": "debian12", "io.ascend-build.python": "3.11",
              "io.ascend-build.chip": "910b", "io.ascend-build.platform": "linux/arm64",
              "io.ascend-build.content-tag": "sha-0123456789abcdef"}
    fake.write_text(f"#!/bin/sh\necho '{json.dumps([{'Id': 'sha256:' + '0' * 64, 'Config': {'Labels': labels}}])}'\n")
    fake.chmod(0o755)
    engine = Engine("podman", str(fake), "podman", "4.3.1")
    rec = verify.recorded(engine, "some/image:tag")
    assert rec.epoch is None and rec.stack == "2.1.0"
    fake.write_text("#!/bin/sh\necho '[{\"Id\": \"sha256:1\", \"Config\": {\"Labels\": {\"maintainer\": \"someone\"}}}]'\n")
    with pytest.raises(UserError, match="does not say what it was built from"):
        verify.recorded(engine, "some/image:tag")


@pytest.mark.parametrize("base, option", [
    (None, ""),
    ("debian:bookworm", ""),
    ("ascend-build/debian:bookworm-arm64", " --debootstrap"),
    ("mirror.site/debian:bookworm-arm64", " --base-image debian:bookworm=mirror.site/debian:bookworm-{arch}"),
])
def test_the_build_verify_suggests_for_an_image_not_reproducible_takes_its_recorded_base(base, option):
    """An image built on a debootstrap base or a mirror's: the build verify names (to make a
    reproducible one) is on that base, not on a registry an air-gapped site cannot reach."""
    from ascend_build.images.verify import _base_option
    from ascend_build.matrix import load_matrix
    cell = load_matrix(ROOT / "matrix.yaml").cell("2.1.0", "debian12", "3.11", None, "linux/arm64")
    assert _base_option(cell, base) == option
