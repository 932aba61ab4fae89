"""The last step of a --reproducible build: the project's files added as one more layer and
the image's config written from its inputs only, through the engine's own archive format
(`save` in, `load` out), with no build in between.

Why not a build step, as without --reproducible: a build writes into the config what is
true of that one run. podman's docker format (the templates need it: SHELL) records the
build container's id and hostname, the id of the image before the step (`parent`) and the
ids of intermediate images in the history's comments, all new each run; docker 20.10's
BuildKit writes the wall-clock time of every step. Here the config keeps what describes
the image (its environment, entrypoint, labels, layers, the step behind each layer) and
drops or fixes the rest: the same layers give the same image ID.

With `retime` (docker's BuildKit, which cannot rewrite times), the layers the build made
(all after the base image's) are written again with every entry's time set to the
epoch, as podman's --timestamp writes them; their bytes otherwise as the engine wrote them."""
from __future__ import annotations

import hashlib
import io
import json
import tarfile
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Iterator

from .. import engine as eng
from ..engine import interrupts
from ..errors import BuildFailed, EngineError
from .imagediff import members

STEP = "ascend-build: the package manifest, the requirement files as installed and the SBOM (images/finish.py)"
VARIES = ("container", "parent", "docker_version")      # facts of one run, not of the image


def iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def config_of(config: dict, added: list[str], epoch: int, base_layers: int) -> dict:
    """The candidate's config with `added` layers (diff_ids), every time of this build the
    epoch, and what varies run to run gone. The base image's history, up to its last
    layer, stays as it is."""
    out = {k: v for k, v in config.items() if k not in VARIES}
    out["created"] = iso(epoch)
    for key in ("config", "container_config"):
        if isinstance(out.get(key), dict):
            out[key] = {**out[key], "Hostname": "", "Image": ""}
    history, seen = [], 0
    for entry in config.get("history", []):
        entry = dict(entry)
        if seen >= base_layers:        # this build's steps: their time and no intermediate image ids
            entry["created"] = iso(epoch)
            entry.pop("comment", None)
        if not entry.get("empty_layer"):
            seen += 1
        history.append(entry)
    history += [{"created": iso(epoch), "created_by": STEP} for _ in added]
    out["history"] = history
    out["rootfs"] = {"type": "layers", "diff_ids": [*config["rootfs"]["diff_ids"], *added]}
    return out


def _retimed(layer: IO[bytes], epoch: int, out: IO[bytes]) -> str:
    """The layer tar with every entry's time the epoch (PAX times dropped too); its diff_id."""
    sha = hashlib.sha256()

    class _Out:
        def write(self, data: bytes) -> int:
            sha.update(data)
            return out.write(data)

    with tarfile.open(fileobj=layer, mode="r|") as src, \
            tarfile.open(fileobj=_Out(), mode="w|", format=tarfile.PAX_FORMAT) as dst:   # type: ignore[call-overload]
        for m in src:
            m.mtime = epoch
            m.pax_headers = {k: v for k, v in m.pax_headers.items() if k not in ("mtime", "atime", "ctime")}
            dst.addfile(m, src.extractfile(m) if m.isfile() else None)
    return "sha256:" + sha.hexdigest()


def finish(engine: eng.Engine, candidate: str, layer_tar: bytes, epoch: int, base: frozenset[str],
           retime: bool, work: Path) -> str:
    """The candidate with `layer_tar` as its last layer and a config from its inputs only;
    returns the loaded image's id (the config's sha256). `base`: the base image's layers
    (diff_ids), kept as they are."""
    work.mkdir(parents=True, exist_ok=True)
    archive = work / "reproducible.tar"
    image_id = ""
    try:
        image_id = rewrite(members(engine, candidate), archive, layer_tar, epoch, base, retime, candidate)
        with archive.open("rb") as fh:
            try:
                engine.load(fh)
            except EngineError as exc:
                raise BuildFailed(f"the reproducible image could not be loaded: {exc}") from None
        interrupts.check()
    except BaseException:
        # Interrupted while (or just after) it loaded: the loaded image is nobody's.
        with interrupts.deferred():
            if image_id and engine.tag_count(image_id) == 0:
                engine.remove(image_id)
        raise
    finally:
        archive.unlink(missing_ok=True)
    return image_id


