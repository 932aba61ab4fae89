"""Where a build's time goes: the wall time of each step of a runtime image build, read
from the BuildKit log `invoke build` writes beside the image (`.build/<image>/build.log`),
grouped into what the steps do. Figures only; nothing is asserted.

    python benchmarks/steps.py [BUILD_LOG ...]      (default: every .build/*/build.log)

BuildKit's plain progress prints `#N [stage i/n] RUN ...` when a step starts and
`#N DONE 12.3s` (or `#N CACHED`) when it ends. podman's log has no step times, so its
builds are listed without them."""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_START = re.compile(r"^#(\d+) \[([\w.-]+) *(\d+/\d+)?\] (.*)$")
_END = re.compile(r"^#(\d+) (DONE ([0-9.]+)s|CACHED|ERROR.*)$")

# What a step does, from its text: (group, needle), first match wins. The fast path's
# steps on the build machine (stages native-*) are grouped apart: they run beside the
# emulated ones, so the sum of step times is not the wall time of the build.
GROUPS = (
    ("CANN's Python needs", "lock/cann.txt"),
    ("CANN's Python needs", "--from=native-cann "),
    ("torch + deps", "lock/torch.txt"),
    ("torch + deps", "--from=native-torch "),
    ("torch_npu", "lock/torch_npu.txt"),
    ("torch_npu", "--from=native-torch_npu "),
    ("CANN toolkit", "cann/toolkit"),
    ("CANN kernels / ops", "cann/kernels"),
    ("apex slot", "source=apex"),
    ("manifest + requirements", "manifest.txt"),
    ("CPython from source", "python.tar.xz"),
    ("venv", "-m venv /opt/venv"),
    ("venv", "--from=native-venv "),
    ("OS packages + distro Python", "python3-venv"),
    ("OS packages + distro Python", "python3-devel"),
    ("OS packages", "apt-get install"),
    ("OS packages", "dnf install"),
)
PIP_GROUPS = ("CANN's Python needs", "torch + deps", "torch_npu")


def group_of(text: str, stage: str = "") -> str:
    group = next((name for name, needle in GROUPS if needle in text), "other (FROM, ENV, WORKDIR, context)")
    return f"build machine: {group}" if stage.startswith("native-") else group


def stage_steps(dockerfile: Path) -> dict[str, list[str]]:
    """The steps BuildKit numbers per stage ([stage i/n]): FROM, RUN, COPY, ADD, WORKDIR,
    each with its full text (the log shows only the start of it)."""
    text = dockerfile.read_text().replace("\\\n", " ")
    stages: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        word = line.split(" ", 1)[0].upper()
        if word == "FROM":
            name = line.rsplit(" AS ", 1)[1].strip() if " AS " in line else str(len(stages))
            current = stages.setdefault(name, [])
        if word in ("FROM", "RUN", "COPY", "ADD", "WORKDIR"):
            current.append(line)
    return stages


def profile(log: Path) -> tuple[dict[str, float], dict[str, int], float] | None:
    """(seconds per group, cached steps per group, total) of one BuildKit log, or None for
    a log without BuildKit step times."""
    titles: dict[str, str] = {}
    stages: dict[str, str] = {}
    seconds: dict[str, float] = {}
    cached: dict[str, int] = {}
    lines = log.read_text(errors="replace").splitlines()
    named = re.search(r" -f (\S+)", lines[0]) if lines else None
    steps = stage_steps(Path(named[1])) if named and Path(named[1]).is_file() else {}
    for line in lines:
        start = _START.match(line)
        if start:
            stage, index = start[2], int(start[3].split("/")[0]) - 1 if start[3] else -1
            full = steps.get(stage, [])
            shown = " ".join(start[4].split())
            # Only if the Dockerfile still is the one built (the log shows the step's start).
            match = 0 <= index < len(full) and " ".join(full[index].split()).startswith(shown.rstrip(".").rstrip())
            titles[start[1]] = full[index] if match else start[4]
            stages[start[1]] = stage
            continue
        end = _END.match(line)
        if end and end[1] in titles:
            group = group_of(titles[end[1]], stages[end[1]])
            if end[3]:
                seconds[group] = seconds.get(group, 0.0) + float(end[3])
            elif end[2] == "CACHED":
                cached[group] = cached.get(group, 0) + 1
    if not titles:
        return None
    return seconds, cached, sum(seconds.values())


def main(argv: list[str]) -> None:
    logs = [Path(a) for a in argv] or sorted((ROOT / ".build").glob("*/build.log"))
    for log in logs:
        found = profile(log)
        print(f"\n{log}")
        if found is None:
            print("  no BuildKit step times in this log (podman, or not a build log)")
            continue
        seconds, cached, total = found
        print(f"  {'step':<38} {'seconds':>8} {'share':>6}  cached steps")
        for group, secs in sorted(seconds.items(), key=lambda kv: -kv[1]):
            print(f"  {group:<38} {secs:8.1f} {secs / total if total else 0:6.1%}  {cached.get(group, 0)}")
        for group in sorted(set(cached) - set(seconds)):
            print(f"  {group:<38} {'-':>8} {'-':>6}  {cached[group]}")
        print(f"  {'sum of step times':<38} {total:8.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
