"""End to end on a real engine: a real linux/arm64 build of the 2.1.0 stack (real torch
and torch_npu wheels from PyPI, the CANN test double for the installers, a Debian base
made by debootstrap), tested by the image suite before it is tagged."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ascend_build.engine.network import Network
from ascend_build.errors import PackageError, UserError
from ascend_build.images.build import build, work_dir
from ascend_build.inputs.options import Inputs, Site
from ascend_build.matrix import load_matrix
from tests.conftest import copy_matrix
from tests.integration.conftest import BOOKWORM as BASE
from tests.integration.conftest import CA, REPO, ROOT, SECRET_MARKER, STACK, image_exists, scan_saved


def site(packages: Path, require_pins: bool = True) -> Site:
    # The host network, as every build of this cell here (it is part of BuildKit's cache key).
    return Site(packages=(packages,), offline=True, require_pins=require_pins, base_images={"debian:bookworm": BASE},
                net=Network(ca_bundle=CA if CA.exists() else None, mode="host"), cache=packages / "cache",
                work=packages / "work")


def build_in(engine, matrix: Path, packages: Path, repository: str, require_pins: bool = True, site_changes=None,
             **kw):
    import dataclasses
    m = load_matrix(matrix)
    return build(m, m.cell(**STACK), dataclasses.replace(site(packages, require_pins), **(site_changes or {})),
                 Inputs(repository=repository), engine, **kw)


def test_build_tests_then_tags(engine, built, pinned_matrix):
    cell = load_matrix(pinned_matrix).cell(**STACK)
    tag = f"{REPO}:{cell.name}-arm64"
    assert "tested and tagged" in built.stdout
    # The image suite ran on the candidate before the tag, and none of it failed.
    assert built.stdout.index("tests/image") < built.stdout.index("tested and tagged")
    assert " failed" not in built.stdout.split("tests/image", 1)[1].split("tested and tagged")[0]
    assert image_exists(engine, tag)
    manifest = Path(built.stdout.split("package manifest: ")[1].split()[0])
    assert "# pip freeze" in (ROOT / manifest).read_text()
    arch = subprocess.run(engine.command("image", "inspect", "--format", "{{.Architecture}}", tag),
                          capture_output=True, text=True).stdout.strip()
    assert arch == "arm64"


def test_the_sbom_beside_the_log_and_in_the_image_carries_the_verified_sums(engine, built, packages, pinned_matrix):
    """CycloneDX, schema-valid; the CANN entries carry the sums of the very files the build
    verified; torch's entry the sha256 of the locked wheel; `invoke sbom` gives it back."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    from ascend_build.hashing import sha256_of
    from ascend_build.locking.lock import read
    cell = load_matrix(pinned_matrix).cell(**STACK)
    path = ROOT / built.stdout.split("sbom: ")[1].split()[0]
    text = path.read_text()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    doc = json.loads(text)
    cann = {c["name"]: c["hashes"][0]["content"] for c in doc["components"] if c.get("group") == "Huawei CANN"}
    assert cann == {f: sha256_of(packages / f) for f in (cell.toolkit.file, cell.kernels.file)}
    torch = next(c for c in doc["components"] if c["bom-ref"] == "pypi:torch")
    locked = next(p for p in read(ROOT, cell.stack, "3.11", "aarch64").packages if p.name == "torch")
    assert torch["version"] == "2.1.0" and torch["hashes"][0]["content"] in locked.hashes
    out = subprocess.run([sys.executable, "-m", "invoke", "sbom", "--image", f"{REPO}:{cell.name}-arm64"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == doc


def _dangling(engine) -> set[str]:
    return set(subprocess.run(engine.command("images", "-q", "--no-trunc", "--filter", "dangling=true"),
                              capture_output=True, text=True).stdout.split())


def test_failing_image_tests_tag_nothing_and_leave_nothing(engine, built, packages, pinned_matrix):
    """On the real engine: its untagged candidate and the finished image go (docker's own
    `rmi` of what no tag names). Every other verdict and step: tests/unit/test_gate.py."""
    # Same inputs: the build is all cache hits; only the verdict differs.
    repo = "ascend-build-test/never-tagged"
    cell = load_matrix(pinned_matrix).cell(**STACK)
    work = work_dir(site(packages), cell)          # where the build keeps its image id and manifest
    with pytest.raises(UserError, match="image tests failed .* nothing was tagged and the image was removed") as failed:
        build_in(engine, pinned_matrix, packages, repo, run_tests=lambda *args: 1)
    listed = subprocess.run(engine.command("images", "-q", repo), capture_output=True, text=True).stdout
    assert listed.strip() == ""
    # Only this build's own images are looked for: the other lane's builds and tag moves leave
    # dangling images of their own at any moment (one did, in a CI run).
    finished = str(failed.value).split("image tests failed for ")[1].split()[0]
    candidate = (work / "image-id").read_text().strip()
    assert finished.startswith("sha256:") and candidate.startswith("sha256:")
    assert {candidate, finished} & _dangling(engine) == set(), "the failed candidate was left dangling"
    # The failed candidate's package manifest is kept beside its log: that is when it is needed.
    assert "# pip freeze" in (work / "manifest.txt").read_text()


def test_a_second_build_of_the_same_inputs_reuses_the_tested_image_in_seconds(engine, built, packages,
                                                                                pinned_matrix, ca_bundle):
    import time

    from tests.integration.conftest import build_2_1_0
    started = time.monotonic()
    again = build_2_1_0(packages, pinned_matrix, ca_bundle, "--require-pins")
    took = time.monotonic() - started
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "tested when it was tagged from these same inputs: reused" in again.stdout
    assert "building cann" not in again.stdout and "tests/image" not in again.stdout
    print(f"no-op rebuild of the 2.1.0 image: {took:.1f} s")
    # --retest, the reuse of a tested image and what a failing retest does: test_gate.py.


def _corrupt(folder: Path) -> None:
    kernels = next(folder.glob("Ascend-cann-kernels-*"))
    data = bytearray(kernels.read_bytes())
    data[-10] ^= 0xFF
    kernels.write_bytes(bytes(data))


def _other_arch(folder: Path) -> None:
    from tests.doubles.cann_double import make_run
    toolkit = next(folder.glob("Ascend-cann-toolkit_*"))
    make_run(folder, "toolkit", "8.0.RC3", "x86_64", name=toolkit.name)       # right name, x86_64 inside


def _other_chip(folder: Path) -> None:
    from tests.doubles.cann_double import make_run
    kernels = next(folder.glob("Ascend-cann-kernels-*"))
    make_run(folder, "kernels", "8.0.RC3", "aarch64", chip="910", name=kernels.name)


@pytest.mark.parametrize("spoil, pinned, message", [
    (_corrupt, True, "sha256 mismatch"),
    (_corrupt, False, "the file is corrupt"),
    (_other_arch, False, "named for aarch64 but its binaries are for x86_64"),
    (_other_chip, False, "named for chip 910b but it carries kernels for 910"),
], ids=["corrupt-pinned", "corrupt-unpinned", "wrong-arch", "wrong-chip"])
def test_a_bad_package_is_refused_before_any_build(engine, packages, pinned_matrix, tmp_path, spoil, pinned,
                                                   message):
    bad = tmp_path / "bad"
    shutil.copytree(packages, bad, ignore=shutil.ignore_patterns("cache", "work"))
    spoil(bad)
    matrix = pinned_matrix
    if not pinned:
        matrix = copy_matrix(tmp_path / "unpinned")        # the committed matrix: nothing pinned
    repo = "ascend-build-test/refused-" + spoil.__name__.strip("_")
    with pytest.raises(PackageError, match=message):
        build_in(engine, matrix, bad, repo, require_pins=pinned,
                 run_tests=lambda *args: pytest.fail("no test may run for a refused package"))
    assert not (bad / "work").exists(), "nothing was staged"
    assert subprocess.run(engine.command("images", "-q", repo), capture_output=True, text=True).stdout.strip() == ""


def test_no_secret_leaves_a_byte_in_the_image(engine, built, pinned_matrix, ca_bundle, site):
    """The build went through a proxy with a password, a pip index with a password and a
    private CA: all three were used (the doubles saw the credentials), and none of their
    bytes is in any layer (`docker save`), the history (build args included), the labels,
    env or config, or the build's own output."""
    proxy, index = site
    assert proxy.seen["CONNECT files.pythonhosted.org"] > 0 and proxy.seen["GET deb.debian.org"] > 0, proxy.seen
    assert index.projects["torch"] > 0 and index.projects["torch-npu"] + index.projects["torch_npu"] > 0, index.projects
    needles = {"proxy password": proxy.password, "index password": index.password}
    if ca_bundle is not None:
        assert SECRET_MARKER in ca_bundle.read_text()
        needles["CA bundle marker"] = SECRET_MARKER
    tag = f"{REPO}:{load_matrix(pinned_matrix).cell(**STACK).name}-arm64"
    for what, needle in needles.items():
        assert needle not in built.stdout + built.stderr, f"the {what} was printed"
    for args in (("history", "--no-trunc", tag), ("image", "inspect", tag)):
        out = subprocess.run(engine.command(*args), capture_output=True, text=True)
        assert out.returncode == 0
        for what, needle in needles.items():
            assert needle not in out.stdout, f"the {what} is in `docker {args[0]}`"
        assert "127.0.0.1:" not in out.stdout and (ca_bundle is None or str(ca_bundle) not in out.stdout)
    total, found = scan_saved(engine, tag, needles)
    assert total > 100 << 20, "docker save gave too little to be the image"
    assert not found, f"in the image's bytes: {sorted(found)}"
