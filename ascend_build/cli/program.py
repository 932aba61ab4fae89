"""How the user calls this tool here: messages name commands (`invoke pin ...`) the user
can paste. In a checkout set up by scripts/python-env.sh only `.venv/bin/invoke` exists,
so a bare `invoke` would say "command not found"."""
from __future__ import annotations

import os
import re
import shutil
import sys
from functools import lru_cache
from pathlib import Path


def running() -> str:
    """The command this process runs as: `ascend-build` (the console script, or `python -m
    ascend_build`) or `invoke`."""
    started = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path("invoke")
    return "ascend-build" if started.name == "ascend-build" or started.parent.name == "ascend_build" else "invoke"


@lru_cache(maxsize=None)
def program() -> str:
    """The command as it runs here: its name when that name on PATH is this environment's,
    else the path to this environment's (relative when it is below the current folder)."""
    name = running()
    mine = Path(sys.executable).parent / name
    found = shutil.which(name)
    if found and mine.exists() and os.path.realpath(found) == os.path.realpath(mine):
        return name
    if not mine.exists():
        return f"{sys.executable} -m {name.replace('-', '_')}"
    try:
        return str(mine.relative_to(Path.cwd()))
    except ValueError:
        return str(mine)


def localize(text: str) -> str:
    """The message with each quoted `invoke TASK` written the way it runs here."""
    name = program()
    return text if name == "invoke" else re.sub(r"`invoke (?=[a-z-])", f"`{name} ", text)
