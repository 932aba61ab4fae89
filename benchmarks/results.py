"""docs/results.md (a page of the documentation site) holds one section per benchmark script, each between its own
marker lines, so that one script's run does not erase another's figures."""
from __future__ import annotations

import os
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "docs" / "results.md"
TITLE = "# Build-efficiency figures\n"


def write_section(script: str, body: str) -> None:
    start, end = f"<!-- {script}: start -->\n", f"<!-- {script}: end -->\n"
    text = RESULTS.read_text() if RESULTS.exists() else TITLE
    section = f"{start}{body.rstrip()}\n{end}"
    if start in text and end in text:
        before, rest = text.split(start, 1)
        text = before + section + rest.split(end, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + section
    RESULTS.write_text(text)


def report(script: str, title: str, setting: str, rows: list[tuple[str, str, str]], after: str = "") -> None:
    """Print the rows (measure, value, target) and write them as the script's section,
    headed by when, on how many cores and with which engine they were measured."""
    head = f"Measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} cores, {setting}."
    table = "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
    write_section(script, f"## {title}\n\n{head}\n\n| measure | value | target |\n|---|---|---|\n{table}\n\n"
                          f"{after.strip()}\n")
    width = max(len(r[0]) for r in rows)
    print("\n" + head)
    for a, b, c in rows:
        print(f"{a.ljust(width)}  {b}   target {c}")
