"""Two images, layer by layer: which layers are the same bytes, and in those that are not,
which files differ and how (content, time, mode, owner, present in one only). Read from
`save` (docker's and podman's archive: each layer an uncompressed tar whose sha256 is the
diff_id the config lists), so it works on any image either engine holds, however it was
made: what `invoke verify` and benchmarks/rebuild.py report."""
from __future__ import annotations

import hashlib
import json
import posixpath
import tarfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import IO, Iterator

from ..engine import Engine
from ..errors import UserError

EMPTY_LAYER = "sha256:5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef"   # the empty tar


@dataclass(frozen=True)
class Entry:
    """One member of a layer tar, as far as it decides the layer's bytes."""
    kind: str            # file, dir, symlink, hardlink, other
    mode: int
    owner: tuple[int, int]
    mtime: int
    size: int
    digest: str          # sha256 of a file's content; the target of a link


@dataclass
class Saved:
    """An image as `save` gives it: its config, and for each layer (oldest first) its
    diff_id and its entries by path."""
    ref: str
    id: str
    config: dict
    layers: list[str]                                   # diff_ids
    entries: dict[str, dict[str, Entry]] = field(default_factory=dict)   # diff_id -> path -> entry

    def steps(self) -> list[str]:
        """The step that made each layer (the config's history without the entries that
        made none), aligned with `layers`; "" where the history is shorter."""
        made = [" ".join(h.get("created_by", "").split()) for h in self.config.get("history", [])
                if not h.get("empty_layer")]
        return [""] * (len(self.layers) - len(made)) + made[-len(self.layers):] if self.layers else []


class _Hashing:
    """A read-only stream that hashes what is read through it."""
    def __init__(self, raw: IO[bytes]):
        self.raw, self.sha = raw, hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.sha.update(data)
        return data


def _sha256(data: IO[bytes] | None) -> str:
    sha = hashlib.sha256()
    assert data is not None
    for chunk in iter(lambda: data.read(1 << 20), b""):
        sha.update(chunk)
    return sha.hexdigest()


def _entries(stream: IO[bytes]) -> tuple[str, dict[str, Entry]]:
    """(diff_id, entries) of one uncompressed layer tar read from `stream`."""
    hashing = _Hashing(stream)
    found: dict[str, Entry] = {}
    with tarfile.open(fileobj=hashing, mode="r|") as tar:        # type: ignore[call-overload]
        for m in tar:
            if m.isfile():
                kind, digest = "file", _sha256(tar.extractfile(m))
            elif m.isdir():
                kind, digest = "dir", ""
            elif m.issym():
                kind, digest = "symlink", m.linkname
            elif m.islnk():
                kind, digest = "hardlink", m.linkname
            else:
                kind, digest = "other", f"{m.type!r} {m.devmajor}:{m.devminor}"
            # The permission bits: some writers put the file type's bits in the header too.
            found[m.name.rstrip("/").removeprefix("./")] = Entry(kind, m.mode & 0o7777, (m.uid, m.gid), int(m.mtime),
                                                                 m.size, digest)
    while hashing.read(1 << 20):     # the tar's end padding is part of the layer's bytes
        pass
    return "sha256:" + hashing.sha.hexdigest(), found


def archive_members(stream: IO[bytes]) -> Iterator[tuple[str, IO[bytes] | str]]:
    """An image archive's files (name, stream) and links (name, the name linked to): a
    layer that occurs twice may be stored once."""
    with tarfile.open(fileobj=stream, mode="r|") as outer:
        for member in outer:
            if member.isfile():
                data = outer.extractfile(member)
                assert data is not None
                yield member.name, data
            elif member.issym() or member.islnk():
                target = member.linkname if member.islnk() else \
                    str(PurePosixPath(member.name).parent / member.linkname)
                yield member.name, posixpath.normpath(target)


def members(engine: Engine, ref: str) -> Iterator[tuple[str, IO[bytes] | str]]:
    """archive_members of `save REF`."""
    with engine.save(ref) as stream:
        yield from archive_members(stream)


def load(engine: Engine, ref: str, skip: frozenset[str] = frozenset()) -> Saved:
    """The image `ref` from the engine's store, every layer's files read (a few seconds a
    GB) except those whose diff_id is in `skip` (known the same)."""
    image_id = engine.image_id(ref)
    if image_id is None:
        raise UserError(f"no image {ref} in {engine.client}'s store: pull it or build it first")
    return read(members(engine, ref), ref, image_id if image_id.startswith("sha256:") else f"sha256:{image_id}", skip)


