"""Ascend's published tables, the second source `invoke update` reads (the first, Huawei's
`ascend-deployer` package, stops at CANN 9.0.0):

- Ascend/pytorch `COMPATIBILITY.en.md`: TorchNPU release -> branch, PyTorch, CANN;
- TorchNPU release notes (one per TorchNPU release, e.g. 26.2.0): the same per branch,
  and the grid of TorchNPU series x CANN series that work together ("compatible");
- Ascend/pytorch release tags (`v26.0.1-pytorch2.10.0`) with the package version each
  tag builds (its version.txt): which TorchNPU release a PyPI release belongs to;
- CANN release notes (cann/release-management, one per CANN release): the Ascend HDK
  driver a release is paired with, and the table of driver series it runs on.

Each parser takes the text as published (markdown with HTML tables) and returns plain
records with the file they came from; nothing here decides between sources (update.py
does, with `upstream.choices`)."""
from __future__ import annotations

import html.parser
import json
import re
import ssl
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError

CANN_VERSION = re.compile(r"\d+\.\d+\.(?:RC\d+|\d+)(?:\.\d+)?", re.I)
TORCH_NPU = re.compile(r"\d+\.\d+\.\d+(?:\.post\d+)?")
DRIVER = re.compile(r"\d+\.\d+\.(?:RC\d+|\d+|X)(?:\.\d+)?", re.I)
RELEASE_TAG = re.compile(r"v(\d+\.\d+\.\d+)-pytorch(\d+\.\d+\.\d+)")      # no -beta, no -0day


# ---------------------------------------------------------------------------- tables

