"""A chip is one record (ascend_build/chips.py), not a string each part of the package reads
its own way (issue #54): looked up by every spelling, refused by name when unknown, one for
every chip the matrix's data names, and read by each place that needs a chip's facts. The
places are shown to read it with a chip planted in the registry: each test fails on code
that keeps a table of its own."""
from __future__ import annotations

from pathlib import Path

import pytest

from ascend_build import chips
from ascend_build.chips import Chip, known
from ascend_build.cli import hosts
from ascend_build.cli.support import chip_rows, support_page
from ascend_build.cluster import k8s
from ascend_build.cluster import ranktable as rt
from ascend_build.cluster.facts import Card, HostFacts
from ascend_build.errors import UserError
from ascend_build.host import doctor as doc
from ascend_build.host.layout import BOARD_310B, SERVER, for_chip, layout_of
from ascend_build.inputs.packages import chip_of_folder
from ascend_build.matrix import imported, load_matrix
from ascend_build.matrix.yamlsource import safe_load
from ascend_build.upstream import cann_images, deployer
from tests.doubles.host_roots import make_host

ROOT = Path(__file__).resolve().parents[2]
MATRIX = load_matrix(ROOT / "matrix.yaml")
IMAGE = "registry.example.com/ascend-runtime:sha-0123456789abcdef-arm64"

# A chip no code has heard of: only the registry knows it, so each place that shows it read it there.
PLANTED = Chip("910x", "a planted chip", spellings=("ascend910x",), smi=r"\b910X\d\b", host="board", npus=4,
               rank_table="1.0", resource="huawei.com/Ascend910X", ring="ascend-910x", kernel_folder="ascend910x_1",
               kernels_file="Planted-910x-kernels_{v}_linux-{arch}.run")


@pytest.fixture
def planted(monkeypatch):
    monkeypatch.setitem(chips.CHIPS, PLANTED.name, PLANTED)
    return PLANTED


# ------------------------------------------------------------------ the registry

@pytest.mark.parametrize("record", chips.known(), ids=str)
def test_every_spelling_of_a_chip_finds_its_record_in_any_case(record):
    for spelled in (record.name, *record.spellings):
        for case in (spelled, spelled.lower(), spelled.upper()):
            assert chips.chip(case) is record, case
            assert chips.spelling(case) == record.name, case


def test_upstreams_lower_case_a3_is_the_matrix_a3():
    assert chips.spelling("a3") == "A3" and chips.chip("a3").rank_table == "1.2"
    assert MATRIX.cell("2.6.0", chip="a3").chip == "A3", "an official tag's a3 builds the matrix's A3 cell"


def test_an_unknown_chip_is_refused_naming_every_known_one():
    with pytest.raises(UserError) as refused:
        chips.chip("910z")
    assert "unknown chip '910z'" in str(refused.value)
    for record in chips.known():
        assert record.name in str(refused.value)
    assert chips.find("910z") is None and chips.find(None) is None and chips.find("") is None
    assert chips.spelling("910z") == "910z", "a name no record has is left as given, for the matrix to refuse"


def _data_chips() -> dict[str, str]:
    """Every chip name the matrix's data spells (kernels in both files, chip_support, the
    defaults, images:), with where it is spelled."""
    names: dict[str, str] = {MATRIX.defaults.chip: "defaults.chip"}
    for version, rel in (safe_load((ROOT / "imported.yaml").read_text())["cann"] or {}).items():
        names.update({str(c): f"imported.yaml cann.{version}.kernels" for c in rel.get("kernels") or {}})
    data = safe_load((ROOT / "matrix.yaml").read_text())
    for version, rel in (data.get("cann_chips") or {}).items():
        names.update({str(c): f"matrix.yaml cann_chips.{version}.kernels" for c in rel.get("kernels") or {}})
    names.update({str(c): "matrix.yaml chip_support" for c in data.get("chip_support") or {}})
    names.update({img.chip: "matrix.yaml images" for img in MATRIX.images if img.chip})
    return names


def unrecorded(names: dict[str, str]) -> list[str]:
    """The names no record spells exactly so (the data's spelling is the record's name)."""
    return [f"{name} ({where})" for name, where in names.items()
            if chips.find(name) is None or chips.find(name).name != name]


def test_every_chip_the_matrix_data_names_has_a_record_spelled_as_the_data_spells_it():
    names = _data_chips()
    assert {"910b", "A3", "310p", "310b", "910", "950"} <= set(names)
    assert unrecorded(names) == []
    # the check can fail: a chip only the data names, or spelled otherwise than its record
    assert unrecorded({**names, "910z": "planted", "a3": "planted"}) == ["910z (planted)", "a3 (planted)"]


# ------------------------------------------------------------------ the behaviours that moved

@pytest.mark.parametrize("smi, chip", [("910B2", "910b"), ("Ascend910_9391", "A3"), ("310B4", "310b"),
                                       ("Ascend950PR", "950"), ("910A", "910")])
def test_npu_smis_name_of_each_chip_is_its_record(tmp_path, smi, chip):
    assert doc.host_chip(make_host(tmp_path, chip=smi)) == chip


def test_a_910b_table_with_a3_in_a_bus_id_is_still_910b(tmp_path):
    """910B's name is tried before A3's bare `A3` (the registry's order): an A2 host whose
    card sits on PCI bus A3 is an A2 host."""
    assert doc.host_chip(make_host(tmp_path, chip="910B2   0000:A3:00.0")) == "910b"


