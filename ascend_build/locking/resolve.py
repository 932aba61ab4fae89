"""`invoke lock`: resolve a stack's Python packages for the target platform and write its
lock (see lock.py for what a lock is).

The resolver is uv (`uv pip compile`), chosen over pip's `--dry-run --report` and
pip-tools because it resolves for another platform and Python *with that target's
environment markers* (`--python-platform`, `--python-version`); pip evaluates markers
against the interpreter that runs it, so an aarch64 / Python 3.9 lock made on an x86_64 /
3.11 machine would be wrong where torch's dependencies use markers. The hashes are then
read from the package index, kept only for the wheels pip may pick on that arch and
Python (any glibc), so a lock names a handful of files per package, not every build
of it; torch and torch_npu's hashes must agree with Huawei's published sums."""
from __future__ import annotations

import contextlib
import json
import re
import subprocess
import tempfile
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

from .. import atomic
from ..engine import credentials
from ..engine.network import Network
from ..errors import UserError
from ..matrix.model import Matrix, Stack
from . import torch_index
from .lock import (
    ALL_LAYERS,
    HEADER,
    LOCKS,
    folder,
    huawei_arch_of,
    huawei_sums,
    inputs_digest,
    normalize,
    pinned_versions,
    read,
    requirements,
)

# The oldest manylinux the lock resolves for. Every OS in the matrix has glibc >= 2.31;
# torch's newest aarch64 wheels need manylinux_2_28.
RESOLVE_GLIBC = "2_28"
_VIA = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)\s*(?:#\s*via\s*(.*))?$")


@dataclass
class Index:
    """The index's files per project (PEP 691 JSON, else the HTML simple page), read once."""
    net: Network
    extra: tuple[str, ...] = ()
    seen: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)

    def files(self, project: str, only: str | None = None) -> list[tuple[str, str]]:
        """(filename, sha256) of every file the indexes list for a project; `only`: one
        index's files (torch's, which nothing else may stand in for)."""
        found = []
        for base in ((only,) if only else (self.net.index_url, *self.extra)):
            key = (base, normalize(project))
            if key not in self.seen:
                self.seen[key] = self._read(f"{base.rstrip('/')}/{key[1]}/")
            found += self.seen[key]
        return found

    def _read(self, url: str) -> list[tuple[str, str]]:
        req = urllib.request.Request(url, headers={
            "Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"})
        try:
            with self.net.opener().open(req, timeout=60) as resp:
                body, kind = resp.read(), resp.headers.get("Content-Type", "")
        except OSError as exc:
            raise UserError(credentials.redact(f"{url}: {exc}; check --pip-index-url, --ca-bundle and --proxy")) from None
        if "json" in kind:
            doc = json.loads(body)
            return [(f["filename"], f["hashes"]["sha256"]) for f in doc.get("files", []) if "sha256" in f.get("hashes", {})]
        return [(urllib.parse.unquote(href.rsplit("/", 1)[-1]), sha) for href, sha in
                re.findall(r'href="([^"#]+)#sha256=([0-9a-f]{64})"', body.decode(errors="replace"))]


def target_tags(python: str, arch: str) -> set[Tag]:
    """Every tag pip accepts for CPython `python` on glibc Linux `arch`, any glibc."""
    version = tuple(int(p) for p in python.split("."))
    platforms = [f"manylinux_2_{n}_{arch}" for n in range(40, 16, -1)] + [
        f"manylinux2014_{arch}", f"linux_{arch}"]
    interp = f"cp{python.replace('.', '')}"
    return set(cpython_tags(version, platforms=platforms)) | set(
        compatible_tags(version, interpreter=interp, platforms=platforms))


def wheel_hashes(files: list[tuple[str, str]], name: str, version: str, tags: set[Tag]) -> list[tuple[str, str]]:
    """The (filename, sha256) of the wheels of name==version that this target may install."""
    picked = []
    for filename, sha in files:
        if not filename.endswith(".whl"):
            continue
        try:
            wname, wversion, _, wtags = parse_wheel_filename(filename)
        except InvalidWheelFilename:
            continue
        if normalize(wname) == normalize(name) and wversion == Version(version) and wtags & tags:
            picked.append((filename, sha))
    return sorted(set(picked))


