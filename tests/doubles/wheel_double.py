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


# e_machine numbers of the ELF headers the binary double writes ("npu": the number the
# Ascend NPU's kernel objects carry in real wheels, device code the check does not judge).
ELF_MACHINE = {"x86_64": 62, "aarch64": 183, "npu": 4137}


def elf_header(machine: str) -> bytes:
    """The first bytes of a 64-bit little-endian shared object for `machine`: what the arch
    check reads. Not a loadable library; nothing here runs it."""
    return (b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8) + (3).to_bytes(2, "little")
            + ELF_MACHINE[machine].to_bytes(2, "little") + bytes(44))


def make_binary_wheel(folder: Path, name: str, version: str, tag: str, machine: str,
                      libraries: int = 5, kernels: int = 0) -> Path:
    """A TEST DOUBLE of a wheel with compiled parts: `libraries` shared objects built (by
    their ELF headers) for `machine`, whatever `tag` says, as MindSpore's aarch64 wheels are
    served on PyPI under `none-any`."""
    module = name.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    files: dict[str, bytes] = {f"{module}/__init__.py": f'__version__ = "{version}"\n'.encode()}
    for i in range(libraries):
        files[f"{module}/lib/lib{module}_{i}.so"] = elf_header(machine)
    for i in range(kernels):
        files[f"{module}/lib/plugin/kernel/op_{i}.o"] = elf_header("npu")
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    files[f"{info}/WHEEL"] = f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n".encode()
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{module}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in files.items():
            zf.writestr(zipfile.ZipInfo(path, (2020, 1, 1, 0, 0, 0)), data)
        zf.writestr(zipfile.ZipInfo(f"{info}/RECORD", (2020, 1, 1, 0, 0, 0)),
                    "".join(f"{p},,\n" for p in [*files, f"{info}/RECORD"]))
    return wheel
