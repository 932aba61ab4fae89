"""Huawei's official CANN container images (GitHub Ascend/cann-container-image), a source
of CANN releases `invoke update --cann-images DIR` reads beside the deployer data: their
Dockerfiles install releases the deployer data does not list (8.2.RC2, 8.3.RC2, 8.5.1,
8.5.2).

Each `cann/<tag>/Dockerfile` (the tag names the version, chip, OS and Python:
`8.5.1-910b-ubuntu22.04-py3.11`) downloads the release's files from variables in one RUN,
`CANN_TOOLKIT_URL`, `CANN_KERNELS_URL` (kernels packages, up to 8.3) or `CANN_OPS_URL`
(operator packages, from 8.5) and `CANN_NNAL_URL`, with `${ARCH}` set from the build's
platform (aarch64, x86_64); variables set by ARG or ENV, or earlier in the RUN, are
expanded too. A file is known by its name (toolkit, kernels or ops per chip, NNAL), as in
the deployer data. The Dockerfiles publish no sums: a file's sha256 is null, for `invoke
pin` on first use. Pre-releases (`8.5.0.alpha001`, `9.1.0-beta.3`) and images built FROM
a released one (`-devel`) are skipped, and said so.

Read from a checkout (its commit is the source), a bare clone (the same), or a plain
folder (named by its folder). Nothing here decides between sources: update.py does."""
from __future__ import annotations

import fnmatch
import io
import re
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

from ..errors import UserError
from ..matrix.official import CANN_FORM, cann_tag
from ..matrix.schema import URL
from ..platforms import ARCHES
from . import cann_env
from .deployer import CANN_VERSION, Published, own_kernels

REPO = "Ascend/cann-container-image"
ROOT = "cann"
# The files of a release, by their names (the .run the Dockerfiles download).
_TOOLKIT = re.compile(r"Ascend-cann-toolkit_(?P<v>[^_]+)_linux-(?P<arch>aarch64|x86_64)\.run")
_KERNELS = re.compile(r"Ascend-cann-kernels-(?P<chip>[0-9A-Za-z]+)_(?P<v>[^_]+)_linux(?:-(?P<arch>aarch64|x86_64))?\.run")
_OPS = re.compile(r"Ascend-cann-(?P<chip>[0-9A-Za-z]+)-ops_(?P<v>[^_]+)_linux-(?P<arch>aarch64|x86_64)\.run")
_NNAL = re.compile(r"Ascend-cann-nnal_(?P<v>[^_]+)_linux-(?P<arch>aarch64|x86_64)\.run")
# Docker's own platform arguments, per arch, beside the Dockerfiles' ARCH.
_BUILTIN = {arch: {"ARCH": arch, "TARGETARCH": {"aarch64": "arm64", "x86_64": "amd64"}[arch],
                   "TARGETPLATFORM": {"aarch64": "linux/arm64", "x86_64": "linux/amd64"}[arch]} for arch in ARCHES}
_UNSET = "\0unset"             # a variable set by a command (ARCH=$(case ...)): not a value to read


@dataclass(frozen=True)
class FileName:
    """What a downloaded file's name says: toolkit, kernels (chip) or nnal; its release and arch."""
    kind: str
    version: str
    arch: str | None           # None: one kernels file for both arches (up to 8.0.RC2)
    chip: str = ""

    @property
    def part(self) -> str:
        return f"kernels.{self.chip}" if self.kind == "kernels" else self.kind


def classify(name: str) -> FileName | None:
    m = _TOOLKIT.fullmatch(name)
    if m:
        return FileName("toolkit", m["v"], m["arch"])
    m = _NNAL.fullmatch(name)
    if m:
        return FileName("nnal", m["v"], m["arch"])
    m = _KERNELS.fullmatch(name) or _OPS.fullmatch(name)
    found = (m["chip"], m) if m else own_kernels(name, ".run")
    if found:
        chip, m = found
        return FileName("kernels", m["v"], m["arch"], chip)
    return None


