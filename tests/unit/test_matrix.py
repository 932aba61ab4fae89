"""The matrix model: the real matrix resolves, and every kind of bad input is refused
with the file, line, key path, bad value and what would be accepted."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ascend_build.errors import MatrixError, UserError
from ascend_build.matrix import expected_kernels, load_matrix
from tests.conftest import committed_imported_text, committed_matrix_text, copy_matrix

ROOT = Path(__file__).resolve().parents[2]
REAL = committed_matrix_text()
IMPORTED = committed_imported_text()


def write(tmp_path: Path, text: str | None = None, imported: str | None = None) -> Path:
    return copy_matrix(tmp_path, text, imported)


def refused(tmp_path: Path, text: str | None = None, imported: str | None = None) -> str:
    with pytest.raises(MatrixError) as info:
        load_matrix(write(tmp_path, text, imported))
    return str(info.value)


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_real_matrix_default_cell():
    m = load_matrix(ROOT / "matrix.yaml")
    cell = m.cell()
    assert cell.stack.torch is not None
    assert (cell.stack.torch.version, cell.stack.package, cell.cann.version, cell.python, cell.stack.torch.gcc) == \
        ("2.1.0", "2.1.0.post8", "8.0.RC3", "3.10", 10)
    assert cell.stack.framework.name == "torch" and cell.stack.flag == "--torch 2.1.0"
    assert cell.platform == "linux/arm64"
    assert cell.toolkit.file == "Ascend-cann-toolkit_8.0.RC3_linux-aarch64.run"
    assert cell.kernels.file == "Ascend-cann-kernels-910b_8.0.RC3_linux-aarch64.run"
    assert "protobuf==3.20.3" in cell.pins and "numpy<2" in cell.pins
    assert cell.name == "cann8.0.rc3-910b-ubuntu22.04-py3.10-torch2.1.0"
    assert cell.python_source is None, "ubuntu22.04's python3 (3.10) fits 2.1.0: nothing to compile"


def test_distro_python_is_used_when_it_fits_and_source_otherwise():
    m = load_matrix(ROOT / "matrix.yaml")
    # Not asked for: the distro's when the stack's range has it, else the stack's default.
    assert m.cell("2.1.0", "debian12").python == "3.11" and m.cell("2.1.0", "debian12").python_source is None
    assert m.cell("2.5.1", "ubuntu20.04").python == "3.10"       # focal's 3.8 is below 2.5.1's 3.9
    assert m.cell("2.5.1", "ubuntu20.04").python_source.version == "3.10.13"
    assert m.cell("2.1.0", "debian12", "3.11").python_source is None
    source = m.cell("2.1.0", "debian12", "3.9").python_source
    assert source is not None and source.version == "3.9.2" and source.sha256


def test_naming_eras():
    assert expected_kernels("8.0.RC1", "910b", "aarch64") == "Ascend-cann-kernels-910b_8.0.RC1_linux.run"
    assert expected_kernels("8.0.RC3", "910b", "aarch64") == "Ascend-cann-kernels-910b_8.0.RC3_linux-aarch64.run"
    assert expected_kernels("8.5.0", "910b", "x86_64") == "Ascend-cann-910b-ops_8.5.0_linux-x86_64.run"


def test_unknown_key_is_named_with_line_and_suggestion(tmp_path):
    text = REAL.replace("    torch_npu: 2.1.0.post8\n", "    torch_nup: 2.1.0.post8\n", 1)
    msg = refused(tmp_path, text)
    line = line_of(text, "torch_nup:")
    assert f"matrix.yaml:{line}: stacks['2.1.0'].torch_nup: unknown key 'torch_nup'; did you mean 'torch_npu'?" in msg
    assert "missing key 'torch_npu'" in msg


def test_unquoted_python_version_is_refused_with_the_fix(tmp_path):
    text = REAL.replace('python: {min: "3.8", max: "3.11", default: "3.9"}',
                        'python: {min: "3.8", max: 3.10, default: "3.9"}', 1)
    msg = refused(tmp_path, text)
    assert "python.max: got the number 3.1;" in msg and 'quote it: "3.1"' in msg


def test_python_outside_range(tmp_path):
    text = REAL.replace('python: {min: "3.8", max: "3.11", default: "3.9"}',
                        'python: {min: "3.8", max: "3.11", default: "3.12"}', 1)
    msg = refused(tmp_path, text)
    assert re.search(r"matrix\.yaml:\d+: stacks\['2\.1\.0'\]\.python\.default: got '3\.12'; expected a version from 3\.8 to 3\.11", msg)


def test_torch_npu_with_a_cann_it_was_not_released_for(tmp_path):
    text = REAL.replace("    torch_npu: 2.1.0.post8\n    cann: 8.0.RC3\n", "    torch_npu: 2.1.0.post8\n    cann: 8.0.0\n", 1)
    msg = refused(tmp_path, text)
    assert "torch_npu 2.1.0.post8 was released for CANN 8.0.RC3, not 8.0.0; use cann: 8.0.RC3" in msg
    assert "stacks['2.1.0'].cann" in msg


def test_missing_arch(tmp_path):
    """A problem in the imported facts is named in their file, with its line."""
    imported = re.sub(r"      x86_64: \{file: Ascend-cann-toolkit_8.0.RC3_linux-x86_64.run, [^\n]*\n", "", IMPORTED, count=1)
    assert imported != IMPORTED
    msg = refused(tmp_path, imported=imported)
    assert re.search(r"imported\.yaml:\d+: cann\['8\.0\.RC3'\]\.toolkit: missing key 'x86_64'", msg), msg


def test_chip_with_no_kernels_file(tmp_path):
    text = REAL.replace("  chip: 910b ", "  chip: A3 ", 1)
    msg = refused(tmp_path, text)
    assert "defaults.chip: got 'A3'; the default stack's CANN has kernels for: 910b, 310p, 910" in msg


def test_kernels_file_named_for_another_era_or_chip(tmp_path):
    imported = IMPORTED.replace("aarch64: {file: Ascend-cann-kernels-910b_8.0.RC3_linux-aarch64.run",
                                "aarch64: {file: Ascend-cann-kernels-910_8.0.RC3_linux-aarch64.run", 1)
    assert imported != IMPORTED
    msg = refused(tmp_path, imported=imported)
    assert "imported.yaml:" in msg
    assert "CANN 8.0.RC3 names its 910b kernels 'Ascend-cann-kernels-910b_8.0.RC3_linux-aarch64.run'" in msg


def test_numpy_pin_that_cann_breaks_with(tmp_path):
    text = REAL.replace('pins: {protobuf: "==3.20.3", numpy: "<2"}', 'pins: {protobuf: "==3.20.3", numpy: ">=1.24"}', 1)
    msg = refused(tmp_path, text)
    assert "admits numpy versions CANN 8.0.RC3 breaks with; it needs numpy<2" in msg


def test_bad_sha256_and_wrong_type(tmp_path):
    text = REAL.replace("Ascend-cann-kernels-310b_8.0.0_linux-aarch64.run, sha256: null",
                        "Ascend-cann-kernels-310b_8.0.0_linux-aarch64.run, sha256: abc", 1)
    text = text.replace("cann_pins: {}", "cann_pins: {Ascend-cann-toolkit_8.0.RC3_linux-aarch64.run: abcd}", 1)
    text = text.replace("gcc: 10                       # 10.2", "gcc: ten                       # 10.2", 1)
    msg = refused(tmp_path, text)
    assert "sha256: got 'abc'; expected 64 lowercase hex digits, or null" in msg
    assert "stacks['2.1.0'].gcc: got 'ten'; expected a whole number from 4 to 20" in msg
    assert "cann_pins['Ascend-cann-toolkit_8.0.RC3_linux-aarch64.run']: got 'abcd'; expected 64 lowercase" in msg


def test_imported_facts_belong_in_their_file(tmp_path):
    """matrix.yaml holds what people decide: an imported section pasted into it is refused,
    naming where it lives; a matrix without its imported file says what to copy."""
    msg = refused(tmp_path, REAL + "\ntorch_npu_releases: {}\n")
    assert "torch_npu_releases: torch_npu_releases is imported: it lives in the file upstream.imported names" in msg
    path = write(tmp_path)
    (tmp_path / "imported.yaml").unlink()
    with pytest.raises(UserError, match=r"cannot read .*imported.yaml, the imported facts matrix.yaml names "
                                        r"\(upstream.imported: imported.yaml\).*copy it with the matrix"):
        load_matrix(path)


def test_duplicate_key_is_refused(tmp_path):
    text = REAL.replace("  debian12:\n", "  ubuntu22.04:\n", 1)
    assert "os['ubuntu22.04']: duplicate key" in refused(tmp_path, text)


def test_syntax_error_names_the_line(tmp_path):
    msg = refused(tmp_path, "schema: 1\ndefaults: [unclosed\n")
    # The line the unclosed bracket opened on, not the end of file where the parser gave up.
    assert "matrix.yaml:2: (syntax): not valid YAML" in msg
    assert "while parsing a flow sequence" in msg


def test_image_list_refers_to_unknown_names(tmp_path):
    text = REAL.replace("    os: [ubuntu22.04, debian12, openeuler22.03]", "    os: [ubuntu22.04, debain12]", 1)
    msg = refused(tmp_path, text)
    assert "images[0].os[1]: got 'debain12'; os defined: ubuntu22.04" in msg


def test_cli_choices_outside_the_matrix_are_user_errors():
    m = load_matrix(ROOT / "matrix.yaml")
    with pytest.raises(UserError, match=r"python 3.12 is outside torch stack 2.1.0's range 3.8-3.11"):
        m.cell("2.1.0", python="3.12")
    with pytest.raises(UserError, match=r"unknown torch stack '9.9'.*`invoke update` imports .* add a `stacks:` entry"):
        m.cell("9.9")
    with pytest.raises(UserError, match="CANN 8.0.0 has no kernels for chip 'A3'"):
        m.cell("2.3.1", chip="A3")


def test_a3_takes_its_own_operator_package_and_950_its_own_torch_npu():
    """A3 (Atlas A3) needs its own package: from 8.5.0 `Ascend-cann-A3-ops_<v>`; the image
    says so in its name. 950 has an operator package from CANN 9.0.0 (cann_chips:), and its
    images need a torch_npu of TorchNPU 26.1.0 or newer (chip_support:): 2.10.0 (TorchNPU
    26.0.0) is refused by name with the stacks that fit; 2.12.0 (26.2.0) takes it."""
    m = load_matrix(ROOT / "matrix.yaml")
    a3 = m.cell("2.10.0", chip="A3")
    assert a3.kernels.file == "Ascend-cann-A3-ops_9.0.0_linux-aarch64.run"
    assert a3.kernels.zip_url.endswith("/CANN%209.0.0/Ascend-cann-A3-ops_9.0.0_linux-aarch64.zip")
    assert a3.name.startswith("cann9.0.0-a3-") and m.cell("2.10.0").name.startswith("cann9.0.0-910b-")
    assert m.cell("2.6.0", chip="A3").kernels.file == "Ascend-cann-A3-ops_8.5.0_linux-aarch64.run"
    with pytest.raises(UserError, match=r"chip 950: its images need TorchNPU 26.1.0 or newer .*stack 2.10.0 is "
                                        r"TorchNPU 26.0.0. Stacks for 950: --torch 2.11.0, --torch 2.12.0"):
        m.cell("2.10.0", chip="950")
    with pytest.raises(UserError, match=r"CANN 8.5.0 has no kernels for chip '950'"):
        m.cell("2.6.0", chip="950")
    c950 = m.cell("2.12.0", chip="950", platform="linux/amd64")
    assert c950.kernels.file == "Ascend-cann-950-ops_9.1.0_linux-x86_64.run" and c950.kernels.sha256 is None
    assert "950" not in m.chips(m.stacks["2.10.0"]) and "950" in m.chips(m.stacks["2.12.0"])


def test_python_with_no_distro_package_and_no_tarball(tmp_path):
    text = REAL.replace('  "3.8":\n    version: 3.8.18\n    urls: [https://www.python.org/ftp/python/3.8.18/Python-3.8.18.tar.xz]\n    sha256: null\n', "", 1)
    m = load_matrix(write(tmp_path, text))
    with pytest.raises(UserError, match=r"python 3.8 is not ubuntu22.04's python3 \(3.10\) and pythons.'3.8'"):
        m.cell("2.1.0", "ubuntu22.04", "3.8")


def test_every_line_of_the_real_matrix_parses_the_same_as_plain_yaml():
    # The line-tracking loader must not change the data, of either file.
    from ascend_build.matrix.yamlsource import load
    for name in ("matrix.yaml", "imported.yaml"):
        text = (ROOT / name).read_text()
        assert load(text, name).data == yaml.safe_load(text)


def test_a_text_read_again_is_its_own_copy_under_its_own_name(monkeypatch):
    """The parse of a text read before is taken as it was (the unit suite reads imported.yaml
    in hundreds of copies): each reader gets data of its own, the lines, and its own file's
    name in what it locates; a problem is found again, in the file that has it."""
    from ascend_build.matrix import yamlsource
    parsed = []

    class Counting(yamlsource.SAFE_LOADER):      # what parses, counted
        def __init__(self, text):
            parsed.append(text)
            super().__init__(text)
    monkeypatch.setattr(yamlsource, "SAFE_LOADER", Counting)
    monkeypatch.setattr(yamlsource, "_PARSED", type(yamlsource._PARSED)())
    text = (ROOT / "imported.yaml").read_text()
    first = yamlsource.load(text, "a/imported.yaml", aliases=False)
    first.data["cann"].clear()                  # a reader that changes what it read
    again = yamlsource.load(text, "b/imported.yaml", aliases=False)
    assert len(parsed) == 1, "the second read parsed the text again"
    assert again.data == yaml.safe_load(text) and again.data["cann"]
    assert again.file == "b/imported.yaml" and again.lines == first.lines and again.lines
    assert yamlsource.load(text, "c/imported.yaml", aliases=True).data == again.data and len(parsed) == 2
    twice = "a: 1\na: 2\n"
    for name in ("x/matrix.yaml", "y/matrix.yaml"):
        with pytest.raises(MatrixError, match=rf"^{re.escape(name)}:2: a: duplicate key"):
            yamlsource.load(twice, name)


def test_invalid_specifiers_are_named_not_raised(tmp_path):
    text = REAL.replace('pins: {protobuf: "==3.20.3", numpy: "<2"}', 'pins: {protobuf: "==3.20.3", numpy: "two"}', 1)
    text = text.replace('cann_numpy: {8.0.RC1: "<2"', 'cann_numpy: {8.0.RC1: "bad"', 1)
    msg = refused(tmp_path, text)
    assert "stacks['2.1.0'].pins.numpy: got 'two'; expected a pip version specifier" in msg
    assert "cann_numpy['8.0.RC1']: got 'bad'; expected a pip version specifier" in msg


def test_site_pins_in_the_checkout_do_not_change_what_the_unit_tests_start_from(tmp_path, monkeypatch):
    """After `invoke pin` in a checkout, the unit tests still see the committed text."""
    import tests.conftest as conf
    # From the text the tests start from: this checkout may hold pins of its own already.
    committed = conf.committed_matrix_text()
    pinned = committed.replace(
        "{file: Ascend-cann-kernels-310b_8.0.0_linux-aarch64.run, sha256: null",
        "{file: Ascend-cann-kernels-310b_8.0.0_linux-aarch64.run, sha256: " + "ab" * 32, 1)
    # the block `invoke pin` writes (inputs/packages.py: one line a file)
    pinned = pinned.replace("cann_pins: {}\n", "cann_pins:\n  Ascend-cann-toolkit_8.0.RC3_linux-aarch64.run: " + "cd" * 32
                            + "\n  Ascend-cann-toolkit_8.0.0_linux-aarch64.run: " + "ef" * 32 + "\n", 1)
    assert pinned.count("ab" * 32) == 1 and pinned.count("cd" * 32) == 1 and pinned.count("ef" * 32) == 1
    (tmp_path / "matrix.yaml").write_text(pinned)
    monkeypatch.setattr(conf, "ROOT", tmp_path)
    started = conf.committed_matrix_text()
    assert "ab" * 32 not in started and "cd" * 32 not in started and "ef" * 32 not in started
    assert started == committed and "cann_pins: {}" in started


def test_hand_recorded_310b_kernels_join_their_cann_release_for_their_arch_only(tmp_path):
    m = load_matrix(ROOT / "matrix.yaml")
    kernels = m.cann["8.0.0"].kernels["310b"]
    assert list(kernels) == ["aarch64"]
    assert kernels["aarch64"].key == ("cann_chips", "8.0.0", "kernels", "310b", "aarch64")
    assert kernels["aarch64"].url.endswith("CANN%208.0.0/Ascend-cann-kernels-310b_8.0.0_linux-aarch64.run")
    assert m.cell("2.1.0-cann8.0.0", "debian12", None, "310b", "linux/arm64").kernels == kernels["aarch64"]
    with pytest.raises(UserError, match="CANN 8.0.0's 310b kernels are published for aarch64 only, not x86_64: "
                                        "build --platform linux/arm64"):
        m.cell("2.1.0-cann8.0.0", "debian12", None, "310b", "linux/amd64")
    # An image for the other arch is refused where it is written.
    text = REAL.replace('  - stack: "2.1.0-cann8.0.0"\n    os: [ubuntu22.04]\n    platforms: [linux/arm64]\n',
                        '  - stack: "2.1.0-cann8.0.0"\n    os: [ubuntu22.04]\n    platforms: [linux/amd64]\n'
                        '    chip: 310b\n', 1)
    assert text != REAL
    assert "got linux/amd64; CANN 8.0.0's 310b kernels are published for aarch64 only" in refused(tmp_path, text)


def test_hand_recorded_kernels_need_their_release_and_give_way_to_an_import(tmp_path):
    unknown = REAL.replace("cann_chips:\n  8.0.0:\n", "cann_chips:\n  7.9.0:\n", 1)
    assert unknown != REAL
    assert "cann_chips['7.9.0']: no CANN 7.9.0 in cann: (the import)" in refused(tmp_path, unknown)
    imported = REAL.replace("      310b:\n        aarch64: {file: Ascend-cann-kernels-310b_8.0.0",
                            "      910b:\n        aarch64: {file: Ascend-cann-kernels-910b_8.0.0", 1)
    assert "CANN 8.0.0's 910b kernels are imported now (cann.8.0.0.kernels.910b): remove this entry" in \
        refused(tmp_path, imported)
    misnamed = REAL.replace("aarch64: {file: Ascend-cann-kernels-310b_8.0.0_linux-aarch64.run",
                            "aarch64: {file: Ascend-cann-kernels-310b_8.0.0_linux.run", 1)
    assert "names its 310b kernels 'Ascend-cann-kernels-310b_8.0.0_linux-aarch64.run'" in refused(tmp_path, misnamed)


def test_a_chip_is_taken_in_upstreams_spelling_too():
    """Upstream's tags say a3 (quay.io/ascend/torch-npu:...-a3-...); the matrix says A3, as
    Huawei's file names do. Either plans the same image; an unknown chip is still refused."""
    m = load_matrix(ROOT / "matrix.yaml")
    lower = m.cell("2.12.0", "ubuntu22.04", "3.11", "a3", "linux/arm64")
    upper = m.cell("2.12.0", "ubuntu22.04", "3.11", "A3", "linux/arm64")
    assert lower == upper and lower.chip == "A3" and lower.name == "cann9.1.0-a3-ubuntu22.04-py3.11-torch2.12.0"
    with pytest.raises(UserError, match="has no kernels for chip 'a4'"):
        m.cell("2.12.0", "ubuntu22.04", "3.11", "a4", "linux/arm64")
