"""The names of this project's image labels: every kind's labels (images/kinds.py), the SBOM
and `invoke doctor --image` read them by these."""
from __future__ import annotations

LABEL_PREFIX = "io.ascend-build"


def label(key: str) -> str:
    return f"{LABEL_PREFIX}.{key}"
