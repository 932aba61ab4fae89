"""The serving images' data: vLLM-Ascend's releases imported from a package index (each
release's pins read from the PKG-INFO at the head of its sdist, streamed and left there),
paired with the stack whose torch and torch_npu they pin and with vLLM's release of their
number, refused by name where they cannot be, listed by `invoke matrix`. The index is a
loopback double serving small sdists made here, never the real ones."""
from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import tarfile
from pathlib import Path

import pytest
import yaml

from ascend_build import chips
from ascend_build.errors import MatrixError, UserError
from ascend_build.matrix import load_matrix
from ascend_build.matrix.imported import emit
from ascend_build.matrix.report import matrix_table, serving_rows
from ascend_build.upstream import pypi, vllm
from ascend_build.upstream.update import summarize, update
from tests.conftest import copy_matrix
from tests.doubles.deployer_fixture import make_deployer
from tests.doubles.net_doubles import PackageIndexDouble

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "tests" / "data" / "upstream-docs"

PINS_0_23 = ["torch==2.10.0", "torch-npu==2.10.0.post4", "torchvision==0.25.0", "torchaudio==2.10.0",
             "triton-ascend==3.2.2", "transformers==5.5.4", "fastapi<0.124.0", "numba"]


def sdist(name: str, version: str, requires: list[str], python: str = ">=3.10", filler: int = 0,
          pkg_info_first: bool = True) -> bytes:
    """A .tar.gz sdist as setuptools lays one out: <name>-<version>/PKG-INFO beside its
    sources; `filler` bytes of incompressible source after (or before) the PKG-INFO."""
    folder = f"{name.replace('-', '_')}-{version}"
    info = "\n".join(["Metadata-Version: 2.4", f"Name: {name.replace('-', '_')}", f"Version: {version}",
                      *([f"Requires-Python: {python}"] if python else []),
                      *(f"Requires-Dist: {r}" for r in requires), "", "A long description."]).encode()
    members = [(f"{folder}/PKG-INFO", info), (f"{folder}/csrc/kernels.bin", os.urandom(filler))]
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for path, data in members if pkg_info_first else members[::-1]:
            entry = tarfile.TarInfo(path)
            entry.size = len(data)
            tar.addfile(entry, io.BytesIO(data))
    return gzip.compress(out.getvalue(), compresslevel=1, mtime=0)     # the same bytes each time


def wheel(version: str, py: str, plat: str) -> tuple[str, tuple[bytes, str]]:
    return f"vllm_ascend-{version}-cp{py}-cp{py}-{plat}.whl", (b"not read", ">=3.10")


def index_projects() -> dict[str, dict[str, tuple[bytes, str]]]:
    plugin = dict([
        ("vllm_ascend-0.20.0.tar.gz", (b"below the floor: never read", ">=3.9")),
        ("vllm_ascend-0.23.0.tar.gz", (sdist("vllm-ascend", "0.23.0", PINS_0_23), ">=3.10")),
        ("vllm_ascend-0.23.0.post1.tar.gz", (sdist("vllm-ascend", "0.23.0.post1", PINS_0_23), ">=3.10")),
        ("vllm_ascend-0.24.0rc1.tar.gz", (sdist("vllm-ascend", "0.24.0rc1", PINS_0_23), ">=3.10")),
        wheel("0.23.0", "310", "manylinux_2_34_aarch64"), wheel("0.23.0", "311", "manylinux_2_34_aarch64"),
        wheel("0.23.0", "312", "manylinux_2_34_x86_64"),
    ])
    vllm_files = {"vllm-0.22.1.tar.gz": (b"not read", ">=3.10,<3.15"),
                  "vllm-0.23.0.tar.gz": (sdist("vllm", "0.23.0", [], python=">=3.10,<3.15"), ">=3.10,<3.15"),
                  "vllm-0.24.0.tar.gz": (b"not read", ">=3.10,<3.15")}
    return {"vllm-ascend": plugin, "vllm": vllm_files}


# ------------------------------------------------------------------ the import

