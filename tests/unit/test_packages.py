"""Package lookup, cache, download and pinning, with a local fetch double standing in
for the Ascend download site (unreachable here)."""
from __future__ import annotations

import dataclasses
import hashlib
import os
import threading
import urllib.error
from pathlib import Path

import pytest

from ascend_build.errors import PackageError
from ascend_build.hashing import sha256_of
from ascend_build.inputs.packages import PackageStore, Pinned, pin
from ascend_build.matrix import CannFile, load_matrix
from tests.conftest import copy_matrix
from tests.doubles.cann_double import make_run

ROOT = Path(__file__).resolve().parents[2]
PAYLOAD = bytes(range(256)) * 64
# A stand-in installer in makeself's form: a header that records its payload's size and sum.
BODY = (f'#!/bin/bash\n# stand-in installer\nskip="5"\nfilesizes="{len(PAYLOAD)}"\n'
        f'SHA="{hashlib.sha256(PAYLOAD).hexdigest()}"\n').encode() + PAYLOAD
SHA = hashlib.sha256(BODY).hexdigest()


def cann_file(sha: str | None = SHA) -> CannFile:
    return CannFile("toolkit", "Ascend-cann-toolkit_8.0.RC3_linux-aarch64.run",
                    "https://example.invalid/Ascend-cann-toolkit_8.0.RC3_linux-aarch64.run", sha,
                    ("cann", "8.0.RC3", "toolkit", "aarch64"))


class FetchDouble:
    """Serves BODY (or a corrupted copy) instead of the network; counts calls."""

    def __init__(self, body: bytes = BODY, fail: bool = False):
        self.body, self.fail, self.calls = body, fail, 0

    def __call__(self, url: str, dest: Path) -> None:
        self.calls += 1
        if self.fail:
            raise urllib.error.URLError("Name or service not known")
        dest.write_bytes(self.body)


def test_found_in_package_dir(tmp_path):
    (tmp_path / "pk").mkdir()
    (tmp_path / "pk" / cann_file().file).write_bytes(BODY)
    fetch = FetchDouble()
    got = PackageStore([tmp_path / "pk"], tmp_path / "cache", fetch=fetch).locate(cann_file())
    assert got.path == tmp_path / "pk" / cann_file().file and got.sha256 == SHA and got.pinned
    assert fetch.calls == 0


def test_missing_file_error_names_file_places_and_url(tmp_path):
    store = PackageStore([tmp_path / "pk"], tmp_path / "cache", fetch=FetchDouble(fail=True))
    with pytest.raises(PackageError) as info:
        store.locate(cann_file())
    msg = str(info.value)
    assert "CANN toolkit package not found: Ascend-cann-toolkit_8.0.RC3_linux-aarch64.run" in msg
    assert str(tmp_path / "pk") in msg and str(tmp_path / "cache" / "cann") in msg
    assert "Name or service not known" in msg and "https://example.invalid/" in msg
    assert not any((tmp_path / "cache" / "cann").iterdir()), "a failed download must leave nothing"
    assert info.value.exit_code == 8, "a download site that does not answer is the network"


def test_a_download_site_that_answers_404_is_a_missing_package_not_the_network(tmp_path):
    def not_there(url: str, dest: Path) -> None:
        raise urllib.error.HTTPError(url, 404, "Not Found", {}, None)  # type: ignore[arg-type]
    with pytest.raises(PackageError) as info:
        PackageStore([tmp_path / "pk"], tmp_path / "cache", fetch=not_there).locate(cann_file())
    assert "HTTP Error 404" in str(info.value) or "Not Found" in str(info.value), str(info.value)
    assert info.value.exit_code == 3


def test_checksum_mismatch_names_expected_and_actual(tmp_path):
    (tmp_path / "pk").mkdir()
    bad = BODY[:-1] + b"X"
    (tmp_path / "pk" / cann_file().file).write_bytes(bad)
    with pytest.raises(PackageError) as info:
        PackageStore([tmp_path / "pk"], tmp_path / "cache").locate(cann_file())
    assert f"expected {SHA}" in str(info.value)
    assert f"actual   {hashlib.sha256(bad).hexdigest()}" in str(info.value)


