"""Source trees as a site hands them over (a checkout, bundles, tarballs, a clone), each
checked against the release it must be before anything compiles; release tags imported
from a git copy; where a long build is; the offline flags a tree's script takes."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ascend_build.errors import UserError
from ascend_build.images.progress import Progress
from ascend_build.images.sources import SOURCE_KINDS, default_source, expected, offline_settings
from ascend_build.inputs.trees import Checkout, Expected, checkout
from ascend_build.matrix import load_matrix
from ascend_build.matrix.yamlsource import safe_load
from ascend_build.upstream import pytorch_git
from tests.conftest import copy_matrix
from tests.doubles import standin_repos as sr

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def repos(tmp_path_factory) -> sr.Repos:
    return sr.make_repos(tmp_path_factory.mktemp("upstream"))


def release(repos: sr.Repos) -> Expected:
    return Expected(f"torch_npu 2.1.0.post8 (tag {sr.TAG})", repos.tag_commit, "2.1.0.post8",
                    {sr.SUBMODULE: repos.op_plugin_commit})


def test_a_checkout_of_the_tag_with_its_submodule_is_the_release(repos, tmp_path):
    tree = sr.checkout(repos, tmp_path / "co")
    got = checkout(str(tree), None, tmp_path / "cache", release(repos))
    assert got.path == tree.resolve()
    # the wheel cache key covers the submodule's commit
    assert got.revision == f"{repos.tag_commit}+{sr.SUBMODULE}@{repos.op_plugin_commit}"


def test_the_release_branch_is_refused_before_compiling(repos, tmp_path):
    tree = sr.checkout(repos, tmp_path / "co", ref=sr.BRANCH)
    with pytest.raises(UserError, match=rf"is commit {repos.branch_commit[:12]}, not torch_npu 2.1.0.post8 "
                                        rf"\(tag {sr.TAG}\), which is commit {repos.tag_commit[:12]}"):
        checkout(str(tree), None, tmp_path / "cache", release(repos))


def test_a_plain_tree_of_another_version_is_refused(tmp_path):
    tree = sr.plain_tree(tmp_path / "t", version="2.1.0.post9")
    with pytest.raises(UserError, match=r"builds torch_npu 2.1.0.post9, not 2.1.0.post8"):
        checkout(str(tree), None, tmp_path / "cache", Expected("torch_npu 2.1.0.post8", None, "2.1.0.post8",
                                                              {sr.SUBMODULE: "0" * 40}))


def test_a_missing_submodule_is_refused_naming_its_commit_and_source(repos, tmp_path):
    tree = sr.checkout(repos, tmp_path / "co", submodules=False)
    with pytest.raises(UserError) as e:
        checkout(str(tree), None, tmp_path / "cache", release(repos))
    said = str(e.value)
    assert f"{sr.SUBMODULE} is missing or empty" in said and repos.op_plugin_commit in said
    assert f"file://{repos.op_plugin}" in said and "git submodule update --init" in said


def test_a_submodule_at_another_commit_is_refused(repos, tmp_path):
    tree = sr.checkout(repos, tmp_path / "co")
    want = Expected("torch_npu 2.1.0.post8", repos.tag_commit, "2.1.0.post8", {sr.SUBMODULE: "1" * 40})
    with pytest.raises(UserError, match=rf"{sr.SUBMODULE} .* is commit {repos.op_plugin_commit[:12]}, but .* needs 1111"):
        checkout(str(tree), None, tmp_path / "cache", want)


def test_bundles_make_the_tree_offline(repos, tmp_path):
    top = sr.bundle(repos.torch_npu, tmp_path / "pytorch.bundle")
    sub = sr.bundle(repos.op_plugin, tmp_path / "op-plugin.bundle")
    got = checkout(str(top), None, tmp_path / "cache", release(repos), [sub])
    assert (got.path / sr.SUBMODULE / "op_plugin" / "ops" / "ops.cpp").is_file()
    assert got.revision == f"{repos.tag_commit}+{sr.SUBMODULE}@{repos.op_plugin_commit}"
    again = checkout(str(top), None, tmp_path / "cache", release(repos), [sub])
    assert again.path == got.path                      # made once, then reused


def test_tarballs_are_checked_by_the_commit_git_archive_recorded(repos, tmp_path):
    top = sr.tarball(repos.torch_npu, repos.tag_commit, tmp_path / "pytorch.tar.gz", "pytorch-6.0.rc3")
    sub = sr.tarball(repos.op_plugin, repos.op_plugin_commit, tmp_path / "op-plugin.tar.gz", "op-plugin")
    got = checkout(str(top), None, tmp_path / "cache", release(repos), [sub])
    assert (got.path / "setup.py").is_file() and (got.path / sr.SUBMODULE / "op_plugin").is_dir()
    assert got.revision == f"{repos.tag_commit}+{sr.SUBMODULE}@{repos.op_plugin_commit}"
    branch = sr.tarball(repos.torch_npu, repos.branch_commit, tmp_path / "branch.tar.gz", "pytorch")
    with pytest.raises(UserError, match=rf"is commit {repos.branch_commit[:12]}, not {repos.tag_commit[:12]}"):
        checkout(str(branch), None, tmp_path / "cache2", release(repos), [sub])


def test_a_tarball_without_its_submodule_is_refused(repos, tmp_path):
    top = sr.tarball(repos.torch_npu, repos.tag_commit, tmp_path / "pytorch.tar.gz", "pytorch")
    with pytest.raises(UserError, match=rf"{sr.SUBMODULE} is missing or empty .* {repos.op_plugin_commit}"):
        checkout(str(top), None, tmp_path / "cache", release(repos))


def test_online_the_clone_takes_the_submodule_at_its_pinned_commit(repos, tmp_path):
    got = checkout(repos.url, sr.TAG, tmp_path / "cache", release(repos))
    assert got.revision == f"{repos.tag_commit}+{sr.SUBMODULE}@{repos.op_plugin_commit}"
    assert (got.path / sr.SUBMODULE / "op_plugin" / "config" / "ops.yaml").is_file()


def test_the_release_tags_are_imported_from_a_git_copy(repos):
    records, notes = pytorch_git.read_tags(repos.torch_npu / ".git", [sr.SUBMODULE, "third_party/nlohmann"],
                                           ["--disable_torchair", "--disable_rpc", "--disable_nothing"])
    assert set(records) == {"2.1.0.post8"}        # the branch's 2.1.0.post9 is no release
    r = records["2.1.0.post8"]
    assert (r.tag, r.commit) == (sr.TAG, repos.tag_commit)
    assert r.submodules == {sr.SUBMODULE: repos.op_plugin_commit}
    assert r.flags == ("--disable_torchair", "--disable_rpc")


def test_invoke_update_writes_the_tags_into_a_matrix(repos, tmp_path):
    path = copy_matrix(tmp_path / "m")
    hand = path.read_bytes()
    imported, before, text, notes = pytorch_git.update(path, str(repos.torch_npu))
    assert imported == path.parent / "imported.yaml" and before == imported.read_text() and text != before
    tags = safe_load(text)["torch_npu_tags"]
    assert tags["tags"]["2.1.0.post8"] == {"tag": sr.TAG, "commit": repos.tag_commit,
                                          "submodules": {sr.SUBMODULE: repos.op_plugin_commit},
                                          "flags": ["--disable_torchair", "--disable_rpc"]}
    assert tags["source"] == "a copy of https://github.com/Ascend/pytorch.git"     # no path of this machine
    assert str(tmp_path) not in text
    # Only the tags change: the rest of the imported facts, and matrix.yaml, as they were.
    assert {k: v for k, v in safe_load(text).items() if k != "torch_npu_tags"} == \
        {k: v for k, v in safe_load(before).items() if k != "torch_npu_tags"}
    imported.write_text(text)
    assert path.read_bytes() == hand
    m = load_matrix(path)
    assert m.torch_npu_tags["2.1.0.post8"].commit == repos.tag_commit
    assert default_source(m, "torch_npu", m.stacks["2.1.0"]) == ("https://github.com/Ascend/pytorch.git", sr.TAG)
    assert expected(m, "torch_npu", m.stacks["2.1.0"]).submodules == {sr.SUBMODULE: repos.op_plugin_commit}
    assert any("stacks' torch_npu with a tag: 1 of" in n for n in notes)


def test_a_stack_whose_release_no_tag_builds_is_refused():
    m = load_matrix(ROOT / "matrix.yaml")
    missing = next(st for st in m.stacks.values() if st.torch and st.package not in m.torch_npu_tags)
    with pytest.raises(UserError, match=r"no release tag builds torch_npu .*Pass --src"):
        default_source(m, "torch_npu", missing)


def test_the_committed_tags_name_the_release_not_the_branch():
    m = load_matrix(ROOT / "matrix.yaml")
    assert m.torch_npu_tags["2.1.0.post8"].tag == "v6.0.rc3-pytorch2.1.0"
    assert m.torch_npu_tags["2.1.0.post8"].commit.startswith("1fa937ac")
    assert default_source(m, "torch_npu", m.stacks["2.1.0"])[1] == "v6.0.rc3-pytorch2.1.0"


def test_offline_flags_only_where_the_tree_takes_them(tmp_path):
    m = load_matrix(ROOT / "matrix.yaml")
    tree = sr.plain_tree(tmp_path / "t")
    flags, env, said = offline_settings(m, SOURCE_KINDS["torch_npu"], Checkout(tree, "x", "x"))
    assert flags == ["--disable_torchair", "--disable_rpc"] and env == {"BUILD_WITHOUT_SHA": "1"}
    (tree / "ci" / "build.sh").write_text("#!/bin/bash\n# an old tag: --python only\n")
    flags, _, said = offline_settings(m, SOURCE_KINDS["torch_npu"], Checkout(tree, "x", "x"))
    assert flags == [] and "has none of --disable_torchair --disable_rpc" in said[0]
    assert offline_settings(m, SOURCE_KINDS["apex"], Checkout(tree, "x", "x")) == ([], {}, [])


def test_progress_counts_files_estimates_and_quotes_the_first_error():
    now = [0.0]
    p = Progress("torch_npu", every=2, clock=lambda: now[0])
    assert p.feed("-- Configuring done\n") is None
    now[0] = 60.0
    assert p.feed("[  1%] Building CXX object CMakeFiles/torch_npu.dir/a.cpp.o\n") is None
    now[0] = 120.0
    said = p.feed("[  2%] Building CXX object CMakeFiles/torch_npu.dir/b.cpp.o\n")
    assert said == "torch_npu: 2 files of about 100 (2%), 2 min 00 s elapsed, about 98 min 00 s left"
    assert p.feed("x.cpp:3:1: error: expected ';' before '}' token\n").startswith("x.cpp:3:1: error")
    p.feed("/work/y.cpp:9: error: another\n")
    assert p.first_error == "x.cpp:3:1: error: expected ';' before '}' token"
    p.feed("cache hit (direct)                     7\n")
    p.feed("cache hit (preprocessed)               3\n")
    assert p.summary().endswith("ccache hits 10")


def test_what_is_left_follows_the_recent_pace_not_the_slow_first_files():
    now = [0.0]
    p = Progress("torch_npu", every=1000, clock=lambda: now[0])
    for i in range(1, 61):
        now[0] = i * 60.0 if i <= 30 else 1800.0 + (i - 30) * 6.0     # a minute a file, then 6 s
        p.feed(f"[{i // 2:3d}%] Building CXX object f{i}.cpp.o\n")
    # 60 of about 200 files in 33 min: 140 left at the last 25 files' 6 s each (14 min),
    # not at the mean since the start (33 s: 77 min)
    assert p.line() == "torch_npu: 60 files of about 200 (30%), 33 min 00 s elapsed, about 14 min 00 s left"


def test_a_built_wheel_of_another_version_is_refused(tmp_path):
    from ascend_build.errors import BuildFailed
    from ascend_build.images.sources import check_version
    want = Expected("torch_npu 2.1.0.post8 (tag v6.0.rc3-pytorch2.1.0)", "1" * 40, "2.1.0.post8")
    check_version(SOURCE_KINDS["torch_npu"], tmp_path / "torch_npu-2.1.0.post8-cp39-cp39-linux_aarch64.whl", want)
    with pytest.raises(BuildFailed, match=r"made torch_npu-2.1.0.post8\+git1fa937a-cp39.*version 2.1.0.post8\+git1fa937a, "
                                          r"but the stack's is 2.1.0.post8"):
        check_version(SOURCE_KINDS["torch_npu"], tmp_path / "torch_npu-2.1.0.post8+git1fa937a-cp39-cp39-linux_aarch64.whl",
                      want)


def test_apex_takes_nvidia_apex_from_the_site_and_refuses_what_cannot_be_checked_out(tmp_path):
    from ascend_build.images.sources import apex_inputs, check_python
    m = load_matrix(ROOT / "matrix.yaml")
    apex = sr.make_apex(tmp_path / "up")
    bcell = m.builder_cell("2.1.0", "debian11")
    src = Checkout(apex.tree, "x", "x")
    got = apex_inputs(m, src, [apex.nvidia], tmp_path / "cache", bcell)
    assert (apex.nvidia / ".git", "/nvidia-apex.git") in [(p, i) for p, i in got.mounts]
    assert "url./nvidia-apex.git.insteadOf https://github.com/NVIDIA/apex.git" in got.script
    # as Ascend apex 5.0.0's, the stand-in's setup.py compiles against torch alone: no torch_npu
    assert "torch_npu" not in got.script and "torch_npu" not in got.key
    assert apex.nvidia_commit in got.key
    # up to 0027c91 its patch added torch_npu/include: then the released one (none built here)
    patch = apex.tree / "patch" / "npu.patch"
    patch.write_text(patch.read_text() + "+    temp_include_dirs.append(os.path.join(package_dir, 'torch_npu/include'))\n")
    older = apex_inputs(m, src, [apex.nvidia], tmp_path / "cache", bcell)
    assert "pip install --no-cache-dir --no-deps torch_npu==2.1.0.post8" in older.script
    assert "torch_npu=2.1.0.post8" in older.key and older.key != got.key
    bundle = sr.bundle(apex.nvidia, tmp_path / "nvidia.bundle")
    from_bundle = apex_inputs(m, src, [bundle], tmp_path / "cache", bcell).mounts[0][0]
    assert from_bundle.is_relative_to(tmp_path / "cache" / "sources")
    assert sr.git("--git-dir", str(from_bundle), "cat-file", "-t", apex.nvidia_commit, cwd=tmp_path) == "commit"
    archive = sr.tarball(apex.nvidia, apex.nvidia_commit, tmp_path / "nvidia.tar.gz", "apex")
    with pytest.raises(UserError, match="must be a git bundle or a checkout"):
        apex_inputs(m, src, [archive], tmp_path / "cache", bcell)
    with pytest.raises(UserError, match=f"has no commit {apex.nvidia_commit}"):
        apex_inputs(m, src, [_without(apex, tmp_path)], tmp_path / "cache", bcell)
    check_python(SOURCE_KINDS["apex"], src, "3.9")
    check_python(SOURCE_KINDS["apex"], src, "3.10")
    with pytest.raises(UserError, match=r"builds for Python 3.7 3.8 3.9 3.10, not 3.11"):
        check_python(SOURCE_KINDS["apex"], src, "3.11")


def _without(apex: sr.Apex, tmp_path: Path) -> Path:
    """A repository of NVIDIA apex that lacks the pinned commit: a fresh one, one commit."""
    repo = tmp_path / "fresh"
    shutil.copytree(apex.nvidia, repo, ignore=shutil.ignore_patterns(".git"))
    (repo / "README.md").write_text("another history\n")
    sr.git("init", "-q", cwd=repo)
    sr.git("add", "-A", cwd=repo)
    sr.git("commit", "-qm", "other", cwd=repo)
    return repo


def test_a_checkout_changed_after_the_tag_is_not_the_release(repos, tmp_path, capsys):
    """Finding (#50): a checkout at the tag with an edited setup.py and an extra file in the
    op-plugin submodule passed as the release and got its revision, the wheel cache's key: the
    edited build would later be served as Huawei's. Now its key is its content, marked
    modified, and the build says so; the clean checkout keeps the release's key."""
    tree = sr.checkout(repos, tmp_path / "co")
    clean = checkout(str(tree), None, tmp_path / "cache", release(repos)).revision
    (tree / "setup.py").write_text((tree / "setup.py").read_text() + "\n# edited\n")
    (tree / sr.SUBMODULE / "extra.cpp").write_text("int extra;\n")
    changed = checkout(str(tree), None, tmp_path / "cache", release(repos))
    assert changed.revision != clean and changed.revision.startswith(f"{repos.tag_commit}+modified-")
    said = capsys.readouterr()
    assert "changed since its commits (2: setup.py, " in said.out + said.err and "extra.cpp" in said.out + said.err
    (tree / sr.SUBMODULE / "extra.cpp").unlink()
    (tree / "setup.py").write_text((tree / "setup.py").read_text().replace("\n# edited\n", ""))
    assert checkout(str(tree), None, tmp_path / "cache", release(repos)).revision == clean
