"""What an import read from a vLLM-Ascend sdist, kept by the sdist's sum (pypi.cached_sdist_files):
the second read takes it from the cache, not from the index; another sum, another selection,
no sum or no cache read the sdist. The sdists here are small archives served by file:// URLs."""
from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from ascend_build.errors import UserError
from ascend_build.upstream import pypi, vllm_sdist

SUM = "a" * 64


def sdist(folder: Path, name: str = "vllm_ascend-0.9.0.tar.gz") -> pypi.IndexFile:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    with tarfile.open(path, "w:gz") as tar:
        for member, text in (("Dockerfile", "FROM x\n"),          # in name order, as setuptools writes them
                             ("PKG-INFO", "Metadata-Version: 2.1\nName: vllm-ascend\nVersion: 0.9.0\n"),
                             ("requirements.txt", "torch==2.5.1\n"), ("setup.py", "")):
            data = text.encode()
            info = tarfile.TarInfo(f"vllm_ascend-0.9.0/{member}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return pypi.IndexFile(name, False, path.as_uri(), SUM)


def read(file: pypi.IndexFile, cache: Path | None, key: str = vllm_sdist.WANTED) -> dict[str, str]:
    return pypi.cached_sdist_files(file, vllm_sdist.wanted, key, cache)


def test_the_second_read_is_the_caches(tmp_path):
    file = sdist(tmp_path / "index")
    first = read(file, tmp_path / "cache")
    assert sorted(first) == ["Dockerfile", "PKG-INFO", "requirements.txt"]
    Path(file.url.removeprefix("file://")).unlink()          # the index no longer serves it
    assert read(file, tmp_path / "cache") == first


def test_another_sum_or_selection_reads_the_sdist_again(tmp_path):
    file = sdist(tmp_path / "index")
    read(file, tmp_path / "cache")
    Path(file.url.removeprefix("file://")).unlink()
    for other, key in ((pypi.IndexFile(file.name, False, file.url, "b" * 64), vllm_sdist.WANTED),
                       (file, vllm_sdist.WANTED + " setup.py")):
        with pytest.raises(UserError, match="cannot read"):
            read(other, tmp_path / "cache", key)


def test_without_a_sum_or_a_cache_nothing_is_kept(tmp_path):
    file = sdist(tmp_path / "index")
    unsummed = pypi.IndexFile(file.name, False, file.url, "")
    assert "requirements.txt" in read(unsummed, tmp_path / "cache")
    assert "requirements.txt" in read(file, None)
    assert not (tmp_path / "cache").exists()


def test_an_unreadable_kept_reading_is_read_again(tmp_path):
    file = sdist(tmp_path / "index")
    read(file, tmp_path / "cache")
    (kept,) = (tmp_path / "cache" / "sdist-top-files").iterdir()
    kept.write_text("{not json")
    assert read(file, tmp_path / "cache")["requirements.txt"] == "torch==2.5.1\n"
