"""Every task, every option, given nonsense: a clear refusal (or a dry run's preview),
never a Python traceback, never a task that runs off with the nonsense (each case has
20 s). Flags without a value are left out: they carry no nonsense. The cases run in one
child process (tests/unit/task_fuzz_runner.py) that imports tasks.py once and forks per
case: one interpreter start instead of hundreds. What no case's input changes (the modules,
the templates, the engine clients' and qemu's versions, the deployer releases `update`
fetches) it makes once before the first fork; each case still runs its task whole."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A word, nothing, a path the system refuses; a number of 4,301 digits (past the digits
# Python turns into an int from text: packaging's Version raised from it) and 10,000
# characters behind a byte-order mark (echoed back whole before #74).
NONSENSE = ["nonsense", "", "x" * 300, "9" * 4301, "\ufeff" + "\u00e9" * 10000]


def options_of_every_task() -> dict[str, list[tuple[str, bool]]]:
    """task name -> [(option, takes a value)], from invoke's own view of tasks.py."""
    from invoke import Collection

    import tasks
    found = {}
    for name, task in Collection.from_module(tasks).tasks.items():
        found[name] = [(arg.name.replace("_", "-").strip("-"), arg.kind is not bool)
                       for arg in task.get_arguments()]
    return found


def cases() -> list[list[str]]:
    out = []
    for name, options in options_of_every_task().items():
        dry = ["--dry"] if any(o == "dry" for o, _ in options) else []
        for option, takes_value in options:
            for value in NONSENSE if takes_value else []:
                out.append([name, f"--{option}", value] + dry)
            if takes_value:      # a value that is an option of whatever it reaches (docker, git) (#50)
                out.append([name, f"--{option}=-v=/:/host"] + dry)
    return out


def _checkout_files() -> set[str]:
    """What git sees changed or new in the checkout (its ignored outputs, .build/ and the
    like, aside): a fuzz case must leave it as it found it."""
    out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    return set(out.stdout.splitlines())


def test_no_task_tracebacks_or_runs_off_on_nonsense(tmp_path):
    before = _checkout_files()
    all_cases = cases()
    assert len(all_cases) > 350, "every option of every task is fuzzed"
    spec = tmp_path / "cases.json"
    spec.write_text(json.dumps(all_cases))
    env = {**os.environ, "ASCEND_BUILD_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "unit" / "task_fuzz_runner.py"), str(spec)],
                         cwd=ROOT, capture_output=True, text=True, env=env, timeout=3000)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    results = json.loads(out.stdout.strip().splitlines()[-1])
    bad = [r for r in results if r["problem"]]
    assert bad == [], "\n".join(f"{' '.join(r['argv'])[:200]}: {r['problem']}" for r in bad[:40])
    # A huge value is said in part: no refusal repeats one of over 1,000 characters whole.
    echoed = [r for r in results if r["echoed"]]
    assert echoed == [], "\n".join(f"{' '.join(r['argv'])[:120]}: echoed whole: {r['said'][:200]}"
                                   for r in echoed[:20])
    # Refused means an exit code the README lists (or a dry run's 0), with a message.
    from ascend_build.errors import EXIT_CODES
    assert {r["code"] for r in results} <= {e.code for e in EXIT_CODES}
    # No case wrote a file outside the tasks' outputs (.build/, the cache given above).
    changed = sorted(_checkout_files() ^ before)
    assert changed == [], changed[:20]
    # A value that begins with "-" never reaches a command line as an option: refused (2), or
    # taken where it is plain data (a dry run's preview, a help text).
    import re
    hostile = [r for r in results if any(a.endswith("=-v=/:/host") for a in r["argv"])]
    reached = [r for r in hostile if r["code"] == 0 and any(re.search(r"(docker|podman|git)\b.* -v=/:/host", line)
                                                            for line in r["marked"])]
    assert len(hostile) > 150 and reached == [], reached[:5]
