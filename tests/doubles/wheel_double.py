"""A TEST DOUBLE: a tiny pure-Python wheel made on the spot, for a user layer's wheelhouse
(a team's own package). `fails_on_import` makes one whose module raises on import, which
the layer suite must catch before the layer is tagged."""
from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def make_wheel(folder: Path, name: str, version: str, fails_on_import: bool = False) -> Path:
    module = name.replace("-", "_")
    body = ('raise ImportError("a test double that fails on import, on purpose")\n' if fails_on_import
            else f'__version__ = "{version}"\n')
    info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": body,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: test double\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: ascend-build test double\nRoot-Is-Purelib: true\n"
                         "Tag: py3-none-any\n",
        f"{info}/top_level.txt": f"{module}\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in files.items():
            zf.writestr(zipfile.ZipInfo(path, (2020, 1, 1, 0, 0, 0)), text)
        zf.writestr(zipfile.ZipInfo(f"{info}/RECORD", (2020, 1, 1, 0, 0, 0)), "\n".join(record) + "\n")
    return wheel
