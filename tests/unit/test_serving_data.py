"""The serving images' data: vLLM-Ascend's releases imported from a package index (each
release's sdist streamed: its PKG-INFO, its requirements.txt's pins, its Dockerfiles'
official CANN images and SOC_VERSIONs), paired with the stack of their pins on the CANN
their images use (one derived from the release's data where matrix.yaml has none) and with
the vLLM release they pair with, refused by name where they cannot be, listed by `invoke
matrix`. The index is a loopback double serving sdists made here: small ones, and ones made
of the real releases' facts (tests/data/vllm-ascend, read from their sdists on PyPI)."""
from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import os
import re
import tarfile
from pathlib import Path

import pytest

from ascend_build import chips
from ascend_build.errors import MatrixError, UserError
from ascend_build.matrix import load_matrix
from ascend_build.matrix.imported import emit
from ascend_build.matrix.report import matrix_table, serving_rows
from ascend_build.matrix.serving import refused
from ascend_build.matrix.yamlsource import safe_load
from ascend_build.upstream import pypi, vllm
from ascend_build.upstream.update import summarize, update
from tests.conftest import copy_matrix
from tests.doubles.deployer_fixture import make_deployer
from tests.doubles.net_doubles import PackageIndexDouble

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "tests" / "data" / "upstream-docs"

PINS_0_23 = ["torch==2.10.0", "torch-npu==2.10.0.post4", "torchvision==0.25.0", "torchaudio==2.10.0",
             "triton-ascend==3.2.2", "transformers==5.5.4", "fastapi<0.124.0", "numba"]


DOCKERFILE_0_23 = ("FROM quay.io/ascend/cann:9.1.0-910b-ubuntu22.04-py3.12\nARG SOC_VERSION=\"ascend910b1\"\n"
                   "RUN python3 -m pip install modelscope 'ray>=2.47.1,<=2.48.0' && \\\n    true\n")


def sdist(name: str, version: str, requires: list[str], python: str = ">=3.10", filler: int = 0,
          pkg_info_first: bool = True, files: dict[str, str] | None = None) -> bytes:
    """A .tar.gz sdist as setuptools lays one out, in name order: <name>-<version>/PKG-INFO
    beside its sources (`files` at its top: requirements.txt, Dockerfiles); `filler` bytes of
    incompressible source after (or before) the PKG-INFO."""
    folder = f"{name.replace('-', '_')}-{version}"
    info = "\n".join(["Metadata-Version: 2.4", f"Name: {name.replace('-', '_')}", f"Version: {version}",
                      *([f"Requires-Python: {python}"] if python else []),
                      *(f"Requires-Dist: {r}" for r in requires), "", "A long description."]).encode()
    members = sorted([(f"{folder}/PKG-INFO", info), (f"{folder}/vllm_ascend/kernels.bin", os.urandom(filler)),
                      *((f"{folder}/{n}", t.encode()) for n, t in (files or {}).items())])
    if not pkg_info_first:
        members = [m for m in members if not m[0].endswith("PKG-INFO")] + [m for m in members
                                                                         if m[0].endswith("PKG-INFO")]
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for path, data in members:
            entry = tarfile.TarInfo(path)
            entry.size = len(data)
            tar.addfile(entry, io.BytesIO(data))
    return gzip.compress(out.getvalue(), compresslevel=1, mtime=0)     # the same bytes each time


def wheel(version: str, py: str, plat: str) -> tuple[str, tuple[bytes, str]]:
    return f"vllm_ascend-{version}-cp{py}-cp{py}-{plat}.whl", (b"not read", ">=3.10")


def plugin_sdist(version: str, requires: list[str] = PINS_0_23, **more) -> bytes:
    """The plugin's sdist: its PKG-INFO names no requirement (vllm_ascend 0.9.1's names none),
    its requirements.txt does, its Dockerfile the image it builds on."""
    return sdist("vllm-ascend", version, [], files={"requirements.txt": "\n".join(requires) + "\n",
                                                   "Dockerfile": DOCKERFILE_0_23}, **more)


def index_projects() -> dict[str, dict[str, tuple[bytes, str]]]:
    plugin = dict([
        ("vllm_ascend-0.20.0.tar.gz", (b"below the floor: never read", ">=3.9")),
        ("vllm_ascend-0.23.0.tar.gz", (plugin_sdist("0.23.0"), ">=3.10")),
        ("vllm_ascend-0.23.0.post1.tar.gz", (plugin_sdist("0.23.0.post1"), ">=3.10")),
        ("vllm_ascend-0.24.0rc1.tar.gz", (plugin_sdist("0.24.0rc1"), ">=3.10")),
        wheel("0.23.0", "310", "manylinux_2_34_aarch64"), wheel("0.23.0", "311", "manylinux_2_34_aarch64"),
        wheel("0.23.0", "312", "manylinux_2_34_x86_64"),
    ])
    vllm_files = {"vllm-0.22.1.tar.gz": (b"not read", ">=3.10,<3.15"),
                  "vllm-0.23.0.tar.gz": (sdist("vllm", "0.23.0", [], python=">=3.10,<3.15"), ">=3.10,<3.15"),
                  "vllm-0.24.0.tar.gz": (b"not read", ">=3.10,<3.15")}
    return {"vllm-ascend": plugin, "vllm": vllm_files}


