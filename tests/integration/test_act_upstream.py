"""The upstream watch, run: .github/workflows/upstream.yml's job executed by act (as
test_act.py runs images.yml), with this machine as the self-hosted runner.

The job checks imported.yaml against Huawei's published data: the ascend-deployer releases
and the torch_npu and MindSpore pages on PyPI, and Ascend's documents, which under act
come from their committed snapshot (tests/data/upstream-docs; GitHub is not reachable
here). PyPI moves on its own, so whether the check passes today is not this test's point:
the job must give the verdict `invoke update --check` gives when run by hand on the same
commit, with the same summary. And a planted change (a torch_npu pairing taken out of
imported.yaml, as if the file were behind Huawei's data) must fail the job, naming it."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.integration.conftest import ROOT
from tests.integration.test_act import act_exe, git, pinned_actions

WORKFLOW = ROOT / ".github" / "workflows" / "upstream.yml"
DOCS = "tests/data/upstream-docs"
JOB = "Is imported.yaml current with Huawei's data"


def by_hand(repo: Path) -> subprocess.CompletedProcess:
    """The job's check, run in the clone as a maintainer would."""
    return subprocess.run([sys.executable, "-m", "invoke", "update", "--check", "--from-docs", DOCS], cwd=repo,
                          capture_output=True, text=True, timeout=600, env={**os.environ, **cache_env(repo)})


def cache_env(repo: Path) -> dict[str, str]:
    """One download cache for the module's four checks (by hand and under act, each act run
    with a HOME of its own): the first reads each vLLM-Ascend sdist from the index, the
    others what it kept by the sdist's sum (pypi.cached_sdist_files), as a maintainer's
    second run does."""
    return {"ASCEND_BUILD_CACHE": str(repo.parent / "cache")}


def run_job(repo: Path, top: Path) -> subprocess.CompletedProcess:
    home = top / "home"
    home.mkdir(parents=True)
    event = top / "event.json"
    event.write_text(json.dumps({"act": True}))
    env_file = top / "runner.env"
    env_file.write_text(f"ACTION_DOUBLE_REPOSITORY={repo}\n" + "".join(f"{k}={v}\n" for k, v in cache_env(repo).items()))
    cmd = [str(act_exe()), "workflow_dispatch", "--workflows", str(WORKFLOW.relative_to(ROOT)), "--job", "check",
           "--eventpath", str(event), "--env-file", str(env_file), "-P", "ubuntu-24.04=-self-hosted",
           "--action-offline-mode", "--no-skip-checkout", "--no-cache-server", "--action-cache-path", str(top / "act")]
    for ref, folder in pinned_actions().items():
        cmd += ["--local-repository", f"{ref}={folder}"]
    out = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=900,
                         env={**os.environ, "HOME": str(home),
                              "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    (top / "act.log").write_text(out.stdout + out.stderr)
    return out


def summary(text: str) -> list[str]:
    """The check's own lines (act prefixes each with the job and `|`)."""
    lines = [line.split("|", 1)[1].strip() if "|" in line else line.strip() for line in text.splitlines()]
    return [line for line in lines if re.match(r"(\S*imported\.yaml: |[+~-] |conflicts between sources: |"
                                               r"Ascend documents read: |deployer releases read: )", line)]


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("act-upstream") / "repo"
    git(repo.parent, "clone", "--quiet", str(ROOT), str(repo))
    return repo


def test_the_job_gives_the_checks_own_verdict(clone, tmp_path, record_property):
    hand = by_hand(clone)
    assert hand.returncode in (0, 1), hand.stdout[-3000:] + hand.stderr[-3000:]     # current, or news
    out = run_job(clone, tmp_path)
    record_property("shown", "upstream.yml under act:\n" + "\n".join(
        line.split("]", 1)[1].strip() for line in out.stdout.splitlines()
        if re.search(r"(✅|❌|🏁).*(Success - Main|Failure - Main|Job)", line)))
    succeeded = re.search(rf"\[upstream/{re.escape(JOB)} *\] 🏁  Job succeeded", out.stdout)
    assert bool(succeeded) == (hand.returncode == 0), out.stdout[-6000:] + out.stderr[-2000:]
    assert "Ascend documents read: 6" in out.stdout, "the committed snapshot of Ascend's documents was read"
    assert summary(out.stdout) == summary(hand.stdout), out.stdout[-6000:]


def test_imported_yaml_behind_huaweis_data_fails_the_job(clone, tmp_path):
    """A pairing Huawei's data holds, taken out of imported.yaml in a commit of the clone:
    the check wants it back, and the job fails, saying so."""
    path = clone / "imported.yaml"
    release = "1.11.0.post14"          # CANN 8.0.RC2's, in the deployer's data; no stack takes it
    assert yaml.safe_load(path.read_text())["torch_npu_releases"][release]["cann"] == ["8.0.RC2"]
    text, count = re.subn(rf"(?m)^  {re.escape(release)}:(\n    .*)+\n", "", path.read_text())
    assert count == 1, release
    path.write_text(text)
    git(clone, "commit", "--quiet", "-am", f"imported.yaml without torch_npu {release}")
    hand = by_hand(clone)
    assert hand.returncode == 1 and "imported.yaml: would change" in hand.stdout, hand.stdout[-3000:]
    assert f"+ torch_npu {release}: CANN 8.0.RC2" in summary(hand.stdout), hand.stdout[-3000:]
    out = run_job(clone, tmp_path)
    assert re.search(rf"\[upstream/{re.escape(JOB)} *\] 🏁  Job failed", out.stdout), out.stdout[-6000:]
    assert summary(out.stdout) == summary(hand.stdout)
