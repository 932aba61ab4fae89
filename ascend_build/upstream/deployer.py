"""Huawei's release data as published in the `ascend-deployer` package (PyPI): which
torch_npu and MindSpore release pairs with which CANN, every file of a CANN release with
its URL and sha256 and the NPU driver it needs, and the torch / torch_npu and mindspore
wheels per Python and arch.

Read from `ascend_deployer/downloader/` of a wheel, an unpacked tree, or a copy fetched
with pip (so a site's PyPI mirror, proxy and CA work as they do for builds)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..chips import known
from ..engine import credentials
from ..errors import UserError
from ..matrix.frameworks import MINDSPORE, TORCH, Framework
from ..platforms import ARCHES

PACKAGE = "ascend-deployer"
DATA_DIR = "ascend_deployer/downloader"
SYSTEM_ARCH = {f"linux_{arch}": arch for arch in ARCHES}     # the deployer's name for an arch
SHA256 = re.compile(r"[0-9a-f]{64}")
CANN_VERSION = re.compile(r"[0-9]+\.[0-9]+\.(RC[0-9]+|[0-9]+)")
DRIVER_VERSION = re.compile(r"[0-9]+\.[0-9]+\.(RC[0-9]+|[0-9]+)", re.IGNORECASE)

# The file names of a CANN release, per naming era (the matrix's `file:` is the .run
# inside the published .zip). Files the images do not use (nnae, nnrt, tfplugin,
# toolbox) are counted, not imported.
_TOOLKIT = re.compile(r"Ascend-cann-toolkit_(?P<v>[^_]+)_linux-(?P<arch>aarch64|x86_64)\.zip")
_KERNELS = re.compile(r"Ascend-cann-kernels-(?P<chip>[0-9A-Za-z]+)_(?P<v>[^_]+)_linux(?:-(?P<arch>aarch64|x86_64))?\.zip")
_OPS = re.compile(r"Ascend-cann-(?P<chip>[0-9A-Za-z]+)-ops_(?P<v>[^_]+)_linux-(?P<arch>aarch64|x86_64)\.zip")
_FIELDS = {"{v}": r"(?P<v>[^_]+)", "{arch}": r"(?P<arch>aarch64|x86_64)"}


def own_kernels(name: str, suffix: str) -> tuple[str, re.Match[str]] | None:
    """The chip whose record names its kernels file outside its era's rule (kernels_file:
    A3's Atlas-A3-cann-kernels up to 8.3), and the match, for a file `name` ending in
    `suffix` (.zip as the deployer lists it, .run inside)."""
    for chip in known():
        if chip.kernels_file:
            stem = chip.kernels_file.removesuffix(".run")
            pattern = "".join(_FIELDS.get(p, re.escape(p)) for p in re.split(r"(\{v\}|\{arch\})", stem))
            m = re.fullmatch(pattern + re.escape(suffix), name)
            if m:
                return chip.name, m
    return None


@dataclass(frozen=True)
class Source:
    """Where an imported fact came from: package, version and file inside it."""
    version: str
    file: str

    def __str__(self) -> str:
        return f"{PACKAGE} {self.version}: {self.file}"


@dataclass(frozen=True)
class Published:
    """One file as Huawei publishes it: the .zip, its URL and sha256; or, for a release
    whose files no data lists (named by its era's rule), the bare .run with no sum."""
    zip: str
    url: str
    sha256: str | None
    run_name: str | None = None

    @property
    def run(self) -> str:
        return self.run_name or self.zip[:-len(".zip")] + ".run"


@dataclass
class CannData:
    version: str
    driver: str | None                     # None: no source names the driver it is paired with
    source: Source | str
    toolkit: dict[str, Published] = field(default_factory=dict)                # arch -> file
    kernels: dict[str, dict[str, Published]] = field(default_factory=dict)     # chip -> arch -> file
    unused: list[str] = field(default_factory=list)                            # nnae, nnrt, ...
    nnal: dict[str, Published] = field(default_factory=dict)                   # arch -> file
    runs_on: list[str] = field(default_factory=list)       # drivers (series like 25.2, or versions) it runs on
    runs_on_source: list[str] = field(default_factory=list)
    # a part another source gave ("kernels.A3", "nnal") -> that source: what the release's own
    # source lists none of (the official images' A3 kernels of 8.1.RC1, say)
    parts_source: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        any_file = next(iter(self.toolkit.values()))
        return any_file.url.rsplit("/", 1)[0] + "/"


@dataclass
class TorchNpuData:
    release: str
    cann: str | None                       # None: the data names no CANN for it
    pairing_source: Source | str | None
    branch: str = ""                       # the release's tag (or branch) in Ascend/pytorch
    torchnpu: str = ""                     # the TorchNPU release it was published in (26.1.0)
    wheels: dict[str, dict[str, str]] = field(default_factory=dict)   # "cp310-aarch64" -> {torch_npu: sha, torch: sha}
    wheels_source: Source | None = None
    on_pypi: bool | None = None            # None: not asked
    pypi_pythons: dict[str, list[str]] = field(default_factory=dict)  # arch -> Pythons of its PyPI wheels


@dataclass
class MindSporeData:
    release: str                           # as Huawei names it (2.6.0-rc1)
    cann: str | None
    pairing_source: Source | str | None
    wheels: dict[str, dict[str, str]] = field(default_factory=dict)   # "cp310-aarch64" -> {mindspore: sha}
    wheels_source: Source | None = None
    on_pypi: bool | None = None
    pypi_pythons: dict[str, list[str]] = field(default_factory=dict)


ReleaseData = TorchNpuData | MindSporeData


@dataclass(frozen=True)
class Paired:
    """A framework whose package Huawei pairs with CANN releases, as `invoke update` reads it:
    its record (matrix/frameworks.py), ascend-deployer's word for it (version_match.json's
    keys, software/'s files), the projects whose wheel sums those files list, the record of
    one release, and whether the index's pre-releases are releases."""
    framework: Framework
    word: str                                   # Torch-npu_2.1.0.post8, software/Torch-npu_*.json
    wheels: tuple[str, ...]                     # the projects of its wheel sums
    release: type[TorchNpuData] | type[MindSporeData]
    pre: bool = False                           # MindSpore: the index's 2.6.0rc1 is Huawei's 2.6.0-rc1

    @property
    def field(self) -> str:
        """Its package, which names its releases in DeployerData and update.Merged."""
        return self.framework.package

    @property
    def section(self) -> str:
        """imported.yaml's section of its releases."""
        return self.framework.releases

    @property
    def index_source(self) -> str:
        """The source of a release only the index serves."""
        return f"PyPI index (simple page of {self.field.replace('_', '-')})"


# The frameworks the import reads releases of, in the order imported.yaml writes them.
PAIRED: tuple[Paired, ...] = (Paired(TORCH, "Torch-npu", ("torch", "torch_npu"), TorchNpuData),
                              Paired(MINDSPORE, "MindSpore", ("mindspore",), MindSporeData, pre=True))


@dataclass
class DeployerData:
    version: str
    cann: dict[str, CannData]
    paired: dict[str, dict[str, ReleaseData]]      # each framework's releases, by its record's field
    archive_sha256: str | None = None      # of the wheel it was read from

    def releases(self, paired: Paired) -> dict[str, ReleaseData]:
        return self.paired.get(paired.field, {})


class Tree:
    """The files of `ascend_deployer/downloader/` in a wheel or a folder."""

    def __init__(self, location: Path):
        self.location = location
        self._zip = zipfile.ZipFile(location) if location.is_file() else None
        if self._zip is None:
            found = [location] if (location / DATA_DIR).is_dir() else sorted(
                p.parents[1] for p in location.glob(f"**/{DATA_DIR}"))
            if not found:
                raise UserError(f"{location}: no {DATA_DIR}/ inside; pass an {PACKAGE} wheel or its unpacked "
                                f"folder (pip download --no-deps {PACKAGE}==VERSION)")
            self._root = found[0]

    def names(self) -> list[str]:
        if self._zip:
            return [n[len(DATA_DIR) + 1:] for n in self._zip.namelist() if n.startswith(DATA_DIR + "/")]
        root = self._root / DATA_DIR
        return [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]

    def json(self, name: str):
        where = f"{self.location}: {DATA_DIR}/{name}"
        try:
            raw = self._zip.read(f"{DATA_DIR}/{name}") if self._zip else (self._root / DATA_DIR / name).read_bytes()
        except (KeyError, FileNotFoundError):
            raise UserError(f"{where} is missing: not an {PACKAGE} release this importer knows") from None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise UserError(f"{where} is not valid JSON: {exc}") from None

    def version(self) -> str:
        """The package's own version, from its dist-info (a wheel) or the folder name."""
        if self._zip:
            for n in self._zip.namelist():
                m = re.fullmatch(r"ascend_deployer-([^/]+)\.dist-info/METADATA", n)
                if m:
                    return m.group(1)
        m = re.search(r"ascend[_-]deployer-([0-9][^/-]*?)(?:-py3.*|\.dist-info)?$", self.location.name)
        if m:
            return m.group(1)
        for info in self._root.glob("ascend_deployer-*.dist-info"):
            return info.name[len("ascend_deployer-"):-len(".dist-info")]
        raise UserError(f"{self.location}: cannot tell which {PACKAGE} version this is (no dist-info)")


def _bad(where: str, what: str) -> UserError:
    return UserError(f"{where}: {what}")


def read(location: Path) -> DeployerData:
    """Every CANN fact, and the releases of every framework it pairs (PAIRED), in one
    ascend-deployer release."""
    tree = Tree(location)
    version = tree.version()
    names = tree.names()
    cann: dict[str, CannData] = {}
    for name in sorted(n for n in names if re.fullmatch(r"software/CANN_[^/]+\.json", n)):
        data = _read_cann(tree.json(name), Source(version, f"{DATA_DIR}/{name}"))
        cann[data.version] = data
    matches = tree.json("version_match.json")
    if not isinstance(matches, dict):
        raise _bad(f"{PACKAGE} {version}: version_match.json", "expected a mapping of release -> CANN release")
    pair_src = Source(version, f"{DATA_DIR}/version_match.json")
    found: dict[str, dict[str, ReleaseData]] = {p.field: {} for p in PAIRED}
    by_word = {p.word: p for p in PAIRED}
    for key, value in matches.items():
        word, _, release = key.partition("_")
        if word not in by_word:
            continue
        if not isinstance(value, str) or not value.startswith("CANN_") or not CANN_VERSION.fullmatch(value[5:]):
            raise _bad(str(pair_src), f"{key}: got {value!r}; expected CANN_<version>")
        paired = by_word[word]
        found[paired.field][release] = paired.release(release, value[5:], pair_src)
    for paired in PAIRED:
        for name in sorted(n for n in names if re.fullmatch(rf"software/{re.escape(paired.word)}_[^/]+\.json", n)):
            src = Source(version, f"{DATA_DIR}/{name}")
            doc = tree.json(name)
            release = doc.get("version") if isinstance(doc, dict) else None
            if not isinstance(release, str):
                raise _bad(str(src), "no version")
            entry = found[paired.field].setdefault(release, paired.release(release, None, None))
            entry.wheels, entry.wheels_source = _read_wheels(doc, src, paired.wheels), src
    archive = None
    if location.is_file():
        from ..hashing import sha256_of
        archive = sha256_of(location)
    return DeployerData(version, cann, found, archive)


def _read_cann(doc, src: Source) -> CannData:
    if not isinstance(doc, dict) or not isinstance(doc.get("version"), str):
        raise _bad(str(src), "expected a mapping with a version")
    version = doc["version"]
    if not CANN_VERSION.fullmatch(version):
        raise _bad(str(src), f"version: got {version!r}; expected a CANN version like 8.0.RC3")
    drivers = [s.get("version") for s in doc.get("required_soft") or [] if isinstance(s, dict) and s.get("name") == "NPU"]
    if len(drivers) != 1 or not isinstance(drivers[0], str) or not DRIVER_VERSION.fullmatch(drivers[0]):
        raise _bad(str(src), f"required_soft: expected one NPU driver version like 24.1.RC3, got {drivers!r}")
    data = CannData(version, drivers[0], src)
    for i, item in enumerate(doc.get("other") or []):
        where = f"{src} other[{i}]"
        if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in ("filename", "url", "sha256")):
            raise _bad(where, "expected filename, url and sha256")
        if not SHA256.fullmatch(item["sha256"]):
            raise _bad(where, f"sha256: got {item['sha256']!r}; expected 64 hex digits")
        if PurePosixPath(item["url"]).name.replace("%2B", "+") != item["filename"]:
            raise _bad(where, f"url {item['url']!r} does not end in {item['filename']!r}")
        pub = Published(item["filename"], item["url"], item["sha256"])
        name = pub.zip
        m = _TOOLKIT.fullmatch(name)
        if m:
            data.toolkit[m["arch"]] = pub
            continue
        m = _KERNELS.fullmatch(name) or _OPS.fullmatch(name)
        found = (m["chip"], m) if m else own_kernels(name, ".zip")
        if found:
            chip, m = found
            # Up to 8.0.RC2 one kernels file served both arches.
            for arch in [m["arch"]] if m["arch"] else list(ARCHES):
                data.kernels.setdefault(chip, {})[arch] = pub
            continue
        data.unused.append(name)
    if set(data.toolkit) != set(ARCHES):
        raise _bad(str(src), f"toolkit files for {sorted(data.toolkit)} only; expected {', '.join(ARCHES)}")
    return data