# ------------------------------------------------------------------ the import

def test_each_release_from_the_floor_is_read_from_its_sdist():
    with PackageIndexDouble(index_projects()) as index:
        got, notes = vllm.read("0.21.0", False, ["--index-url", index.url])
    assert list(got) == ["0.23.0", "0.23.0.post1"], "final and post releases from the floor; no rc"
    rel = got["0.23.0"]
    # the pins of its requirements.txt (its PKG-INFO names none here, as 0.9.1's does not)
    assert rel.pins == {"torch": "2.10.0", "torch_npu": "2.10.0.post4", "torchvision": "0.25.0",
                        "torchaudio": "2.10.0", "triton_ascend": "3.2.2", "transformers": "5.5.4"}
    assert rel.pins_source == "requirements.txt"
    assert rel.requires_python == ">=3.10"
    assert rel.source == "PyPI vllm-ascend 0.23.0 sdist vllm_ascend-0.23.0.tar.gz: PKG-INFO, requirements.txt, Dockerfile"
    image, = rel.images
    assert image.to_data() == {"from": "quay.io/ascend/cann:9.1.0-910b-ubuntu22.04-py3.12", "cann": "9.1.0",
                               "chip": "910b", "os": "ubuntu22.04", "python": "3.12", "soc_version": "ascend910b1",
                               "read": "FROM line 1; SOC_VERSION line 2; ray line 3"}
    assert rel.ray == "ray<=2.48.0,>=2.47.1"
    assert rel.wheels == {"aarch64": ["3.10", "3.11"], "x86_64": ["3.12"]}
    made = index_projects()["vllm-ascend"]["vllm_ascend-0.23.0.tar.gz"][0]
    assert rel.sdist == "vllm_ascend-0.23.0.tar.gz" and rel.sha256 == hashlib.sha256(made).hexdigest()
    assert rel.vllm is not None and rel.vllm.version == "0.23.0" and rel.vllm.sdist == "vllm-0.23.0.tar.gz"
    assert rel.vllm.requires_python == ">=3.10,<3.15", "as the index page says it"
    assert rel.vllm.source == "PyPI vllm 0.23.0 (index page: sdist, sha256, requires-python)"
    post = got["0.23.0.post1"]
    assert post.wheels == {} and post.vllm is not None and post.vllm.version == "0.23.0", "a post pairs with its base"
    assert notes == []
    # Only the plugin's sdists from the floor were fetched; vLLM's facts came from its page.
    assert index.asked["file vllm_ascend-0.23.0.tar.gz"] == 1
    assert not index.asked["file vllm_ascend-0.20.0.tar.gz"] and not index.asked["file vllm_ascend-0.24.0rc1.tar.gz"]
    assert not index.asked["file vllm-0.23.0.tar.gz"]


def test_pre_releases_are_read_when_the_matrix_asks_and_a_mirrors_html_page_serves():
    with PackageIndexDouble(index_projects(), html=True) as index:
        got, _ = vllm.read("0.23.0", True, ["--index-url", index.url])
    assert list(got) == ["0.23.0", "0.23.0.post1", "0.24.0rc1"]
    # a release candidate pairs with vLLM's release of its base number
    assert got["0.24.0rc1"].vllm is not None and got["0.24.0rc1"].vllm.version == "0.24.0"
    assert got["0.23.0"].vllm and got["0.23.0"].vllm.requires_python == ">=3.10,<3.15", "the link's attribute, unescaped"


def test_vllms_requires_python_comes_from_its_sdist_where_the_page_does_not_say_it():
    projects = index_projects()
    data, _ = projects["vllm"]["vllm-0.23.0.tar.gz"]
    projects["vllm"]["vllm-0.23.0.tar.gz"] = (data, "")
    with PackageIndexDouble(projects, html=True) as index:
        got, _ = vllm.read("0.21.0", False, ["--index-url", index.url])
        assert index.asked["file vllm-0.23.0.tar.gz"] == 1
    assert got["0.23.0"].vllm and got["0.23.0"].vllm.requires_python == ">=3.10,<3.15"
    assert "sdist PKG-INFO: requires-python" in got["0.23.0"].vllm.source


def test_a_release_without_an_sdist_is_said_and_left_out():
    projects = index_projects()
    projects["vllm-ascend"].update(dict([wheel("0.23.1", "311", "manylinux_2_34_aarch64")]))
    with PackageIndexDouble(projects) as index:
        got, notes = vllm.read("0.21.0", False, ["--index-url", index.url])
    assert "0.23.1" not in got
    assert notes == ["vllm-ascend 0.23.1: no sdist on the index, so no requirements or Dockerfiles to read its pins "
                     "and images from; not imported"]


class Counting(io.RawIOBase):
    """A stream that counts what its reader took."""

    def __init__(self, data: bytes):
        self.inner, self.taken = io.BytesIO(data), 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        chunk = self.inner.read(len(buffer))
        buffer[:len(chunk)] = chunk
        self.taken += len(chunk)
        return len(chunk)