def parse_compiled(text: str) -> dict[str, tuple[str, list[str]]]:
    """uv's output (line annotations) -> {name: (version, [parents])}; a parent is a
    package name or `-r <layer>.in`."""
    found = {}
    for line in text.splitlines():
        m = _VIA.match(line.strip())
        if m:
            parents = [p.strip() for p in (m[3] or "").split(",") if p.strip()]
            found[normalize(m[1])] = (m[2], parents)
    return found


def assign_layers(resolved: dict[str, tuple[str, list[str]]]) -> dict[str, str]:
    """Each package goes to the first layer whose requirements reach it: what CANN's
    Python needs is installed once, below torch; torch_npu's layer holds only its own."""
    children: dict[str, set[str]] = {}
    roots: dict[str, set[str]] = {layer: set() for layer in ALL_LAYERS}
    for name, (_, parents) in resolved.items():
        for parent in parents:
            if parent.startswith("-r "):
                roots[Path(parent[3:].strip()).stem].add(name)
            else:
                children.setdefault(normalize(parent), set()).add(name)
    layer_of: dict[str, str] = {}
    for layer in ALL_LAYERS:        # the lock's files in their install order
        todo = list(roots[layer])
        while todo:
            name = todo.pop()
            if name in layer_of:
                continue
            layer_of[name] = layer
            todo.extend(children.get(name, ()))
    missing = set(resolved) - set(layer_of)
    if missing:
        raise UserError(f"the resolver's output does not say what needs {', '.join(sorted(missing))}")
    return layer_of


def uv_binary() -> str:
    try:
        from uv import find_uv_bin
    except ImportError:
        raise UserError("uv is not installed in this environment: run scripts/python-env.sh "
                        "(or pip install -e .)") from None
    return find_uv_bin()


def uv_version() -> str:
    # "uv 0.13.9 (x86_64-unknown-linux-gnu)": the build triple says nothing about the lock
    return " ".join(subprocess.run([uv_binary(), "--version"], capture_output=True, text=True).stdout.split()[:2])


def compile_cell(matrix: Matrix, stack: Stack, python: str, arch: str, net: Network,
                 prefer: dict[str, str] | None = None) -> dict[str, tuple[str, list[str]]]:
    reqs = requirements(matrix, stack, arch)
    if not _torch_npu_on_index(matrix, stack):
        reqs["torch_npu"] = [r for r in reqs["torch_npu"] if not r.startswith("torch_npu==")]
    out = uv_compile({layer: reqs[layer] for layer in stack.layers}, python, arch, net,
                     extra_index=torch_index.source(stack, arch, net.torch_index_url).index, prefer=prefer)
    if isinstance(out, str):
        raise UserError(f"stack {stack.name} / Python {python} / {arch} does not resolve:\n{out}")
    return out


def uv_compile(ins: dict[str, list[str]], python: str, arch: str, net: Network, *,
               constraints: tuple[str, ...] | list[str] = (), prefer: dict[str, str] | None = None, extra_index: str | None = None,
               find_links: Path | None = None, glibc: str | None = None) -> dict[str, tuple[str, list[str]]] | str:
    """Resolve requirement files (name -> lines) for CPython `python` on glibc `arch`:
    {name: (version, [parents])}, or uv's complaint when they do not resolve.
    `constraints` hold versions without asking for them; `prefer` (an earlier lock)
    keeps its versions where they still fit, so a new requirement moves nothing else."""
    with tempfile.TemporaryDirectory(prefix="ascend-lock-") as tmp:
        paths = []
        for name, lines in ins.items():
            path = Path(tmp) / f"{name}.in"
            path.write_text("\n".join(lines) + "\n")
            paths.append(str(path))
        output = Path(tmp) / "resolved.txt"
        output.write_text("".join(f"{n}=={v}\n" for n, v in sorted((prefer or {}).items())))
        cmd = [uv_binary(), "pip", "compile", *paths, "--python-version", python,
               "--python-platform", f"{arch}-manylinux_{glibc or RESOLVE_GLIBC}", "--only-binary", ":all:",
               "--annotation-style", "line", "--no-header", "--quiet", "--no-config",
               "--output-file", str(output)]
        # The indexes go to uv by its environment (as --index-url and --extra-index-url would):
        # their URLs may carry a password, and a command line is anyone's to read (ps).
        indexes = {"UV_INDEX_URL": net.index_url}
        if constraints:
            (Path(tmp) / "constraints.txt").write_text("\n".join(constraints) + "\n")
            cmd += ["--constraint", str(Path(tmp) / "constraints.txt")]
        if extra_index:
            indexes["UV_EXTRA_INDEX_URL"] = extra_index
            cmd += ["--index-strategy", "unsafe-best-match"]
        if find_links:
            cmd += ["--find-links", str(find_links)]
        env = {**net.host_env(), **indexes}
        credentials.echo(cmd, {k: v for k, v in env.items() if k in (*indexes, "HTTPS_PROXY")})
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            return credentials.redact(done.stderr.strip()[-3000:])
        return parse_compiled(output.read_text())


