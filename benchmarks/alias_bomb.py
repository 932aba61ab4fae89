"""How long `invoke matrix` takes to refuse a billion-laughs in imported.yaml (the finding
of tests/unit/test_hostile.py, whose test asserts the memory bound, not the time), and its
peak memory: the wall time of the whole command, its interpreter's start included. Figures,
printed; nothing is asserted (a loaded machine is slower).

    python benchmarks/alias_bomb.py [--repeat 5]"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The same 9 levels of ten aliases each as the test's: 10**9 nodes once expanded.
BOMB = "".join([f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]\n" if i else "l0: &l0 [lol]\n"
                for i in range(10)])
CHILD = ("import sys\nsys.argv = ['invoke', 'matrix', '--matrix', sys.argv[1]]\n"
         "from invoke import Collection, Program\nimport tasks\n"
         "try:\n    Program(namespace=Collection.from_module(tasks)).run(sys.argv)\n"
         "finally:\n    print('peak', open('/proc/self/status').read().split('VmHWM:')[1].split()[0], file=sys.stderr)")


def once(matrix: Path) -> tuple[float, int]:
    """(seconds, peak KB) of one refusal."""
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", CHILD, str(matrix)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    took = time.monotonic() - started
    if out.returncode != 2 or "an alias (*name)" not in out.stderr:
        raise SystemExit(f"the bomb was not refused as it should be (exit {out.returncode}):\n{out.stderr[-2000:]}")
    return took, int(out.stderr.split("peak ")[1].split()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="alias-bomb-"))
    try:
        shutil.copy(ROOT / "matrix.yaml", folder / "matrix.yaml")
        (folder / "imported.yaml").write_text((ROOT / "imported.yaml").read_text() + BOMB)
        runs = [once(folder / "matrix.yaml") for _ in range(args.repeat)]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    times = sorted(t for t, _ in runs)
    print(f"alias bomb in imported.yaml, refused by `invoke matrix` ({args.repeat} runs, {os.cpu_count()} cores):")
    print(f"  wall time: median {statistics.median(times):.2f} s (min {times[0]:.2f} s, max {times[-1]:.2f} s)")
    print(f"  peak memory (VmHWM): {max(kb for _, kb in runs) >> 10} MB")


if __name__ == "__main__":
    main()
