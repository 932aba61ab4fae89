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


@lru_cache(maxsize=None)
def program() -> str:
    """`invoke` when that name on PATH is this environment's, else the path to this
    environment's invoke (relative when it is below the current folder)."""
    mine = Path(sys.executable).parent / "invoke"
    found = shutil.which("invoke")
    if found and mine.exists() and os.path.realpath(found) == os.path.realpath(mine):
        return "invoke"
    if not mine.exists():
        return f"{sys.executable} -m invoke"
    try:
        return str(mine.relative_to(Path.cwd()))
    except ValueError:
        return str(mine)


def localize(text: str) -> str:
    """The message with each quoted `invoke TASK` written the way it runs here."""
    name = program()
    return text if name == "invoke" else re.sub(r"`invoke (?=[a-z])", f"`{name} ", text)
