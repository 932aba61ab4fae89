"""Writes are atomic and exclusive (ascend_build/atomic.py). Finding: `invoke render` wrote
every file through one shared `X.tmp` name, unlocked: four renders started together failed
in three of four (FileNotFoundError, exit 2), and a reader could see a file another writer
was still filling. Each test below fails on that code."""
from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ascend_build import atomic
from ascend_build.matrix import load_matrix

ROOT = Path(__file__).resolve().parents[2]
RENDERS = 4
MATRIX = load_matrix(ROOT / "matrix.yaml")


def _scratch_checkout(where: Path) -> Path:
    """What `invoke render` reads and writes, copied: the package (its templates link
    included), templates/, tasks.py, the matrix and its imported facts, README.md. images/
    and docs/ start empty, so every render has every file to write."""
    where.mkdir()
    shutil.copytree(ROOT / "ascend_build", where / "ascend_build", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "templates", where / "templates", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("tasks.py", "matrix.yaml", "imported.yaml", "README.md"):
        shutil.copy2(ROOT / name, where / name)
    (where / "docs").mkdir()
    return where


def _env(scratch: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(scratch), "PYTHONDONTWRITEBYTECODE": "1"}


def _generated(scratch: Path) -> dict[str, bytes]:
    return {str(p.relative_to(scratch)): p.read_bytes()
            for folder in ("images", "docs") for p in sorted((scratch / folder).rglob("*")) if p.is_file()}


def test_four_renders_started_together_all_succeed_and_agree(tmp_path):
    """Four `invoke render` processes, started together in a scratch copy of the checkout
    (the checkout's own files are never written): each exits 0, none leaves a temporary,
    and what they leave is what one render gives (`render --check`), byte for byte."""
    scratch = _scratch_checkout(tmp_path / "checkout")
    which = subprocess.run([sys.executable, "-c", "import ascend_build; print(ascend_build.__file__)"], cwd=scratch,
                           env=_env(scratch), capture_output=True, text=True)
    assert Path(which.stdout.strip()).parent == scratch / "ascend_build", "the renders must write the copy only"
    procs = [subprocess.Popen([sys.executable, "-m", "invoke", "render"], cwd=scratch, env=_env(scratch),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(RENDERS)]
    outs = [p.communicate() for p in procs]
    assert [p.returncode for p in procs] == [0] * RENDERS, [err[-2000:] for _, err in outs]
    files = _generated(scratch)
    assert sum(name.endswith("Dockerfile") for name in files) > 100 and "docs/tasks.md" in files
    assert [n for n in files if n.endswith((".tmp", ".lock"))] == [], "no temporary file left behind"
    check = subprocess.run([sys.executable, "-m", "invoke", "render", "--check"], cwd=scratch, env=_env(scratch),
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]     # every file as one render gives
    again = subprocess.run([sys.executable, "-m", "invoke", "render"], cwd=scratch, env=_env(scratch),
                           capture_output=True, text=True)
    assert again.returncode == 0 and "already current" in again.stdout and _generated(scratch) == files


def _write_pages(root: str, start) -> None:
    import tasks
    from ascend_build.cli import pages
    start.wait()
    pages.render(tasks, MATRIX, Path(root), check=False)


def test_four_processes_writing_the_pages_at_once_all_succeed(tmp_path):
    """The tasks page, README's table and the support page, stale, written by four processes let go at once,
    ten times over: none fails, and what they leave is what rendering gives."""
    import tasks
    from ascend_build.cli import pages
    head, rest = (ROOT / pages.README).read_text().split(pages.README_START, 1)
    stale = head + pages.README_START + "\n" + pages.README_END + rest.split(pages.README_END, 1)[1]
    (tmp_path / "docs").mkdir()
    fork = multiprocessing.get_context("fork")
    for _ in range(10):
        (tmp_path / pages.README).write_text(stale)
        (tmp_path / pages.PAGE).unlink(missing_ok=True)
        (tmp_path / "docs" / "support.md").unlink(missing_ok=True)
        start = fork.Barrier(RENDERS)
        procs = [fork.Process(target=_write_pages, args=(str(tmp_path), start)) for _ in range(RENDERS)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        assert [p.exitcode for p in procs] == [0] * RENDERS
        assert pages.render(tasks, MATRIX, tmp_path, check=True) == []
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["README.md", "docs", "support.md", "tasks.md"], \
        "no temporary left"


def _versions(size: int) -> list[bytes]:
    """Whole contents a reader may see: each one byte repeated, and a line that ends it."""
    return [bytes([ord("a") + i]) * size + b"\nend %d\n" % i for i in range(3)]


def test_a_reader_never_sees_a_partial_file_while_writers_replace_it(tmp_path):
    """Three writers replace one file (1 MiB each time) while a reader polls it: every read
    is one whole version, and no writer fails."""
    path = tmp_path / "Dockerfile"
    versions = _versions(1 << 20)
    atomic.write_bytes(path, versions[0])
    done, errors, seen = threading.Event(), [], set()
    reads = []

    def writer(start: int) -> None:
        try:
            for i in range(40):
                atomic.write_bytes(path, versions[(start + i) % len(versions)])
        except BaseException as exc:        # pragma: no cover - reported below
            errors.append(exc)

    def reader() -> None:
        try:
            while not done.is_set():
                data = path.read_bytes()
                reads.append(len(data))
                seen.add(data if data in versions else b"partial: %d bytes" % len(data))
        except BaseException as exc:        # pragma: no cover - reported below
            errors.append(exc)
    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    poll = threading.Thread(target=reader)
    poll.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    poll.join()
    partial = sorted(s.decode() for s in seen if s not in versions)
    assert (partial, errors) == ([], []), "a reader saw a file half written, or a writer or the reader failed"
    assert len(reads) > 1
    assert path.read_bytes() in versions and [p.name for p in tmp_path.iterdir()] == ["Dockerfile"]


class Interrupted(BaseException):
    pass


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt(), Interrupted()])
def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch, failure):
    """A write that fails after its bytes went out (a full disk, Ctrl-C, any exception):
    the old file as it was, its mode kept, and no temporary left beside it."""
    path = tmp_path / "matrix.yaml"
    path.write_text("old: 1\n")
    path.chmod(0o600)

    def fail(fd: int) -> None:          # the new bytes are written, not yet synced
        raise failure
    monkeypatch.setattr(atomic.os, "fsync", fail)
    with pytest.raises(type(failure)):
        atomic.write_text(path, "new: 2\n" * 1000)
    assert path.read_text() == "old: 1\n"
    assert [p.name for p in tmp_path.iterdir()] == ["matrix.yaml"], "the temporary is gone"
    monkeypatch.undo()
    atomic.write_text(path, "new: 2\n")
    assert path.read_text() == "new: 2\n" and path.stat().st_mode & 0o777 == 0o600, "its mode is kept"