@dataclass
class ImageRelease:
    """One CANN release as the images install it."""
    version: str
    dockerfiles: list[str] = field(default_factory=list)         # their paths in the repository
    chips: list[str] = field(default_factory=list)               # as the tags name them (a3, 910b)
    oses: list[str] = field(default_factory=list)                # ubuntu22.04, openeuler24.03
    pythons: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)                # the images' tags, as the folders name them
    devel_tags: list[str] = field(default_factory=list)          # their -devel twins (built FROM them, no download)
    # "toolkit.aarch64", "kernels.910b.x86_64", "nnal.aarch64" -> URL -> the Dockerfiles that download it
    files: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    source: str = ""
    notes: list[str] = field(default_factory=list)
    envs: dict[str, cann_env.Env] = field(default_factory=dict)   # Dockerfile -> the CANN ENV its last stage sets
    env: cann_env.EnvFound | None = None                         # the one most of them set

    @property
    def env_source(self) -> str:
        """Where the environment was read: the copy, one Dockerfile and how many more, and
        what the others set otherwise."""
        if self.env is None:
            return ""
        where = self.source.split(": ", 1)[0]
        first, more = self.env.dockerfiles[0], len(self.env.dockerfiles) - 1
        said = (f"{where}: {first}" + (f" and {more} more Dockerfile{'s' if more > 1 else ''}" if more else "")
                + " (the last stage's ENV under the notes 'obtained from .../set_env.sh')")
        return said + "".join(f"; {d}" for d in self.env.differ)


def published(url: str) -> Published:
    """A file the images download: its .run at its URL, with no published sum."""
    return Published("", url, None, unquote(PurePosixPath(url).name))


@dataclass
class ImagesData:
    where: str                                  # "Ascend/cann-container-image <commit>"
    releases: dict[str, ImageRelease]
    dockerfiles: int
    skipped: dict[str, list[str]] = field(default_factory=dict)  # why -> Dockerfiles

    def summary(self) -> str:
        return (f"{self.where}: {self.dockerfiles} Dockerfiles under {ROOT}/, "
                f"{sum(len(r.dockerfiles) for r in self.releases.values())} of them for "
                f"{len(self.releases)} CANN releases")


# ---------------------------------------------------------------------------- the tree

def _git(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], capture_output=True)


def _git_dir(path: Path) -> Path | None:
    return next((c for c in (path / ".git", path) if (c / "HEAD").is_file() and (c / "objects").is_dir()), None)


def dockerfiles(location: Path) -> tuple[dict[str, str], str]:
    """The `cann/<tag>/Dockerfile` texts of a checkout, bare clone or folder, by path; and
    how to name the copy (the repository and its commit, else the folder's name)."""
    if not location.is_dir():
        raise UserError(f"--cann-images {location}: no such folder")
    gitdir = _git_dir(location)
    named = f"{REPO} (a copy in a folder named {location.resolve().name})"
    if gitdir is not None:
        head = _git(["--git-dir", str(gitdir), "rev-parse", "HEAD"])
        if head.returncode == 0:
            named = f"{REPO} {head.stdout.decode().strip()}"
        if gitdir == location:                  # a bare clone: its HEAD's tree
            if head.returncode != 0:
                raise UserError(f"--cann-images {location}: a git repository with no commit")
            tar = _git(["--git-dir", str(gitdir), "archive", "--format=tar", "HEAD", ROOT])
            if tar.returncode != 0:
                raise UserError(f"--cann-images {location}: no {ROOT}/ in its HEAD ({tar.stderr.decode().strip()[-200:]})")
            texts = {}
            with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as archive:
                for member in archive.getmembers():
                    if member.isfile() and _wanted(member.name):
                        texts[member.name] = archive.extractfile(member).read().decode(errors="replace")  # type: ignore[union-attr]
            return texts, named
        dirty = _git(["--git-dir", str(gitdir), "--work-tree", str(location), "status", "--porcelain", "--", ROOT])
        if head.returncode == 0 and dirty.stdout.strip():
            named += " with local changes"
    return {str(p.relative_to(location).as_posix()): p.read_text(errors="replace")
            for p in sorted(location.glob(f"{ROOT}/*/Dockerfile")) if p.is_file()}, named


def _wanted(path: str) -> bool:
    parts = path.split("/")
    return len(parts) == 3 and parts[0] == ROOT and parts[2] == "Dockerfile"


# ---------------------------------------------------------------------------- Dockerfiles

