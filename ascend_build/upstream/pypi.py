"""What the package index serves for a project: its releases and, per release, the
Pythons and arches it has wheels for (and, where asked, its sdist). Read from the index's
simple page (PEP 691 JSON, or the PEP 503 HTML a mirror may serve instead), through the
site's index URL, CA bundle and proxy: the same pip options a build uses. An sdist's
PKG-INFO is read from the head of its stream (PyPI's JSON API and PEP 658 metadata files
are not what every mirror serves; the index's files are)."""
from __future__ import annotations

import email.parser
import hashlib
import html.parser
import json
import os
import ssl
import tarfile
import urllib.parse
import urllib.request
import zlib
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path
from typing import Callable

from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, parse_sdist_filename, parse_wheel_filename
from packaging.version import Version

from .. import atomic
from ..engine.credentials import redact
from ..errors import UserError
from ..platforms import ARCHES

DEFAULT_INDEX = "https://pypi.org/simple/"
_JSON = "application/vnd.pypi.simple.v1+json"


@dataclass
class Release:
    version: str
    pythons: dict[str, set[str]] = field(default_factory=dict)    # arch (or "any") -> {"3.10", ...}
    yanked: bool = True                                           # until a file says otherwise
    sdist: IndexFile | None = None                                # its .tar.gz, where releases() was asked for it


@dataclass(frozen=True)
class IndexFile:
    name: str
    yanked: bool
    url: str = ""                  # absolute, without its #sha256= fragment
    sha256: str = ""               # as the index gives it ("": none given)
    requires_python: str = ""      # the index's data-requires-python


def _option(pip_args: list[str], name: str, env: str) -> str | None:
    if name in pip_args and pip_args.index(name) + 1 < len(pip_args):
        return pip_args[pip_args.index(name) + 1]
    return os.environ.get(env) or None


def _opener(pip_args: list[str]) -> urllib.request.OpenerDirector:
    cert = _option(pip_args, "--cert", "PIP_CERT")
    handlers: list[urllib.request.BaseHandler] = [urllib.request.HTTPSHandler(
        context=ssl.create_default_context(cafile=cert) if cert else ssl.create_default_context())]
    proxy = _option(pip_args, "--proxy", "PIP_PROXY")
    if proxy:
        handlers.append(urllib.request.ProxyHandler({"http": proxy, "https": proxy}))
    return urllib.request.build_opener(*handlers)


class _Links(html.parser.HTMLParser):
    def __init__(self, base: str) -> None:
        super().__init__()
        self.base = base
        self.files: list[IndexFile] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            a = dict(attrs)
            href = a.get("href") or ""
            url, fragment = urllib.parse.urldefrag(urllib.parse.urljoin(self.base, href))
            path = urllib.parse.urlsplit(href).path
            sha = fragment[len("sha256="):] if fragment.startswith("sha256=") else ""
            self.files.append(IndexFile(urllib.parse.unquote(path.rsplit("/", 1)[-1]), "data-yanked" in a, url, sha,
                                        a.get("data-requires-python") or ""))


def parse_page(body: str, content_type: str, base: str = "") -> list[IndexFile]:
    """The files of a project's page; `base`: the page's URL, which relative links are read against."""
    if content_type.startswith(_JSON):
        return [IndexFile(f["filename"], bool(f.get("yanked")),
                          urllib.parse.urldefrag(urllib.parse.urljoin(base, f.get("url") or ""))[0],
                          (f.get("hashes") or {}).get("sha256", ""), f.get("requires-python") or "")
                for f in json.loads(body).get("files", [])]
    links = _Links(base)
    links.feed(body)
    return links.files


def files(project: str, pip_args: list[str] | None = None) -> list[IndexFile]:
    args = pip_args or []
    index = (_option(args, "--index-url", "PIP_INDEX_URL") or DEFAULT_INDEX).rstrip("/") + "/"
    url = f"{index}{project.lower().replace('_', '-')}/"
    request = urllib.request.Request(url, headers={"Accept": f"{_JSON}, text/html;q=0.1"})
    try:
        with _opener(args).open(request, timeout=60) as r:
            return parse_page(r.read().decode(), r.headers.get("Content-Type", ""), r.geturl())
    except OSError as e:
        raise UserError(redact(f"cannot read {url} (the package index's page for {project}): {e}")) from e


def releases(index_files: list[IndexFile], pre: bool = False, sdists: bool = False) -> dict[str, Release]:
    """Final releases (and pre-releases with `pre`: Huawei pairs some of MindSpore's) and
    the (arch, Python) of their CPython wheels; with `sdists`, also the releases that have
    only a .tar.gz sdist, each release with its sdist. A release whose every file is yanked
    is left out, as pip leaves it out."""
    out: dict[str, Release] = {}
    for f in index_files:
        try:
            _, version, _, tags = parse_wheel_filename(f.name)
        except InvalidWheelFilename:
            if not (sdists and f.name.endswith(".tar.gz")):
                continue
            try:
                _, version = parse_sdist_filename(f.name)
            except InvalidSdistFilename:
                continue
            if version.is_devrelease or (version.is_prerelease and not pre):
                continue
            rel = out.setdefault(str(version), Release(str(version)))
            rel.yanked = rel.yanked and f.yanked
            if not f.yanked:
                rel.sdist = f
            continue
        if version.is_devrelease or (version.is_prerelease and not pre):
            continue
        rel = out.setdefault(str(version), Release(str(version)))
        rel.yanked = rel.yanked and f.yanked
        for tag in tags:
            # "any": a CPython wheel tagged for any platform (MindSpore's aarch64 wheels on PyPI)
            arch = next((a for a in ARCHES if tag.platform.endswith(a)), "any" if tag.platform == "any" else None)
            if arch and tag.interpreter.startswith("cp3") and not f.yanked:
                rel.pythons.setdefault(arch, set()).add(f"3.{tag.interpreter[3:]}")
    return {v: r for v, r in sorted(out.items(), key=lambda kv: Version(kv[0])) if not r.yanked}