def test_a_new_file_gets_0o644_or_the_mode_asked_and_a_link_stays_a_link(tmp_path):
    old = os.umask(0o077)
    try:
        atomic.write_text(tmp_path / "a.txt", "a\n")
        atomic.write_bytes(tmp_path / "b.sh", b"#!/bin/sh\n", mode=0o755)
    finally:
        os.umask(old)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "b.sh").stat().st_mode & 0o777 == 0o755
    (tmp_path / "link.txt").symlink_to("a.txt")
    atomic.write_text(tmp_path / "link.txt", "through the link\n")
    assert (tmp_path / "link.txt").is_symlink() and (tmp_path / "a.txt").read_text() == "through the link\n"


ROUNDS = 150


def _append_lines(path: str, who: str) -> None:
    """A read-modify-write, ROUNDS times: read the file, add a line, write it whole."""
    for i in range(ROUNDS):
        with atomic.locked(path):
            text = Path(path).read_text()
            atomic.write_text(path, text + f"{who} {i}\n")


def test_concurrent_read_modify_write_writers_under_locked_both_land_every_change(tmp_path):
    path = tmp_path / "imported.yaml"
    path.write_text("")
    fork = multiprocessing.get_context("fork")
    writers = [fork.Process(target=_append_lines, args=(str(path), who)) for who in ("update", "pytorch-git")]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    assert [w.exitcode for w in writers] == [0, 0], "each waited its turn: neither failed"
    lines = path.read_text().splitlines()
    assert sorted(lines) == sorted(f"{who} {i}" for who in ("update", "pytorch-git") for i in range(ROUNDS)), \
        f"{2 * ROUNDS - len(lines)} changes lost"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".imported.yaml.lock", "imported.yaml"]


def test_two_lock_runs_at_once_take_turns_on_a_cell(tmp_path, monkeypatch):
    """`invoke lock` reads a cell's lock, resolves, and writes its files: two runs at once
    take turns, so the later one reads the lock the earlier wrote (and finds it current)
    instead of both writing theirs over each other."""
    import time

    from ascend_build.locking import lock as locks
    from ascend_build.locking import resolve
    from tests.unit.test_lock import UV_OUTPUT, IndexDouble, _matrix
    m = _matrix(tmp_path)
    preferred: list[dict[str, str] | None] = []

    def compile_cell(*args):
        preferred.append(args[5])
        time.sleep(0.3)             # a resolution takes a while: the other run starts meanwhile
        return resolve.parse_compiled(UV_OUTPUT)
    monkeypatch.setattr(resolve, "compile_cell", compile_cell)
    monkeypatch.setattr(resolve, "uv_version", lambda: "uv 0.0 (double)")
    monkeypatch.setattr(resolve, "Index", lambda *a, **k: IndexDouble())
    changes: list[list] = []
    runs = [threading.Thread(target=lambda: changes.append(
        resolve.lock(m, tmp_path, [("2.1.0", "3.9", "aarch64")], resolve.Network()))) for _ in range(2)]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    assert sorted(len(c) for c in changes) == [0, 1], "one made the lock, the other found it made"
    made = locks.read(tmp_path, m.stacks["2.1.0"], "3.9", "aarch64")
    assert made is not None and preferred == [None, locks.pinned_versions(made.files)]


def test_two_imports_into_imported_yaml_at_once_both_land(tmp_path, monkeypatch):
    """`invoke update` reads imported.yaml, changes it and writes it whole: two at once
    (here two --pytorch-git runs, their reading of the tags a double that takes a while)
    take turns, so each one's change lands."""
    import time

    from ascend_build.cli import data
    from ascend_build.upstream import pytorch_git
    from tests.conftest import copy_matrix
    matrix = copy_matrix(tmp_path)
    imported = tmp_path / "imported.yaml"

    def update(matrix_path: Path, location: str):
        before = imported.read_text()
        time.sleep(0.3)             # reading the tags takes a while: the other run starts meanwhile
        return imported, before, before + f"# tags read from {location}\n", []
    monkeypatch.setattr(pytorch_git, "update", update)
    errors: list[BaseException] = []

    def one(where: str) -> None:
        try:
            data.update(data.UpdateOptions(matrix=str(matrix), pytorch_git=where))
        except BaseException as exc:        # pragma: no cover - reported below
            errors.append(exc)
    runs = [threading.Thread(target=one, args=(where,)) for where in ("copy-a", "copy-b")]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    text = imported.read_text()
    assert errors == [] and "# tags read from copy-a\n" in text and "# tags read from copy-b\n" in text