class _Tables(html.parser.HTMLParser):
    """Every <table> of a document as rows of cell texts (rowspan/colspan ignored:
    the tables read here put one value per cell); a row of <th> cells only is a header,
    marked by HEADER as its first element."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._all_th = True
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._depth += 1
            self.tables.append([])
        elif tag == "tr" and self._depth:
            self._row, self._all_th = [], True
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
            self._all_th = self._all_th and tag == "th"
        elif tag == "br" and self._cell is not None:
            self._cell.append(" ")

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._row:
                self.tables[-1].append(([HEADER] if self._all_th else []) + self._row)
            self._row = None
        elif tag == "table" and self._depth:
            self._depth -= 1

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


HEADER = "\0header"


def html_tables(text: str) -> list[list[list[str]]]:
    parser = _Tables()
    parser.feed(text)
    return [t for t in parser.tables if t]


def _strip(table: list[list[str]]) -> list[list[str]]:
    return [row[1:] if row and row[0] == HEADER else row for row in table]


def pipe_tables(text: str) -> list[list[list[str]]]:
    """Markdown tables: header and rows (the |---| line dropped), links and <br> as text."""
    tables, current = [], []
    for line in text.splitlines() + [""]:
        s = line.strip()
        if s.startswith("|") and s.endswith("|"):
            cells = [_plain(c) for c in s.strip("|").split("|")]
            if not all(re.fullmatch(r":?-+:?", c) for c in cells if c):
                current.append(cells)
        elif current:
            tables.append(current)
            current = []
    return tables


def _plain(cell: str) -> str:
    cell = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", cell)          # [text](link) -> text
    cell = re.sub(r"<br\s*/?>", " ", cell)
    cell = re.sub(r"<[^>]+>", "", cell).replace("*", "")
    return " ".join(cell.split())


# ---------------------------------------------------------------------------- records

@dataclass(frozen=True)
class Pairing:
    release: str          # torch_npu package version, e.g. 2.12.0.post3
    cann: str             # e.g. 9.1.0
    branch: str           # e.g. v2.12.0-26.1.0
    torch: str
    source: str


@dataclass
class TorchNpuDocs:
    pairings: list[Pairing] = field(default_factory=list)
    compatible: dict[str, list[str]] = field(default_factory=dict)     # "26.1" -> ["8.5", "9.0", ...]
    compatible_source: str = ""
    series: dict[str, tuple[str, str]] = field(default_factory=dict)  # release -> (TorchNPU version, source)


@dataclass
class CannNotes:
    version: str
    drivers: list[str]                      # the paired drivers, as listed (first: the one it is paired with)
    runs_on: dict[str, list[str]]           # CANN version or series ("9.1.X") -> driver series marked Y
    source: str


def series_of(branch_or_version: str) -> str | None:
    """The TorchNPU release of a branch or tag (v2.12.0-26.1.0, v26.0.1-pytorch2.10.0) or a
    TorchNPU version (26.1.0)."""
    m = re.fullmatch(r"v\d+\.\d+\.\d+-(\d+\.\d+\.\d+)", branch_or_version) or RELEASE_TAG.fullmatch(branch_or_version)
    if m:
        return m.group(1)
    return branch_or_version if re.fullmatch(r"\d+\.\d+\.\d+", branch_or_version) else None


def cann_series(version: str) -> str:
    """9.1.0 -> 9.1 (the rows and columns of the compatibility tables are X.Y.X)."""
    return ".".join(version.split(".")[:2])


def parse_compatibility(text: str, source: str) -> TorchNpuDocs:
    """COMPATIBILITY.en.md: every row of the tables headed by the TorchNPU package version,
    its branch, the PyTorch version and `CANN x.y.z`."""
    out = TorchNpuDocs()
    for table in pipe_tables(text):
        head = [h.lower() for h in table[0]]
        if not (head and "torchnpu" in head[0] and any("cann" in h for h in head)):
            continue
        where = {name: next(i for i, h in enumerate(head) if key in h)
                 for name, key in (("release", "torchnpu"), ("branch", "branch"), ("torch", "pytorch"), ("cann", "cann"))}
        for row in table[1:]:
            release = row[where["release"]].split()[0]
            cann = CANN_VERSION.search(row[where["cann"]])
            if not TORCH_NPU.fullmatch(release) or not cann:
                continue           # release candidates and betas (2.1.0.rc1, 1.11.0.rc2 (beta)) are not releases
            out.pairings.append(Pairing(release, cann.group(0), row[where["branch"]], row[where["torch"]], source))
    if not out.pairings:
        raise UserError(f"{source}: no TorchNPU -> CANN table found (columns: TorchNPU, branch, PyTorch, CANN)")
    return out


def parse_release_notes(text: str, source: str) -> TorchNpuDocs:
    """TorchNPU release notes: the branch table (branch, PyTorch, TorchNPU, package
    version, CANN, Python, ...) and the compatibility grid (TorchNPU series rows, CANN
    series columns, Y where they work together)."""
    out = TorchNpuDocs(compatible_source=source)
    for table in pipe_tables(text):
        head = table[0]
        if len(head) < 5 or "TorchNPU" not in " ".join(head):
            continue
        for row in table[1:]:
            branch, torch, _, release, cann = row[:5]
            found = CANN_VERSION.search(cann)
            if TORCH_NPU.fullmatch(release) and found:
                out.pairings.append(Pairing(release, found.group(0), branch, torch, source))
    for table in map(_strip, html_tables(text)):
        columns = [c for c in table[0] + (table[1] if len(table) > 1 else []) if re.fullmatch(r"\d+\.\d+\.X", c)]
        if not columns:
            continue
        for row in table[1:]:
            if row and re.fullmatch(r"\d+\.\d+\.X", row[0]) and len(row) == len(columns) + 1:
                out.compatible[row[0][:-2]] = [col[:-2] for col, mark in zip(columns, row[1:]) if mark.upper() == "Y"]
    if not out.pairings:
        raise UserError(f"{source}: no branch table (TorchNPU package version -> CANN) found")
    return out


def parse_tags(text: str, source: str) -> TorchNpuDocs:
    """`<tag> <package version>` lines (a release tag and the version.txt it builds):
    which TorchNPU release each package version was published in."""
    out = TorchNpuDocs()
    for line in text.splitlines():
        parts = line.split()
        tag = RELEASE_TAG.fullmatch(parts[0]) if len(parts) == 2 else None
        if tag and TORCH_NPU.fullmatch(parts[1]):
            out.series[parts[1]] = (tag.group(1), f"{source}: {parts[0]}")
    return out


def parse_cann_notes(text: str, version: str, source: str) -> CannNotes:
    """CANN release notes: the driver table (CANN -> Ascend HDK, an HTML table or the
    markdown one of 9.0.x, which lists earlier releases too) and the compatibility table
    (CANN rows, HDK series columns, Y or N)."""
    drivers: list[str] = []
    runs_on: dict[str, list[str]] = {}
    for marked in html_tables(text) + pipe_tables(text):
        heads = [r[1:] for r in marked if r and r[0] == HEADER]
        table = _strip(marked)
        if "CANN" not in " ".join(table[0]).upper():
            continue
        columns = next((r for r in heads if len(r) >= 2 and all(_is_driver(c) for c in r)), [])
        for row in table[1:]:
            name = row[0].replace("CANN", "").strip()
            if row is columns or not _is_cann(name):
                continue
            if columns and len(row) == len(columns) + 1 and all(m.upper() in ("Y", "N") for m in row[1:]):
                runs_on[name] = [col for col, mark in zip(columns, row[1:]) if mark.upper() == "Y"]
            elif len(row) == 2:
                listed = [d.group(0) for d in DRIVER.finditer(row[1].replace("Ascend HDK", " "))]
                runs_on.setdefault(name, []).extend(x for x in listed if x not in runs_on.get(name, []))
                if name == version:
                    drivers = listed
    if not drivers:
        raise UserError(f"{source}: no driver (Ascend HDK) named for CANN {version}")
    return CannNotes(version, drivers, runs_on, source)


def _is_cann(cell: str) -> bool:
    return bool(re.fullmatch(r"\d+\.\d+\.(?:RC\d+|\d+|X)", cell.strip(), re.I))


def _is_driver(cell: str) -> bool:
    """A driver column of a compatibility table: 25.2.X, 26.1.0, 26.0.RC1/25.7.RC1."""
    return all(re.fullmatch(r"\d+\.\d+\.(?:X|RC\d+|\d+)", part.strip(), re.I) for part in cell.split("/"))


def driver_entries(columns: list[str]) -> list[str]:
    """The drivers a compatibility row allows, as matrix entries: a series `25.2` (any
    25.2.x) or an exact version `26.0.RC1` (a column `26.0.RC1/25.7.RC1` is two)."""
    out = []
    for col in columns:
        for part in col.split("/"):
            out.append(part[:-2] if part.upper().endswith(".X") else part)
    return out


def runs_on(notes: list[CannNotes], version: str) -> tuple[list[str], list[str]]:
    """(driver entries, sources) for one CANN release: every notes row about it, by its
    version or its series (9.1.X)."""
    found, sources = [], []
    for n in notes:
        for row, cols in n.runs_on.items():
            if row.upper() == version.upper() or (row.upper().endswith(".X") and cann_series(version) == row[:-2]):
                found += [d for d in driver_entries(cols) if d not in found]
                sources.append(n.source)
    return found, sources


# ---------------------------------------------------------------------------- fetching

@dataclass(frozen=True)
class Doc:
    key: str          # compatibility | tags | torch_npu_notes <v> | cann_notes <v>
    url: str
    file: str         # the name of a local copy (--from-docs DIR)


def configured(upstream: dict) -> list[Doc]:
    docs = upstream.get("docs") or {}
    out = []
    for key in ("compatibility", "tags"):
        if key in docs:
            out.append(Doc(key, docs[key]["url"], docs[key]["file"]))
    for group in ("torch_npu_notes", "cann_notes"):
        for version, entry in (docs.get(group) or {}).items():
            out.append(Doc(f"{group} {version}", entry["url"], entry["file"]))
    return out


def read(doc: Doc, folder: Path | None, opener: urllib.request.OpenerDirector | None = None) -> tuple[str, str]:
    """(text, where it came from): the copy in `folder`, else the URL."""
    if folder is not None:
        path = folder / doc.file
        if not path.is_file():
            raise UserError(f"--from-docs {folder}: no {doc.file} (the copy of {doc.url}); put it there or "
                            f"drop {doc.key} from upstream.docs")
        return path.read_text(errors="replace"), f"{doc.file} (copy of {doc.url})"
    try:
        with (opener or urllib.request.build_opener()).open(doc.url, timeout=60) as r:
            body = r.read().decode(errors="replace")
    except OSError as exc:
        raise UserError(f"cannot read {doc.url} ({doc.key}): {exc}; on a site without GitHub, pass a copy: "
                        f"invoke update --from-docs DIR (the file {doc.file})") from None
    if doc.key == "tags" and doc.url.startswith("https://api.github.com/"):
        body = _tag_versions(body, doc.url, opener)
    return body, doc.url


def _tag_versions(body: str, url: str, opener) -> str:
    """The GitHub API's tag list -> `<tag> <version.txt>` lines for the release tags."""
    repo = url.split("/repos/")[1].split("/tags")[0]
    lines = []
    for tag in json.loads(body):
        name = tag.get("name", "")
        if RELEASE_TAG.fullmatch(name):
            raw = f"https://raw.githubusercontent.com/{repo}/{name}/version.txt"
            with (opener or urllib.request.build_opener()).open(raw, timeout=60) as r:
                versions = [v for v in r.read().decode().split() if TORCH_NPU.fullmatch(v)]
            if versions:
                lines.append(f"{name} {versions[0]}")
    return "\n".join(lines) + "\n"