def test_the_sdist_is_left_once_its_pkg_info_is_read():
    data = sdist("vllm-ascend", "0.23.0", PINS_0_23, filler=4 << 20)
    stream = Counting(data)
    text = pypi.pkg_info(stream, "vllm_ascend-0.23.0.tar.gz")
    assert "Requires-Dist: torch-npu==2.10.0.post4" in text
    assert stream.taken < len(data) // 8, f"read {stream.taken} of {len(data)} bytes"
    # Its PKG-INFO after 4 MB of sources: read that far, and no further than the archive.
    late = Counting(sdist("vllm-ascend", "0.23.0", PINS_0_23, filler=4 << 20, pkg_info_first=False))
    assert "Version: 0.23.0" in pypi.pkg_info(late, "late.tar.gz") and late.taken > 4 << 20


def test_the_sdist_is_left_early_over_the_network_too():
    """Its PKG-INFO, Dockerfiles and requirements.txt read, the sdist is left: the package's
    sources, which sort after them (setuptools writes the archive in name order), stay unread."""
    projects = index_projects()
    big = plugin_sdist("0.23.0", filler=24 << 20)
    projects["vllm-ascend"]["vllm_ascend-0.23.0.tar.gz"] = (big, ">=3.10")
    with PackageIndexDouble(projects) as index:
        got, _ = vllm.read("0.23.0", False, ["--index-url", index.url])
        files = [f for f in pypi.files("vllm-ascend", ["--index-url", index.url]) if f.name.endswith("0.23.0.tar.gz")]
    assert got["0.23.0"].pins["torch"] == "2.10.0" and files[0].url.startswith("http://127.0.0.1:")
    # What the double got out before the reader left: socket buffers, not the 24 MB.
    assert index.sent["vllm_ascend-0.23.0.tar.gz"] < len(big) // 2


@pytest.mark.parametrize("data, message", [
    (b"\x1f\x8b not gzip at all", "not a readable .tar.gz sdist"),
    (sdist("vllm-ascend", "0.23.0", [], filler=10)[:40], "not a readable .tar.gz sdist"),
], ids=["garbage", "cut short"])
def test_a_broken_sdist_is_refused_with_its_name(data, message):
    with pytest.raises(UserError, match=f"broken.tar.gz: {message}"):
        pypi.pkg_info(io.BytesIO(data), "broken.tar.gz")


def test_an_sdist_without_pkg_info_or_of_another_release_is_refused():
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        entry = tarfile.TarInfo("vllm_ascend-0.23.0/setup.py")
        tar.addfile(entry, io.BytesIO(b""))
    with pytest.raises(UserError, match="no PKG-INFO .* at the top of the sdist"):
        pypi.pkg_info(io.BytesIO(out.getvalue()), "vllm_ascend-0.23.0.tar.gz")
    projects = index_projects()
    projects["vllm-ascend"]["vllm_ascend-0.23.0.tar.gz"] = (sdist("vllm-ascend", "0.22.0", PINS_0_23), ">=3.10")
    with PackageIndexDouble(projects) as index, pytest.raises(UserError) as refused:
        vllm.read("0.23.0", False, ["--index-url", index.url])
    assert str(refused.value) == ("vllm_ascend-0.23.0.tar.gz: its PKG-INFO says Name vllm_ascend Version 0.22.0, not "
                                  "vllm-ascend 0.23.0; the index's file is not what its name says")


def test_pins_are_the_linux_images_exact_releases_or_their_specifier():
    assert vllm.pins_of(["torch==2.10.0", "torch-npu==2.10.0.post4; platform_machine == 'aarch64'",
                         "torchvision>=0.24,<0.26", "transformers==5.*", "triton_ascend==3.2.2 ; sys_platform == 'win32'",
                         "torchaudio==2.10.0; extra == 'audio'", "numba", "not a requirement ==="]) == {
        "torch": "2.10.0", "torch_npu": "2.10.0.post4", "torchvision": "<0.26,>=0.24", "transformers": "==5.*"}
    assert vllm.pins_of(["torch==2.10.0; platform_machine == 'aarch64'",
                         "torch==2.9.0; platform_machine == 'x86_64'"]) == {"torch": "==2.10.0,==2.9.0"}


def _section(text: str) -> dict:
    return safe_load(text)["vllm_ascend_releases"]


def test_the_section_is_written_in_one_order_and_summarized():
    with PackageIndexDouble(index_projects()) as index:
        got, _ = vllm.read("0.21.0", False, ["--index-url", index.url])
    old = safe_load((ROOT / "imported.yaml").read_text())
    new = dict(old, vllm_ascend_releases={v: r.to_data() for v, r in reversed(got.items())})
    text = emit(new)
    assert text.startswith("# Generated by `invoke update`")
    assert list(_section(text)) == ["0.23.0", "0.23.0.post1"], "releases in version order"
    assert emit(safe_load(text)) == text
    assert re.search(r"\n  0\.23\.0:\n    source: 'PyPI vllm-ascend 0\.23\.0 sdist vllm_ascend-0\.23\.0\.tar\.gz: PKG-INFO, "
                     r"requirements\.txt, Dockerfile'\n    requires_python: '>=3\.10'\n"
                     r"    pins: \{torch: 2\.10\.0, torch_npu: 2\.10\.0\.post4, .*\}\n    pins_source: requirements\.txt\n", text)
    assert "\n    images:\n      Dockerfile: {from: 'quay.io/ascend/cann:9.1.0-910b-ubuntu22.04-py3.12', cann: 9.1.0, " \
           "chip: 910b, os: ubuntu22.04, python: '3.12', soc_version: ascend910b1, read: FROM line 1; SOC_VERSION " \
           "line 2; ray line 3}\n    ray: ray<=2.48.0,>=2.47.1\n" in text
    lines = summarize(old, safe_load(text)).lines()
    assert any(line.startswith("~ vllm-ascend 0.23.0 sdist: vllm_ascend-0.23.0.tar.gz sha256 a58db76e") for line in lines)
    assert "~ vllm-ascend 0.23.0 wheels: aarch64 3.10 3.11 3.12; x86_64 3.10 3.11 3.12 -> aarch64 3.10 3.11; " \
           "x86_64 3.12" in lines
    assert "- vllm-ascend 0.23.0 Dockerfile.a5" in lines, "its a5 image gone from this import: said"