def _torch_npu_on_index(matrix: Matrix, stack: Stack) -> bool:
    """torch_npu comes from the index (else: a wheelhouse, checked against Huawei's sum)."""
    if stack.torch is None:
        return True
    rel = matrix.release_of(stack)
    return stack.torch.npu_on_pypi and (rel is None or rel.on_pypi)


def _compare(name: str, version: str, picked: list[tuple[str, str]], huawei: str) -> str:
    """Huawei's sum against the index's: the lock takes the index's file (that is what pip
    fetches); a mirror copy with other bytes under the same name is said, not taken."""
    if huawei in [sha for _, sha in picked]:
        return f"{name} {version}: the index's wheel matches the sha256 Huawei publishes"
    return (f"{name} {version}: Huawei's mirror copy has sha256 {huawei}, not the index's "
            f"({', '.join(sha[:12] for _, sha in picked)}...); the lock takes the index's")


def _layer_named(note: str, layer_of: dict[str, str], last: str) -> str:
    return layer_of.get(normalize(note.split(" ", 1)[0]), last)


def make(matrix: Matrix, stack: Stack, python: str, arch: str, net: Network, index: Index,
         prefer: dict[str, str] | None = None) -> dict[str, str]:
    """The three lock files of one cell, as text."""
    src = torch_index.source(stack, arch, net.torch_index_url)
    resolved = compile_cell(matrix, stack, python, arch, net, prefer)
    torch_index.refuse_cuda(torch_index.cuda_packages((n, v) for n, (v, _) in resolved.items()),
                            f"the lock of stack {stack.name} / Python {python} / {arch}", src)
    layer_of = assign_layers(resolved)
    tags = target_tags(python, arch)
    sums = huawei_sums(matrix, stack, python, arch)
    arch_of = huawei_arch_of(matrix)
    notes: list[str] = []
    entries: dict[str, list[str]] = {layer: [] for layer in stack.layers}
    for name, (version, _) in sorted(resolved.items()):
        # torch and its companions: the hashes of torch's index only, so pip can take no other build.
        only = src.index if normalize(name) in torch_index.TORCH_FAMILY else None
        picked = wheel_hashes(index.files(name, only), name, version, tags)
        foreign = [(f, sha) for f, sha in picked if arch_of.get(sha, arch) != arch]
        for filename, sha in foreign:
            notes.append(f"{name} {version}: {filename} is Huawei's {arch_of[sha]} wheel (sha256 {sha[:12]}...) "
                         f"under a tag for any platform: left out of this {arch} lock")
        picked = [p for p in picked if p not in foreign]
        if not picked:
            raise UserError(f"{name}=={version}: {'the torch index ' + credentials.redact(only) if only else 'the index'} "
                            f"has no wheel for CPython {python} on {arch} (stack {stack.name}); the image would have "
                            f"to build it from source")
        project = next((p for p in sums if normalize(p) == normalize(name)), None)     # torch, torch_npu, mindspore
        if project and sums[project]:
            notes.append(_compare(name, version, picked, sums[project]))
        entries[layer_of[name]].append(_entry(name, version, picked))
    if not _torch_npu_on_index(matrix, stack):
        # Not on the index: the wheel comes from a wheelhouse, checked against Huawei's sum.
        if not sums.get("torch_npu"):
            raise UserError(f"torch_npu {stack.package} is not on the index and Huawei publishes no sha256 "
                            f"for CPython {python} / {arch}: nothing to lock it to")
        entries["torch_npu"].append(f"torch-npu=={stack.package} \\\n    --hash=sha256:{sums['torch_npu']}"
                                    "  # Huawei's sum; the wheel comes from --wheelhouse")
    digest = inputs_digest(matrix, stack, python, arch)
    return {layer: "\n".join([
        HEADER,
        f"# stack {stack.name}, CPython {python}, {arch}: the {layer} layer of the runtime image.",
        f"# inputs: sha256:{digest}",
        f"# resolved by {uv_version()} for {arch}-manylinux_{RESOLVE_GLIBC}; each hash is a wheel pip may",
        "# pick on that arch and Python (any glibc).",
        *([f"# {src.describe()}"] if src.named else []),
        *[f"# {note}" for note in notes if layer == _layer_named(note, layer_of, stack.layers[-1])],
        "--require-hashes",
        "--only-binary :all:",
        *entries[layer]]) + "\n" for layer in stack.layers}