def test_an_a3_operator_package_is_known_by_its_kernel_folder():
    assert chip_of_folder("ascend910_93") == "A3" and chip_of_folder("ascend910b") == "910b"
    assert chip_of_folder("ascend920") == "920", "a folder no record names: its name after ascend"


def test_a_job_on_a3_takes_sixteen_npus_and_a_310b_none():
    assert k8s.job_chip("a3").npus == 16 and k8s.job_chip("910b").npus == 8
    # the chips with a job, read from the registry: a new chip with one joins the list, and
    # 310B (a board: no resource, no ring) never does
    with_jobs = ", ".join(c.name for c in known() if c.job)
    assert "310b" not in with_jobs.split(", ") and {"910b", "A3"} <= set(with_jobs.split(", "))
    with pytest.raises(UserError, match=rf"--chip '310b': choose one of {with_jobs}$"):
        k8s.job_chip("310b")


# ------------------------------------------------------------------ each place reads the record

def test_doctor_names_the_planted_chip_from_npu_smi_and_matches_its_spellings(tmp_path, planted):
    assert doc.host_chip(make_host(tmp_path, chip="910X1")) == "910x"
    image = doc.ImageFacts("img", "8.5.0", "ascend910x", "25.5.0", "linux/arm64")
    assert doc._chip_and_arch(image, "910x", None) == [], "one chip by two of its spellings"


def test_the_host_layout_is_the_planted_chips(tmp_path, planted):
    assert for_chip("910x") is BOARD_310B and layout_of(tmp_path, "ASCEND910X") is BOARD_310B
    assert for_chip("910z") is SERVER


def test_the_rank_table_version_is_the_planted_chips(planted):
    host = HostFacts("node-a", "10.0.0.11", "910x", "25.5.0", [Card(0, ip="192.168.1.10")])
    assert rt.build([host])["version"] == "1.0"
    tables = ", ".join(c.name for c in known() if c.rank_table)
    assert tables.endswith("910x") and "310b" not in tables.split(", ")
    with pytest.raises(UserError, match=rf"chip 310b: rank tables are written for {tables} "):
        rt.version_of("310b")


def test_the_kubernetes_resource_and_ring_are_the_planted_chips(planted):
    job = k8s.ascend_job("train", IMAGE, 2, 4, ["train.py"], chip="ascend910x")
    table, acjob = job["items"]
    assert table["metadata"]["labels"]["ring-controller.atlas"] == "ascend-910x"
    worker = acjob["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert worker["resources"]["limits"]["huawei.com/Ascend910X"] == 4
    indexed = k8s.indexed_job("train", IMAGE, 2, 4, ["train.py"], chip="910x")["items"][1]
    container = indexed["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["huawei.com/Ascend910X"] == 4


def test_the_jobs_chip_choices_and_devices_are_the_planted_chips(planted):
    with pytest.raises(UserError, match=r"--chip '310b': choose one of 910b, A3, 950, 910, 910x$"):
        k8s.job_chip("310b")
    # the CLI bounds --devices by the record (4 NPUs a server), before it looks at the image
    with pytest.raises(UserError, match=r"--devices 5: expected a whole number from 1 to 4"):
        hosts.job(hosts.JobOptions(image=IMAGE, chip="910X", devices="5"), ["train.py"], ROOT / "matrix.yaml")


def test_imported_yaml_writes_the_registrys_first_chip_first(monkeypatch):
    kernels = {c: {"aarch64": {"file": f"{c}.run"}} for c in ("A3", "910b", "310p", "910x")}
    written = lambda: list(imported.ordered({"cann": {"8.5.0": {"kernels": kernels}}})["cann"]["8.5.0"]["kernels"])  # noqa: E731
    assert written() == ["910b", "310p", "910x", "A3"]
    monkeypatch.setattr(chips, "CHIPS", {PLANTED.name: PLANTED, **chips.CHIPS})
    assert written() == ["910x", "310p", "910b", "A3"]


def test_the_support_page_lists_the_planted_chip(planted):
    row = next(r for r in chip_rows(MATRIX) if r["chip"].startswith("910x"))
    assert row["chip"] == "910x (ascend910x)" and row["host"] == "board" and row["rank table"] == "1.0"
    assert row["Kubernetes"] == "`huawei.com/Ascend910X`, ring `ascend-910x`"
    assert row["lines"] == f"0 of {len(MATRIX.stacks)}", "no CANN release has its kernels"
    assert "| 910x (ascend910x) | a planted chip |" in support_page(MATRIX)


def test_the_importers_know_the_planted_chips_own_kernels_name(planted):
    found = cann_images.classify("Planted-910x-kernels_8.3.RC1_linux-aarch64.run")
    assert found == cann_images.FileName("kernels", "8.3.RC1", "aarch64", "910x")
    chip, match = deployer.own_kernels("Planted-910x-kernels_8.3.RC1_linux-x86_64.zip", ".zip")
    assert (chip, match["v"], match["arch"]) == ("910x", "8.3.RC1", "x86_64")
    assert chip_of_folder("ascend910x_1") == "910x"


def test_a_cell_takes_the_planted_chips_spelling(planted):
    with pytest.raises(UserError, match="no kernels for chip '910x'"):
        MATRIX.cell("2.6.0", chip="ASCEND910x")