def test_download_is_checked_and_lands_atomically_in_the_cache(tmp_path):
    fetch = FetchDouble()
    store = PackageStore([], tmp_path / "cache", fetch=fetch)
    got = store.locate(cann_file())
    assert got.path == tmp_path / "cache" / "cann" / cann_file().file and got.path.read_bytes() == BODY
    assert [p.name for p in got.path.parent.iterdir()] == [cann_file().file]
    store.locate(cann_file())
    assert fetch.calls == 1, "the cached file is reused"


def test_corrupt_download_is_not_kept(tmp_path):
    store = PackageStore([], tmp_path / "cache", fetch=FetchDouble(body=BODY[:100]))
    with pytest.raises(PackageError, match="sha256 mismatch"):
        store.locate(cann_file())
    assert list((tmp_path / "cache" / "cann").iterdir()) == []


def test_offline_and_require_pins(tmp_path):
    with pytest.raises(PackageError, match="downloads are off"):
        PackageStore([], tmp_path, download=False).locate(cann_file())
    with pytest.raises(PackageError, match="--require-pins"):
        PackageStore([], tmp_path).locate(cann_file(sha=None), require_pin=True)


def test_concurrent_downloads_leave_one_whole_file(tmp_path):
    stores = [PackageStore([], tmp_path / "cache", fetch=FetchDouble()) for _ in range(4)]
    threads = [threading.Thread(target=s.locate, args=(cann_file(),)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    files = list((tmp_path / "cache" / "cann").iterdir())
    assert [f.name for f in files] == [cann_file().file] and files[0].read_bytes() == BODY


def test_pin_writes_sums_and_keeps_the_rest(tmp_path):
    """An imported file's pin goes to matrix.yaml's cann_pins (imported.yaml is machine-
    written and stays as it is); a hand-recorded entry's beside it. Nothing else changes."""
    matrix_path = copy_matrix(tmp_path / "m")
    before, imported = matrix_path.read_text(), (matrix_path.parent / "imported.yaml").read_text()
    pkg = tmp_path / "Ascend-cann-kernels-910b_8.0.RC1_linux.run"   # no-arch era: two entries share it
    pkg.write_bytes(BODY)
    board = make_run(tmp_path / "board", "kernels", "8.0.0", "aarch64", chip="310b")     # cann_chips:
    assert pin(load_matrix(matrix_path), [pkg, board]) == [Pinned(pkg.name, SHA), Pinned(board.name, sha256_of(board))]
    after = matrix_path.read_text()
    assert (matrix_path.parent / "imported.yaml").read_text() == imported
    assert after.replace(f"cann_pins:\n  {pkg.name}: {SHA}\n", "cann_pins: {}\n").replace(
        sha256_of(board), "null") == before
    m = load_matrix(matrix_path)
    assert {m.cann["8.0.RC1"].kernels["910b"][a].sha256 for a in ("aarch64", "x86_64")} == {SHA}
    assert m.cann["8.0.0"].kernels["310b"]["aarch64"].sha256 == sha256_of(board)
    again = tmp_path / "Ascend-cann-toolkit_8.0.RC1_linux-aarch64.run"
    again.write_bytes(BODY)
    pin(m, [again])         # a second pin joins the first, the section in file order
    assert f"cann_pins:\n  {pkg.name}: {SHA}\n  {again.name}: {SHA}\n" in matrix_path.read_text()
    assert load_matrix(matrix_path).cann_pins == {again.name: SHA, pkg.name: SHA}
    unknown = tmp_path / "Ascend-cann-toolkit_9.9.9_linux-aarch64.run"
    unknown.write_bytes(BODY)
    with pytest.raises(PackageError, match="not a file matrix.yaml knows"):
        pin(m, [unknown])


def test_fetch_release_downloads_every_file_then_pin_records_them(tmp_path):
    """Bare .run files (a release with no published sums in this copy of the matrix)."""
    import re

    from ascend_build.inputs.packages import fetch_release
    from tests.conftest import committed_imported_text
    matrix_path = copy_matrix(tmp_path / "m", imported=re.sub(r", zip_sha256: [0-9a-f]{64}", "",
                                                             committed_imported_text()))
    m = load_matrix(matrix_path)
    fetch = FetchDouble()
    store = PackageStore([], tmp_path / "cache", fetch=fetch)
    files = fetch_release(m, "8.0.RC3", [], store=store)
    assert sorted(f.name for f in files) == sorted({
        "Ascend-cann-toolkit_8.0.RC3_linux-aarch64.run", "Ascend-cann-toolkit_8.0.RC3_linux-x86_64.run",
        "Ascend-cann-kernels-910b_8.0.RC3_linux-aarch64.run", "Ascend-cann-kernels-910b_8.0.RC3_linux-x86_64.run",
        "Ascend-cann-kernels-310p_8.0.RC3_linux-aarch64.run", "Ascend-cann-kernels-310p_8.0.RC3_linux-x86_64.run",
        "Ascend-cann-kernels-910_8.0.RC3_linux-aarch64.run", "Ascend-cann-kernels-910_8.0.RC3_linux-x86_64.run"})
    assert fetch.calls == 8
    pin(m, files)
    pinned = load_matrix(matrix_path).cann["8.0.RC3"]
    assert pinned.toolkit["aarch64"].sha256 == SHA and pinned.kernels["910"]["x86_64"].sha256 == SHA
    with pytest.raises(PackageError, match="unknown CANN release '9.9'"):
        fetch_release(m, "9.9", [], store=store)


def test_unpinned_truncated_installer_is_refused_by_its_own_check(tmp_path):
    from tests.doubles.cann_double import make_run
    good = make_run(tmp_path / "pk", "toolkit", "8.0.RC3", "aarch64")
    unpinned = CannFile("toolkit", good.name, "https://example.invalid/" + good.name, None,
                        ("cann", "8.0.RC3", "toolkit", "aarch64"))
    store = PackageStore([tmp_path / "pk"], tmp_path / "cache")
    assert store.locate(unpinned).path == good and not store.locate(unpinned).pinned
    good.write_bytes(good.read_bytes()[:-200])        # truncated
    with pytest.raises(PackageError, match="truncated: a download cut short"):
        PackageStore([tmp_path / "pk"], tmp_path / "cache").locate(unpinned)


def test_wrong_chip_or_arch_is_named_when_the_right_file_is_missing(tmp_path):
    (tmp_path / "pk").mkdir()
    for name in ("Ascend-cann-kernels-910_8.0.RC3_linux-aarch64.run", "Ascend-cann-kernels-910b_8.0.RC3_linux-x86_64.run"):
        (tmp_path / "pk" / name).write_bytes(BODY)
    wanted = CannFile("kernels", "Ascend-cann-kernels-910b_8.0.RC3_linux-aarch64.run", "https://example.invalid/k.run",
                      None, ("cann", "8.0.RC3", "kernels", "910b", "aarch64"))
    with pytest.raises(PackageError) as info:
        PackageStore([tmp_path / "pk"], tmp_path / "cache", download=False).locate(wanted)
    msg = str(info.value)
    assert "not found: Ascend-cann-kernels-910b_8.0.RC3_linux-aarch64.run" in msg
    assert "present but not this one (another chip or arch?): Ascend-cann-kernels-910_8.0.RC3_linux-aarch64.run" in msg
    assert "Ascend-cann-kernels-910b_8.0.RC3_linux-x86_64.run" in msg


def _locate_in_process(args):
    cache, url, sha = args
    f = CannFile("toolkit", "Ascend-cann-toolkit_8.0.RC3_linux-aarch64.run", url, sha,
                 ("cann", "8.0.RC3", "toolkit", "aarch64"))
    return str(PackageStore([], Path(cache)).locate(f).path)


def test_processes_downloading_into_one_cache_leave_one_whole_file(tmp_path):
    import multiprocessing
    body = b"#!/bin/bash\n" + os.urandom(32 << 20)
    source = tmp_path / "site" / "Ascend-cann-toolkit_8.0.RC3_linux-aarch64.run"
    source.parent.mkdir()
    source.write_bytes(body)
    args = (str(tmp_path / "cache"), source.as_uri(), hashlib.sha256(body).hexdigest())
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        paths = pool.map(_locate_in_process, [args] * 4)
    assert len(set(paths)) == 1
    files = list((tmp_path / "cache" / "cann").iterdir())
    assert [f.name for f in files] == [source.name], "no partial files left behind"
    assert files[0].read_bytes() == body


def test_a_package_for_the_other_arch_under_the_right_name_is_refused(tmp_path):
    """A renamed download or a mislabelled mirror: the name says aarch64, the binaries
    inside are x86_64. Refused from the ELF headers in its payload, pinned or not."""
    from ascend_build.inputs.packages import read_contents
    from tests.doubles.cann_double import make_run
    right = make_run(tmp_path / "right", "toolkit", "8.0.RC3", "aarch64")
    wrong = make_run(tmp_path / "wrong", "toolkit", "8.0.RC3", "x86_64", name=right.name)
    assert read_contents(right).arches == {"aarch64"} and read_contents(wrong).arches == {"x86_64"}
    for sha in (None, sha256_of(wrong)):
        f = CannFile("toolkit", right.name, "https://example.invalid/" + right.name, sha,
                     ("cann", "8.0.RC3", "toolkit", "aarch64"))
        with pytest.raises(PackageError, match="named for aarch64 but its binaries are for x86_64"):
            PackageStore([tmp_path / "wrong"], tmp_path / "cache", download=False).locate(f)
        assert PackageStore([tmp_path / "right"], tmp_path / "cache", download=False).locate(
            dataclasses.replace(f, sha256=sha and sha256_of(right))).path == right


def test_kernels_for_another_chip_under_the_right_name_are_refused(tmp_path):
    from tests.doubles.cann_double import make_run
    name = "Ascend-cann-kernels-910b_8.0.RC3_linux-aarch64.run"
    make_run(tmp_path / "pk", "kernels", "8.0.RC3", "aarch64", chip="910", name=name)
    f = CannFile("kernels", name, "https://example.invalid/" + name, None, ("cann", "8.0.RC3", "kernels", "910b", "aarch64"))
    with pytest.raises(PackageError, match="named for chip 910b but it carries kernels for 910"):
        PackageStore([tmp_path / "pk"], tmp_path / "cache", download=False).locate(f)


def test_pin_refuses_a_package_whose_contents_contradict_its_name(tmp_path):
    from tests.doubles.cann_double import make_run
    m = load_matrix(ROOT / "matrix.yaml")
    name = m.cann["8.0.RC3"].toolkit["aarch64"].file
    wrong = make_run(tmp_path / "pk", "toolkit", "8.0.RC3", "x86_64", name=name)
    copy = copy_matrix(tmp_path / "m")
    before = copy.read_bytes()
    with pytest.raises(PackageError, match="binaries are for x86_64"):
        pin(load_matrix(copy), [wrong])
    assert copy.read_bytes() == before, "nothing pinned"


# ---------------------------------------------------------------- the published .zip form

def zipped(folder: Path, run: Path, extra: dict[str, bytes] | None = None) -> Path:
    """A .zip around a .run, as Huawei publishes CANN files."""
    import zipfile
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / (run.name[:-4] + ".zip")
    with zipfile.ZipFile(out, "w") as archive:
        archive.write(run, run.name)
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return out


def zip_file_entry(run_name: str, zip_sum: str, sha: str | None = None) -> CannFile:
    return CannFile("toolkit", run_name, "https://example.invalid/" + run_name, sha,
                    ("cann", "8.0.RC3", "toolkit", "aarch64"), zip_sum)


def test_a_published_zip_is_checked_against_huaweis_sum_and_its_run_taken_out(tmp_path):
    from tests.doubles.cann_double import make_run
    run = make_run(tmp_path / "made", "toolkit", "8.0.RC3", "aarch64")
    archive = zipped(tmp_path / "pk", run, {"Ascend-cann-toolkit_8.0.RC3_linux-aarch64.run.sig": b"sig"})
    entry = zip_file_entry(run.name, sha256_of(archive))
    got = PackageStore([tmp_path / "pk"], tmp_path / "cache").locate(entry, require_pin=True)
    assert got.pinned and got.sha256 == sha256_of(run) and got.path.read_bytes() == run.read_bytes()
    assert got.path.is_relative_to(tmp_path / "cache") and os.access(got.path, os.X_OK)
    # Taken out once: the next build finds the verified .run without the .zip.
    archive.unlink()
    again = PackageStore([tmp_path / "pk"], tmp_path / "cache").locate(entry, require_pin=True)
    assert again.path == got.path and again.pinned


def test_a_zip_that_fails_the_published_sum_is_refused(tmp_path):
    from tests.doubles.cann_double import make_run
    run = make_run(tmp_path / "made", "toolkit", "8.0.RC3", "aarch64")
    archive = zipped(tmp_path / "pk", run)
    entry = zip_file_entry(run.name, "0" * 64)
    with pytest.raises(PackageError, match="sha256 mismatch for Ascend-cann-toolkit_8.0.RC3_linux-aarch64.zip"):
        PackageStore([tmp_path / "pk"], tmp_path / "cache").locate(entry)
    assert not (tmp_path / "cache" / "cann" / "from-zip").exists(), "nothing was taken out"
    assert archive.exists()


def test_the_payload_checks_apply_to_the_run_inside_the_zip(tmp_path):
    from tests.doubles.cann_double import make_run
    # Named for aarch64, x86_64 binaries inside, wrapped in a zip whose own sum is right.
    run = make_run(tmp_path / "made", "toolkit", "8.0.RC3", "x86_64",
                   name="Ascend-cann-toolkit_8.0.RC3_linux-aarch64.run")
    archive = zipped(tmp_path / "pk", run)
    entry = zip_file_entry(run.name, sha256_of(archive))
    with pytest.raises(PackageError, match="named for aarch64 but its binaries are for x86_64"):
        PackageStore([tmp_path / "pk"], tmp_path / "cache").locate(entry)


def test_the_zip_is_downloaded_when_the_matrix_has_its_published_sum(tmp_path):
    from tests.doubles.cann_double import make_run
    run = make_run(tmp_path / "made", "toolkit", "8.0.RC3", "aarch64")
    body = zipped(tmp_path / "served", run).read_bytes()
    fetch = FetchDouble(body)
    entry = zip_file_entry(run.name, hashlib.sha256(body).hexdigest())
    got = PackageStore([], tmp_path / "cache", fetch=fetch).locate(entry)
    assert fetch.calls == 1 and got.pinned and got.sha256 == sha256_of(run)


def test_require_pins_refuses_a_bare_run_that_only_the_zip_sum_could_verify(tmp_path):
    from tests.doubles.cann_double import make_run
    run = make_run(tmp_path / "pk", "toolkit", "8.0.RC3", "aarch64")
    entry = zip_file_entry(run.name, "1" * 64)
    with pytest.raises(PackageError, match="a bare .run with no sha256"):
        PackageStore([tmp_path / "pk"], tmp_path / "cache").locate(entry, require_pin=True)


def test_a_bare_run_in_a_relative_folder_passes_its_own_check(tmp_path, monkeypatch):
    """The README's default, `./packages` with unpinned bare .run files: the installer's
    `--check` runs in another folder, so the path it gets must not be relative."""
    from tests.doubles.cann_double import make_run
    good = make_run(tmp_path / "packages", "toolkit", "8.0.RC3", "aarch64")
    unpinned = CannFile("toolkit", good.name, "https://example.invalid/" + good.name, None,
                        ("cann", "8.0.RC3", "toolkit", "aarch64"))
    monkeypatch.chdir(tmp_path)
    got = PackageStore([Path("packages")], Path("cache"), download=False).locate(unpinned)
    assert got.path == good and got.path.is_absolute() and not got.pinned


def test_a_given_run_is_kept_by_its_sum_and_found_without_the_folder(tmp_path):
    """`invoke verify` and a rebuild find the installer a build was given, with no --packages:
    the build kept it in the cache under its sum (pinned or not), once."""
    (tmp_path / "pk").mkdir()
    (tmp_path / "pk" / cann_file().file).write_bytes(BODY)
    for pinned in (SHA, None):
        cache = tmp_path / f"cache-{bool(pinned)}"
        first = PackageStore([tmp_path / "pk"], cache, download=False, keep=True).locate(cann_file(pinned))
        assert first.path == tmp_path / "pk" / cann_file().file
        again = PackageStore([], cache, download=False).locate(cann_file(pinned))
        assert again.path == cache / "cann" / "kept" / SHA[:24] / cann_file().file and again.sha256 == SHA
        PackageStore([tmp_path / "pk"], cache, download=False, keep=True).locate(cann_file(pinned))
        assert len(list((cache / "cann" / "kept").glob("*/*"))) == 1, "kept once, no temp left"
    # A store not asked to keep (pin, a dry run) leaves the cache as it was.
    PackageStore([tmp_path / "pk"], tmp_path / "cache-dry", download=False).locate(cann_file())
    assert not (tmp_path / "cache-dry").exists()


def _python_tarball(folder: Path, name: str, top: str) -> Path:
    import io
    import tarfile
    path = folder / name
    with tarfile.open(path, "w:xz") as archive:
        data = b"This is Python (a stand-in for the release file)\n"
        info = tarfile.TarInfo(f"{top}/README.rst")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return path


def test_pin_writes_a_cpython_tarballs_sum_under_its_pythons_entry(tmp_path):
    """The build says an unpinned CPython tarball is not verified and to run `invoke pin`:
    pin takes the tarball `pythons:` names, checks it holds that release, and writes its sum
    on that entry's sha256 line, the rest of matrix.yaml byte for byte."""
    path = copy_matrix(tmp_path / "m")
    before = path.read_text()
    assert load_matrix(path).pythons["3.12"].sha256 is None
    tarball = _python_tarball(tmp_path, "Python-3.12.13.tar.xz", "Python-3.12.13")
    assert pin(load_matrix(path), [tarball]) == [Pinned("Python-3.12.13.tar.xz", sha256_of(tarball))]
    after = load_matrix(path)
    assert after.pythons["3.12"].sha256 == sha256_of(tarball)
    changed = [(a, b) for a, b in zip(before.splitlines(), path.read_text().splitlines()) if a != b]
    assert changed == [("    sha256: null", f"    sha256: {sha256_of(tarball)}")] and len(changed) == 1
    cell = after.cell("2.12.0-26.1.0", "ubuntu22.04", "3.12", None, "linux/arm64")
    assert not [n for n in cell.unpinned() if n.startswith("CPython")]
    # A file of that name holding another release is refused, and nothing is written.
    (tmp_path / "w").mkdir()
    wrong = _python_tarball(tmp_path / "w", "Python-3.14.10.tar.xz", "Python-3.14.9")
    text = path.read_text()
    with pytest.raises(PackageError, match=r"holds Python-3.14.9, not Python-3.14.10 \(pythons.\"3.14\".version\)"):
        pin(load_matrix(path), [wrong])
    assert path.read_text() == text
