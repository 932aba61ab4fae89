"""`invoke update` on synthetic ascend-deployer releases in the real layout (the fixture
in tests/doubles/deployer_fixture.py): the imported part is rewritten with its sources,
the hand-written rest stays byte for byte, disagreements are never settled silently."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ascend_build.errors import MatrixError, UserError
from ascend_build.matrix import load_matrix
from ascend_build.matrix.upstream.deployer import read
from ascend_build.matrix.upstream.update import BEGIN, END, split, update
from tests.conftest import committed_matrix_text
from tests.doubles.deployer_fixture import fake_sum, make_deployer

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "tests" / "data" / "upstream-docs"     # the snapshot of Ascend's tables


@pytest.fixture
def matrix(tmp_path) -> Path:
    path = tmp_path / "matrix.yaml"
    path.write_text(committed_matrix_text())
    return path


def hand_written(text: str) -> tuple[str, str]:
    before, _, after = split(text, "matrix.yaml")
    return before, after


def test_update_rewrites_only_the_imported_part_with_sources(matrix, tmp_path):
    old = matrix.read_text()
    result = update(matrix, [make_deployer(tmp_path / "d", "6.0.0")], docs_folder=DOCS)
    assert result.changed
    assert hand_written(result.text) == hand_written(old), "a hand-written byte changed"
    m_text = result.text
    matrix.write_text(m_text)
    m = load_matrix(matrix)
    rel = m.cann["8.0.RC3"]
    assert rel.driver == "24.1.RC3"
    name = "Ascend-cann-toolkit_8.0.RC3_linux-aarch64.zip"
    assert rel.toolkit["aarch64"].zip_sha256 == fake_sum(name) and rel.toolkit["aarch64"].file == name[:-4] + ".run"
    # Up to 8.0.RC2 one kernels file serves both arches; 8.5.0 names operator packages.
    assert m.cann["8.0.RC1"].kernels["910b"]["x86_64"].file == "Ascend-cann-kernels-910b_8.0.RC1_linux.run"
    assert m.cann["8.5.0"].kernels["910"]["aarch64"].file == "Ascend-cann-910-ops_8.5.0_linux-aarch64.run"
    assert 'source: "ascend-deployer 6.0.0: ascend_deployer/downloader/software/CANN_8.0.RC3.json"' in m_text
    assert 'source: "ascend-deployer 6.0.0: ascend_deployer/downloader/version_match.json"' in m_text
    assert re.search(r"cp310-aarch64: \{torch_npu: [0-9a-f]{64}, torch: [0-9a-f]{64}\}", m_text)
    assert "Ascend-cann-nnrt" not in m_text, "files the images do not use are counted, not imported"
    # --from reads no index: PyPI's facts stay as the last import found them (3.13 for 2.10.0).
    assert m.source.data["torch_npu_releases"]["2.10.0"]["pypi_pythons"]["aarch64"][-1] == "3.13"
    # 8 from the deployer double, 9.0.1 to 9.2.0 from the snapshot of Ascend's tables.
    assert result.counts["CANN releases"] == 12 and result.counts["CANN releases only the release notes or TorchNPU notes name"] == 4
    assert m.cann["9.1.0"].driver == "26.0.RC1" and m.cann["9.2.0"].driver is None
    assert result.counts["CANN files not used by images (nnae, nnrt, ...)"] == 16
    lines = result.summary.lines()      # against the real import committed in matrix.yaml
    assert "- cann 8.0.RC2" in lines and "~ cann 8.0.RC3 toolkit aarch64: Ascend-cann-toolkit_8.0.RC3_linux-aarch64.run " \
        f"zip_sha256 872691b3734908536a7526fa14ff2b90bed81d38c38e9e6124ae447da6029471 -> " \
        f"Ascend-cann-toolkit_8.0.RC3_linux-aarch64.run zip_sha256 {fake_sum(name)}" in lines
    # A second run on its own output changes nothing.
    assert not update(matrix, [make_deployer(tmp_path / "d", "6.0.0")], docs_folder=DOCS).changed


def test_run_pins_survive_an_update(matrix, tmp_path):
    source = [make_deployer(tmp_path / "d", "6.0.0")]
    matrix.write_text(update(matrix, source, docs_folder=DOCS).text)
    pin = "ab" * 32
    text = matrix.read_text().replace("{file: Ascend-cann-toolkit_8.0.RC3_linux-aarch64.run, sha256: null",
                                      f"{{file: Ascend-cann-toolkit_8.0.RC3_linux-aarch64.run, sha256: {pin}", 1)
    matrix.write_text(text)
    again = update(matrix, source, docs_folder=DOCS)
    assert not again.changed and f"sha256: {pin}" in again.text


def test_a_disagreement_stops_the_update_until_the_matrix_records_a_choice(matrix, tmp_path):
    newer = make_deployer(tmp_path / "a", "7.3.0", pairs={"2.1.0.post8": "8.1.RC1"})
    older = make_deployer(tmp_path / "b", "6.0.0")
    before = matrix.read_text()
    with pytest.raises(UserError) as info:
        update(matrix, [newer, older], docs_folder=DOCS)
    msg = str(info.value)
    assert "torch_npu_releases.2.1.0.post8.cann: sources disagree" in msg
    assert "ascend-deployer 7.3.0: 8.1.RC1" in msg and "ascend-deployer 6.0.0: 8.0.RC3" in msg
    assert "upstream.choices" in msg
    assert matrix.read_text() == before
    # Recorded: the choice is taken and reported, and the matrix says why.
    matrix.write_text(before.replace("  choices: {}", '  choices:\n    "torch_npu_releases.2.1.0.post8.cann": '
                                                      '{take: 8.0.RC3, why: "the 6.0.rc3 branch was built for it"}'))
    result = update(matrix, [newer, older], docs_folder=DOCS)
    assert [str(c) for c in result.merged.conflicts] == [
        "torch_npu_releases.2.1.0.post8.cann: sources disagree (ascend-deployer 7.3.0: 8.1.RC1; ascend-deployer "
        "6.0.0: 8.0.RC3): took 8.0.RC3 (the 6.0.rc3 branch was built for it)"]
    assert "  2.1.0.post8:\n    cann: [8.0.RC3]\n" in result.text


def test_a_newer_release_wins_where_the_sources_agree_and_adds_what_is_new(matrix, tmp_path):
    newer = make_deployer(tmp_path / "a", "7.3.0", pairs={"2.5.1": "8.1.RC1", "2.6.0": "8.2.RC1"},
                          drivers={"8.1.RC1": "25.0.RC1", "8.2.RC1": "25.2.0"})
    older = make_deployer(tmp_path / "b", "6.0.0")
    result = update(matrix, [older, newer], docs_folder=DOCS)
    assert not result.merged.conflicts
    assert 'ascend-deployer 7.3.0: ascend_deployer/downloader/software/CANN_8.2.RC1.json' in result.text
    assert "  2.6.0:\n    cann: [8.2.RC1]\n" in result.text


@pytest.mark.parametrize("spoil, message", [
    (lambda d: _edit(d, "software/CANN_8.0.RC3.json", '"24.1.RC3"', '"abc"'), "expected one NPU driver version"),
    (lambda d: _edit(d, "version_match.json", '"CANN_8.0.RC3"', '"CANN_banana"'), "expected CANN_<version>"),
    (lambda d: _edit(d, "software/CANN_8.0.0.json", '"sha256": "', '"sha256": "zz'), "expected 64 hex digits"),
    (lambda d: (d / "ascend_deployer/downloader/version_match.json").unlink(), "version_match.json is missing"),
], ids=["driver", "pairing", "sha256", "layout"])
def test_nonsense_in_the_upstream_data_is_refused_with_its_file(matrix, tmp_path, spoil, message):
    folder = make_deployer(tmp_path / "d", "6.0.0")
    spoil(folder)
    before = matrix.read_text()
    with pytest.raises(UserError, match=message):
        update(matrix, [folder], docs_folder=DOCS)
    assert matrix.read_text() == before


def _edit(folder: Path, name: str, old: str, new: str) -> None:
    path = folder / "ascend_deployer/downloader" / name
    path.write_text(path.read_text().replace(old, new, 1))


def test_an_import_that_leaves_a_stack_unpaired_writes_nothing(matrix, tmp_path):
    """Upstream no longer pairs the release a stack uses (neither the deployer data nor
    Ascend's table, and no TorchNPU grid covers it): refused by the matrix checks."""
    import shutil

    from tests.doubles.deployer_fixture import PAIRS
    pairs = {r: c for r, c in PAIRS.items() if r != "2.1.0.post8"}
    docs = shutil.copytree(DOCS, tmp_path / "docs")
    table = docs / "COMPATIBILITY.en.md"
    table.write_text("".join(line for line in table.read_text().splitlines(keepends=True)
                             if "2.1.0.post8 " not in line))
    before = matrix.read_text()
    with pytest.raises(MatrixError, match="got '2.1.0.post8', which torch_npu_releases does not list"):
        update(matrix, [make_deployer(tmp_path / "d", "6.0.0", pairs=pairs)], docs_folder=docs)
    assert matrix.read_text() == before


def test_the_deployer_data_and_ascends_table_disagreeing_stop_the_update(matrix, tmp_path):
    """A pairing the two sources give differently (the deployer double: 2.6.0 on 8.1.RC1;
    the snapshot of COMPATIBILITY.en.md: 8.2.RC1) is never settled silently."""
    newer = make_deployer(tmp_path / "a", "7.3.0", pairs={"2.6.0": "8.1.RC1"}, drivers={"8.1.RC1": "25.0.RC1"})
    with pytest.raises(UserError) as info:
        update(matrix, [newer, make_deployer(tmp_path / "b", "6.0.0")], docs_folder=DOCS)
    msg = str(info.value)
    assert "torch_npu_releases.2.6.0.cann: sources disagree" in msg
    assert "ascend-deployer 7.3.0" in msg and ": 8.1.RC1" in msg and "COMPATIBILITY.en.md" in msg and ": 8.2.RC1" in msg


def test_a_wheel_reads_like_its_folder(tmp_path):
    wheel = read(make_deployer(tmp_path / "w", "6.0.0", as_wheel=True))
    folder = read(make_deployer(tmp_path / "f", "6.0.0"))
    assert wheel.version == folder.version == "6.0.0" and wheel.archive_sha256
    assert wheel.cann.keys() == folder.cann.keys() and wheel.torch_npu.keys() == folder.torch_npu.keys()
    assert wheel.cann["8.0.0"].toolkit == folder.cann["8.0.0"].toolkit


def test_the_task_dry_and_check_write_nothing_and_check_reports_news(matrix, tmp_path):
    source = str(make_deployer(tmp_path / "d", "6.0.0"))
    before = matrix.read_text()
    task = [sys.executable, "-m", "invoke", "update", "--matrix", str(matrix), "--from", source,
            "--from-docs", str(DOCS)]
    dry = subprocess.run(task + ["--dry"], cwd=ROOT, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    assert "would change" in dry.stdout and "CANN releases: 12" in dry.stdout
    check = subprocess.run(task + ["--check"], cwd=ROOT, capture_output=True, text=True)
    assert check.returncode == 1 and matrix.read_text() == before
    wrote = subprocess.run(task, cwd=ROOT, capture_output=True, text=True)
    assert wrote.returncode == 0 and "wrote" in wrote.stdout
    assert hand_written(matrix.read_text()) == hand_written(before)
    current = subprocess.run(task + ["--check"], cwd=ROOT, capture_output=True, text=True)
    assert current.returncode == 0 and "is current" in current.stdout


def test_markers_missing_is_a_clear_error(matrix, tmp_path):
    matrix.write_text(matrix.read_text().replace(BEGIN, "# gone"))
    with pytest.raises(UserError, match="no imported part"):
        update(matrix, [make_deployer(tmp_path / "d", "6.0.0")], docs_folder=DOCS)
    assert END in matrix.read_text()


@pytest.mark.parametrize("old, new, message", [
    ('    python: "3.11"        # bookworm', '    python: "3.99"        # bookworm', "got '3.99'; expected a python minor"),
    ("    driver: 24.1.RC3", "    driver: abc", "got 'abc'; expected an NPU driver version"),
])
def test_nonsense_versions_in_the_matrix_are_refused(matrix, old, new, message):
    text = matrix.read_text()
    assert old in text
    matrix.write_text(text.replace(old, new, 1))
    with pytest.raises(MatrixError, match=message):
        load_matrix(matrix)


def test_a_stack_on_an_unpaired_torch_npu_is_refused_with_that_reason(matrix):
    text = matrix.read_text()
    old = "  2.1.0.post8:\n    cann: [8.0.RC3]\n"
    assert old in text
    matrix.write_text(text.replace(old, "  2.1.0.post8:\n    cann: []\n", 1))
    with pytest.raises(MatrixError, match=r"torch_npu 2.1.0.post8 is unpaired: no CANN release is published for it "
                                          r"\(torch_npu_releases.2.1.0.post8.cann is empty\) and no compatibility grid"):
        load_matrix(matrix)


def test_a_python_range_beyond_the_published_wheels_is_refused(matrix):
    text = matrix.read_text()
    old = '''    python: {min: "3.10", max: "3.13", default: "3.11"}
    gcc: 13                       # manylinux_2_28'''
    assert old in text
    matrix.write_text(text.replace(old, old.replace('max: "3.13"', 'max: "3.14"'), 1))
    with pytest.raises(MatrixError, match=r"torch_npu 2.10.0 has no aarch64 wheel for Python 3.14 "
                                          r"\(torch_npu_releases lists 3.10, 3.11, 3.12, 3.13, Huawei's list and "
                                          r"PyPI's files\)"):
        load_matrix(matrix)


def test_python_range_takes_pypis_wheels_where_huaweis_list_stops(matrix):
    """2.10.0: Huawei lists cp310-cp312, PyPI also has cp313; without PyPI's fact 3.13 is refused."""
    text = matrix.read_text()
    head, tail = text.split("\n  2.10.0:\n    cann: [9.0.0]\n", 1)
    line = next(row for row in tail.splitlines() if "pypi_pythons" in row)
    assert '"3.13"' in line
    matrix.write_text(head + "\n  2.10.0:\n    cann: [9.0.0]\n" + tail.replace(line + "\n", "", 1))
    with pytest.raises(MatrixError, match=r"torch_npu 2.10.0 has no aarch64 wheel for Python 3.13"):
        load_matrix(matrix)


def _index_page(files: list[str], yanked: tuple[str, ...] = ()) -> str:
    """A PEP 503 simple page as a mirror serves it (a stand-in for PyPI's)."""
    links = "".join(f'<a href="../../files/{f}#sha256={"0" * 64}"{" data-yanked" if f in yanked else ""}>{f}</a>\n'
                    for f in files)
    return f"<!DOCTYPE html><html><body>\n{links}</body></html>"


def test_index_pages_give_final_releases_and_their_pythons_per_arch():
    from ascend_build.matrix.upstream import pypi
    names = ["torch_npu-2.10.0-cp310-cp310-manylinux_2_28_aarch64.whl",
             "torch_npu-2.10.0-cp313-cp313-manylinux_2_28_aarch64.whl",
             "torch_npu-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl",
             "torch_npu-2.11.0rc1-cp310-cp310-manylinux_2_28_aarch64.whl",         # pre-release: left out
             "torch_npu-2.9.9-cp310-cp310-manylinux_2_28_aarch64.whl",             # every file yanked
             "torch_npu-2.1.0.post3-cp38-cp38-manylinux_2_17_aarch64.manylinux2014_aarch64.whl",
             "torch_npu-2.1.0.post3.tar.gz"]
    html = pypi.parse_page(_index_page(names, yanked=(names[4],)), "text/html")
    as_json = pypi.parse_page(json.dumps({"files": [{"filename": n, "yanked": n == names[4]} for n in names]}),
                              "application/vnd.pypi.simple.v1+json")
    assert html == as_json
    got = pypi.releases(html)
    assert list(got) == ["2.1.0.post3", "2.10.0"]
    assert got["2.10.0"].pythons == {"aarch64": {"3.10", "3.13"}, "x86_64": {"3.11"}}
    # Not only the running interpreter's wheels (what `pip index versions` lists): cp38 counts.
    assert got["2.1.0.post3"].pythons == {"aarch64": {"3.8"}}


def test_pypi_marks_mirror_only_releases_and_lists_unpaired_ones(tmp_path):
    from ascend_build.matrix.upstream import pypi
    from ascend_build.matrix.upstream.update import add_pypi, merge, render_region
    merged = merge([read(make_deployer(tmp_path / "d", "6.0.0"))], {})
    served = [r for r in merged.torch_npu if r != "2.10.0"] + ["2.14.0"]
    add_pypi(merged, pypi.releases(pypi.parse_page(_index_page(
        [f"torch_npu-{r}-cp313-cp313-manylinux_2_28_aarch64.whl" for r in served]), "text/html")))
    region = render_region(merged, {})
    assert "  2.10.0:\n    cann: [9.0.0]\n" in region and "    pypi: false" in region.split("  2.10.0:")[1]
    assert region.count("pypi: false") == 1
    assert ('  2.14.0:\n    cann: []     # unpaired: no CANN pairing published\n'
            '    source: "PyPI index (simple page of torch-npu)"\n'
            '    pypi_pythons: {aarch64: ["3.13"]}\n') in region
    assert list(merged.torch_npu)[-1] == "2.14.0", "in version order"


def test_a_stack_on_a_release_pypi_does_not_serve_is_refused(matrix):
    text = matrix.read_text()
    old = "  2.10.0:\n    cann: [9.0.0]\n"
    assert old in text
    matrix.write_text(text.replace(old, old + "    pypi: false\n", 1))
    with pytest.raises(MatrixError, match=r"torch_npu 2.10.0 is not on PyPI \(Huawei's mirror only\)"):
        load_matrix(matrix)


def test_mindspore_pairings_and_wheel_sums_are_imported_with_their_source(matrix, tmp_path):
    from ascend_build.locking import lock as locks
    result = update(matrix, [make_deployer(tmp_path / "d", "6.0.0")], docs_folder=DOCS)
    matrix.write_text(result.text)
    m = load_matrix(matrix)
    ms = m.source.data["mindspore_releases"]
    assert list(ms) == ["2.4.0", "2.6.0-rc1", "2.9.0"]
    assert ms["2.9.0"]["cann"] == ["9.0.0"] and ms["2.6.0-rc1"]["cann"] == ["8.1.RC1"]
    assert ms["2.9.0"]["source"] == "ascend-deployer 6.0.0: ascend_deployer/downloader/version_match.json"
    name = "mindspore-2.9.0-cp310-cp310-linux_aarch64.whl"
    assert ms["2.9.0"]["wheels"]["cp310-aarch64"] == {"mindspore": fake_sum(name)}
    assert ("ascend-deployer 6.0.0: ascend_deployer/downloader/software/MindSpore_2.9.0.json"
            in result.text.split("mindspore_releases:")[1])
    # Huawei's sums tell which arch a wheel is for, whatever tag an index serves it under.
    assert locks.huawei_arch_of(m)[fake_sum(name)] == "aarch64"
    assert result.counts["MindSpore releases with a CANN pairing"] == 3
    assert result.counts["wheel checksums (mindspore)"] == 18
    lines = result.summary.lines()        # against the real import committed in matrix.yaml
    assert any(line.startswith("~ mindspore 2.9.0 wheel sums: (digest ") for line in lines)
    assert "- mindspore 2.10.0" in lines, "PyPI's unpaired release is not in the given copy"
    assert not update(matrix, [make_deployer(tmp_path / "d", "6.0.0")], docs_folder=DOCS).changed


def test_pypi_mindspore_releases_any_tagged_wheels_and_pre_releases(tmp_path):
    from ascend_build.matrix.upstream import pypi
    from ascend_build.matrix.upstream.update import add_pypi_mindspore, merge, render_region
    merged = merge([read(make_deployer(tmp_path / "d", "6.0.0"))], {})
    names = ["mindspore-2.9.0-cp310-none-any.whl", "mindspore-2.9.0-cp310-cp310-manylinux1_x86_64.whl",
             "mindspore-2.6.0rc1-cp39-cp39-manylinux1_x86_64.whl", "mindspore-2.10.0-cp311-none-any.whl",
             "mindspore-2.11.0rc1-cp311-none-any.whl"]
    add_pypi_mindspore(merged, pypi.releases(pypi.parse_page(_index_page(names), "text/html"), pre=True))
    assert list(merged.mindspore) == ["2.4.0", "2.6.0-rc1", "2.9.0", "2.10.0"]
    assert merged.mindspore["2.4.0"].on_pypi is False
    assert merged.mindspore["2.6.0-rc1"].on_pypi is True          # 2.6.0rc1 on the index
    assert merged.mindspore["2.9.0"].pypi_pythons == {"any": ["3.10"], "x86_64": ["3.10"]}
    region = render_region(merged, {})
    assert ('  "2.10.0":\n    cann: []     # unpaired: no CANN pairing published\n'
            '    source: "PyPI index (simple page of mindspore)"\n    pypi_pythons: {any: ["3.11"]}\n') in region