def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Instructions with their continuation lines joined, comment lines dropped (as Docker
    drops them, inside a continued instruction too), each with the line it starts on."""
    lines, current, start = [], "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        if raw.lstrip().startswith("#"):
            continue
        start = start if current else number
        if raw.rstrip().endswith("\\"):
            current += raw.rstrip()[:-1] + " "
            continue
        lines.append((start, current + raw))
        current = ""
    if current:
        lines.append((start, current))
    return [(n, line.strip()) for n, line in lines if line.strip()]


_ASSIGN = re.compile(r"(?<![\w$-])([A-Za-z_][A-Za-z0-9_]*)=(\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^\s;&|]*)")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:-|%%|%|##|#)([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _trim(value: str, op: str, pattern: str) -> str:
    """The shell's ${V%p} ${V%%p} ${V#p} ${V##p}: the shortest or longest match removed."""
    n = len(value)
    if op in ("%", "%%"):
        cuts = range(n, -1, -1) if op == "%" else range(0, n + 1)
        return next((value[:i] for i in cuts if fnmatch.fnmatchcase(value[i:], pattern)), value)
    cuts = range(0, n + 1) if op == "#" else range(n, -1, -1)
    return next((value[i:] for i in cuts if fnmatch.fnmatchcase(value[:i], pattern)), value)


def expand(text: str, scope: dict[str, str], arch: str, where: str, depth: int = 0) -> str:
    """`text` with its variables replaced: ARCH (and Docker's TARGETARCH/TARGETPLATFORM) for
    `arch`, the rest from `scope`; a variable nothing sets is an error naming it."""
    if depth > 10:
        raise UserError(f"{where}: variables that refer to each other without end in {text!r}")

    def one(m: re.Match) -> str:
        name, op, arg = (m[1], m[2], m[3] or "") if m[1] else (m[4], None, "")
        if name in _BUILTIN[arch]:
            value: str | None = _BUILTIN[arch][name]
        elif name in scope and scope[name] != _UNSET:
            value = expand(scope[name], scope, arch, where, depth + 1)
        else:
            value = None
        if op == ":-":
            return value if value else expand(arg, scope, arch, where, depth + 1)
        if value is None:
            raise UserError(f"{where}: ${{{name}}} is set by nothing this importer reads (ARG, ENV, or an "
                            f"assignment earlier in the RUN); cannot tell which file it downloads")
        return _trim(value, op, arg) if op else value
    return _VAR.sub(one, text)


def downloads(text: str, where: str) -> list[tuple[str, dict[str, str]]]:
    """(variable, arch -> URL) for each `CANN_*_URL=...` a RUN sets, in order."""
    scope: dict[str, str] = {}
    found = []
    for number, line in _logical_lines(text):
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word == "ARG":
            name, eq, value = rest.strip().partition("=")
            if eq:
                scope[name.strip()] = _unquote(value.strip())
            continue
        if word == "ENV":
            pairs = _ASSIGN.findall(rest)
            if pairs:
                scope.update((name, _unquote(value)) for name, value in pairs)
            elif len(rest.split(None, 1)) == 2:
                name, value = rest.split(None, 1)
                scope[name] = _unquote(value.strip())
            continue
        if word != "RUN":
            continue
        local = dict(scope)                 # what a RUN sets lives in that RUN
        for name, raw in _ASSIGN.findall(rest):
            value = _unquote(raw)
            local[name] = _UNSET if value.startswith(("$(", "`")) else value
            if re.fullmatch(r"CANN_[A-Z0-9_]*URL", name) and local[name] != _UNSET:
                urls = {arch: expand(value, local, arch, f"{where}: {name}") for arch in ARCHES}
                bad = next((u for u in urls.values() if not re.fullmatch(r"https?://" + URL, u)), None)
                if bad is not None:     # it would be written into imported.yaml, then into Dockerfiles
                    raise UserError(f"{where} line {number}: {name}={bad[:120]!r} is not a URL this project takes "
                                    f"(no quote, space, $, ; or &); the import stops (nothing was written)")
                found.append((name, urls))
    return found


# ---------------------------------------------------------------------------- reading