def opener(ca_bundle: str | None, proxy: str | None) -> urllib.request.OpenerDirector:
    handlers: list[urllib.request.BaseHandler] = [urllib.request.HTTPSHandler(
        context=ssl.create_default_context(cafile=ca_bundle) if ca_bundle else ssl.create_default_context())]
    if proxy:
        handlers.append(urllib.request.ProxyHandler({"http": proxy, "https": proxy}))
    return urllib.request.build_opener(*handlers)


@dataclass
class DocsData:
    torch_npu: TorchNpuDocs
    cann: list[CannNotes]
    read: list[str]                          # where each document came from


def load(upstream: dict, folder: Path | None, ca_bundle: str | None = None, proxy: str | None = None) -> DocsData:
    docs = configured(upstream)
    if not docs:
        return DocsData(TorchNpuDocs(), [], [])
    web = None if folder else opener(ca_bundle, proxy)
    merged, cann, where = TorchNpuDocs(), [], []
    for doc in docs:
        text, source = read(doc, folder, web)
        where.append(source)
        name = f"{doc.key}: {source}"
        if doc.key == "compatibility":
            part = parse_compatibility(text, name)
        elif doc.key == "tags":
            part = parse_tags(text, name)
        elif doc.key.startswith("torch_npu_notes"):
            part = parse_release_notes(text, name)
        else:
            cann.append(parse_cann_notes(text, doc.key.split()[1], name))
            continue
        merged.pairings += part.pairings
        merged.series.update(part.series)
        if part.compatible:
            merged.compatible, merged.compatible_source = part.compatible, part.compatible_source
    return DocsData(merged, cann, where)
