"""The fast path of a cross-arch build against the plain one, for real, on the runtime
Dockerfile's first Python layer: CANN's Python packages for the 2.1.0 arm64 cell (numpy,
scipy, sympy, protobuf and the rest of its lock, compiled wheels among them), installed
by pip on the build machine for aarch64 (`--pip-on auto` on an x86_64 host: the
`cann-pip-native` stage, which the lane's main build has made) and by pip in the image
under qemu (`--pip-on target`: the `cann-pip-target` stage, built here). The two
environments must be the same: `pip freeze --all` to the byte, and the venv's file list
with every file's type, mode and size, the content of every file but the byte code, and
the byte code's target interpreter (its magic number).

The torch and torch_npu layers are installed by the same template step (templates/_pip.j2)
with the same script (images/pip_for_target.py) from their own lock files: that the
whole image's venv comes out the same was measured once with both whole images
(docs/results.md); building the plain path's whole image on every run (pip under qemu
for torch, about seven minutes) is left out to keep CI within its time.

The OS step's fast path the same way (test_the_os_step_unpacked_on_the_build_machine_is_apts_in_the_image):
a few packages with maintainer scripts and a trigger, installed by apt in the image under
qemu (OS_ON=target) and fetched and unpacked by apt and dpkg on the build machine, then
configured in the image (OS_ON=native; the standard library byte-compiled by the build
machine's interpreter), from the template's own steps (templates/_steps.j2): the two file
systems must be the same, entry for entry (type, mode, owner, link, content, byte code too).
The lane's main build takes the native path for its whole package list; its image suite
passing is the proof at full size (benchmarks/os_step.py compares the whole list's trees)."""
from __future__ import annotations

import hashlib
import io
import subprocess
import tarfile

import pytest

from ascend_build.engine import RunSpec
from ascend_build.engine.network import Network
from ascend_build.inputs.options import Site
from ascend_build.platforms import PLATFORMS, host
from tests.integration.conftest import BOOKWORM, CA, ROOT, STACK, build_stage, image_tree

STAGES = "ascend-build-test/fast-path"


def stage(engine, pinned_matrix, packages, tmp_path, pip_on: str) -> str:
    """The cell's `cann-pip-<where pip ran>` stage, built with the lane's build network and
    CA (the main build's cache keys), tagged under STAGES."""
    site = Site(packages=(packages,), offline=True, require_pins=True, base_images={"debian:bookworm": BOOKWORM},
                net=Network(ca_bundle=CA if CA.exists() else None, mode="host"), cache=packages / "cache",
                work=tmp_path / "work", pip_on=pip_on)  # type: ignore[arg-type]
    tag = f"{STAGES}:{pip_on}"
    target = build_stage(engine, pinned_matrix, STACK, site, "cann-pip-{pip}", tag, tmp_path / f"build-{pip_on}.log")
    assert target == {"auto": "cann-pip-native", "target": "cann-pip-target"}[pip_on], target
    return tag


def venv_listing(engine, image: str) -> dict[str, tuple]:
    """Every entry of /opt/venv, read natively from `docker cp` (no emulated process):
    path -> (type, mode, size, sha256 of the content or, for byte code, its magic number)."""
    cid = subprocess.run(engine.command("create", "--platform", "linux/arm64", image, "true"), capture_output=True,
                         text=True, check=True).stdout.strip()
    try:
        raw = subprocess.run(engine.command("cp", f"{cid}:/opt/venv", "-"), capture_output=True, check=True).stdout
    finally:
        subprocess.run(engine.command("rm", cid), capture_output=True)
    listing = {}
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        for m in tar:
            if m.isdir():
                listing[m.name] = ("dir", m.mode)
            elif m.issym():
                listing[m.name] = ("link", m.linkname)
            else:
                data = tar.extractfile(m).read()
                # .pyc: header + marshal data, whose bytes depend on reference counts
                # at compile time; what matters is which interpreter it is for.
                what = data[:4].hex() if m.name.endswith(".pyc") else hashlib.sha256(data).hexdigest()
                listing[m.name] = ("file", m.mode, m.size if not m.name.endswith(".pyc") else None, what)
    return listing


def freeze(engine, image: str) -> str:
    out = engine.run_container(RunSpec(image, ("freeze", "--all"), platform="linux/arm64",
                                       entrypoint="/opt/venv/bin/pip"), timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.skipif(host() is None or not PLATFORMS["linux/arm64"].emulated(),
                    reason="the fast path is for cross-arch builds; this machine builds arm64 natively")
def test_fast_path_installs_what_the_plain_path_installs(engine, built, pinned_matrix, packages, tmp_path):
    assert "pip runs on the build machine" in built.stdout, "CI's arm64 build must take the fast path"
    fast = stage(engine, pinned_matrix, packages, tmp_path, "auto")
    plain = stage(engine, pinned_matrix, packages, tmp_path, "target")
    try:
        assert freeze(engine, fast) == freeze(engine, plain)
        fast_venv, plain_venv = venv_listing(engine, fast), venv_listing(engine, plain)
        assert len(fast_venv) > 1000, "the venv with CANN's Python packages has thousands of files"
        only_fast, only_plain = sorted(set(fast_venv) - set(plain_venv)), sorted(set(plain_venv) - set(fast_venv))
        assert (only_fast, only_plain) == ([], []), "files in one venv only"
        differ = {path: (fast_venv[path], plain_venv[path]) for path in fast_venv
                  if fast_venv[path] != plain_venv[path]}
        assert differ == {}, "files that differ (fast, plain)"
        assert sum(1 for v in fast_venv.values() if v[0] == "file" and v[2] is None) > 200, "byte code was compared"
    finally:
        engine.remove(fast, plain)


# A few packages with what makes an OS step more than unpacking: maintainer scripts
# (update-alternatives, a conffile), a shared library and libc-bin's ldconfig trigger, files
# of arch `all`; and ca-certificates, whose postinst, debconf and trigger run the build
# machine's text utilities on the native path (_steps.j2: native_tools); and python3-minimal,
# whose interpreter's postinst and py3compile byte-compile the minimal standard library, on
# the build machine's interpreter on the native path. Small, so that the emulated side stays
# short.
OS_PACKAGES = "pciutils net-tools unzip xz-utils ca-certificates python3-minimal"
OS_STEP = """{% import "_steps.j2" as steps -%}
ARG BASE_IMAGE
ARG BUILD_BASE_IMAGE
ARG BUILDPLATFORM
ARG TARGETARCH
ARG OS_ON=target
FROM ${BASE_IMAGE} AS os-base
{{ steps.native_tools(os, packages) }}
{% set preamble %}SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ARG QEMU_CPU
{% endset %}
{{ steps.os_stages("os", os, steps.packages_run(os, packages, words), words, "", preamble) }}
"""


def os_step(engine, tmp_path, os_on: str) -> str:
    from ascend_build import engine as eng
    from ascend_build.engine.emulation import build_args as emulation_args
    from ascend_build.images.render import PACKAGES, _env
    from ascend_build.matrix import load_matrix
    system = load_matrix(ROOT / "matrix.yaml").os["debian12"]
    folder = tmp_path / f"os-{os_on}"
    folder.mkdir()
    (folder / "Dockerfile").write_text(_env().from_string(OS_STEP).render(os=system, packages=PACKAGES["apt"],
                                                                          words=OS_PACKAGES))
    tag = f"{STAGES}:os-{os_on}"
    here = host()
    req = eng.BuildRequest(dockerfile=folder / "Dockerfile", context=folder, platform="linux/arm64", target="os",
                           tags=[tag], network="host", no_cache=True,
                           build_args={"BASE_IMAGE": BOOKWORM.format(arch="arm64"), "OS_ON": os_on,
                                       "BUILD_BASE_IMAGE": BOOKWORM.format(arch=here.suffix),
                                       **emulation_args(PLATFORMS["linux/arm64"])},
                           secrets={"ca-bundle": CA} if CA.exists() else {})
    assert engine.build(req, tmp_path / f"os-{os_on}.log") == 0, (tmp_path / f"os-{os_on}.log").read_text()[-4000:]
    return tag


@pytest.mark.skipif(host() is None or not PLATFORMS["linux/arm64"].emulated(),
                    reason="the fast path is for cross-arch builds; this machine builds arm64 natively")
def test_the_os_step_unpacked_on_the_build_machine_is_apts_in_the_image(engine, built, arm64_base, tmp_path):
    assert "OS packages: apt fetches and unpacks them on the build machine" in built.stdout, \
        "CI's arm64 build must take the OS step's fast path"
    native, emulated = os_step(engine, tmp_path, "native"), os_step(engine, tmp_path, "target")
    try:
        fast, plain = image_tree(engine, native), image_tree(engine, emulated)
        base = image_tree(engine, BOOKWORM.format(arch="arm64"))
        added = set(fast) - set(base)
        assert any(p.endswith("bin/lspci") for p in added) and any("libpci.so" in p for p in added), \
            "the packages are in the image"
        bundle = next(p for p in added if p.endswith("etc/ssl/certs/ca-certificates.crt"))
        assert fast[bundle][0] == tarfile.REGTYPE and sum(p.startswith(bundle.rsplit("/", 1)[0]) for p in added) > 200, \
            "update-ca-certificates ran: the bundle and a link per certificate"
        assert "byte code: python3.11 " in (tmp_path / "os-native.log").read_text(), \
            "the native path's configure step byte-compiled on the build machine's interpreter"
        assert sum(p.endswith(".cpython-311.pyc") and "/python3.11/" in p for p in added) > 100, \
            "the standard library's byte code is in both (and compared, byte for byte)"
        assert (sorted(set(fast) - set(plain)), sorted(set(plain) - set(fast))) == ([], []), "entries in one only"
        differ = {path: (fast[path], plain[path]) for path in fast if fast[path] != plain[path]}
        assert differ == {}, "entries that differ (native, emulated)"
    finally:
        engine.remove(native, emulated)
