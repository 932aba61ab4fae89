"""Where a command's CPU goes: emulated (qemu-user) against native, by program. Runs the
command given after `--` (the whole suite, one module, one build) and reads every process's
CPU time from /proc every --interval seconds; prints the machine's CPU over the run (from
/proc/stat), the part the sampling saw, and the programs that used most, emulated ones
marked. Figures, printed; nothing written.

    python benchmarks/cpu_share.py [--interval 2] [--top 30] -- ascend-build test

A process that starts and ends between two samples is not seen (a maintainer script, a
short `docker` call): the coverage line says how much of the machine's CPU was seen. A
container's processes are the machine's: a build step under qemu shows as the program qemu
runs (binfmt_misc starts qemu with the program's path as its first argument)."""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
# qemu-user started by binfmt_misc: /usr/libexec/qemu-binfmt/aarch64-binfmt-P (Debian 12's
# qemu-user-static) or /usr/bin/qemu-aarch64-static (older set-ups); the program follows.
QEMU = re.compile(r"(^|/)(qemu-[a-z0-9_]+(-static)?|[a-z0-9_]+-binfmt-[A-Z]*)$")


def machine_cpu() -> float:
    """Seconds of CPU the whole machine spent (user, nice, system, irq, softirq)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    return sum(int(fields[i]) for i in (0, 1, 2, 5, 6)) / TICK


def processes() -> dict[tuple[int, str], tuple[float, list[str]]]:
    """(pid, start time) -> (CPU seconds so far, argv) of every process now."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2:].split()
        found[(int(pid), rest[19])] = ((int(rest[11]) + int(rest[12])) / TICK,
                                       [a.decode(errors="replace") for a in argv if a])
    return found


def program(argv: list[str]) -> str:
    """What a process is, shortly: `qemu: python -c`, `dockerd`, `python -m pytest`."""
    if not argv:
        return "(kernel thread or gone)"
    emulated = bool(QEMU.search(argv[0])) and len(argv) > 1
    # qemu's own argv: its path, the program's path, then (binfmt's P flag: argv[0] kept) the
    # program's argv[0], then its arguments
    kept = emulated and re.search(r"-binfmt-[A-Z]*P[A-Z]*$", argv[0]) is not None
    args = argv[3:] if kept else argv[2:] if emulated else argv[1:]
    name = os.path.basename(argv[1] if emulated else argv[0])
    if re.fullmatch(r"python[0-9.]*|\.python[0-9.]*-image", name) and args:
        first = args[0]
        if first in ("-m", "-c") and len(args) > 1:
            name += f" {first} " + (args[1] if first == "-m" else args[1].strip().split("\n")[0][:40])
        elif not first.startswith("-"):
            name += " " + os.path.basename(first)
    return ("qemu: " if emulated else "") + name


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--interval", type=float, default=2.0, help="seconds between samples (default 2)")
    ap.add_argument("--top", type=int, default=30, help="programs to list (default 30)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    o = ap.parse_args()
    command = o.command[1:] if o.command[:1] == ["--"] else o.command
    if not command:
        ap.error("give the command to measure after --")
    used: Counter[str] = Counter()
    seen = processes()
    start_cpu, start = machine_cpu(), time.monotonic()
    child = subprocess.Popen(command)
    while child.poll() is None:
        time.sleep(o.interval)
        now = processes()
        for key, (cpu, argv) in now.items():
            before = seen.get(key, (0.0, []))[0]
            if cpu > before:
                used[program(argv)] += cpu - before
        seen = now
    wall, total = time.monotonic() - start, machine_cpu() - start_cpu
    sampled = sum(used.values())
    emulated = sum(v for k, v in used.items() if k.startswith("qemu: "))
    print(f"\n{' '.join(command)}: exit {child.returncode}, {wall:.0f} s wall, {os.cpu_count()} cores")
    print(f"machine CPU {total:.0f} s ({total / wall / (os.cpu_count() or 1):.0%} of the cores); "
          f"seen by sampling {sampled:.0f} s ({sampled / total if total else 0:.0%}); "
          f"of that under qemu {emulated:.0f} s ({emulated / sampled if sampled else 0:.0%})")
    for name, cpu in used.most_common(o.top):
        print(f"{cpu:8.0f} s  {cpu / sampled:5.1%}  {name}")
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