def test_an_import_that_reads_no_index_keeps_the_section_as_it_was(tmp_path):
    matrix = copy_matrix(tmp_path / "m")
    before = _section((matrix.parent / "imported.yaml").read_text())
    result = update(matrix, [make_deployer(tmp_path / "d", "6.0.0")], docs_folder=DOCS)
    assert _section(result.text) == before
    assert result.counts["vLLM-Ascend releases"] == len(before) == 49
    assert result.counts["vLLM-Ascend releases with a vLLM release of the same number"] == 48
    assert not any("vllm-ascend" in line for line in result.summary.lines())


# ------------------------------------------------------------------ the import of the real releases' facts

REAL = ROOT / "tests" / "data" / "vllm-ascend"
REAL_RELEASES = sorted(p.name for p in REAL.iterdir() if p.is_dir())


def real_sdist(version: str) -> bytes:
    """An sdist of a real release's facts as its sdist holds them (tests/data/vllm-ascend:
    PKG-INFO's headers, requirements.txt, each Dockerfile's lines the import reads, at their
    lines), in name order as setuptools writes it, its sources after."""
    folder = f"vllm_ascend-{version}"
    files = sorted((f"{folder}/{p.name}", p.read_bytes()) for p in (REAL / version).iterdir())
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for path, data in files + [(f"{folder}/vllm_ascend/__init__.py", b"")]:
            entry = tarfile.TarInfo(path)
            entry.size = len(data)
            tar.addfile(entry, io.BytesIO(data))
    return gzip.compress(out.getvalue(), compresslevel=1, mtime=0)


def test_the_committed_import_is_what_the_real_releases_sdists_say():
    """Each release of tests/data/vllm-ascend imported through a loopback index: the facts its
    sdist gives are the committed imported.yaml's, field by field."""
    committed = _section((ROOT / "imported.yaml").read_text())
    plugin = {f"vllm_ascend-{v}.tar.gz": (real_sdist(v), committed[v]["requires_python"]) for v in REAL_RELEASES}
    vllms = {f"vllm-{v}.tar.gz": (b"not read", ">=3.10,<3.15") for v in ("0.7.3", "0.9.1", "0.11.0", "0.13.0", "0.18.0",
                                                                           "0.23.0", "0.25.1", "0.30.0")}
    with PackageIndexDouble({"vllm-ascend": plugin, "vllm": vllms}) as index:
        got, _ = vllm.read("0.7.3", True, ["--index-url", index.url])
    assert sorted(got) == REAL_RELEASES
    for version, rel in got.items():
        data, want = rel.to_data(), committed[version]
        for key in ("requires_python", "pins", "pins_source", "images", "ray", "vllm_tag"):
            assert data.get(key) == want.get(key), (version, key)
        assert want["source"].endswith(data["source"].split(": ", 1)[1]), version
        assert data["vllm"]["version"] == want["vllm"]["version"], version
    # The facts the issue's table gives, from the releases' own files:
    images = {v: {i.dockerfile: i for i in got[v].images} for v in got}
    assert (got["0.13.0"].pins["torch_npu"], images["0.13.0"]["Dockerfile"].cann) == ("2.8.0.post2", "8.5.0")
    assert (got["0.25.1rc1"].pins["torch_npu"], images["0.25.1rc1"]["Dockerfile"].cann) == ("2.10.0.post2", "9.0.1")
    rc2 = images["0.30.0rc2"]["Dockerfile.a5"]
    assert (rc2.cann, rc2.build, rc2.chip, rc2.soc_version) == ("9.2.0", "20260930220649", "950", "ascend950dt_9582")
    assert rc2.base == "swr.cn-north-12.myhuaweicloud.com/atlas_inference/cann:9.2.0_20260930220649-950-ubuntu22.04-py3.12"
    assert rc2.read == "FROM line 23 (ARG CANN_QUAY_URL 19, CANN_VERSION 21); SOC_VERSION line 39; ray line 84"
    assert images["0.25.1rc1"]["Dockerfile.310p"].cann == "9.1.0-beta.1"
    assert got["0.9.1"].pins_source == "requirements.txt" and got["0.9.1"].pins["torch_npu"] == "2.5.1.post1", \
        "0.9.1's PKG-INFO names no requirement: its requirements.txt does"
    assert "Dockerfile.a5" not in images["0.13.0"] and images["0.7.3"]["Dockerfile"].soc_version == ""
    assert got["0.23.0.post1"].vllm is not None and got["0.23.0.post1"].vllm.version == "0.23.0"


