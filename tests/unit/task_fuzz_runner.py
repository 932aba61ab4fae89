"""Runs invoke task cases for tests/unit/test_task_fuzz.py: tasks.py is imported once, then
each case runs in a forked child (its own process group, killed with everything it
started when it overruns) with its output captured, two at a time. Prints one JSON list
of results."""
from __future__ import annotations

import gc
import json
import os
import select
import shutil
import signal
import sys
import time
from pathlib import Path

LIMIT = 20.0
AT_ONCE = 2


def start(program, argv: list[str]) -> dict:
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:                                    # the child: one task run
        os.setpgid(0, 0)
        os.close(out_r)
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        sys.argv = ["invoke", *argv]
        try:
            program.run(["invoke", *argv], exit=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:                       # a traceback: what the test looks for
            import traceback
            traceback.print_exc()
            code = 99
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    os.close(out_w)
    return {"argv": argv, "pid": pid, "fd": out_r, "chunks": [], "started": time.monotonic(), "timed_out": False}


def finish(case: dict) -> dict:
    os.close(case["fd"])
    _, status = os.waitpid(case["pid"], 0)
    try:
        os.killpg(case["pid"], signal.SIGKILL)      # anything it left behind
    except ProcessLookupError:
        pass
    text = b"".join(case["chunks"]).decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    problem = ""
    if case["timed_out"]:
        problem = f"still running after {LIMIT:.0f} s"
    elif "Traceback (most recent call last)" in text:
        problem = "traceback: " + text[text.index("Traceback"):][-600:]
    elif code != 0 and not text.strip():
        problem = f"exit {code} without a word"
    marked = [line[:400] for line in text.splitlines() if "-v=/:/host" in line][:20]
    # a refusal (from its "error:" on: a dry run's plan before it shows the values as its commands use them)
    refusal = text[text.index("error:"):] if "error:" in text else ""
    echoed = any(len(arg) > 1000 and arg.split("=", 1)[-1] in refusal for arg in case["argv"])
    return {"argv": case["argv"], "code": code, "problem": problem, "said": text[-300:], "marked": marked,
            "echoed": echoed}


def share(downloads: Path) -> None:
    """What every case does alike, done here once so that each forked case starts with it:
    the committed matrix read and checked, every module imported (a task imports some at
    first use), the templates compiled, and the answers of commands whose arguments no case
    chooses: the engine clients on PATH (`version`, `buildx version`), qemu's version and
    the ascend-deployer releases `invoke update` fetches with no pip option. A client, a
    pip option or anything else a case names itself is still asked by that case."""
    import importlib
    import pkgutil

    import ascend_build
    from ascend_build.engine import client, emulation
    from ascend_build.images.catalog import render_all
    from ascend_build.matrix import load_matrix
    from ascend_build.platforms import ARCHES
    for module in pkgutil.walk_packages(ascend_build.__path__, "ascend_build."):
        importlib.import_module(module.name)
    render_all(load_matrix("matrix.yaml"))
    for arch in ARCHES:
        emulation.qemu_version(arch)
    probe = client._probe
    answers = {(kind, cand): probe(kind, cand) for kind in ("docker", "podman") for cand in client._candidates(kind)}

    def shared_probe(kind: str, cand: str) -> tuple:
        return answers[(kind, cand)] if (kind, cand) in answers else probe(kind, cand)
    client._probe = shared_probe
    _share_deployer_downloads(downloads)


def _share_deployer_downloads(folder: Path) -> None:
    from ascend_build.errors import UserError
    from ascend_build.matrix.load import upstream_of
    from ascend_build.upstream import deployer, update
    fetched = {}
    for version in upstream_of(Path("matrix.yaml")).deployer:
        try:
            fetched[version] = deployer.fetch(version, folder / version)
        except UserError:
            return              # no index here: each case asks pip itself and is refused
    fetch = update.fetch

    def shared(version: str, dest: Path, pip_args: list[str] | None = None) -> Path:
        if pip_args or version not in fetched:
            return fetch(version, dest, pip_args)
        dest.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy(fetched[version], dest))
    update.fetch = shared


def main() -> None:
    from invoke import Collection, Program
    sys.path.insert(0, os.getcwd())
    import tasks
    share(Path(os.environ["ASCEND_BUILD_CACHE"]) / "fuzz-shared")
    program = Program(namespace=Collection.from_module(tasks), name="invoke", binary="invoke")
    todo = json.loads(open(sys.argv[1]).read())
    gc.collect()
    gc.freeze()     # the collector leaves the objects made so far alone: a case's collections write to none
    # of their pages, which its fork shares with this process until written
    running: list[dict] = []
    results = []
    while todo or running:
        while todo and len(running) < AT_ONCE:
            running.append(start(program, todo.pop(0)))
        now = time.monotonic()
        for case in running:
            if not case["timed_out"] and now - case["started"] > LIMIT:
                case["timed_out"] = True
                os.killpg(case["pid"], signal.SIGKILL)
        ready, _, _ = select.select([c["fd"] for c in running], [], [], 0.5)
        for case in [c for c in running if c["fd"] in ready]:
            data = os.read(case["fd"], 65536)
            if data:
                case["chunks"].append(data)
            else:
                results.append(finish(case))
                running.remove(case)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
