"""CI workflow files cannot run here: validate them against the GitHub workflow schema
that check-jsonschema vendors, and check they take the image list from the matrix."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def validate(*files: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
                           *map(str, files)], capture_output=True, text=True)


def test_workflows_match_the_schema():
    assert WORKFLOWS
    out = validate(*WORKFLOWS)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_schema_check_can_fail(tmp_path):
    # One misspelt job key, the rest untouched.
    text = (ROOT / ".github/workflows/images.yml").read_text()
    assert "    runs-on: ubuntu-24.04\n" in text
    broken = tmp_path / "broken.yml"
    broken.write_text(text.replace("    runs-on: ubuntu-24.04\n", "    runs_on: ubuntu-24.04\n", 1))
    out = validate(broken)
    assert out.returncode != 0 and "runs_on" in out.stdout + out.stderr


def test_build_matrix_comes_from_invoke_ci_matrix():
    text = (ROOT / ".github/workflows/images.yml").read_text()
    assert "invoke ci-matrix" in text and "fromJSON(needs.plan.outputs.cells)" in text
    assert "invoke render" in text and "git diff --exit-code" in text and "invoke lint" in text
    # No image name from the matrix is written into the workflow.
    assert "cann8.0" not in text and "ubuntu22.04" not in text


def zizmor(*paths: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "zizmor"
    return subprocess.run([str(exe), "--offline", "--format", "json", *map(str, paths)], capture_output=True, text=True)


def test_workflows_pass_zizmor_without_suppressions():
    """Pinned actions, no `${{ }}` inside scripts, no persisted checkout credentials, the
    narrowest permissions: zizmor's offline audits find nothing, and nothing is ignored."""
    import json
    out = zizmor(*WORKFLOWS)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert json.loads(out.stdout) == []
    assert not list(ROOT.glob("zizmor.y*ml")) and not list((ROOT / ".github").glob("zizmor.y*ml"))
    assert not any("zizmor: ignore" in f.read_text() for f in WORKFLOWS)


def test_zizmor_does_find_what_it_checks(tmp_path):
    """The same audit on a workflow with a moving tag and an expansion inside a script."""
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\npermissions: {}\njobs:\n  j:\n    runs-on: ubuntu-24.04\n    permissions: {}\n"
                   "    steps:\n      - uses: actions/checkout@v4\n"
                   "      - run: echo \"${{ github.event.head_commit.message }}\"\n")
    out = zizmor(bad)
    assert out.returncode != 0
    found = {f["ident"] for f in __import__("json").loads(out.stdout)}
    assert {"unpinned-uses", "template-injection", "artipacked"} <= found, found