def read(location: Path) -> ImagesData:
    """Every released CANN version the images install: its files per arch and chip, the
    chips, OSes and Pythons it is published for, and the Dockerfiles that say so."""
    texts, where = dockerfiles(location)
    if not texts:
        raise UserError(f"--cann-images {location}: no {ROOT}/<tag>/Dockerfile inside; pass a checkout of {REPO} "
                        f"(git clone https://github.com/{REPO}) or a copy of its tree")
    releases: dict[str, ImageRelease] = {}
    skipped: dict[str, list[str]] = {}
    devel: list[str] = []
    for path in sorted(texts):
        tag = path.split("/")[1]
        m = cann_tag(tag)
        if m is None:
            skipped.setdefault(f"a tag this importer cannot read ({CANN_FORM})", []).append(path)
            continue
        urls = downloads(texts[path], path)
        if not urls:
            skipped.setdefault("no CANN download (an image built FROM a released one)", []).append(path)
            devel += [tag] if m.devel and not m.pre_release else []
            continue
        files = [(var, arch, url, classify(unquote(PurePosixPath(url).name))) for var, per in urls
                 for arch, url in per.items()]
        versions = {f.version for _, _, _, f in files if f is not None and f.kind == "toolkit"}
        if not versions:
            skipped.setdefault("CANN downloads but no toolkit (its release unknown)", []).append(path)
            continue
        if len(versions) > 1:
            raise UserError(f"{where}: {path}: downloads the toolkits of {', '.join(sorted(versions))}; "
                            f"expected one release's")
        version = versions.pop()
        if not CANN_VERSION.fullmatch(version):
            skipped.setdefault("a pre-release (alpha, beta)", []).append(path)
            continue
        if m.cann.upper() != version.upper():
            raise UserError(f"{where}: {path}: the tag says {m.cann}, its toolkit is {version}")
        rel = releases.setdefault(version, ImageRelease(version))
        rel.dockerfiles.append(path)
        rel.tags.append(tag)
        rel.envs[path] = cann_env.final_env(texts[path], path, version)
        for attr, value in (("chips", m.chip), ("oses", m.os), ("pythons", m.python)):
            if value not in getattr(rel, attr):
                getattr(rel, attr).append(value)
        for var, arch, url, name in files:
            if name is None:
                rel.notes.append(f"{path}: {var} downloads {PurePosixPath(url).name}, not a toolkit, kernels, "
                                 f"operator or NNAL package: not imported")
            elif name.version != version:
                rel.notes.append(f"{path}: {var} downloads {PurePosixPath(url).name}, a file of CANN {name.version}: "
                                 f"not imported as {version}'s")
            elif name.arch not in (None, arch):
                raise UserError(f"{where}: {path}: {var} names {name.arch} where ARCH is {arch}: {url}")
            else:
                rel.files.setdefault(f"{name.part}.{arch}", {}).setdefault(url, []).append(path)
    _twins(releases, devel, skipped)
    for rel in releases.values():
        _finish(rel, where)
    return ImagesData(where, releases, len(texts), skipped)


def _twins(releases: dict[str, ImageRelease], devel: list[str], skipped: dict[str, list[str]]) -> None:
    """The -devel tags of released images (9.0.0 on: each FROM its twin, the same tag less
    -devel), recorded with their twin's release; one whose twin the import did not read is
    said."""
    by_tag = {t: rel for rel in releases.values() for t in rel.tags}
    for tag in devel:
        rel = by_tag.get(tag.removesuffix("-devel"))
        if rel is None:
            skipped.setdefault("a -devel tag whose twin is no released image read here", []).append(
                f"{ROOT}/{tag}/Dockerfile")
        else:
            rel.devel_tags.append(tag)


def _finish(rel: ImageRelease, where: str) -> None:
    """A release's lists in order, its one environment, and where it was read."""
    rel.chips.sort()
    rel.oses.sort()
    rel.pythons.sort(key=lambda p: int(p.split(".")[1]))
    rel.notes = list(dict.fromkeys(rel.notes))
    rel.env = cann_env.release_env(rel.envs)
    first, more = rel.dockerfiles[0], len(rel.dockerfiles) - 1
    rel.source = (f"{where}: {first}" + (f" and {more} more Dockerfile{'s' if more > 1 else ''} of {rel.version}"
                                         if more else "")
                  + f" (images for {', '.join(rel.chips)} on {', '.join(rel.oses)})")
