"""Which machine a wheel's binaries are for, read from their ELF headers, whatever the
wheel's platform tag says. A wheel tagged for any platform may carry one arch's binaries
(PyPI serves MindSpore's aarch64 wheels as `cp310-none-any`, the same bytes Huawei
publishes as `linux_aarch64`): pip would install it on any machine, and the image would
fail at `import`. `invoke build` copies this file into the build context and every pip
step runs it on the wheels its lock names, before pip installs them:

    python3 wheel_arch.py aarch64 /tmp/lock/torch.txt /var/cache/ascend-build/wheels

The image suite runs `installed()` in the image, over every file the venv's packages
record. Standard library only (it runs in the images' own Pythons, 3.7 and newer)."""
from __future__ import annotations

import hashlib
import os
import re
import struct
import sys
import zipfile

# ELF e_machine values (the System V ABI's registry) -> `uname -m` of that machine. Only
# these CPUs' files are judged: wheels for Ascend also carry the NPU's own kernel objects
# (MindSpore 2.9.0's aarch64 wheel holds 42 with e_machine 4137), which are for the
# device, not for the host, and are the same whatever the host's machine.
MACHINES = {3: "i686", 8: "mips", 20: "ppc", 21: "ppc64le", 22: "s390x", 40: "armv7l", 62: "x86_64",
            183: "aarch64", 243: "riscv64", 258: "loongarch64"}
_HEAD = 20                                   # e_ident (16) + e_type (2) + e_machine (2)
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:==([^\s\\;]+))?")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")
SHOWN = 3                                    # foreign files named per wheel; the rest are counted


def elf_machine(head: bytes) -> str | None:
    """The machine of an ELF file from its first 20 bytes; None when it is not ELF."""
    if len(head) < _HEAD or head[:4] != b"\x7fELF":
        return None
    order = "<" if head[5] == 1 else ">"    # EI_DATA: 1 little-endian, 2 big-endian
    number = struct.unpack(order + "H", head[18:20])[0]
    return MACHINES.get(number, f"e_machine {number}")


def may_be_binary(name: str) -> bool:
    """Shared objects (.so, .so.1.2) and files without a suffix (executables, bin/): the
    only files read, so that a venv's thousands of .py, .pyc and headers cost nothing (the
    image suite reads them under qemu)."""
    base = name.rsplit("/", 1)[-1]
    return base.endswith(".so") or ".so." in base or "." not in base


def _foreign(found: str | None, machine: str) -> str | None:
    """The machine of a host CPU's binary for another CPU than the image's, else None."""
    return found if found is not None and found in MACHINES.values() and found != machine else None


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_tags(names: list[str], read) -> list[str]:
    """The Tag: lines of a wheel's (or an installed distribution's) WHEEL file."""
    for name in names:
        if name.endswith(".dist-info/WHEEL"):
            return [line.split(":", 1)[1].strip() for line in read(name).decode("utf-8", "replace").splitlines()
                    if line.startswith("Tag:")]
    return []


def foreign_in_wheel(path: str, machine: str) -> tuple[list[str], list[tuple[str, str]]]:
    """(its tags, [(member, machine)] of every ELF member built for another CPU than `machine`)."""
    with zipfile.ZipFile(path) as zf:
        names = [i.filename for i in zf.infolist() if not i.is_dir()]
        tags = wheel_tags(names, zf.read)
        foreign = []
        for name in filter(may_be_binary, names):
            with zf.open(name) as member:
                found = elf_machine(member.read(_HEAD))
            other = _foreign(found, machine)
            if other:
                foreign.append((name, other))
    return tags, foreign


def _requested(requirements: str) -> tuple[dict[str, str | None], set[str]]:
    """The projects (name -> pinned version or None) and the sha256s a requirement file names."""
    projects: dict[str, str | None] = {}
    sums: set[str] = set()
    with open(requirements, encoding="utf-8") as f:
        for line in f:
            sums.update(_HASH.findall(line))
            m = _PIN.match(line.strip())
            if m and not line.lstrip().startswith(("-", "#")):
                projects[normalize(m.group(1))] = m.group(2)
    return projects, sums


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _for_another_machine(filename: str, machine: str) -> bool:
    """A wheel whose platform tags all name another machine (torch-2.1.0+cpu-...-x86_64 in
    an aarch64 build): pip here would never take it."""
    platforms = filename[:-len(".whl")].split("-")[-1].split(".")
    named = [next((m for m in MACHINES.values() if p.endswith("_" + m)), None) for p in platforms]
    return all(m is not None and m != machine for m in named)


def wheels_of(requirements: str, folders: list[str], machine: str) -> list[str]:
    """The wheels in `folders` that the requirement file asks for and pip on `machine`
    could take: by name and version, not tagged for another machine only, and where the
    file carries hashes, only those with one of its sha256s (the folder is a cache that
    may hold the same release for another machine)."""
    projects, sums = _requested(requirements)
    picked = []
    for folder in folders:
        if not os.path.isdir(folder):
            continue
        for entry in sorted(os.listdir(folder)):
            if not entry.endswith(".whl"):
                continue
            name, version = (entry.split("-") + [""])[:2]
            want = projects.get(normalize(name), "")
            if want == "" or (want is not None and version != want and not version.startswith(want + "+")):
                continue
            if _for_another_machine(entry, machine):
                continue
            path = os.path.join(folder, entry)
            if not sums or _sha256(path) in sums:
                picked.append(path)
    return picked


def describe(wheel: str, tags: list[str], foreign: list[tuple[str, str]], machine: str) -> str:
    found = sorted({m for _, m in foreign})
    lines = [f"{wheel} (tagged {', '.join(tags) or 'with no WHEEL tags'}) carries {' and '.join(found)} "
             f"binaries; the image is {machine}:"]
    lines += [f"  {name}: ELF {m}" for name, m in foreign[:SHOWN]]
    if len(foreign) > SHOWN:
        lines.append(f"  ... and {len(foreign) - SHOWN} more")
    return "\n".join(lines)


def installed(machine: str, site_packages: list[str]) -> dict[str, list[tuple[str, str]]]:
    """{distribution: [(file, machine)]} of every ELF file an installed distribution
    records (its RECORD) that is built for another CPU than `machine`."""
    bad: dict[str, list[tuple[str, str]]] = {}
    for site in filter(os.path.isdir, site_packages):      # Debian's list names folders that need not exist
        for entry in sorted(os.listdir(site)):
            record = os.path.join(site, entry, "RECORD")
            if not entry.endswith(".dist-info") or not os.path.isfile(record):
                continue
            with open(record, encoding="utf-8", errors="replace") as f:
                files = [line.split(",", 1)[0] for line in f if line.strip()]
            for rel in filter(may_be_binary, files):
                path = os.path.normpath(os.path.join(site, rel))
                try:
                    with open(path, "rb") as fh:
                        found = elf_machine(fh.read(_HEAD))
                except OSError:
                    continue
                other = _foreign(found, machine)
                if other:
                    bad.setdefault(entry[:-len(".dist-info")], []).append((rel, other))
    return bad


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print("usage: wheel_arch.py MACHINE REQUIREMENTS WHEEL-FOLDER...", file=sys.stderr)
        return 2
    machine, requirements, folders = argv[0], argv[1], argv[2:]
    refused = []
    for wheel in wheels_of(requirements, folders, machine):
        tags, foreign = foreign_in_wheel(wheel, machine)
        if foreign:
            refused.append(describe(os.path.basename(wheel), tags, foreign, machine))
    if refused:
        print("wheel_arch: refused before install, whatever their tags say:\n" + "\n".join(refused)
              + "\nThe requirement file names a wheel built for another machine: remake the lock with "
                "`invoke lock` (it leaves out files Huawei's data lists for the other arch), or take that "
                "wheel's hash out of the lock.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