def test_the_image_pipeline_runs_whole_with_dry(tmp_path):
    """Every cell `invoke ci-matrix` plans gets the workflow's own build and push scripts,
    and the publish job its join, run by bash with the cell's values and every `invoke`
    made a dry run: each must succeed. A cell the pipeline cannot build (no lock for its
    arch) is left out of the plan with its reason, never handed to a job that would fail."""
    import json
    import os

    import yaml
    jobs = yaml.safe_load((ROOT / ".github/workflows/images.yml").read_text())["jobs"]
    plan = subprocess.run([sys.executable, "-m", "invoke", "ci-matrix"], cwd=ROOT, capture_output=True, text=True)
    assert plan.returncode == 0, plan.stderr
    cells = json.loads(plan.stdout)["include"]
    assert cells and all(c["platform"] == "linux/arm64" for c in cells)
    assert plan.stderr.count("left out ") == 11 and plan.stderr.count("no x86_64 lock") == 3
    # The 310b kernels and NNAL: no source publishes their sums, so `--require-pins` would
    # refuse them (until 2026-11-27 the dry run passed them: it did not exit as the real run would).
    assert plan.stderr.count("Ascend-cann-kernels-310b_8.0.0_linux-aarch64.run has no sha256") == 2
    assert plan.stderr.count("Ascend-cann-nnal_") == 6
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # `invoke` as the job runs it, each command a dry run; `docker login` answered (a double).
    (bin_dir / "invoke").write_text(f'#!/bin/sh\ncase " $* " in *" --dry "*) ;; *) set -- "$@" --dry;; esac\n'
                                    f'exec {sys.executable} -m invoke "$@"\n')
    (bin_dir / "docker").write_text('#!/bin/sh\n[ "$1" = login ] && { cat >/dev/null; exit 0; }\nexit 1\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "REGISTRY": "registry.example/ascend",
           "REGISTRY_USER": "ci", "REGISTRY_TOKEN": "unused", "CANN_PACKAGE_MIRROR": "", "CACHE_REGISTRY": "",
           "ASCEND_BUILD_CACHE": str(tmp_path / "cache")}
    steps = {s.get("name"): s["run"] for s in jobs["build"]["steps"] if "run" in s and "invoke" in s["run"]}
    assert set(steps) == {"Build, test, tag", "Push this arch (skipped when the registry has the content already)"}
    ran = 0
    for cell in cells:
        cell_env = {f"CELL_{k.upper()}": cell[k] for k in ("torch", "os", "python", "chip", "platform")}
        for name, script in steps.items():
            out = subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=ROOT, capture_output=True, text=True,
                                 env={**env, **cell_env})
            assert out.returncode == 0, f"{cell['name']}: {name}:\n{out.stdout[-2000:]}{out.stderr[-2000:]}"
            ran += 1
    join = next(s["run"] for s in jobs["publish"]["steps"] if "run" in s and "invoke join" in s["run"])
    out = subprocess.run(["bash", "-eo", "pipefail", "-c", join], cwd=ROOT, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert ran == 2 * len(cells)


def _build_steps() -> list[dict]:
    import yaml
    return yaml.safe_load((ROOT / ".github/workflows/images.yml").read_text())["jobs"]["build"]["steps"]


def test_the_build_job_fetches_exactly_the_plans_files_each_with_a_sum(tmp_path):
    """Found by running the pipeline under act: the job grepped `.run` names out of a dry
    plan and fetched those, but for 8.0.RC3 only the `.zip` has Huawei's sum, so
    --require-pins refused every cell. The mirror step now fetches the plan's own list
    (ci-matrix's `files`), run here by bash against a curl double for every planned cell."""
    import json
    import os

    from ascend_build.matrix import load_matrix
    step = next(s for s in _build_steps() if s.get("name") == "CANN packages from the site's mirror")
    plan = subprocess.run([sys.executable, "-m", "invoke", "ci-matrix"], cwd=ROOT, capture_output=True, text=True)
    cells = json.loads(plan.stdout)["include"]
    files = {f.checked_name: f for cell in load_matrix(ROOT / "matrix.yaml").image_cells() for f in cell.cann_files}
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    asked = tmp_path / "asked.txt"
    # curl -fsSL -o DEST URL: the double records the URL and writes a stand-in.
    (bin_dir / "curl").write_text(f'#!/bin/sh\nwhile [ "$1" != -o ]; do shift; done\necho "$3" >> {asked}\n'
                                  'echo stand-in > "$2"\n')
    (bin_dir / "curl").chmod(0o755)
    for cell in cells:
        work = tmp_path / cell["name"]
        (work / "packages").mkdir(parents=True)
        asked.write_text("")
        env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
               "CANN_PACKAGE_MIRROR": "https://mirror.example/cann", "CELL_FILES": cell["files"]}
        out = subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], cwd=work, capture_output=True,
                             text=True, env=env)
        assert out.returncode == 0, out.stderr
        urls = asked.read_text().split()
        names = sorted(u.rsplit("/", 1)[1] for u in urls)
        assert names == sorted(cell["files"].split()) and len(names) >= 2, (cell["name"], names)
        assert all(u.startswith("https://mirror.example/cann/") for u in urls)
        for name in names:
            f = files[name]
            assert (f.zip_sha256 if name.endswith(".zip") else f.sha256), f"{cell['name']}: {name} has no sum"
            assert (work / "packages" / name).is_file()
        # A second run (the cache restored packages/) fetches nothing.
        asked.write_text("")
        subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], cwd=work, env=env, check=True)
        assert asked.read_text() == ""


def test_the_cache_keeps_folders_the_job_makes_and_the_log_upload_sees_hidden_folders(tmp_path):
    """Two more of act's findings: the cache saved ~/.cache/ascend-build, which a job that takes
    its files from the mirror never makes ("Path Validation Error"); the log upload skipped
    .build/ (hidden: upload-artifact 4.4 on leaves those out) and said nothing."""
    import os
    steps = _build_steps()
    names = [s.get("name") for s in steps]
    cache = next(s for s in steps if s.get("name") == "CANN packages cache")
    make = next(s for s in steps if s.get("name") == "CANN package folders")
    assert names.index("CANN package folders") < names.index("CANN packages cache")
    home = tmp_path / "home"
    home.mkdir()
    subprocess.run(["bash", "-eo", "pipefail", "-c", make["run"]], cwd=tmp_path, check=True,
                   env={**os.environ, "HOME": str(home)})
    paths = [p.strip() for p in cache["with"]["path"].splitlines() if p.strip()]
    assert "packages" in paths
    for p in paths:
        assert (tmp_path / p.replace("~", str(home), 1)).is_dir(), p
    log = next(s for s in steps if "upload-artifact" in s.get("uses", ""))
    hidden = any(part.startswith(".") for part in log["with"]["path"].split("/"))
    assert not hidden or log["with"].get("include-hidden-files") is True
    assert log["with"].get("if-no-files-found") in ("warn", "error")
