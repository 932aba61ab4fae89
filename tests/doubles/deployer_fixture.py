"""A small synthetic `ascend-deployer` release in the real layout (test fixture, never
used by the main path): `ascend_deployer/downloader/version_match.json`,
`software/CANN_<v>.json`, `software/Torch-npu_<v>.json` and `software/MindSpore_<v>.json`,
with made-up sums."""
from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

BASE = "https://ascend-repo.obs.cn-east-2.myhuaweicloud.com/CANN/CANN%20{v}/"
DRIVERS = {"8.0.RC1": "24.1.RC1", "8.0.RC3": "24.1.RC3", "8.0.0": "24.1.0", "8.1.RC1": "25.0.RC1",
           "8.2.RC1": "25.2.0", "8.3.RC1": "25.3.RC1", "8.5.0": "25.5.0", "9.0.0": "26.0.RC1"}
# What the matrix's stacks use, so an update with this fixture gives a valid matrix.
PAIRS = {"1.11.0.post11": "8.0.RC1", "2.1.0.post8": "8.0.RC3", "2.1.0.post10": "8.0.0", "2.3.1.post4": "8.0.0",
         "2.4.0.post2": "8.0.0", "2.5.1": "8.1.RC1", "2.9.0": "8.5.0", "2.6.0.post5": "8.5.0",
         "2.7.1.post4": "9.0.0", "2.8.0.post4": "9.0.0", "2.9.0.post2": "9.0.0", "2.10.0": "9.0.0"}
MINDSPORE = {"2.4.0": "8.0.RC3", "2.6.0-rc1": "8.1.RC1", "2.9.0": "9.0.0"}


def fake_sum(text: str, salt: str = "") -> str:
    return hashlib.sha256((salt + text).encode()).hexdigest()


def cann_files(version: str, salt: str = "") -> list[dict]:
    """The files of one release, named for its era."""
    major, minor = (int(x) for x in version.split(".")[:2])
    names = []
    for arch in ("aarch64", "x86_64"):
        names.append(f"Ascend-cann-toolkit_{version}_linux-{arch}.zip")
        names.append(f"Ascend-cann-nnrt_{version}_linux-{arch}.zip")
        for chip in ("910b", "910"):
            if (major, minor) >= (8, 5):
                names.append(f"Ascend-cann-{chip}-ops_{version}_linux-{arch}.zip")
            elif version in ("8.0.RC1", "8.0.RC2"):
                if arch == "aarch64":
                    names.append(f"Ascend-cann-kernels-{chip}_{version}_linux.zip")
            else:
                names.append(f"Ascend-cann-kernels-{chip}_{version}_linux-{arch}.zip")
    return [{"filename": n, "url": BASE.format(v=version) + n, "sha256": fake_sum(n, salt)} for n in names]


def make_deployer(root: Path, version: str, pairs: dict[str, str] | None = None, drivers: dict[str, str] | None = None,
                  salt: str = "", as_wheel: bool = False, mindspore: dict[str, str] | None = None) -> Path:
    """Write the release under root; returns its folder (or wheel, with as_wheel)."""
    pairs = PAIRS if pairs is None else pairs
    drivers = DRIVERS if drivers is None else drivers
    mindspore = MINDSPORE if mindspore is None else mindspore
    files: dict[str, str] = {}
    data = "ascend_deployer/downloader/"
    files[data + "version_match.json"] = json.dumps(
        {**{f"Torch-npu_{r}": f"CANN_{c}" for r, c in pairs.items()},
         **{f"MindSpore_{r}": f"CANN_{c}" for r, c in mindspore.items()}, "NoneMatched": ["NPU_24.1.RC3"]}, indent=1)
    for cann, driver in drivers.items():
        files[data + f"software/CANN_{cann}.json"] = json.dumps(
            {"name": "CANN", "version": cann, "default": False, "required_soft": [{"name": "NPU", "version": driver}],
             "other": cann_files(cann, salt)}, indent=1)
    for release in pairs:
        wheels = []
        for arch in ("aarch64", "x86_64"):
            for tag in ("cp37", "cp38", "cp39", "cp310", "cp311", "cp312"):
                for project in ("torch", "torch_npu"):
                    name = f"{project}-{release}-{tag}-{tag}-manylinux_2_17_{arch}.whl"
                    wheels.append({"filename": name, "url": "https://example.invalid/" + name, "python": tag,
                                   "dest": f"pylibs/python3.{tag[3:]}", "sha256": fake_sum(name, salt)})
        files[data + f"software/Torch-npu_{release}.json"] = json.dumps(
            {"name": "Torch-npu", "version": release, "default": False,
             "framework_whl": [{"system": f"linux_{arch}", "whl": [w for w in wheels if arch in w["filename"]]}
                               for arch in ("aarch64", "x86_64")]}, indent=1)
    for release in mindspore:
        blocks = []
        for arch in ("aarch64", "x86_64"):
            whl = []
            for tag in ("cp39", "cp310", "cp311"):
                name = f"mindspore-{release}-{tag}-{tag}-linux_{arch}.whl"
                whl.append({"filename": name, "url": "https://example.invalid/" + name, "python": tag,
                            "dest": f"pylibs/python3.{tag[3:]}", "sha256": fake_sum(name, salt)})
            blocks.append({"system": f"linux_{arch}", "whl": whl})
        files[data + f"software/MindSpore_{release}.json"] = json.dumps(
            {"name": "MindSpore", "version": release, "default": False, "framework_whl": blocks}, indent=1)
    files[f"ascend_deployer-{version}.dist-info/METADATA"] = f"Name: ascend-deployer\nVersion: {version}\n"
    if as_wheel:
        root.mkdir(parents=True, exist_ok=True)
        wheel = root / f"ascend_deployer-{version}-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            for name, text in files.items():
                archive.writestr(name, text)
        return wheel
    folder = root / f"ascend-deployer-{version}"
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder
