"""Runs invoke task cases for tests/unit/test_task_fuzz.py: tasks.py is imported once, then
each case runs in a forked child (its own process group, killed with everything it
started when it overruns) with its output captured, two at a time. Prints one JSON list
of results."""
from __future__ import annotations

import json
import os
import select
import signal
import sys
import time

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
    return {"argv": case["argv"], "code": code, "problem": problem, "said": text[-300:], "marked": marked}


def main() -> None:
    from invoke import Collection, Program
    sys.path.insert(0, os.getcwd())
    import tasks
    from ascend_build.matrix import load_matrix
    load_matrix("matrix.yaml")      # read and checked once here; each forked case finds it read
    program = Program(namespace=Collection.from_module(tasks), name="invoke", binary="invoke")
    todo = json.loads(open(sys.argv[1]).read())
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
