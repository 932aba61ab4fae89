"""`invoke pin` taking the sha256 Huawei publishes (issue #66): for an installer whose header
this project cannot check, `pin --file F --sha256 SUM` and `pin --packages DIR --sums FILE`
hold the file's bytes to Huawei's sum, never running or reading the installer; the refusal
of such an installer names that command and, where imported.yaml has its .zip, the .zip.
Everything here is made in tmp_path: stand-in installers and a copy of the matrix."""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

from ascend_build.hashing import sha256_of
from ascend_build.matrix import load_matrix
from tests import forked
from tests.conftest import committed_imported_text, copy_matrix
from tests.doubles.cann_double import make_run

TOOLKIT = "Ascend-cann-toolkit_8.0.RC3_linux-aarch64.run"
KERNELS = "Ascend-cann-kernels-910b_8.0.RC3_linux-aarch64.run"
CELL = ("--torch", "2.1.0", "--os", "debian12")
PLACEHOLDER = "<the sum Huawei publishes>"


def invoke(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """The task in tmp_path, with a home and a cache of its own and no site settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INVOKE_", "ASCEND_BUILD_", "XDG_"))}
    env.update(HOME=str(tmp_path), ASCEND_BUILD_CACHE=str(tmp_path / "cache"))
    return forked.invoke(*args, cwd=tmp_path, env=env)


def uncheckable(folder: Path, name: str) -> Path:
    """An installer whose header this project cannot read (no `skip`, no `filesizes`): only a
    published sum can vouch for its bytes. Its script is never to run."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(b"#!/bin/sh\nexit 1\n" + hashlib.sha256(name.encode()).digest() * 64)
    return path


def dry_build(tmp_path: Path, matrix: Path, *more: str) -> subprocess.CompletedProcess:
    return invoke(tmp_path, "build", *CELL, "--dry", "--offline", "--packages", "packages", "--matrix", str(matrix),
                  *more)


def test_pin_file_sha256_records_the_published_sum_and_a_build_takes_it(tmp_path):
    matrix = copy_matrix(tmp_path / "m")
    before, imported = matrix.read_text(), (matrix.parent / "imported.yaml").read_text()
    files = [uncheckable(tmp_path / "packages", n) for n in (TOOLKIT, KERNELS)]
    assert dry_build(tmp_path, matrix).returncode == 3, "unpinned, its header unreadable: refused"
    for path in files:
        out = invoke(tmp_path, "pin", "--file", f"packages/{path.name}", "--sha256", sha256_of(path).upper(),
                     "--matrix", str(matrix))
        assert out.returncode == 0, out.stdout + out.stderr
        assert f"pinned {path.name} {sha256_of(path)}" in out.stdout
    assert load_matrix(matrix).cann_pins == {p.name: sha256_of(p) for p in files}
    assert load_matrix(matrix).cann["8.0.RC3"].toolkit["aarch64"].sha256 == sha256_of(files[0])
    # the same section `pin` writes, and nothing else changed (imported.yaml is the import's)
    pins = "".join(f"  {p.name}: {sha256_of(p)}\n" for p in sorted(files))
    assert matrix.read_text() == before.replace("cann_pins: {}\n", f"cann_pins:\n{pins}")
    assert (matrix.parent / "imported.yaml").read_text() == imported
    for more in ((), ("--require-pins",)):
        plan = dry_build(tmp_path, matrix, *more)
        assert plan.returncode == 0, plan.stdout[-2000:] + plan.stderr[-2000:]
        assert f'"file":"{TOOLKIT}","version":"8.0.RC3","sha256":"{sha256_of(files[0])}"' in plan.stdout


def test_a_sum_the_file_does_not_have_is_exit_3_and_pins_nothing(tmp_path):
    matrix = copy_matrix(tmp_path / "m")
    before = matrix.read_bytes()
    path = uncheckable(tmp_path / "packages", TOOLKIT)
    other = hashlib.sha256(b"another release").hexdigest()
    out = invoke(tmp_path, "pin", "--file", str(path), "--sha256", other, "--matrix", str(matrix))
    assert out.returncode == 3, out.stdout + out.stderr
    assert other in out.stderr and sha256_of(path) in out.stderr, out.stderr
    assert "not the one Huawei published" in out.stderr
    assert matrix.read_bytes() == before, "nothing was pinned"
    # a file the matrix does not know, and one that is not there: refused, nothing written
    unknown = uncheckable(tmp_path / "packages", "Ascend-cann-toolkit_9.9.9_linux-aarch64.run")
    for given, said in ((unknown, "not a file matrix.yaml knows"), (tmp_path / "nowhere" / TOOLKIT, "no such file")):
        out = invoke(tmp_path, "pin", "--file", str(given), "--sha256", sha256_of(unknown), "--matrix", str(matrix))
        assert out.returncode == 3 and said in out.stderr, out.stdout + out.stderr
    assert matrix.read_bytes() == before


def test_a_sums_file_pins_every_file_of_the_folder_it_names(tmp_path):
    """Huawei's page lists more than a site has: a name not in the folder is said, not an
    error. A file of the folder the sums file does not name is pinned as `pin` always did
    (its header checked)."""
    matrix = copy_matrix(tmp_path / "m")
    folder = tmp_path / "packages"
    toolkit, kernels = uncheckable(folder, TOOLKIT), uncheckable(folder, KERNELS)
    checked = make_run(folder, "kernels", "8.0.RC3", "aarch64", chip="310p")      # not in the sums file
    absent = "Ascend-cann-toolkit_8.0.RC3_linux-x86_64.run"
    (tmp_path / "SHA256SUMS").write_text(
        "# sha256 from Huawei's download page\n\n"
        f"{sha256_of(toolkit)}  {TOOLKIT}\n"
        f"{sha256_of(kernels).upper()} *./{KERNELS}\n"
        f"{hashlib.sha256(b'x86').hexdigest()}  {absent}\n")
    out = invoke(tmp_path, "pin", "--packages", "packages", "--sums", "SHA256SUMS", "--matrix", str(matrix))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{absent}: in SHA256SUMS, not in packages; not pinned" in out.stdout
    assert load_matrix(matrix).cann_pins == {p.name: sha256_of(p) for p in (toolkit, kernels, checked)}
    # one file of the folder that is not what its line says: exit 3, and nothing of the rest is written
    again = copy_matrix(tmp_path / "again")
    kernels.write_bytes(kernels.read_bytes() + b"\n")
    out = invoke(tmp_path, "pin", "--packages", "packages", "--sums", "SHA256SUMS", "--matrix", str(again))
    assert out.returncode == 3 and sha256_of(kernels) in out.stderr, out.stdout + out.stderr
    assert load_matrix(again).cann_pins == {}


def test_a_malformed_sums_line_is_exit_2_naming_its_line(tmp_path):
    matrix = copy_matrix(tmp_path / "m")
    before = matrix.read_bytes()
    path = uncheckable(tmp_path / "packages", TOOLKIT)
    good = f"{sha256_of(path)}  {TOOLKIT}\n"
    for bad, said in ((f"# page\n{good}{sha256_of(path)}{KERNELS}\n", "line 3"),
                      (f"{good}\n{hashlib.md5(b'x').hexdigest()}  {KERNELS}\n", "line 3: "),
                      (f"{good}SHA256 ({KERNELS}) = {sha256_of(path)}\n", "line 2")):
        (tmp_path / "sums").write_text(bad)
        out = invoke(tmp_path, "pin", "--packages", "packages", "--sums", "sums", "--matrix", str(matrix))
        assert out.returncode == 2 and f"sums {said}" in out.stderr, (bad, out.stdout + out.stderr)
        assert matrix.read_bytes() == before


def test_an_option_without_the_one_it_needs_is_exit_2(tmp_path):
    matrix = copy_matrix(tmp_path / "m")
    before = matrix.read_bytes()
    path = uncheckable(tmp_path / "packages", TOOLKIT)
    (tmp_path / "sums").write_text(f"{sha256_of(path)}  {TOOLKIT}\n")
    for args, said in ((["--sha256", sha256_of(path)], "--sha256 needs the file"),
                       (["--packages", "packages", "--sha256", sha256_of(path)], "--sha256 needs the file"),
                       (["--file", str(path), "--file", str(path), "--sha256", sha256_of(path)], "of one file"),
                       (["--file", str(path), "--sha256", sha256_of(path)[:-1]], "is not a sha256"),
                       (["--sums", "sums"], "--sums needs the folder"),
                       (["--file", str(path), "--sums", "sums"], "--sums needs the folder")):
        out = invoke(tmp_path, "pin", *args, "--matrix", str(matrix))
        assert out.returncode == 2 and said in out.stderr, (args, out.stdout + out.stderr)
    assert matrix.read_bytes() == before


def _pin_command(said: str) -> list[str]:
    """The pin command a refusal names, as the user would paste it (the program's path left out)."""
    found = re.search(r"`\S*invoke (pin --file \S+ --sha256 <the sum Huawei publishes>)`", said)
    assert found, said
    return found.group(1).split(" --sha256 ")[0].split()


def test_the_refusal_names_the_pin_command_and_the_published_zip(tmp_path):
    """A build and `pin` refuse an installer whose header cannot be checked with the command
    that pins it (this file's own path) and, where imported.yaml has its .zip, the .zip and
    its URL, not "fetch the .run again". Pasted with the sum, the command makes the build go."""
    matrix = copy_matrix(tmp_path / "m")
    toolkit = load_matrix(matrix).cann["8.0.RC3"].toolkit["aarch64"]
    assert toolkit.zip_sha256, "imported.yaml holds Huawei's sum of its .zip"
    path = uncheckable(tmp_path / "packages", TOOLKIT)
    make_run(tmp_path / "packages", "kernels", "8.0.RC3", "aarch64", chip="910b")
    for out in (dry_build(tmp_path, matrix), invoke(tmp_path, "pin", "--packages", "packages", "--matrix", str(matrix))):
        assert out.returncode == 3, out.stdout[-2000:] + out.stderr
        assert f"pin --file packages/{TOOLKIT} --sha256 {PLACEHOLDER}`" in out.stderr, out.stderr
        assert f"Or use Huawei's {toolkit.zip} in its place, from {toolkit.zip_url}" in out.stderr
        assert f"Fetch it again from {toolkit.url}" not in out.stderr and "(`invoke pin`)" not in out.stderr
    command = _pin_command(dry_build(tmp_path, matrix).stderr)
    assert invoke(tmp_path, *command, "--sha256", sha256_of(path), "--matrix", str(matrix)).returncode == 0
    assert dry_build(tmp_path, matrix, "--require-pins").returncode == 3, "the kernels are not pinned yet"
    assert invoke(tmp_path, "pin", "--packages", "packages", "--matrix", str(matrix)).returncode == 0
    plan = dry_build(tmp_path, matrix, "--require-pins")
    assert plan.returncode == 0, plan.stdout[-2000:] + plan.stderr[-2000:]


def test_without_a_published_zip_the_refusal_names_the_pin_command_alone(tmp_path):
    imported = re.sub(r", zip_sha256: [0-9a-f]{64}", "", committed_imported_text())
    matrix = copy_matrix(tmp_path / "m", imported=imported)
    uncheckable(tmp_path / "packages", TOOLKIT)
    out = invoke(tmp_path, "pin", "--packages", "packages", "--matrix", str(matrix))
    assert out.returncode == 3, out.stdout + out.stderr
    assert f"pin --file packages/{TOOLKIT} --sha256 {PLACEHOLDER}`" in out.stderr, out.stderr
    assert ".zip" not in out.stderr


def test_a_corrupt_installer_is_sent_to_the_published_zip(tmp_path):
    """A header that can be checked, and a payload that fails it: where imported.yaml has the
    .zip's sum, the .zip is what to fetch (the .run is not what Huawei publishes)."""
    matrix = copy_matrix(tmp_path / "m")
    toolkit = load_matrix(matrix).cann["8.0.RC3"].toolkit["aarch64"]
    path = make_run(tmp_path / "packages", "toolkit", "8.0.RC3", "aarch64")
    path.write_bytes(path.read_bytes()[:-100])
    out = invoke(tmp_path, "pin", "--file", f"packages/{TOOLKIT}", "--matrix", str(matrix))
    assert out.returncode == 3 and "truncated" in out.stderr, out.stdout + out.stderr
    assert f"Use Huawei's {toolkit.zip} in its place: get it from {toolkit.zip_url}" in out.stderr
    assert f"Fetch it again from {toolkit.url}" not in out.stderr


def test_pinning_again_says_which_sum_it_replaces(tmp_path):
    """Re-pinning replaced a sum without a word (issue 78): the line names the old and the
    new; the same sum again says it is as it was."""
    matrix = copy_matrix(tmp_path / "m")
    path = uncheckable(tmp_path / "packages", TOOLKIT)
    first = sha256_of(path)
    out = invoke(tmp_path, "pin", "--file", f"packages/{path.name}", "--sha256", first, "--matrix", str(matrix))
    assert out.returncode == 0 and out.stdout.strip() == f"pinned {path.name} {first}", out.stdout + out.stderr
    again = invoke(tmp_path, "pin", "--file", f"packages/{path.name}", "--sha256", first, "--matrix", str(matrix))
    assert again.stdout.strip() == f"pinned {path.name} {first} (as it was)", again.stdout + again.stderr
    path.write_bytes(path.read_bytes() + b"another download")
    second = sha256_of(path)
    out = invoke(tmp_path, "pin", "--file", f"packages/{path.name}", "--sha256", second, "--matrix", str(matrix))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"pinned {path.name} {second}, replacing the sum it had: {first} -> {second}" in out.stdout
    assert load_matrix(matrix).cann_pins[path.name] == second
