"""What the package index serves for a project: its releases and, per release, the
Pythons and arches it has wheels for. Read from the index's simple page (PEP 691 JSON,
or the PEP 503 HTML a mirror may serve instead), through the site's index URL, CA bundle
and proxy: the same pip options a build uses."""
from __future__ import annotations

import html.parser
import json
import os
import ssl
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

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


@dataclass(frozen=True)
class IndexFile:
    name: str
    yanked: bool


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
    def __init__(self) -> None:
        super().__init__()
        self.files: list[IndexFile] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            a = dict(attrs)
            path = urllib.parse.urlsplit(a.get("href") or "").path
            self.files.append(IndexFile(urllib.parse.unquote(path.rsplit("/", 1)[-1]), "data-yanked" in a))


def parse_page(body: str, content_type: str) -> list[IndexFile]:
    if content_type.startswith(_JSON):
        return [IndexFile(f["filename"], bool(f.get("yanked"))) for f in json.loads(body).get("files", [])]
    links = _Links()
    links.feed(body)
    return links.files


def files(project: str, pip_args: list[str] | None = None) -> list[IndexFile]:
    args = pip_args or []
    index = (_option(args, "--index-url", "PIP_INDEX_URL") or DEFAULT_INDEX).rstrip("/") + "/"
    url = f"{index}{project.lower().replace('_', '-')}/"
    request = urllib.request.Request(url, headers={"Accept": f"{_JSON}, text/html;q=0.1"})
    try:
        with _opener(args).open(request, timeout=60) as r:
            return parse_page(r.read().decode(), r.headers.get("Content-Type", ""))
    except OSError as e:
        raise UserError(redact(f"cannot read {url} (the package index's page for {project}): {e}")) from e


def releases(index_files: list[IndexFile], pre: bool = False) -> dict[str, Release]:
    """Final releases (and pre-releases with `pre`: Huawei pairs some of MindSpore's) and
    the (arch, Python) of their CPython wheels; a release whose every file is yanked is
    left out, as pip leaves it out."""
    out: dict[str, Release] = {}
    for f in index_files:
        try:
            _, version, _, tags = parse_wheel_filename(f.name)
        except InvalidWheelFilename:
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