def rewrite(found: Iterator[tuple[str, IO[bytes] | str]], archive: Path, layer_tar: bytes, epoch: int,
            base: frozenset[str], retime: bool, what: str = "the image") -> str:
    """Write the new image archive (docker's `load` format) from the members of the old
    one; returns its id."""
    work = archive.parent
    by_name: dict[str, str] = {}          # layer member -> its diff_id in the new archive
    links: dict[str, str] = {}
    configs: dict[str, dict] = {}
    manifest: list = []
    with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as out:
        for name, data in found:
            if isinstance(data, str):
                links[name] = data
            elif name.endswith(".json") and "/" not in name:
                loaded = json.load(data)
                if name == "manifest.json":
                    manifest = loaded
                else:
                    configs[name] = loaded
            elif name.endswith(".tar"):
                by_name[name] = _copy_layer(data, out, epoch, base if retime else None, work)
        if not manifest:
            raise BuildFailed(f"the archive of {what} gave no manifest.json")
        order = []
        for name in manifest[0]["Layers"]:
            while name not in by_name and name in links:
                name = links[name]
            if name not in by_name:
                raise BuildFailed(f"the archive of {what}: its manifest names a layer it does not hold ({name})")
            order.append(by_name[name])
        config = configs[manifest[0]["Config"]]
        old = config.get("rootfs", {}).get("diff_ids", [])
        base_layers = next((i for i, d in enumerate(old) if d not in base), len(old))
        config = {**config, "rootfs": {"type": "layers", "diff_ids": order}}
        added = "sha256:" + hashlib.sha256(layer_tar).hexdigest()
        out.addfile(_info(f"{added[7:]}.tar", len(layer_tar), epoch), io.BytesIO(layer_tar))
        text = json.dumps(config_of(config, [added], epoch, base_layers), sort_keys=True,
                          separators=(",", ":")).encode()
        image_id = hashlib.sha256(text).hexdigest()
        out.addfile(_info(f"{image_id}.json", len(text), epoch), io.BytesIO(text))
        doc = json.dumps([{"Config": f"{image_id}.json", "RepoTags": None,
                           "Layers": [f"{d[7:]}.tar" for d in [*order, added]]}]).encode()
        out.addfile(_info("manifest.json", len(doc), epoch), io.BytesIO(doc))
    return f"sha256:{image_id}"


def _copy_layer(data: IO[bytes], out: tarfile.TarFile, epoch: int, keep: frozenset[str] | None, work: Path) -> str:
    """One layer into the new archive, once per diff_id: as it is, or (`keep` given, the
    layer not in it) with its times set to the epoch. Returns its diff_id there."""
    with tempfile.TemporaryFile(dir=work) as tmp:
        sha = hashlib.sha256()
        for chunk in iter(lambda: data.read(1 << 20), b""):
            sha.update(chunk)
            tmp.write(chunk)
        diff = "sha256:" + sha.hexdigest()
        tmp.seek(0)
        if keep is not None and diff not in keep:
            with tempfile.TemporaryFile(dir=work) as again:
                diff = _retimed(tmp, epoch, again)
                return _add(out, diff, again, epoch)
        return _add(out, diff, tmp, epoch)


def _add(out: tarfile.TarFile, diff: str, fh: IO[bytes], epoch: int) -> str:
    name = f"{diff[7:]}.tar"
    if name not in out.getnames():
        size = fh.seek(0, 2)
        fh.seek(0)
        out.addfile(_info(name, size, epoch), fh)
    return diff


def _info(name: str, size: int, epoch: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, epoch
    return info