def read(found: Iterator[tuple[str, IO[bytes] | str]], ref: str, image_id: str,
         skip: frozenset[str] = frozenset()) -> Saved:
    """An image from its archive's members."""
    jsons: dict[str, object] = {}
    by_member: dict[str, tuple[str, dict[str, Entry]]] = {}
    links: dict[str, str] = {}
    for name, data in found:
        if isinstance(data, str):
            links[name] = data
        elif name.endswith(".json") and "/" not in name:
            jsons[name] = json.load(data)
        elif name.endswith(".tar"):
            by_member[name] = _entries(data)
    manifest = jsons.get("manifest.json")
    if not isinstance(manifest, list) or not manifest:
        raise UserError(f"the archive of {ref} has no manifest.json: not an image archive")
    config = jsons[manifest[0]["Config"]]
    assert isinstance(config, dict)
    layers = list(config.get("rootfs", {}).get("diff_ids", []))
    entries = {}
    for member in manifest[0]["Layers"]:
        while member not in by_member and member in links:
            member = links[member]
        diff_id, files = by_member[member]
        if diff_id not in skip:
            entries[diff_id] = files
    return Saved(ref, image_id, config, layers, entries)


@dataclass(frozen=True)
class LayerDiff:
    index: int
    a: str | None                  # diff_id, None: the image has fewer layers
    b: str | None
    step: str                      # what made the layer (A's history)
    only_a: tuple[str, ...] = ()
    only_b: tuple[str, ...] = ()
    changed: tuple[tuple[str, tuple[str, ...]], ...] = ()    # path, which of content/time/mode/owner/kind differ

    @property
    def same(self) -> bool:
        return self.a == self.b

    def why(self, shown: int = 4) -> str:
        """What differs in the layer's files, grouped: time only; content (by kind of
        file); present in one only."""
        if self.same:
            return "the empty layer" if self.a == EMPTY_LAYER else ""
        if self.a is None or self.b is None:
            return "in one image only"
        parts = []
        times = [p for p, what in self.changed if what == ("time",)]
        if times:
            parts.append(f"{len(times)} file(s) differ in their time only ({_sample(times, shown)})")
        content = [p for p, what in self.changed if "content" in what]
        if content:
            groups = Counter(_group(p) for p in content)
            parts.append(f"{len(content)} in their content: " + ", ".join(f"{n} {g}" for g, n in groups.most_common(4))
                         + f" ({_sample(content, shown)})")
        other = [f"{p} ({'/'.join(what)})" for p, what in self.changed if what != ("time",) and "content" not in what]
        if other:
            parts.append(f"{len(other)} in mode, owner or kind ({_sample(other, shown)})")
        if self.only_a or self.only_b:
            parts.append(f"{len(self.only_a)} only in the first ({_sample(self.only_a, shown)}), "
                         f"{len(self.only_b)} only in the second ({_sample(self.only_b, shown)})")
        if not parts:
            parts.append("the same files, metadata and order of entries differ (the tar itself)")
        return "; ".join(parts)


def _sample(paths, shown: int) -> str:
    paths = list(paths)
    if not paths:
        return "none"
    return ", ".join(paths[:shown]) + (f", ... {len(paths) - shown} more" if len(paths) > shown else "")


def _group(path: str) -> str:
    p = PurePosixPath(path)
    if p.suffix == ".pyc":
        return ".pyc"
    for top in ("var/log", "var/cache", "var/lib/dpkg", "var/lib/apt", "etc", "tmp", "root"):
        if path.startswith(top + "/"):
            return top + "/"
    return p.suffix or p.name


def _what(x: Entry, y: Entry) -> tuple[str, ...]:
    what = []
    if x.kind != y.kind:
        what.append("kind")
    if x.digest != y.digest or x.size != y.size:
        what.append("content")
    if x.mtime != y.mtime:
        what.append("time")
    if x.mode != y.mode:
        what.append("mode")
    if x.owner != y.owner:
        what.append("owner")
    return tuple(what)


def compare(a: Saved, b: Saved) -> list[LayerDiff]:
    """Layer i of A against layer i of B, for every i."""
    steps = a.steps()
    out = []
    for i in range(max(len(a.layers), len(b.layers))):
        da = a.layers[i] if i < len(a.layers) else None
        db = b.layers[i] if i < len(b.layers) else None
        step = steps[i] if i < len(steps) else ""
        if da == db or da is None or db is None or da not in a.entries or db not in b.entries:
            out.append(LayerDiff(i, da, db, step))
            continue
        ea, eb = a.entries[da], b.entries[db]
        changed = tuple((p, w) for p in sorted(ea.keys() & eb.keys()) if (w := _what(ea[p], eb[p])))
        out.append(LayerDiff(i, da, db, step, tuple(sorted(ea.keys() - eb.keys())),
                             tuple(sorted(eb.keys() - ea.keys())), changed))
    return out


def config_differences(a: Saved, b: Saved) -> list[str]:
    """The config fields (besides the layers) whose values differ, e.g. `created`."""
    keys = sorted((a.config.keys() | b.config.keys()) - {"rootfs"})
    found = []
    for key in keys:
        x, y = a.config.get(key), b.config.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            found += [f"{key}.{k}" for k in sorted(x.keys() | y.keys()) if x.get(k) != y.get(k)]
        elif x != y:
            found.append(key)
    return found
