"""Hostile and careless input (issue #50), each test naming the finding it covers. The
findings were made on the code of 2026-11-26; each test fails there and passes now."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ascend_build.errors import PackageError
from ascend_build.inputs import makeself
from tests import forked
from tests.conftest import copy_matrix
from tests.doubles.cann_double import make_run

ROOT = Path(__file__).resolve().parents[2]
TOOLKIT = "Ascend-cann-toolkit_8.0.RC3_linux-aarch64.run"
KERNELS = "Ascend-cann-kernels-910b_8.0.RC3_linux-aarch64.run"


def invoke(*args: str, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    return forked.invoke(*args, cwd=cwd, env={**os.environ, **(env or {})})


def planted(folder: Path, witness: Path, name: str = TOOLKIT) -> Path:
    """A file named as CANN's installer whose script writes `witness` when anything runs it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f'#!/bin/sh\necho "ran as $(id -un) in $(pwd) with $*" > {witness}\nexit 0\n')
    path.chmod(0o755)
    return path


def test_no_package_code_runs_on_the_host(tmp_path):
    """Finding: `--dry` ran a package file as root on the host (the integrity check executed
    the archive's own script). build --dry, build, pin and doctor --explain on a planted
    installer: each refuses it, and nothing ran."""
    witness = tmp_path / "witness"
    packages = tmp_path / "packages"
    planted(packages, witness)
    planted(packages, witness, KERNELS)
    matrix = copy_matrix(tmp_path / "m")
    env = {"ASCEND_BUILD_CACHE": str(tmp_path / "cache"), "PATH": f"{tmp_path / 'nobin'}:{os.environ['PATH']}"}
    runs = {
        "build --dry": invoke("build", "--torch", "2.1.0", "--os", "debian12", "--dry", "--offline", "--packages",
                              str(packages), "--matrix", str(matrix), env=env),
        "build": invoke("build", "--torch", "2.1.0", "--os", "debian12", "--offline", "--packages", str(packages),
                        "--matrix", str(matrix), env=env),
        "pin": invoke("pin", "--packages", str(packages), "--matrix", str(matrix), env=env),
        "doctor --explain": invoke("doctor", "--explain", str(packages / TOOLKIT), env=env),
    }
    assert not witness.exists(), f"a package's script ran: {witness.read_text() if witness.exists() else ''}"
    for what in ("build", "pin"):
        assert runs[what].returncode == 3, (what, runs[what].stdout[-2000:], runs[what].stderr[-2000:])
        assert "not a makeself installer this project can check without running it" in runs[what].stderr
    assert runs["build --dry"].returncode == 3, runs["build --dry"].stdout[-2000:] + runs["build --dry"].stderr
    assert "Traceback" not in "".join(r.stderr for r in runs.values())


