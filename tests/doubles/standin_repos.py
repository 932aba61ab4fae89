"""STAND-IN upstream repositories (test double) made from tests/doubles: a torch_npu
repository whose release tag and release branch build different versions (as upstream's
do: the branch moves on after the release), with an op-plugin submodule of its own, and
the ways a site hands them over offline (a checkout, a bundle, a tarball)."""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

DOUBLES = Path(__file__).parent
TAG = "v6.0.rc3-pytorch2.1.0"            # builds 2.1.0.post8, as upstream's tag
BRANCH = "v2.1.0-6.0.rc3"                # moved on: builds 2.1.0.post9
SUBMODULE = "third_party/op-plugin"


def git(*args: str, cwd: Path) -> str:
    env = {"GIT_AUTHOR_NAME": "standin", "GIT_AUTHOR_EMAIL": "standin@example.invalid",
           "GIT_COMMITTER_NAME": "standin", "GIT_COMMITTER_EMAIL": "standin@example.invalid",
           "GIT_AUTHOR_DATE": "2024-09-30T00:00:00Z", "GIT_COMMITTER_DATE": "2024-09-30T00:00:00Z",
           "PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    out = subprocess.run(["git", "-c", "init.defaultBranch=master", "-c", "protocol.file.allow=always", *args],
                         cwd=cwd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {out.stderr}")
    return out.stdout.strip()


def set_version(tree: Path, version: str) -> None:
    setup = tree / "setup.py"
    setup.write_text(setup.read_text().replace("VERSION = '2.1.0.post8'", f"VERSION = '{version}'"))


def plain_tree(dest: Path, version: str | None = None, nlohmann: bool = False) -> Path:
    """The stand-in torch_npu as a plain tree, op-plugin in its submodule folder (and from
    the 2.10 line a stand-in nlohmann folder, the other submodule those tags compile)."""
    shutil.copytree(DOUBLES / "torch_npu_src", dest)
    shutil.copytree(DOUBLES / "op_plugin_src", dest / SUBMODULE)
    if nlohmann:
        header = dest / "third_party" / "nlohmann" / "include" / "nlohmann" / "json.hpp"
        header.parent.mkdir(parents=True)
        header.write_text("// STAND-IN nlohmann/json.hpp (test double)\n")
    if version:
        set_version(dest, version)
    return dest


@dataclass(frozen=True)
class Repos:
    torch_npu: Path          # a bare-like repository to clone from (file://)
    op_plugin: Path
    tag_commit: str
    branch_commit: str
    op_plugin_commit: str

    @property
    def url(self) -> str:
        return f"file://{self.torch_npu}"


def make_repos(root: Path) -> Repos:
    """The two repositories: op-plugin with one commit; torch_npu with the release tag
    (2.1.0.post8, op-plugin as a submodule) and the branch one commit later (2.1.0.post9)."""
    op = root / "op-plugin"
    shutil.copytree(DOUBLES / "op_plugin_src", op)
    git("init", "-q", cwd=op)
    git("add", "-A", cwd=op)
    git("commit", "-q", "-m", "op-plugin stand-in", cwd=op)
    op_commit = git("rev-parse", "HEAD", cwd=op)

    repo = root / "pytorch"
    shutil.copytree(DOUBLES / "torch_npu_src", repo)
    git("init", "-q", cwd=repo)
    (repo / ".gitmodules").write_text(f'[submodule "{SUBMODULE}"]\n\tpath = {SUBMODULE}\n\turl = file://{op}\n')
    git("add", "-A", cwd=repo)
    git("update-index", "--add", "--cacheinfo", f"160000,{op_commit},{SUBMODULE}", cwd=repo)
    (repo / SUBMODULE).mkdir()          # an uninitialized submodule's folder: empty, not deleted
    git("commit", "-q", "-m", "release", cwd=repo)
    git("tag", "-a", TAG, "-m", "release", cwd=repo)
    tag_commit = git("rev-parse", "HEAD", cwd=repo)
    git("checkout", "-q", "-b", BRANCH, cwd=repo)
    set_version(repo, "2.1.0.post9")
    git("commit", "-q", "-am", "moved on", cwd=repo)
    branch_commit = git("rev-parse", "HEAD", cwd=repo)
    git("checkout", "-q", "master", cwd=repo)
    return Repos(repo, op, tag_commit, branch_commit, op_commit)


def checkout(repos: Repos, dest: Path, ref: str = TAG, submodules: bool = True) -> Path:
    """A site's checkout of `ref`, with or without its submodule."""
    git("clone", "-q", repos.url, str(dest), cwd=dest.parent)
    git("-c", "advice.detachedHead=false", "checkout", "-q", ref, cwd=dest)
    if submodules:
        git("submodule", "update", "--init", "-q", SUBMODULE, cwd=dest)
    return dest


def bundle(repo: Path, dest: Path) -> Path:
    git("bundle", "create", str(dest), "--all", cwd=repo)
    return dest


def tarball(repo: Path, commit: str, dest: Path, prefix: str) -> Path:
    """`git archive` of one commit, as GitHub's source tarballs are (the commit in its header)."""
    git("archive", "--format=tar.gz", f"--prefix={prefix}/", "-o", str(dest), commit, cwd=repo)
    return dest


# ---------------------------------------------------------------------------- apex

@dataclass(frozen=True)
class Apex:
    tree: Path               # Ascend apex stand-in, its build script pinned at the NVIDIA commit
    nvidia: Path             # the NVIDIA apex stand-in repository
    nvidia_commit: str


def make_apex(root: Path) -> Apex:
    nvidia = root / "nvidia-apex"
    shutil.copytree(DOUBLES / "nvidia_apex_src", nvidia)
    git("init", "-q", cwd=nvidia)
    git("add", "-A", cwd=nvidia)
    git("commit", "-q", "-m", "nvidia apex stand-in", cwd=nvidia)
    commit = git("rev-parse", "HEAD", cwd=nvidia)
    git("commit", "-q", "--allow-empty", "-m", "moved on", cwd=nvidia)      # the pin is not the head
    tree = root / "apex"
    shutil.copytree(DOUBLES / "apex_src", tree)
    script = tree / "scripts" / "build.sh"
    script.write_text(script.read_text().replace("@NVIDIA_COMMIT@", commit))
    return Apex(tree, nvidia, commit)