def _entry(name: str, version: str, picked: list[tuple[str, str]]) -> str:
    lines = [f"{name}=={version} \\"]
    lines += [f"    --hash=sha256:{sha} \\" for _, sha in picked]
    lines[-1] = lines[-1].rstrip(" \\")
    # Which file each hash is: the SBOM matches the installed wheel's tags to it.
    lines += [f"    # {sha[:16]} {filename}" for filename, sha in picked]
    return "\n".join(lines)


@dataclass(frozen=True)
class Change:
    where: Path
    diff: list[str]          # "+ name version", "- name version", "~ name old -> new"
    new: bool
    warnings: list[str]      # where Huawei's published sums differ from the index's


def diff_packages(old: dict[str, str] | None, new: dict[str, str]) -> list[str]:
    before, after = pinned_versions(old or {}), pinned_versions(new)
    lines = [f"+ {n} {after[n]}" for n in sorted(set(after) - set(before))]
    lines += [f"- {n} {before[n]}" for n in sorted(set(before) - set(after))]
    lines += [f"~ {n} {before[n]} -> {after[n]}" for n in sorted(set(before) & set(after)) if before[n] != after[n]]
    return lines


def lock(matrix: Matrix, root: Path, cells: list[tuple[str, str, str]], net: Network, write: bool = True,
         upgrade: bool = False) -> list[Change]:
    """Make (or remake) the locks of the given (stack, python, arch) cells; returns what changed.
    A stale lock is remade keeping the versions it had where they still fit (a new
    companion or pin moves only what it must); `upgrade` takes the newest instead."""
    sources = {torch_index.source(matrix.stack(s), a, net.torch_index_url) for s, _, a in cells}
    for src in sorted(sources, key=lambda x: x.index or ""):
        torch_index.reach(src, net)      # seconds, before uv would retry an index that does not answer
    index = Index(net, tuple(sorted({src.index for src in sources if src.index})))
    changes = []
    for cell in cells:      # two `invoke lock` at once take turns, cell by cell (.locks.lock beside locks/)
        with atomic.locked(root / LOCKS) if write else contextlib.nullcontext():
            change = _lock_cell(matrix, root, cell, net, index, write, upgrade)
        if change is not None:
            changes.append(change)
    return changes


def _lock_cell(matrix: Matrix, root: Path, cell: tuple[str, str, str], net: Network, index: Index, write: bool,
               upgrade: bool) -> Change | None:
    """One cell's lock read, remade, and written if it changed (the caller holds locks/ from
    the read to the last file, so the later of two writers reads what the earlier wrote and
    a cell's files never mix two runs); each file replaced whole."""
    stack, python, arch = cell
    where = folder(root, stack, python, arch)
    try:
        old = read(root, matrix.stack(stack), python, arch)
    except UserError:
        old = None
    prefer = None if upgrade or old is None else pinned_versions(old.files)
    files = make(matrix, matrix.stack(stack), python, arch, net, index, prefer)
    if old is not None and old.files == files:
        return None
    warnings = [line[2:] for text in files.values() for line in text.splitlines() if "mirror copy" in line]
    if write:
        where.mkdir(parents=True, exist_ok=True)
        for layer, text in files.items():
            atomic.write_text(where / f"{layer}.txt", text)
    return Change(where, diff_packages(old.files if old else None, files), old is None, warnings)