# An sdist's PKG-INFO is a few kB (its long description at most a few hundred): more is not one.
_PKG_INFO_MAX = 4 << 20


def sdist_metadata(file: IndexFile, pip_args: list[str] | None = None) -> Message:
    """The core metadata of an sdist on the index, from its PKG-INFO: the archive streamed
    and left as soon as that is read (vllm-ascend's sdist is 15 MB; its PKG-INFO lies in the
    first few hundred kB)."""
    request = urllib.request.Request(file.url)
    try:
        with _opener(pip_args or []).open(request, timeout=60) as r:
            return metadata(pkg_info(r, file.name))
    except OSError as e:
        raise UserError(redact(f"cannot read {file.url} (the sdist {file.name}): {e}")) from e


def pkg_info(stream, name: str) -> str:
    """The text of the PKG-INFO at the top of a .tar.gz sdist read from `stream` (read no
    further than it)."""
    try:
        with tarfile.open(fileobj=stream, mode="r|gz") as tar:
            for member in tar:
                if member.isfile() and member.name.count("/") == 1 and member.name.endswith("/PKG-INFO"):
                    if member.size > _PKG_INFO_MAX:
                        break
                    body = tar.extractfile(member)
                    assert body is not None           # a regular file
                    return body.read().decode("utf-8", "replace")
    except (tarfile.TarError, EOFError, zlib.error) as e:
        raise UserError(f"{name}: not a readable .tar.gz sdist ({e}); the index's file is broken or not what its "
                        f"name says") from e
    raise UserError(f"{name}: no PKG-INFO (at most {_PKG_INFO_MAX >> 20} MB) at the top of the sdist, where every "
                    f"sdist has its metadata; the index's file is not an sdist")


def sdist_files(file: IndexFile, wanted: Callable[[str], bool], pip_args: list[str] | None = None) -> dict[str, str]:
    """The sdist's PKG-INFO and the other files at its top that `wanted` names, by name, from
    its stream (vllm-ascend's requirements.txt and Dockerfiles)."""
    request = urllib.request.Request(file.url)
    try:
        with _opener(pip_args or []).open(request, timeout=300) as r:
            return top_files(r, file.name, wanted)
    except OSError as e:
        raise UserError(redact(f"cannot read {file.url} (the sdist {file.name}): {e}")) from e


def cached_sdist_files(file: IndexFile, wanted: Callable[[str], bool], key: str, cache: Path | None,
                       pip_args: list[str] | None = None) -> dict[str, str]:
    """sdist_files, kept in `cache` by the index's sha256 of the sdist and `key` (what `wanted`
    takes, in words): a file of the index does not change under its sum, so an import reads each
    sdist once per machine, not each time (vllm-ascend's are 15 MB, about fifty of them). No sum
    from the index, or no cache: read as before."""
    if cache is None or len(file.sha256) != 64:
        return sdist_files(file, wanted, pip_args)
    path = cache / "sdist-top-files" / f"{hashlib.sha256(f'{file.sha256} {key}'.encode()).hexdigest()}.json"
    try:
        kept = json.loads(path.read_text())
        if kept.get("sdist") == file.name and isinstance(kept.get("files"), dict):
            return {str(k): str(v) for k, v in kept["files"].items()}
    except (OSError, ValueError):
        pass                    # none yet, or unreadable: read the sdist again
    found = sdist_files(file, wanted, pip_args)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(path, json.dumps({"sdist": file.name, "sha256": file.sha256, "key": key, "files": found}))
    except OSError:
        pass                    # a read-only cache: the import goes on without it
    return found


def top_files(stream, name: str, wanted: Callable[[str], bool]) -> dict[str, str]:
    """The PKG-INFO and `wanted` files at the top of a .tar.gz sdist read from `stream`. An
    archive in name order (setuptools writes them so) is left once PKG-INFO and
    requirements.txt have gone by: every Dockerfile sorts before them."""
    found: dict[str, str] = {}
    last = ""
    in_order = True
    try:
        with tarfile.open(fileobj=stream, mode="r|gz") as tar:
            for member in tar:
                top, _, rest = member.name.partition("/")
                in_order = in_order and member.name >= last
                last = member.name
                if member.isfile() and rest and "/" not in rest and (rest == "PKG-INFO" or wanted(rest)):
                    if member.size > _PKG_INFO_MAX:
                        raise UserError(f"{name}: {rest} is {member.size} bytes, not a file of its kind")
                    body = tar.extractfile(member)
                    assert body is not None           # a regular file
                    found[rest] = body.read().decode("utf-8", "replace")
                if in_order and "PKG-INFO" in found and "requirements.txt" in found:
                    break
    except (tarfile.TarError, EOFError, zlib.error) as e:
        raise UserError(f"{name}: not a readable .tar.gz sdist ({e}); the index's file is broken or not what its "
                        f"name says") from e
    if "PKG-INFO" not in found:
        raise UserError(f"{name}: no PKG-INFO at the top of the sdist, where every sdist has its metadata; the index's "
                        f"file is not an sdist")
    return found


def metadata(text: str) -> Message:
    return email.parser.Parser().parsestr(text, headersonly=True)