def _read_wheels(doc, src: Source, projects: tuple[str, ...]) -> dict[str, dict[str, str]]:
    wheels: dict[str, dict[str, str]] = {}
    for block in doc.get("framework_whl") or []:
        arch = SYSTEM_ARCH.get(block.get("system"))
        if arch is None:
            raise _bad(str(src), f"system: got {block.get('system')!r}; expected one of {', '.join(SYSTEM_ARCH)}")
        for item in block.get("whl") or []:
            name, sha, tag = item.get("filename", ""), item.get("sha256", ""), item.get("python", "")
            project = name.split("-", 1)[0]
            if project not in projects:
                continue
            if not re.fullmatch(r"cp3[0-9]+", tag) or not SHA256.fullmatch(sha):
                raise _bad(str(src), f"{name}: python {tag!r} / sha256 {sha!r} not understood")
            wheels.setdefault(f"{tag}-{arch}", {})[project] = sha
    return dict(sorted(wheels.items(), key=lambda kv: (kv[0].split("-")[1], int(kv[0].split("-")[0][3:]))))


# pip reads each of its options from PIP_<NAME> as well: the ones that are URLs go there, as
# an index's and a proxy's carry passwords and a command line is anyone's to read (ps).
PIP_ENV = {"--index-url": "PIP_INDEX_URL", "--extra-index-url": "PIP_EXTRA_INDEX_URL", "--proxy": "PIP_PROXY"}