def test_each_release_from_the_floor_is_read_from_its_sdists_pkg_info():
    with PackageIndexDouble(index_projects()) as index:
        got, notes = vllm.read("0.21.0", False, ["--index-url", index.url])
    assert list(got) == ["0.23.0", "0.23.0.post1"], "final and post releases from the floor; no rc"
    rel = got["0.23.0"]
    assert rel.pins == {"torch": "2.10.0", "torch_npu": "2.10.0.post4", "torchvision": "0.25.0",
                        "torchaudio": "2.10.0", "triton_ascend": "3.2.2", "transformers": "5.5.4"}
    assert rel.requires_python == ">=3.10" and rel.source == "PyPI vllm-ascend 0.23.0 sdist PKG-INFO"
    assert rel.wheels == {"aarch64": ["3.10", "3.11"], "x86_64": ["3.12"]}
    made = index_projects()["vllm-ascend"]["vllm_ascend-0.23.0.tar.gz"][0]
    assert rel.sdist == "vllm_ascend-0.23.0.tar.gz" and rel.sha256 == hashlib.sha256(made).hexdigest()
    assert rel.vllm is not None and rel.vllm.version == "0.23.0" and rel.vllm.sdist == "vllm-0.23.0.tar.gz"
    assert rel.vllm.requires_python == ">=3.10,<3.15", "as the index page says it"
    assert rel.vllm.source == "PyPI vllm 0.23.0 (index page: sdist, sha256, requires-python)"
    post = got["0.23.0.post1"]
    assert post.vllm is None and post.wheels == {}
    assert post.vllm_note == "PyPI's vllm has no release 0.23.0.post1; nearest: 0.23.0, 0.24.0"
    assert notes == []
    # Only the plugin's sdists from the floor were fetched; vLLM's facts came from its page.
    assert index.asked["file vllm_ascend-0.23.0.tar.gz"] == 1
    assert not index.asked["file vllm_ascend-0.20.0.tar.gz"] and not index.asked["file vllm_ascend-0.24.0rc1.tar.gz"]
    assert not index.asked["file vllm-0.23.0.tar.gz"]


def test_pre_releases_are_read_when_the_matrix_asks_and_a_mirrors_html_page_serves():
    with PackageIndexDouble(index_projects(), html=True) as index:
        got, _ = vllm.read("0.23.0", True, ["--index-url", index.url])
    assert list(got) == ["0.23.0", "0.23.0.post1", "0.24.0rc1"]
    assert got["0.24.0rc1"].vllm is None and "has no release 0.24.0rc1" in got["0.24.0rc1"].vllm_note
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
    assert notes == ["vllm-ascend 0.23.1: no sdist on the index, so no PKG-INFO to read its pins from; not imported"]


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
    projects = index_projects()
    big = sdist("vllm-ascend", "0.23.0", PINS_0_23, filler=24 << 20)
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
    return yaml.safe_load(text)["vllm_ascend_releases"]


def test_the_section_is_written_in_one_order_and_summarized():
    with PackageIndexDouble(index_projects()) as index:
        got, _ = vllm.read("0.21.0", False, ["--index-url", index.url])
    old = yaml.safe_load((ROOT / "imported.yaml").read_text())
    new = dict(old, vllm_ascend_releases={v: r.to_data() for v, r in reversed(got.items())})
    text = emit(new)
    assert text.startswith("# Generated by `invoke update`")
    assert list(_section(text)) == ["0.23.0", "0.23.0.post1"], "releases in version order"
    assert emit(yaml.safe_load(text)) == text
    assert re.search(r"\n  0\.23\.0:\n    source: PyPI vllm-ascend 0\.23\.0 sdist PKG-INFO\n    requires_python: '>=3\.10'\n"
                     r"    pins: \{torch: 2\.10\.0, torch_npu: 2\.10\.0\.post4, ", text)
    lines = summarize(old, yaml.safe_load(text)).lines()
    assert any(line.startswith("~ vllm-ascend 0.23.0 sdist: vllm_ascend-0.23.0.tar.gz sha256 a58db76e") for line in lines)
    assert "~ vllm-ascend 0.23.0 wheels: aarch64 3.10 3.11 3.12; x86_64 3.10 3.11 3.12 -> aarch64 3.10 3.11; " \
           "x86_64 3.12" in lines


def test_an_import_that_reads_no_index_keeps_the_section_as_it_was(tmp_path):
    matrix = copy_matrix(tmp_path / "m")
    before = _section((matrix.parent / "imported.yaml").read_text())
    result = update(matrix, [make_deployer(tmp_path / "d", "6.0.0")], docs_folder=DOCS)
    assert _section(result.text) == before
    assert result.counts["vLLM-Ascend releases"] == 2
    assert result.counts["vLLM-Ascend releases with a vLLM release of the same number"] == 1
    assert not any("vllm-ascend" in line for line in result.summary.lines())


def test_the_committed_import_holds_vllm_ascend_0_23_0_on_the_2_10_0_line():
    rel = load_matrix(ROOT / "matrix.yaml").vllm_ascend["0.23.0"]
    assert rel.pins["torch"] == "2.10.0" and rel.pins["torch_npu"] == "2.10.0.post4"
    assert rel.pins["triton_ascend"] == "3.2.2" and rel.requires_python == ">=3.10"
    assert rel.sdist == "vllm_ascend-0.23.0.tar.gz" and rel.vllm and rel.vllm.sdist == "vllm-0.23.0.tar.gz"
    assert ("3.12", "x86_64") in rel.wheels and ("3.13", "aarch64") not in rel.wheels


# ------------------------------------------------------------------ the matrix

@pytest.fixture
def matrix(tmp_path) -> Path:
    return copy_matrix(tmp_path / "m")


def _edit(matrix: Path, change) -> None:
    """imported.yaml's vllm_ascend_releases changed by `change(section)`, written as the import writes it."""
    path = matrix.parent / "imported.yaml"
    data = yaml.safe_load(path.read_text())
    change(data["vllm_ascend_releases"])
    path.write_text(emit(data))


def test_a_release_pairs_with_the_stack_its_torch_and_torch_npu_name(matrix):
    m = load_matrix(matrix)
    rel = m.serving("0.23.0")
    assert (rel.version, rel.vllm, rel.stack.name) == ("0.23.0", "0.23.0", "2.10.0-26.1.0")
    assert rel.stack is m.stacks["2.10.0-26.1.0"]
    assert rel.sdist == "vllm_ascend-0.23.0.tar.gz" and rel.vllm_sdist == "vllm-0.23.0.tar.gz"
    assert re.fullmatch(r"[0-9a-f]{64}", rel.sdist_sha256) and re.fullmatch(r"[0-9a-f]{64}", rel.vllm_sdist_sha256)
    assert rel.pythons() == ["3.10", "3.11", "3.12", "3.13"] == rel.pythons(rel.stack)
    assert rel.has_wheel("3.12", "aarch64") and not rel.has_wheel("3.13", "aarch64")
    assert rel.fits("3.13") and not rel.fits("3.9")
    assert m.serving("v0.23.0").version == "0.23.0", "PyPI's normal form"
    assert [r.version for r in m.serving_releases()] == ["0.23.0"]


def test_pythons_are_the_stacks_that_both_requires_python_take(matrix):
    _edit(matrix, lambda s: s["0.23.0"]["vllm"].update(requires_python=">=3.10,<3.12"))
    _edit(matrix, lambda s: s["0.23.0"].update(requires_python=">=3.11"))
    rel = load_matrix(matrix).serving("0.23.0")
    assert rel.pythons() == ["3.11"] and not rel.fits("3.10") and not rel.fits("3.12")


def test_releases_are_listed_newest_first(matrix):
    _edit(matrix, lambda s: s.update({"0.23.1": dict(s["0.23.0"], vllm=dict(s["0.23.0"]["vllm"], version="0.23.1"))}))
    assert [r.version for r in load_matrix(matrix).serving_releases()] == ["0.23.1", "0.23.0"]


def test_an_unknown_release_is_refused_naming_the_known_ones_nearest_first(matrix):
    _edit(matrix, lambda s: s.update({"0.21.0": dict(s["0.23.0"], vllm=None, vllm_note="none")}))
    with pytest.raises(UserError) as refused:
        load_matrix(matrix).serving("0.22.0")
    assert refused.value.exit_code == 2
    assert str(refused.value) == ("unknown vllm-ascend release '0.22.0'; imported.yaml lists (nearest first): 0.23.0, "
                                  "0.21.0, 0.23.0.post1; of those, a serving image can take 0.23.0. `invoke update` "
                                  "imports newer ones (from upstream.serving.from on)")


def test_with_no_release_imported_the_refusal_says_how_to_import_them(matrix):
    path = matrix.parent / "imported.yaml"
    data = yaml.safe_load(path.read_text())
    del data["vllm_ascend_releases"]
    path.write_text(emit(data))
    with pytest.raises(UserError, match=r"imported.yaml lists none. Name the first release to import under upstream: "
                                        r"in matrix.yaml \(serving: \{from: \"0.23.0\"\}\) and run `invoke update`"):
        load_matrix(matrix).serving("0.23.0")


def test_a_release_whose_pins_no_stack_has_is_refused_naming_the_stacks_of_its_torch(matrix):
    _edit(matrix, lambda s: s["0.23.0"]["pins"].update(torch_npu="2.10.0.post9"))
    m = load_matrix(matrix)
    with pytest.raises(UserError) as refused:
        m.serving("0.23.0")
    msg = str(refused.value)
    same = [f"{st.name} (torch_npu {st.torch.npu})" for st in m.stacks.values() if st.torch and st.torch.version == "2.10.0"]
    assert "2.10.0-26.1.0 (torch_npu 2.10.0.post4)" in same
    assert msg == ("vllm-ascend 0.23.0 pins torch 2.10.0 and torch_npu 2.10.0.post9 (PyPI vllm-ascend 0.23.0 sdist "
                   f"PKG-INFO), and no stack in matrix.yaml has both. Stacks with torch 2.10.0: {', '.join(same)}. Add a "
                   "stack with torch 2.10.0 and torch_npu 2.10.0.post9 (stacks:); no release in imported.yaml pairs "
                   "here yet")
    assert m.serving_releases() == []


def test_a_release_without_vllms_of_its_number_is_refused_naming_those_that_pair(matrix):
    with pytest.raises(UserError) as refused:
        load_matrix(matrix).serving("0.23.0.post1")
    assert str(refused.value) == (
        "vllm-ascend 0.23.0.post1 has no vllm release of the same number (PyPI's vllm has no release 0.23.0.post1; "
        "nearest: 0.23.0, 0.24.0), and a serving image installs vllm's release of its plugin's number; or take a "
        "release that pairs here: 0.23.0")


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
                                         f"sdist PKG-INFO): {problem}. A serving image cannot hold them all")


def test_a_pin_missing_is_refused(matrix):
    _edit(matrix, lambda s: s["0.23.0"]["pins"].pop("torch_npu"))
    with pytest.raises(UserError, match=r"pins disagree with each other .*: it pins no torch_npu\."):
        load_matrix(matrix).serving("0.23.0")


def test_a_release_no_python_of_its_stack_fits_is_refused(matrix):
    _edit(matrix, lambda s: s["0.23.0"]["vllm"].update(requires_python="<3.10"))
    with pytest.raises(UserError) as refused:
        load_matrix(matrix).serving("0.23.0")
    assert str(refused.value) == (
        "vllm-ascend 0.23.0 on stack 2.10.0-26.1.0: no Python fits all three: the stack takes 3.10-3.13, vllm-ascend "
        "requires >=3.10, vllm 0.23.0 requires <3.10; widen the stack's python range (stacks.2.10.0-26.1.0.python); "
        "no release in imported.yaml pairs here yet")


def test_a_malformed_entry_is_refused_with_its_key(matrix):
    _edit(matrix, lambda s: s["0.23.0"]["sdist"].update(sha256="zz"))
    with pytest.raises(MatrixError, match=r"imported.yaml:\d+: vllm_ascend_releases\['0.23.0'\]\.sdist\.sha256: got 'zz'"):
        load_matrix(matrix)


def test_the_floor_is_checked_in_the_matrix(matrix):
    text = matrix.read_text()
    assert '  serving: {from: "0.21.0"}\n' in text
    matrix.write_text(text.replace('  serving: {from: "0.21.0"}\n', '  serving: {from: "0.21.0", rc: true}\n'))
    with pytest.raises(MatrixError, match=r"unknown key 'rc'.*accepted keys: from, pre"):
        load_matrix(matrix)


# ------------------------------------------------------------------ chips

def test_each_serving_chip_has_its_soc_version_and_the_others_are_refused():
    m = load_matrix(ROOT / "matrix.yaml")
    assert (m.soc_version("910b"), m.soc_version("a3"), m.soc_version("310P")) == \
        ("ascend910b1", "ascend910_9391", "ascend310p1")
    assert m.soc_version() == chips.chip(m.defaults.chip).soc_version
    with pytest.raises(UserError) as refused:
        m.soc_version("950")
    assert str(refused.value) == ("chip 950: vLLM-Ascend has no SOC_VERSION for it here, so no serving image is built "
                                  "for it; the chips with one: 910b (ascend910b1), A3 (ascend910_9391), 310p "
                                  "(ascend310p1) (--chip)")


# ------------------------------------------------------------------ invoke matrix

def test_the_narrow_view_lists_the_serving_lines_and_the_releases_left_out(matrix):
    m = load_matrix(matrix)
    assert serving_rows(m) == [{"vllm-ascend": "0.23.0", "vllm": "0.23.0", "stack": "2.10.0-26.1.0",
                                "Python": "3.10-3.13", "install": "wheels 3.10-3.12 (aarch64, x86_64); sdist 3.13"}]
    narrow = matrix_table(m, None, 100)
    assert re.search(r"\n0\.23\.0 +0\.23\.0 +2\.10\.0-26\.1\.0 +3\.10-3\.13 +wheels 3\.10-3\.12 \(aarch64, x86_64\); "
                     r"sdist 3\.13\n", narrow)
    assert "serving image takes here: 0.23.0.post1 (no vllm 0.23.0.post1)" in narrow.replace("\n", " ")
    assert all(len(line) <= 100 for line in narrow[narrow.index("Serving lines"):].split("\n\n")[0].splitlines())
    wide = matrix_table(m, None, None)
    assert "0.23.0.post1 (vllm-ascend 0.23.0.post1 has no vllm release of the same number" in wide


def test_a_matrix_without_the_section_shows_no_serving_table(matrix):
    path = matrix.parent / "imported.yaml"
    data = yaml.safe_load(path.read_text())
    del data["vllm_ascend_releases"]
    path.write_text(emit(data))
    assert "Serving lines" not in matrix_table(load_matrix(matrix), None, 100)