@pytest.mark.parametrize("text, image", [
    ('ARG BASE="quay.io/ascend/cann:8.5.0-910b-ubuntu22.04-py3.11"\nFROM $BASE AS build\nFROM build\n',
     {"from": "quay.io/ascend/cann:8.5.0-910b-ubuntu22.04-py3.11", "cann": "8.5.0", "chip": "910b"}),
    ("FROM quay.io/ascend/cann:9.0.1-a3-ubuntu22.04-py3.11-devel\n", {"from": "quay.io/ascend/cann:9.0.1-a3-ubuntu22.04-py3.11-devel"}),
    ("FROM ubuntu:22.04\n", {"from": "ubuntu:22.04"}),
    ("FROM --platform=$BUILDPLATFORM quay.io/ascend/cann:9.1.0-beta.1-310p-ubuntu22.04-py3.12\n",
     {"from": "quay.io/ascend/cann:9.1.0-beta.1-310p-ubuntu22.04-py3.12", "cann": "9.1.0-beta.1", "chip": "310p"}),
], ids=["stage", "devel", "not-cann", "platform"])
def test_a_dockerfiles_from_is_read_with_its_args_and_stages(text, image):
    from ascend_build.upstream import vllm_sdist
    got = vllm_sdist.dockerfile("Dockerfile", text).to_data()
    assert {k: got.get(k) for k in image} == image and "cann" in got or set(image) == {"from"}


def test_a_dockerfile_without_from_or_with_a_broken_ray_is_refused():
    from ascend_build.upstream import vllm_sdist
    with pytest.raises(UserError, match="Dockerfile.a3: no FROM line"):
        vllm_sdist.dockerfile("Dockerfile.a3", "ARG SOC_VERSION=ascend910_9391\n")
    with pytest.raises(UserError, match="Dockerfile:2: 'ray>=' is not a requirement"):
        vllm_sdist.dockerfile("Dockerfile", "FROM x\nRUN pip install 'ray>='\n")


# ------------------------------------------------------------------ the matrix

@pytest.fixture
def matrix(tmp_path) -> Path:
    return copy_matrix(tmp_path / "m")


def _edit(matrix: Path, change) -> None:
    """imported.yaml's vllm_ascend_releases changed by `change(section)`, written as the import writes it."""
    path = matrix.parent / "imported.yaml"
    data = safe_load(path.read_text())
    change(data["vllm_ascend_releases"])
    path.write_text(emit(data))


def test_a_release_pairs_with_the_stack_of_its_pins_on_its_images_cann(matrix):
    m = load_matrix(matrix)
    rel = m.serving("0.23.0")
    assert (rel.version, rel.vllm, rel.stack.name, rel.stack.cann) == ("0.23.0", "0.23.0", "2.10.0-26.1.0", "9.1.0")
    assert rel.stack is m.stacks["2.10.0-26.1.0"]
    assert rel.sdist == "vllm_ascend-0.23.0.tar.gz" and rel.vllm_sdist == "vllm-0.23.0.tar.gz"
    assert re.fullmatch(r"[0-9a-f]{64}", rel.sdist_sha256) and re.fullmatch(r"[0-9a-f]{64}", rel.vllm_sdist_sha256)
    assert rel.pythons() == ["3.10", "3.11", "3.12", "3.13"] == rel.pythons(rel.stack)
    assert rel.has_wheel("3.12", "aarch64") and not rel.has_wheel("3.13", "aarch64")
    assert rel.fits("3.13") and not rel.fits("3.9")
    assert m.serving("v0.23.0").version == "0.23.0", "PyPI's normal form"
    # each on its own pins and CANN: a post release as its base, a release candidate on the CANN its images use
    post, rc1, rc2, old = (m.serving(v) for v in ("0.23.0.post1", "0.25.1rc1", "0.30.0rc2", "0.13.0"))
    assert (post.vllm, post.stack.name) == ("0.23.0", "2.10.0-26.1.0")
    assert (rc1.vllm, rc1.stack.name, rc1.stack.cann, rc1.stack.package) == ("0.25.1", "2.10.0-26.0.1", "9.0.1",
                                                                             "2.10.0.post2")
    assert rc1.candidate and not post.candidate
    assert (rc2.vllm, rc2.stack.name, rc2.stack.cann, rc2.stack.package) == ("0.30.0", "2.10.0.post4-cann9.2.0",
                                                                             "9.2.0", "2.10.0.post4")
    assert (old.vllm, old.stack.name, old.stack.cann, old.stack.package) == ("0.13.0", "2.8.0.post2-cann8.5.0",
                                                                             "8.5.0", "2.8.0.post2")