def test_pin_refuses_a_truncated_or_empty_installer(tmp_path):
    """Finding: `pin` recorded the sum of half a makeself file, and of an empty one (e3b0c442...)."""
    packages = tmp_path / "packages"
    whole = make_run(packages, "toolkit", "8.0.RC3", "aarch64")
    data = whole.read_bytes()
    matrix = copy_matrix(tmp_path / "m")
    before = matrix.read_text()
    whole.write_bytes(data[: len(data) // 2])
    half = invoke("pin", "--file", str(whole), "--matrix", str(matrix))
    assert half.returncode == 3 and "truncated" in half.stderr, half.stdout + half.stderr
    whole.write_bytes(b"")
    empty = invoke("pin", "--file", str(whole), "--matrix", str(matrix))
    assert empty.returncode == 3 and "empty" in empty.stderr, empty.stdout + empty.stderr
    assert matrix.read_text() == before, "nothing was pinned"
    corrupt = bytearray(data)
    corrupt[-100] ^= 0xFF
    whole.write_bytes(bytes(corrupt))
    with pytest.raises(PackageError, match="the file is corrupt"):
        makeself.verify(whole)
    whole.write_bytes(data)
    assert makeself.verify(whole).sha256, "the double's header records its payload's sha256"


def test_a_pinned_file_that_is_corrupt_is_refused(tmp_path):
    """Finding: once pinned, a corrupt file passed `build --dry`. The pin is the file's
    sum: another file under the same name is refused (sha256 mismatch), dry or not."""
    packages = tmp_path / "packages"
    make_run(packages, "toolkit", "8.0.RC3", "aarch64")
    make_run(packages, "kernels", "8.0.RC3", "aarch64", chip="910b")
    matrix = copy_matrix(tmp_path / "m")
    assert invoke("pin", "--packages", str(packages), "--matrix", str(matrix)).returncode == 0
    path = packages / KERNELS
    path.write_bytes(path.read_bytes()[:-10])
    out = invoke("build", "--torch", "2.1.0", "--os", "debian12", "--dry", "--offline", "--packages", str(packages),
                 "--matrix", str(matrix), env={"ASCEND_BUILD_CACHE": str(tmp_path / "cache")})
    assert out.returncode == 3 and "sha256 mismatch" in out.stdout + out.stderr, out.stdout[-2000:] + out.stderr


def test_two_pins_at_once_keep_both(tmp_path):
    """Finding: two `pin` runs at once lost one pin (both wrote matrix.yaml through the
    same temp name, unlocked). 20 rounds of two concurrent pins, each keeping its own."""
    from ascend_build.inputs import packages as pkgs
    from ascend_build.matrix import load_matrix
    folder = tmp_path / "packages"
    toolkit = make_run(folder, "toolkit", "8.0.RC3", "aarch64")
    kernels = make_run(folder, "kernels", "8.0.RC3", "aarch64", chip="910b")
    for round_ in range(20):
        matrix_path = copy_matrix(tmp_path / f"m{round_}")
        start = threading.Barrier(2)
        errors: list[BaseException] = []

        def one(path: Path, matrix_path=matrix_path, start=start, errors=errors) -> None:
            try:
                stale = load_matrix(matrix_path)        # each read the file before the other wrote
                start.wait()
                pkgs.pin(stale, [path])
            except BaseException as exc:      # pragma: no cover - reported below
                errors.append(exc)
        threads = [threading.Thread(target=one, args=(p,)) for p in (toolkit, kernels)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert errors == []
        pins = load_matrix(matrix_path).cann_pins
        text = matrix_path.read_text()
        assert TOOLKIT in pins or TOOLKIT in text
        assert (KERNELS in pins or KERNELS in text) and pins.keys() >= {TOOLKIT, KERNELS}, (round_, pins)
        assert not list(matrix_path.parent.glob("*.tmp")), "no temporary file left"


BOMB = "".join([f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]\n" if i else "l0: &l0 [lol]\n"
                for i in range(10)])


def test_an_alias_bomb_is_refused_fast(tmp_path):
    """Finding: a 9-level billion-laughs in imported.yaml grew `invoke matrix` past 1.1 GB
    until it was killed. Refused using under 200 MB (39 MB here: a whole `invoke matrix`
    with its interpreter's start); and imported.yaml (written by `invoke update`) holds no
    alias at all. How fast: `python benchmarks/alias_bomb.py` prints it (a median of 2.4 s
    on 2 cores: a figure, not an assert, for a loaded machine is slower)."""
    from tests.conftest import committed_imported_text
    imported = committed_imported_text() + BOMB
    matrix = copy_matrix(tmp_path / "imported-bomb", imported=imported)
    # The child's own peak is VmHWM: its ru_maxrss carries this process's peak over the exec
    # (Linux keeps the larger of the two), so a large pytest would seem to be the child. Its
    # address space is capped, so a regression ends in a MemoryError, not by eating the machine.
    out = subprocess.run([sys.executable, "-c", "import resource, sys\n"
                          "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
                          "sys.argv = ['invoke', 'matrix', '--matrix', sys.argv[1]]\n"
                          "from invoke import Collection, Program\nimport tasks\n"
                          "try:\n    Program(namespace=Collection.from_module(tasks)).run(sys.argv)\n"
                          "finally:\n    print('peak', open('/proc/self/status').read().split('VmHWM:')[1].split()[0],"
                          " file=sys.stderr)", str(matrix)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 2 and "an alias (*name)" in out.stderr, out.stderr[-2000:]
    peak_kb = int(out.stderr.split("peak ")[1].split()[0])
    assert 0 < peak_kb < 200 << 10, f"refusing the bomb took {peak_kb >> 10} MB"
    # In matrix.yaml (which may use anchors, as it does for the CPU index) it is bounded.
    text = (ROOT / "matrix.yaml").read_text() + "\nbomb:\n" + "".join("  " + line + "\n" for line in BOMB.splitlines())
    from ascend_build.errors import MatrixError
    from ascend_build.matrix import load_matrix
    path = copy_matrix(tmp_path / "matrix-bomb", text=text)
    with pytest.raises(MatrixError, match="expands to more than 200000 nodes"):
        load_matrix(path)


def test_a_matrix_that_is_not_utf8_is_refused_by_name_and_offset(tmp_path):
    """Finding: non-UTF-8 or binary matrix files gave a UnicodeDecodeError traceback, exit 1."""
    path = copy_matrix(tmp_path / "m")
    raw = path.read_bytes()
    path.write_bytes(raw[:100] + b"\xff\xfe" + raw[100:])
    out = invoke("matrix", "--matrix", str(path))
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert f"{path}" in out.stderr and "not UTF-8 text: byte 100 (0xff)" in out.stderr


# (finding, argv, the exit code the README's table gives, a part of what is said)
REFUSALS = [
    ("values that begin with - became options of docker", ["run", "--dry", "--image=--privileged", "--", "echo"],
     2, "is not an image reference"),
    ("values that begin with - became options of docker", ["run", "--dry", "--image=-v=/:/host"], 2,
     "is not an image reference"),
    ("values that begin with - reached git clone", ["update", "--pytorch-git=--upload-pack=touch /tmp/x", "--dry"],
     2, "not a URL or a path"),
    ("--image=--help gave a JSONDecodeError traceback", ["doctor", "--image=--help", "--root", "/nonexistent"], 2,
     "is not an image reference"),
    ("--image=--help gave a JSONDecodeError traceback", ["sbom", "--image=--help"], 2, "is not an image reference"),
    ("--image=--help gave a JSONDecodeError traceback", ["verify", "--image=--help"], 2, "is not an image reference"),
    ("--devices 7-0 gave a run with no card", ["run", "--dry", "--image", "img", "--devices", "7-0"], 2,
     "runs backwards; write 0-7"),
    ("--shm-size banana was accepted", ["run", "--dry", "--image", "img", "--shm-size", "banana"], 2,
     "expected a size like 16g"),
    ("--runtime magic was accepted", ["run", "--dry", "--image", "img", "--runtime", "magic"], 2,
     "choose one of auto, ascend, runc"),
    ("--nproc-per-node 0 became 8", ["run", "--dry", "--image", "img", "--torchrun", "--nproc-per-node", "0"], 2,
     "expected a whole number from 1 to 64"),
    ("--hccl-timeout -5 only warned", ["run", "--dry", "--image", "img", "--torchrun", "--hccl-timeout", "-5"], 2,
     "expected a whole number from 1 to 86400"),
    ("job --devices 9 asked for 9 NPUs a server", ["job", "--image", "img", "--devices", "9"], 2,
     "expected a whole number from 1 to 8"),
    ("job --chip 910x wrote ascend-910x", ["job", "--image", "img", "--chip", "910x"], 2, "choose one of 910b"),
    ("--queue 'a b;c' was accepted", ["job", "--image", "img", "--queue", "a b;c"], 2, "a Kubernetes name"),
    ("unknown options exited 1", ["build", "--bogus"], 2, "No idea what '--bogus' is"),
    ("a missing option value exited 1", ["build", "--torch"], 2, "needed value"),
    ("--engine foo exited 6", ["build", "--dry", "--engine", "foo"], 2, "--engine 'foo': choose docker or podman"),
    ("lock --check --torch 9.9.9 said none stale", ["lock", "--check", "--torch", "9.9.9"], 2, "unknown torch stack"),
    ("lock --check --python 2.7 said none stale", ["lock", "--check", "--python", "2.7"], 2, "no stack takes it"),
    ("lock --check --platform linux/s390x said none stale", ["lock", "--check", "--platform", "linux/s390x"], 2,
     "choose one of linux/arm64"),
    ("pin --packages /nonexistent said nothing to pin", ["pin", "--packages", "/nonexistent"], 2, "no such folder"),
    ("doctor --explain /nonexistent.log read the path as error text", ["doctor", "--explain", "/nonexistent.log"], 2,
     "no such file"),
    ("build --dry exited 0 where the real build stops", ["build", "--dry", "--offline", "--packages", "/"], 3,
     "a real build of this image stops before it starts"),
]


@pytest.mark.parametrize("finding, argv, code, said", REFUSALS, ids=[" ".join(r[1])[:60] for r in REFUSALS])
def test_each_bad_input_ends_with_the_readmes_code_and_says_why(finding, argv, code, said, tmp_path):
    out = invoke(*argv, env={"ASCEND_BUILD_CACHE": str(tmp_path / "cache")})
    assert out.returncode == code and said in out.stderr, (finding, out.returncode, out.stderr[-1500:])
    assert "Traceback" not in out.stderr, finding


def test_facts_files_are_checked_before_use(tmp_path):
    """Findings: a card with "id": "zero" gave a TypeError traceback in `ranktable`; a card IP
    of 999.1.1.1 went into hccl.json; a newer facts version was "not a host facts file"."""
    import json
    base = {"ascend_build_host_facts": 1, "name": "a", "address": "10.0.0.1", "chip": "910B2", "driver": "24.1.0",
            "cards": [{"id": 0, "ip": "192.168.1.10"}, {"id": 1, "ip": "192.168.1.11"}]}
    cases = {"zero": ({**base, "cards": [{"id": "zero", "ip": "192.168.1.10"}]}, "card id 'zero' is not a whole number"),
             "ip": ({**base, "cards": [{"id": 0, "ip": "999.1.1.1"}]}, "ip '999.1.1.1' is not an IP address"),
             "twice": ({**base, "cards": [{"id": 0}, {"id": 0}]}, "card ids repeat"),
             "newer": ({**base, "ascend_build_host_facts": 9}, "newer than this release reads")}
    for name, (data, said) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(data))
        out = invoke("ranktable", "--hosts", str(path))
        assert out.returncode == 2 and said in out.stderr and "Traceback" not in out.stderr, (name, out.stderr)


def test_a_closed_pipe_ends_quietly():
    """Finding: `invoke ... | head` printed `error: Broken pipe` (exit 2), and a traceback for --help."""
    for argv in (["matrix"], ["--help", "build"]):
        out = subprocess.run(f"{sys.executable} -m invoke {' '.join(argv)} | head -1", shell=True, cwd=ROOT,
                             capture_output=True, text=True)
        assert "Traceback" not in out.stderr and "Broken pipe" not in out.stderr, out.stderr
