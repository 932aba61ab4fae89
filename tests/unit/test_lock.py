"""Locks: reading, staleness, the layer split, the wheel choice per target, and the
refusals. The resolver's output and the index are doubles here (resolve.compile_cell and
Index.files); tests/integration/test_build_train_26.py runs the real `invoke lock` (uv against
PyPI, under the test-only switch) and builds from the lock it made."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ascend_build.errors import UserError
from ascend_build.locking import lock as locks
from ascend_build.locking import resolve, torch_index
from ascend_build.matrix import load_text
from ascend_build.matrix.frameworks import TORCH
from tests import forked
from tests.conftest import ROOT, committed_matrix_text, copy_matrix, link_locks

TORCH_LAYERS = ("cann",) + TORCH.layers      # a torch stack's lock files

# uv's `--annotation-style line` output for a small stack: three .in files, one per layer.
UV_OUTPUT = """\
numpy==1.26.4             # via -r /tmp/x/cann.in, scipy, torch-npu
scipy==1.13.1             # via -r /tmp/x/cann.in
pyyaml==6.0.3             # via -r /tmp/x/cann.in, torch-npu
torch==2.1.0              # via -r /tmp/x/torch.in, -r /tmp/x/torch_npu.in
filelock==3.19.1          # via torch
protobuf==3.20.3          # via -r /tmp/x/torch.in, -r /tmp/x/torch_npu.in
torch-npu==2.1.0.post8    # via -r /tmp/x/torch_npu.in
"""


def _matrix(tmp_path: Path, text: str | None = None):
    path = copy_matrix(tmp_path, text)
    return load_text(path.read_text(), path)


def test_uv_output_is_split_into_layers_by_who_needs_what():
    resolved = resolve.parse_compiled(UV_OUTPUT)
    assert resolved["numpy"] == ("1.26.4", ["-r /tmp/x/cann.in", "scipy", "torch-npu"])
    layers = resolve.assign_layers(resolved)
    assert {n for n, layer in layers.items() if layer == "cann"} == {"numpy", "scipy", "pyyaml"}
    assert {n for n, layer in layers.items() if layer == "torch"} == {"torch", "filelock", "protobuf"}
    assert {n for n, layer in layers.items() if layer == "torch_npu"} == {"torch-npu"}


def test_a_package_nobody_asked_for_is_an_error_not_a_guess():
    with pytest.raises(UserError, match="does not say what needs orphan"):
        resolve.assign_layers(resolve.parse_compiled(UV_OUTPUT + "orphan==1.0  # via nobody-listed\n"))


def test_hashes_are_kept_for_the_wheels_this_target_may_install():
    files = [
        ("numpy-1.26.4-cp39-cp39-manylinux_2_17_aarch64.manylinux2014_aarch64.whl", "a" * 64),
        ("numpy-1.26.4-cp39-cp39-manylinux_2_34_aarch64.whl", "b" * 64),         # newer glibc: pip may pick it
        ("numpy-1.26.4-cp39-cp39-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "c" * 64),
        ("numpy-1.26.4-cp311-cp311-manylinux_2_17_aarch64.manylinux2014_aarch64.whl", "d" * 64),
        ("numpy-1.26.4-cp39-cp39-musllinux_1_1_aarch64.whl", "e" * 64),
        ("numpy-1.26.4.tar.gz", "f" * 64),
        ("numpy-1.26.3-cp39-cp39-manylinux_2_17_aarch64.manylinux2014_aarch64.whl", "0" * 64),
    ]
    picked = resolve.wheel_hashes(files, "numpy", "1.26.4", resolve.target_tags("3.9", "aarch64"))
    assert [sha[0] for _, sha in picked] == ["a", "b"]
    pure = [("PyYAML-6.0.3-py3-none-any.whl", "1" * 64), ("pyyaml-6.0.3-cp39-abi3-manylinux_2_28_aarch64.whl", "2" * 64)]
    assert len(resolve.wheel_hashes(pure, "pyyaml", "6.0.3", resolve.target_tags("3.9", "aarch64"))) == 2


class IndexDouble:
    """Stands in for the package index: every package has one aarch64 wheel per Python."""
    def __init__(self, sums: dict[str, str] | None = None):
        self.sums = sums or {}

    def files(self, project: str, only: str | None = None):
        return [(f"{project.replace('-', '_')}-{v}-cp39-cp39-manylinux2014_aarch64.whl", self.sums.get(project, "9" * 64))
                for v in ("1.26.4", "1.13.1", "6.0.3", "2.1.0", "3.19.1", "3.20.3", "2.1.0.post8")]


def test_a_lock_is_three_hash_checked_files_that_record_their_inputs(tmp_path, monkeypatch):
    m = _matrix(tmp_path)
    huawei = locks.huawei_sums(m, m.stacks["2.1.0"], "3.9", "aarch64")
    monkeypatch.setattr(resolve, "compile_cell", lambda *a: resolve.parse_compiled(UV_OUTPUT))
    monkeypatch.setattr(resolve, "uv_version", lambda: "uv 0.0 (double)")
    index = IndexDouble({"torch": huawei["torch"], "torch-npu": "8" * 64})   # torch_npu: another copy
    files = resolve.make(m, m.stacks["2.1.0"], "3.9", "aarch64", resolve.Network(), index)
    assert set(files) == set(m.stacks["2.1.0"].layers)
    for text in files.values():
        assert text.startswith(locks.HEADER) and "--require-hashes" in text
        assert re.search(r"^# inputs: sha256:[0-9a-f]{64}$", text, re.M)
    assert "torch==2.1.0 \\\n    --hash=sha256:" + huawei["torch"] in files["torch"]
    assert "matches the sha256 Huawei publishes" in files["torch"]
    assert "Huawei's mirror copy has sha256 " + huawei["torch_npu"] in files["torch_npu"]
    assert locks.pinned_versions(files) == {"numpy": "1.26.4", "scipy": "1.13.1", "pyyaml": "6.0.3",
                                           "torch": "2.1.0", "filelock": "3.19.1", "protobuf": "3.20.3",
                                           "torch-npu": "2.1.0.post8"}


def test_no_wheel_for_the_target_is_refused_by_name(tmp_path, monkeypatch):
    m = _matrix(tmp_path)
    monkeypatch.setattr(resolve, "compile_cell", lambda *a: resolve.parse_compiled(UV_OUTPUT))

    class NoScipy(IndexDouble):
        def files(self, project, only=None):
            return [] if project == "scipy" else super().files(project)
    with pytest.raises(UserError, match=r"scipy==1.13.1: the index has no wheel for CPython 3.9 on aarch64"):
        resolve.make(m, m.stacks["2.1.0"], "3.9", "aarch64", resolve.Network(), NoScipy())


def test_torch_npu_not_on_the_index_is_locked_to_huaweis_sum(tmp_path, monkeypatch):
    m = _matrix(tmp_path)
    seen = {}
    monkeypatch.setattr(resolve, "compile_cell", lambda *a: seen.setdefault("out", resolve.parse_compiled(
        UV_OUTPUT.replace("torch-npu==2.1.0.post8    # via -r /tmp/x/torch_npu.in\n", ""))))
    monkeypatch.setattr(resolve, "uv_version", lambda: "uv 0.0 (double)")
    files = resolve.make(m, m.stacks["1.11.0"], "3.9", "aarch64", resolve.Network(), IndexDouble())
    sha = locks.huawei_sums(m, m.stacks["1.11.0"], "3.9", "aarch64")["torch_npu"]
    assert f"torch-npu==1.11.0.post11 \\\n    --hash=sha256:{sha}" in files["torch_npu"]


def _write(root: Path, stack: str, python: str, arch: str, digest: str, body: str = "numpy==1.0 --hash=sha256:" + "a" * 64):
    where = locks.folder(root, stack, python, arch)
    where.mkdir(parents=True)
    for layer in TORCH_LAYERS:
        (where / f"{layer}.txt").write_text(f"{locks.HEADER}\n# inputs: sha256:{digest}\n--require-hashes\n{body}\n")
    return where


def test_a_stale_lock_is_refused_with_the_command_that_remakes_it(tmp_path):
    m = _matrix(tmp_path)
    cell = m.cell("2.1.0", "debian12", "3.11")
    _write(tmp_path, "2.1.0", "3.11", "aarch64", locks.inputs_digest(m, m.stacks["2.1.0"], "3.11", "aarch64"))
    assert locks.for_cell(m, cell, tmp_path).packages[0].name == "numpy"
    bumped = _matrix(tmp_path, committed_matrix_text().replace(
        'pins: {protobuf: "==3.20.3", numpy: "<2"}      # new protobuf', 'pins: {protobuf: "==3.20.2", numpy: "<2"}  #', 1))
    with pytest.raises(UserError, match=r"locks/2.1.0/py3.11-aarch64 is stale.*invoke lock --torch 2.1.0 --python 3.11"):
        locks.for_cell(bumped, bumped.cell("2.1.0", "debian12", "3.11"), tmp_path)


def test_check_all_names_stale_broken_orphaned_and_missing_locks(tmp_path):
    m = _matrix(tmp_path)
    _write(tmp_path, "2.1.0", "3.9", "aarch64", "0" * 64)                      # stale
    half = _write(tmp_path, "2.3.1", "3.9", "aarch64", "0" * 64)
    (half / "torch.txt").unlink()                                              # broken
    _write(tmp_path, "9.9.9", "3.9", "aarch64", "0" * 64)                      # no such stack
    problems, missing = locks.check_all(m, tmp_path)
    text = "\n".join(problems)
    assert "py3.9-aarch64: stale" in text and "torch.txt: missing" in text and "no stack '9.9.9'" in text
    assert "2.10.0 / Python 3.11 / aarch64" in missing


def test_select_takes_missing_and_stale_cells_and_update_only_the_stale(tmp_path):
    m = _matrix(tmp_path)
    stack = m.stacks["2.1.0"]
    _write(tmp_path, "2.1.0", "3.9", "aarch64", locks.inputs_digest(m, stack, "3.9", "aarch64"))   # current
    _write(tmp_path, "2.1.0", "3.10", "aarch64", "0" * 64)                                        # stale
    picked = locks.select(m, tmp_path, ["2.1.0"], [], ["linux/arm64"], refresh=False)
    assert picked == [("2.1.0", p, "aarch64") for p in stack.pythons() if p != "3.9"]
    assert locks.select(m, tmp_path, ["2.1.0"], [], ["linux/arm64"], False, existing_only=True) == [
        ("2.1.0", "3.10", "aarch64")]
    assert len(locks.select(m, tmp_path, ["2.1.0"], [], ["linux/arm64"], refresh=True)) == len(stack.pythons())
    with pytest.raises(UserError, match="unknown stack '2.0'"):
        locks.select(m, tmp_path, ["2.0"], [], ["linux/arm64"], False)


def test_a_given_wheel_replaces_the_release_and_keeps_hash_checking(tmp_path):
    files = {layer: f"{locks.HEADER}\n--require-hashes\n" for layer in TORCH_LAYERS}
    files["torch_npu"] += "torch-npu==2.1.0.post8 \\\n    --hash=sha256:" + "a" * 64 + "\nsix==1.0 --hash=sha256:" + "b" * 64 + "\n"
    out = locks.with_wheel(files, Path("/x/torch_npu-2.1.0.post8+git1-cp39-cp39-linux_aarch64.whl"), "c" * 64,
                           "/tmp/torch_npu")
    assert "torch-npu==" not in out["torch_npu"] and "six==1.0" in out["torch_npu"]
    assert ("torch-npu @ file:///tmp/torch_npu/torch_npu-2.1.0.post8+git1-cp39-cp39-linux_aarch64.whl "
            "--hash=sha256:" + "c" * 64) in out["torch_npu"]
    assert out["cann"] == files["cann"]


def test_an_unlocked_cell_says_so_and_x86_64_takes_torch_from_the_cpu_index(tmp_path):
    m = _matrix(tmp_path)
    cell = m.cell("2.1.0", "debian12", "3.11", platform="linux/amd64")
    files = locks.unlocked(m, cell)
    assert all(text.startswith("# NOT LOCKED") for text in files.values())
    staged = locks.with_torch_index(files, torch_index.source(cell.stack, cell.arch))
    assert staged["torch"].startswith("--extra-index-url https://download.pytorch.org/whl/cpu\n")
    assert "torch==2.1.0+cpu" in staged["torch"] and staged["cann"] == files["cann"]
    assert 'numpy<2' in files["cann"] and "protobuf==3.20.3" in files["torch_npu"]


def test_committed_locks_are_current_and_cover_every_image():
    """invoke lock --check` on the repository: what CI builds is locked, and no lock is stale."""
    out = forked.invoke("lock", "--check")
    assert out.returncode == 0, out.stdout + out.stderr
    # `images:` cells without a lock (x86_64: PyTorch's CPU index is unreachable here) are named
    assert "not locked (a build needs --unlocked): 2.1.0 / Python 3.11 / x86_64" in out.stdout
    m = load_text(committed_matrix_text(), ROOT / "matrix.yaml")
    unlocked = set()
    for stack in m.stacks.values():       # every stack, every Python, on the arch 910B hosts have
        for python in stack.pythons():
            lock = locks.read(ROOT, stack, python, "aarch64")
            if lock is None:
                unlocked.add(stack.name)
                continue
            assert all(p.hashes for p in lock.packages), f"{lock.where}: an entry without a hash"
    # Every stack CI builds is locked. The 26.x stacks take torch from PyTorch's CPU index
    # (PyPI's aarch64 torch is a CUDA build from 2.11), which the machine these locks were
    # written on could not reach: they are unlocked, and not in `images:` until they are. CANN
    # 9.2.0's CANN-only stack (for Huawei's dated SWR tags) is not locked yet either.
    assert not unlocked & {spec.stack for spec in m.images}
    assert unlocked == {"2.11.0", "2.12.0", "2.13.0", "2.14.0", "2.11.0-26.1.0", "2.12.0-26.1.0", "2.10.0-26.1.0",
                        "2.10.0-26.0.1", "2.10.0-26.2.0", "cann9.2.0"}


def test_build_refuses_a_stale_lock_and_an_unlocked_cell_under_require_pins(tmp_path):
    bumped = copy_matrix(tmp_path, committed_matrix_text().replace('numpy: "<2"}      # new protobuf',
                                                                   'numpy: "<1.26"}  #', 1))
    link_locks(bumped)
    cmd = ["build", "--torch", "2.1.0", "--os", "debian12", "--dry", "--matrix", str(bumped)]
    out = forked.invoke(*cmd)
    assert out.returncode == 2 and "is stale" in out.stderr, out.stdout + out.stderr
    # the plan is shown whole (a dry run always plans), then it ends as the real run would
    assert "python packages: no lock (a real run stops here: see the end)" in out.stdout
    assert " build " in out.stdout and "from nothing: there is no lock (a real run stops here)" in out.stdout
    (tmp_path / "locks").unlink()
    out = forked.invoke(*cmd, "--require-pins")
    assert out.returncode == 3 and "has no lock and --require-pins is set" in out.stderr, out.stderr


def test_a_matrix_copied_elsewhere_takes_the_projects_lock_that_fits_it(tmp_path, checkout):
    """A copy of matrix.yaml with no locks/ beside it (`--matrix` elsewhere) built unlocked:
    pip resolved at build time, and an unlocked MindSpore build made an image with two numpys.
    Now it takes the checkout's lock where that lock was made from what the copy asks (the
    same inputs digest), and says so; a copy that asks for something else has none, and is
    refused unless the build is told --unlocked."""
    same = copy_matrix(tmp_path / "same")
    cmd = ["build", "--torch", "2.1.0", "--os", "debian12", "--dry", "--matrix"]
    out = forked.invoke(*cmd, str(same), cwd=checkout)     # run where no build left ./packages
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"python packages: locked by the project's locks/2.1.0/py3.11-aarch64 (no lock beside {same}" in out.stdout
    assert "has no lock" not in out.stdout + out.stderr
    assert "# NOT LOCKED" not in out.stdout
    other = copy_matrix(tmp_path / "other", committed_matrix_text().replace('numpy: "<2"}      # new protobuf',
                                                                           'numpy: "<1.26"}  #', 1))
    out = forked.invoke(*cmd, str(other), cwd=checkout)
    assert out.returncode == 2, out.stdout + out.stderr
    assert (f"stack 2.1.0 / Python 3.11 / aarch64 has no lock (none in {other.parent}/locks/2.1.0/py3.11-aarch64; the "
            "project's locks/2.1.0/py3.11-aarch64 was made from other inputs than this matrix asks)") in out.stderr
    assert (f"invoke lock --torch 2.1.0 --python 3.11 --platform linux/arm64 --matrix {other}` makes one, or "
            "--unlocked builds it without one") in out.stderr
    assert "locked by the project's" not in out.stdout and "python packages: no lock (a real run stops" in out.stdout
    out = forked.invoke(*cmd, str(other), "--unlocked", cwd=checkout)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "has no lock: pip resolves its Python packages at build time" in out.stderr
    assert "python packages: unlocked (--unlocked)" in out.stdout and "locked by the project's" not in out.stdout


# Cells with no lock: x86_64 has none (the project locks aarch64, and x86_64 only for the
# CANN-only image podman builds natively in the suite), and a copy elsewhere of a
# MindSpore stack that asks for other numpys than the project's lock was made from (the
# newcomer's build that put two numpys in one image).
NO_LOCK = [
    (["--torch", "2.1.0", "--os", "debian12", "--python", "3.11", "--platform", "linux/amd64"],
     "stack 2.1.0 / Python 3.11 / x86_64", "invoke lock --torch 2.1.0 --python 3.11 --platform linux/amd64`"),
    (["--cann", "9.0.0", "--os", "debian12", "--python", "3.11", "--platform", "linux/amd64"],
     "stack cann9.0.0 / Python 3.11 / x86_64", "invoke lock --cann 9.0.0 --python 3.11 --platform linux/amd64`"),
    (["--mindspore", "2.9.0", "--os", "debian12", "--python", "3.11", "--matrix", "{copy}"],
     "stack mindspore2.9.0 / Python 3.11 / aarch64",
     "invoke lock --mindspore 2.9.0 --python 3.11 --platform linux/arm64 --matrix {copy}`"),
]


@pytest.mark.parametrize("select, what, command", NO_LOCK, ids=["torch-x86_64", "cann-only-x86_64", "mindspore-copy"])
def test_a_cell_without_a_lock_is_refused_unless_the_build_says_unlocked(tmp_path, select, what, command):
    from ascend_build.errors import CODE
    from tests.forked import invoke
    text = committed_matrix_text().replace('pins: {numpy: "<2"}          # mindspore 2.9.0',
                                           'pins: {numpy: "<1.27"}       # mindspore 2.9.0', 1)
    assert text != committed_matrix_text()
    copy = copy_matrix(tmp_path / "elsewhere", text)
    select = [a.replace("{copy}", str(copy)) for a in select]
    command = command.replace("{copy}", str(copy))
    env = {**os.environ, "ASCEND_BUILD_CACHE": str(tmp_path / "cache")}
    out = invoke("build", *select, "--dry", "--packages", str(tmp_path), env=env)
    assert out.returncode == UserError.exit_code == CODE[2].code == 2, out.stdout + out.stderr     # bad input
    assert f"error: {what} has no lock (none in " in out.stderr and "Traceback" not in out.stderr
    assert f"{command} makes one, or --unlocked builds it without one" in out.stderr
    # a dry run shows the whole plan, nothing of it built, and ends as the real run would
    assert "python packages: no lock (a real run stops here: see the end)" in out.stdout
    assert "# stage requirements/" in out.stdout and "from nothing: there is no lock" in out.stdout
    out = invoke("build", *select, "--dry", "--packages", str(tmp_path), "--unlocked", env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"WARNING: {what} has no lock: pip resolves its Python packages at build time" in out.stderr
    assert "(--unlocked); `" in out.stderr and f"{command} makes one" in out.stderr
    assert "python packages: unlocked (--unlocked): pip resolves them at build time" in out.stdout
    assert "the matrix's specifiers (unlocked: --unlocked)" in out.stdout
    assert "--label io.ascend-build.lock=none" in out.stdout and " tag '<built id>' " in out.stdout


def test_require_pins_and_unlocked_together_are_refused_as_contradictory(tmp_path):
    """Even for a cell that has its lock, and whether --require-pins is given or is the site's
    setting (invoke's config): a site that requires pins builds nothing unlocked."""
    from tests.forked import invoke
    select = ["build", "--torch", "2.1.0", "--os", "debian12", "--python", "3.11", "--dry"]
    out = invoke(*select, "--require-pins", "--unlocked")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "error: --require-pins and --unlocked contradict each other" in out.stderr
    assert out.stdout == "", "refused before the matrix is read"
    site = tmp_path / "site.yaml"
    site.write_text("ascend_build:\n  require_pins: true\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("INVOKE_")}
    out = invoke("-f", str(site), *select, "--unlocked", env={**env, "HOME": str(tmp_path)})
    assert out.returncode == 2 and "--require-pins and --unlocked contradict each other" in out.stderr, out.stderr
    assert "ascend_build.require_pins in invoke's config" in out.stderr and "docker" not in out.stdout


def test_the_plan_says_which_lock_with_its_package_count_also_when_quiet(tmp_path, checkout):
    """The dry run's plan (stdout, also under --quiet, as its commands are) names the lock
    folder, relative to the matrix, and how many packages it pins; a copy of the matrix
    elsewhere names the project's."""
    from tests.forked import invoke
    lock = locks.read(ROOT, load_text(committed_matrix_text(), ROOT / "matrix.yaml").stacks["2.1.0"], "3.11", "aarch64")
    assert lock is not None and len(lock.packages) > 10
    select = ["build", "--torch", "2.1.0", "--os", "debian12", "--python", "3.11", "--dry", "--quiet"]
    out = invoke(*select, cwd=checkout)     # the checkout's matrix.yaml, with no ./packages a build left
    assert out.returncode == 0, out.stdout + out.stderr
    said = f"python packages: locked by locks/2.1.0/py3.11-aarch64 ({len(lock.packages)} packages, sha256-checked)"
    assert said in out.stdout.splitlines(), out.stdout
    beside = link_locks(copy_matrix(tmp_path / "beside"))
    out = invoke(*select, "--matrix", str(beside), cwd=checkout)
    assert said in out.stdout.splitlines(), out.stdout
    elsewhere = copy_matrix(tmp_path / "elsewhere")
    out = invoke(*select, "--matrix", str(elsewhere), cwd=checkout)
    assert (f"python packages: locked by the project's locks/2.1.0/py3.11-aarch64 (no lock beside {elsewhere}; that "
            f"one was made from what this matrix asks) ({len(lock.packages)} packages, sha256-checked)") in out.stdout


def test_a_stale_lock_is_remade_preferring_its_versions_unless_refreshed(tmp_path, monkeypatch):
    """A new companion or pin should move only what it must: the old lock's versions are
    the resolver's preferences; `invoke lock --refresh` (upgrade) asks for none."""
    m = _matrix(tmp_path)
    _write(tmp_path, "2.1.0", "3.9", "aarch64", "0" * 64, "scipy==1.10.0 --hash=sha256:" + "a" * 64)
    seen = []
    monkeypatch.setattr(resolve, "compile_cell", lambda *a: seen.append(a[5]) or resolve.parse_compiled(UV_OUTPUT))
    monkeypatch.setattr(resolve, "uv_version", lambda: "uv 0.0 (double)")
    monkeypatch.setattr(resolve, "Index", lambda *a, **k: IndexDouble())
    resolve.lock(m, tmp_path, [("2.1.0", "3.9", "aarch64")], resolve.Network(), write=False)
    resolve.lock(m, tmp_path, [("2.1.0", "3.9", "aarch64")], resolve.Network(), write=False, upgrade=True)
    assert seen == [{"scipy": "1.10.0"}, None]


def test_stacks_that_need_the_same_cann_packages_give_pip_the_same_bytes():
    """The committed locks of 2.1.0-cann8.0.0, 2.3.1 and 2.4.0 (one CANN) differ in their
    cann layer only by the comments naming the stack: what pip reads (and the build's
    layer cache keys) is the same, with every entry and hash kept; different packages
    stay different."""
    texts = [(ROOT / "locks" / s / "py3.11-aarch64" / "cann.txt").read_text() for s in ("2.1.0-cann8.0.0", "2.3.1", "2.4.0")]
    assert len(set(texts)) == 3
    read = [locks.pip_text(t) for t in texts]
    assert len(set(read)) == 1 and "#" not in read[0]
    assert locks._entries(read[0]) == locks._entries(texts[0]) and "--hash=sha256:" in read[0]
    torch = [(ROOT / "locks" / s / "py3.11-aarch64" / "torch.txt").read_text() for s in ("2.3.1", "2.4.0")]
    assert locks.pip_text(torch[0]) != locks.pip_text(torch[1])
    # A comment inside a continued entry is pip's to read, so it stays.
    assert locks.pip_text("# x\na==1 \\\n# kept\n\nb==2\n") == "a==1 \\\n# kept\nb==2\n"


def test_huaweis_wheel_for_another_arch_under_an_any_tag_is_left_out(tmp_path, monkeypatch):
    """An index may serve Huawei's wheel for one arch under a tag for any platform (PyPI's
    MindSpore aarch64 wheels are `none-any`, byte for byte Huawei's `linux_aarch64`): the
    other arch's lock leaves that file out and says why."""
    m = _matrix(tmp_path)
    x86 = locks.huawei_sums(m, m.stacks["2.1.0"], "3.9", "x86_64")["torch_npu"]

    class AnyTagged(IndexDouble):
        def files(self, project: str, only: str | None = None):
            found = super().files(project)
            if project == "torch-npu":
                found.append(("torch_npu-2.1.0.post8-cp39-none-any.whl", x86))
            return found

    monkeypatch.setattr(resolve, "compile_cell", lambda *a: resolve.parse_compiled(UV_OUTPUT))
    monkeypatch.setattr(resolve, "uv_version", lambda: "uv 0.0 (double)")
    files = resolve.make(m, m.stacks["2.1.0"], "3.9", "aarch64", resolve.Network(), AnyTagged())
    assert x86 not in files["torch_npu"]
    assert (f"torch-npu 2.1.0.post8: torch_npu-2.1.0.post8-cp39-none-any.whl is Huawei's x86_64 wheel "
            f"(sha256 {x86[:12]}...) under a tag for any platform: left out of this aarch64 lock") in files["torch_npu"]
    assert "--hash=sha256:" + "9" * 64 in files["torch_npu"]      # the aarch64 wheel stays