def test_a_stack_no_written_one_matches_is_derived_from_the_releases_data(matrix):
    m = load_matrix(matrix)
    st = m.serving("0.30.0rc2").stack
    assert st.derived and st.name not in m.stacks and m.derived[st.name] is st
    # its torch_npu's written stack on another CANN gives the toolchain (2.10.0-26.1.0: setuptools<81 for vLLM)
    template = m.stacks["2.10.0-26.1.0"]
    assert (st.torch.gcc, st.torch.builder, st.torch.index, st.pins, st.cxx11_abi) == (
        template.torch.gcc, template.torch.builder, template.torch.index, template.pins, template.cxx11_abi)
    # its Pythons and OSes are the release's images', its Dockerfile's OS first
    assert (st.python_min, st.python_max, st.python_default) == ("3.12", "3.12", "3.12")
    assert st.oses == ("ubuntu22.04", "openeuler24.03") and m.official_oses(st) == st.oses
    assert m.pairing(st)[0] == "compatible", "torch_npu 2.10.0.post4 (26.1.0) on CANN 9.2.0 by Huawei's grid"
    cell = m.cell(st)
    assert (cell.os.name, cell.python, cell.cann.version) == ("ubuntu22.04", "3.12", "9.2.0")
    # built on the release's images' OSes and, as every derived line, on the Debian releases
    # debootstrap makes (a site that reaches no registry); any other OS is refused naming them
    assert m.derived_oses(st) == ("ubuntu22.04", "openeuler24.03", "debian12", "debian11", "debian13")
    assert m.cell(st, os="debian12").os.name == "debian12"
    with pytest.raises(UserError, match=r"built on the OSes vLLM-Ascend's images publish \(ubuntu22.04, "
                                        r"openeuler24.03\) and on the Debian releases .*not on ubuntu24.04: pass --os ubuntu22.04"):
        m.cell(st, os="ubuntu24.04")
    # 0.13.0's: torch_npu 2.8.0.post2 was released for CANN 8.5.0; the 2.8.0 line's toolchain
    old = m.serving("0.13.0").stack
    assert old.torch.npu_branch == "v2.8.0-7.3.0" and old.pythons() == ["3.11"] and m.pairing(old)[0] == "published"
    assert (ROOT / "images" / "runtime" / st.name / "ubuntu22.04" / "Dockerfile").is_file(), "rendered, committed"


def test_releases_are_listed_newest_first(matrix):
    versions = [r.version for r in load_matrix(matrix).serving_releases()]
    assert versions[:3] == ["0.30.0rc2", "0.30.0rc1", "0.29.0rc1"] and versions.index("0.23.0.post1") < \
        versions.index("0.23.0") < versions.index("0.23.0rc1")


def test_an_unknown_release_is_refused_naming_the_known_ones_nearest_first(matrix):
    with pytest.raises(UserError) as refused:
        load_matrix(matrix).serving("0.22.0")
    assert refused.value.exit_code == 2
    assert str(refused.value) == (
        "unknown vllm-ascend release '0.22.0'; imported.yaml lists, nearest first: 0.22.1rc1, 0.23.0, 0.23.0rc1, "
        "0.21.0rc1, 0.23.0.post1, 0.24.0rc1 and 43 more (`invoke matrix` lists them). `invoke update` imports newer "
        "ones (from upstream.serving.from on)")
    with pytest.raises(UserError, match=r"nearest first: 0\.9\.1 \(not served here\), "):
        load_matrix(matrix).serving("0.9.1.post1")


def test_with_no_release_imported_the_refusal_says_how_to_import_them(matrix):
    path = matrix.parent / "imported.yaml"
    data = safe_load(path.read_text())
    del data["vllm_ascend_releases"]
    path.write_text(emit(data))
    with pytest.raises(UserError, match=r"imported.yaml lists none. Name the first release to import under upstream: "
                                        r"in matrix.yaml \(serving: \{from: \"0.23.0\"\}\) and run `invoke update`"):
        load_matrix(matrix).serving("0.23.0")


def test_a_release_whose_pins_no_stack_has_and_none_derives_is_refused_naming_what_is_missing(matrix):
    _edit(matrix, lambda s: s["0.23.0"]["pins"].update(torch="2.99.0", torch_npu="2.99.0", torchaudio="2.99.0",
                                                       torchvision="0.114.0"))
    m = load_matrix(matrix)
    with pytest.raises(UserError) as refused:
        m.serving("0.23.0")
    assert str(refused.value).startswith(
        "vllm-ascend 0.23.0 pins torch 2.99.0 and torch_npu 2.99.0 (PyPI vllm-ascend 0.23.0 sdist "
        "vllm_ascend-0.23.0.tar.gz: PKG-INFO, requirements.txt, Dockerfile, Dockerfile.310p, Dockerfile.310p.openEuler, "
        "Dockerfile.a3, Dockerfile.a3.openEuler, Dockerfile.a5, Dockerfile.a5.openEuler, Dockerfile.openEuler) on CANN "
        "9.1.0 (its Dockerfile), and no stack in matrix.yaml has all three; none is derived either: a derived stack "
        "takes its toolchain (gcc, builder, torch's index, companions) from a stack of the same torch, and matrix.yaml "
        "has none with torch 2.99.0. Add a stack with torch 2.99.0, torch_npu 2.99.0 and cann 9.1.0 (stacks:)")
    assert "0.23.0" not in [r.version for r in m.serving_releases()]