def pip_env(pip_args: list[str]) -> tuple[list[str], dict[str, str]]:
    """pip's options (`--index-url URL`, `--proxy=URL`, ...) split into the ones that stay on
    its command line and the environment that carries the URLs."""
    args: list[str] = []
    env: dict[str, str] = {}
    rest = iter(pip_args)
    for arg in rest:
        name, eq, value = arg.partition("=")
        if name in PIP_ENV:
            var, url = PIP_ENV[name], value if eq else next(rest, "")
            # extra indexes add up (pip splits the variable at blanks); the others: the last one given
            env[var] = f"{env[var]} {url}" if var == "PIP_EXTRA_INDEX_URL" and var in env else url
        else:
            args.append(arg)
    return args, env


def fetch(version: str, dest: Path, pip_args: list[str] | None = None) -> Path:
    """`pip download --no-deps ascend-deployer==VERSION` (or the newest with "latest")."""
    spec = PACKAGE if version == "latest" else f"{PACKAGE}=={version}"
    dest.mkdir(parents=True, exist_ok=True)
    before = set(dest.glob("*.whl"))
    args, env = pip_env(pip_args or [])
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--disable-pip-version-check",
           "-q", "-d", str(dest), spec, *args]
    credentials.echo(cmd, env)
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
    if out.returncode != 0:
        raise UserError(f"cannot fetch {spec} with pip: {credentials.redact((out.stderr or out.stdout).strip()[-400:])}\n"
                        f"On a site without the index, pass a copy: invoke update --from DIR-OR-WHEEL")
    wheels = sorted(dest.glob("ascend_deployer-*.whl"))
    if version != "latest":
        wheels = [w for w in wheels if w.name.startswith(f"ascend_deployer-{version}-")]
    new = [w for w in wheels if w not in before] or wheels
    if not new:
        raise UserError(f"pip downloaded no {PACKAGE} wheel for {spec} into {dest}")
    return new[-1]


def newest_version(pip_args: list[str] | None = None) -> str:
    with tempfile.TemporaryDirectory(prefix="ascend-deployer-") as tmp:
        return Tree(fetch("latest", Path(tmp), pip_args)).version()