@pytest.mark.parametrize("image, said", [
    ({"cann": "9.9.9"}, "its Dockerfile builds on CANN 9.9.9 (quay.io/ascend/cann:9.1.0-910b-ubuntu22.04-py3.12), which "
                        "the imported facts do not list: `invoke update` imports a CANN release once Huawei publishes its "
                        "files"),
    ({"cann": "9.1.0-beta.1"}, "its Dockerfile builds on CANN 9.1.0-beta.1, a pre-release, whose files are not "
                               "published for download"),
    ({"cann": None, "from": "ubuntu:22.04"}, "its Dockerfile builds FROM ubuntu:22.04, not an official CANN image"),
], ids=["unknown", "pre-release", "not-cann"])
def test_a_release_whose_images_cann_is_not_one_to_build_on_is_refused(matrix, image, said):
    def change(section):
        entry = section["0.23.0"]["images"]["Dockerfile"]
        entry.update({k: v for k, v in image.items() if v is not None})
        for k in (k for k, v in image.items() if v is None):
            entry.pop(k)
    _edit(matrix, change)
    with pytest.raises(UserError) as refused:
        load_matrix(matrix).serving("0.23.0")
    assert str(refused.value).startswith(f"vllm-ascend 0.23.0: {said}; its serving image is built on the CANN its own "
                                         f"images use"), str(refused.value)


def test_a_release_whose_dockerfile_sets_no_soc_version_is_refused(matrix):
    """0.11.0's Dockerfile sets no ARG SOC_VERSION: the chip its kernels are for is not known."""
    _edit(matrix, lambda s: s["0.23.0"]["images"]["Dockerfile"].pop("soc_version"))
    with pytest.raises(UserError, match=r"^vllm-ascend 0\.23\.0: its Dockerfile sets no SOC_VERSION \(ARG SOC_VERSION, "
                                        r"which the import reads: .*\), so the chip its kernels are compiled for is not "
                                        r"known; or take a release that pairs here: 0\.30\.0rc2"):
        load_matrix(matrix).serving("0.23.0")


def test_a_release_with_no_dockerfile_read_is_refused(matrix):
    _edit(matrix, lambda s: s["0.23.0"].pop("images"))
    with pytest.raises(UserError, match=r"vllm-ascend 0.23.0: no Dockerfile of its sdist was read .* `invoke update` "
                                        r"reads them"):
        load_matrix(matrix).serving("0.23.0")


def test_a_torch_npu_not_for_its_images_cann_is_refused(matrix):
    """0.13.0rc2 pins torch_npu 2.8.0 (released for CANN 8.3.RC1) and builds on 8.5.0."""
    with pytest.raises(UserError) as refused:
        load_matrix(matrix).serving("0.13.0rc2")
    assert str(refused.value).startswith("vllm-ascend 0.13.0rc2 pins torch 2.8.0 and torch_npu 2.8.0 ")
    assert "on CANN 8.5.0 (its Dockerfile), and no stack in matrix.yaml has all three" in str(refused.value)


def test_a_release_without_its_vllm_is_refused_naming_those_that_pair(matrix):
    with pytest.raises(UserError) as refused:
        load_matrix(matrix).serving("0.15.0rc1")
    assert str(refused.value) == (
        "vllm-ascend 0.15.0rc1 has no vllm release to pair with (PyPI's vllm has a release but no sdist 0.15.0; nearest: "
        "0.14.0, 0.16.0), and a serving image installs vllm's release of its plugin's number; or take a release that "
        "pairs here: 0.30.0rc2, 0.30.0rc1, 0.29.0rc1, 0.28.0rc1, 0.27.1rc1, 0.26.0rc1 and 16 more (`invoke matrix`)")


@pytest.mark.parametrize("pins, problem", [
    ({"torch_npu": "2.9.0.post1"}, "torch_npu 2.9.0.post1 is made for torch 2.9.0, not 2.10.0"),
    ({"torchaudio": "2.9.0"}, "torchaudio 2.9.0 is not torch 2.10's (torchaudio 2.10.x)"),
    ({"torchvision": "0.24.1"}, "torchvision 0.24.1 is not torch 2.10's (torchvision 0.25.x)"),
    ({"torch": ">=2.9"}, "torch is >=2.9, not one release"),
], ids=["torch_npu", "torchaudio", "torchvision", "range"])
def test_pins_that_disagree_are_refused(matrix, pins, problem):
    _edit(matrix, lambda s: s["0.23.0"]["pins"].update(pins))
    with pytest.raises(UserError) as refused:
        load_matrix(matrix).serving("0.23.0")
    assert str(refused.value).startswith("vllm-ascend 0.23.0's pins disagree with each other (PyPI vllm-ascend 0.23.0 "
                                         "sdist vllm_ascend-0.23.0.tar.gz: PKG-INFO, ")
    assert f"): {problem}. A serving image cannot hold them all" in str(refused.value)


def test_a_pin_missing_is_refused(matrix):
    _edit(matrix, lambda s: s["0.23.0"]["pins"].pop("torch_npu"))
    with pytest.raises(UserError, match=r"pins disagree with each other .*: it pins no torch_npu\."):
        load_matrix(matrix).serving("0.23.0")


def test_a_release_no_python_of_its_stack_fits_is_refused(matrix):
    _edit(matrix, lambda s: s["0.23.0"]["vllm"].update(requires_python="<3.10"))
    with pytest.raises(UserError) as refused:
        load_matrix(matrix).serving("0.23.0")
    assert str(refused.value).startswith(
        "vllm-ascend 0.23.0 on stack 2.10.0-26.1.0: no Python fits all three: the stack takes 3.10-3.13, vllm-ascend "
        "requires >=3.10, vllm 0.23.0 requires <3.10; widen the stack's python range (stacks.2.10.0-26.1.0.python); "
        "or take a release that pairs here: ")


def test_a_malformed_entry_is_refused_with_its_key(matrix):
    _edit(matrix, lambda s: s["0.23.0"]["sdist"].update(sha256="zz"))
    with pytest.raises(MatrixError, match=r"imported.yaml:\d+: vllm_ascend_releases\['0.23.0'\]\.sdist\.sha256: got 'zz'"):
        load_matrix(matrix)
    _edit(matrix, lambda s: s["0.23.0"]["sdist"].update(sha256="a" * 64) or s["0.23.0"]["images"].update(
        {"Dockerfile.x": {"from": "a b", "read": ""}}))
    with pytest.raises(MatrixError, match=r"vllm_ascend_releases\['0.23.0'\]\.images\['Dockerfile.x'\]\.from: got 'a b'"):
        load_matrix(matrix)


def test_the_floor_is_checked_in_the_matrix(matrix):
    text = matrix.read_text()
    assert '  serving: {from: "0.7.1rc1", pre: true}\n' in text
    matrix.write_text(text.replace('  serving: {from: "0.7.1rc1", pre: true}\n', '  serving: {from: "0.21.0", rc: true}\n'))
    with pytest.raises(MatrixError, match=r"unknown key 'rc'.*accepted keys: from, pre"):
        load_matrix(matrix)


# ------------------------------------------------------------------ chips: their SOC_VERSION from the release's Dockerfiles

def test_each_chip_a_release_serves_has_its_dockerfiles_soc_version_and_the_others_are_refused(matrix):
    from ascend_build.matrix.serving import image
    m = load_matrix(matrix)
    rel = m.serving("0.23.0")
    assert {c: image(rel, c).soc_version for c in ("910b", "A3", "a3", "310p", "950")} == {
        "910b": "ascend910b1", "A3": "ascend910_9391", "a3": "ascend910_9391", "310p": "ascend310p1",
        "950": "ascend950dt_9582"}
    assert image(rel, "a3", "openeuler24.03").dockerfile == "Dockerfile.a3.openEuler"
    assert not any(c.name == "soc_version" for c in dataclasses.fields(chips.Chip)), "no chip record types one"
    with pytest.raises(UserError) as refused:
        image(m.serving("0.13.0"), "950")
    assert str(refused.value) == ("vLLM-Ascend 0.13.0 publishes no image for chip 950, so no SOC_VERSION to compile its "
                                  "kernels for; its Dockerfiles serve 310p (Dockerfile.310p), 310p "
                                  "(Dockerfile.310p.openEuler), 910b (Dockerfile), 910b (Dockerfile.openEuler), a3 "
                                  "(Dockerfile.a3), a3 (Dockerfile.a3.openEuler) (--chip)")
    with pytest.raises(UserError, match="publishes no image for chip 310b"):
        image(rel, "310b")
    with pytest.raises(UserError, match=r"its Dockerfile.310p builds on CANN 9.1.0-beta.1, not on CANN 9.0.1, which its "
                                        r"stack 2.10.0-26.0.1 is on"):
        image(m.serving("0.25.1rc1"), "310p")


# ------------------------------------------------------------------ invoke matrix

def test_the_narrow_view_lists_every_release_its_kind_and_stack_and_those_left_out(matrix):
    m = load_matrix(matrix)
    rows = {r["vllm-ascend"]: r for r in serving_rows(m)}
    assert rows["0.23.0"] == {"vllm-ascend": "0.23.0", "kind": "final", "vllm": "0.23.0", "stack": "2.10.0-26.1.0",
                              "CANN": "9.1.0", "chips": "310p 910b 950 a3", "Python": "3.10-3.13",
                              "install": "wheels 3.10-3.12 (aarch64, x86_64); sdist 3.13"}
    assert (rows["0.30.0rc2"]["kind"], rows["0.30.0rc2"]["stack"]) == ("rc", "2.10.0.post4-cann9.2.0 (derived)")
    assert rows["0.23.0.post1"]["kind"] == "post" and rows["0.25.1rc1"]["chips"] == "910b 950 a3"
    narrow = matrix_table(m, None, 100)
    assert re.search(r"\n0\.23\.0 +final +0\.23\.0 +2\.10\.0-26\.1\.0 +310p 910b", narrow)
    said = " ".join(narrow.split())
    assert "serving image takes here: 0.15.0rc1 (no vllm 0.15.0); 0.13.0rc2 (no stack of torch_npu 2.8.0 on CANN " \
           "8.5.0);" in said
    assert "0.7.1rc1 (pins disagree: it pins no torch_npu)" in said
    left = refused(m)
    assert len(rows) + len(left) == 49 and all(f"{v} (" in said for v in left), "every release, once"
    assert all(len(line) <= 100 for line in narrow[narrow.index("Serving lines"):].split("\n\n")[0].splitlines())
    wide = matrix_table(m, None, None)
    assert "0.15.0rc1 (vllm-ascend 0.15.0rc1 has no vllm release to pair with" in wide


def test_a_matrix_without_the_section_shows_no_serving_table(matrix):
    path = matrix.parent / "imported.yaml"
    data = safe_load(path.read_text())
    del data["vllm_ascend_releases"]
    path.write_text(emit(data))
    assert "Serving lines" not in matrix_table(load_matrix(matrix), None, 100)
