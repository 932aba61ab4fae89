"""A test double of a container engine: the operations of ascend_build.engine.Engine
answered from an in-memory store of images (each a real image config and real layer tars),
tags, a build cache and a registry, and every call recorded. No process is started. It
lets the build/test/tag logic (images/steps.py, build.py, batch.py, registry.py,
verify.py) be tested in milliseconds; only tests use it (never the package).

What a build does here: the image FROM (BASE_IMAGE, or CANDIDATE for the project's
finishing step) must be in the store or pullable; the new image is its layers plus one
layer per build that holds a file naming the build's inputs (the Dockerfile's text, the
build arguments, the labels, every staged file's sha256), and for the finishing step the
tar the context carries. Without an epoch (--reproducible) that layer also holds a
counter, as a real engine's layers hold the time they were written: two uncached builds
then differ, and a cached one (same inputs, no --no-cache) is the same image.

Faults and interrupts on demand:
- `fail_build`: a predicate on the BuildRequest: the build exits 1;
- `pullable`: references `pull` fetches (anything else: "no registry here");
- `interrupt_at`: the n-th recorded call (1-based) sends SIGINT to this process first,
  as a terminal's Ctrl-C would arrive during that step;
- `probe`: what the image's own Python says is installed (provenance/probe.py).

Containers: a detached `run_container` (or one without --rm) leaves a container, running
or stopped, and `add_container` makes one. As docker's `rmi` without --force, `remove`
refuses an image a container uses (and the last tag of one) and says so in docker's words
(`refusals`); with --force a stopped container's image goes, a running one's never.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import tarfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Iterator

from ascend_build.engine import BuildRequest, Engine, RunSpec
from ascend_build.errors import EngineError, UserError
from ascend_build.images.render import FINISH_TAR

PROBE = {
    "os_release": 'ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n',
    "deb": "bash\t5.2.15-2+b2\tarm64\n", "rpm": None,
    "python": [{"name": "pip", "version": "24.0", "tags": ["py3-none-any"]}],
    "freeze": "pip==24.0\n", "requirements": {}, "manifest": None, "toolkit_home": "/usr/local/Ascend/ascend-toolkit/latest",
    "files": {},
}


def layer_tar(files: dict[str, bytes]) -> bytes:
    """A layer: a tar of `files`, fixed metadata, the same bytes for the same files."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(files):
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.mtime = len(files[path]), 0o644, 0
            tar.addfile(info, io.BytesIO(files[path]))
    return out.getvalue()


def diff_id(layer: bytes) -> str:
    return "sha256:" + hashlib.sha256(layer).hexdigest()


@dataclass
class Image:
    config: dict                 # the image config, as `save` writes it
    layers: list[bytes]          # each layer's tar

    @property
    def id(self) -> str:
        return "sha256:" + hashlib.sha256(_canonical(self.config)).hexdigest()


def _canonical(config: dict) -> bytes:
    return json.dumps(config, sort_keys=True, separators=(",", ":")).encode()


@dataclass
class Container:
    image: str                   # the id of the image it was made from
    running: bool


@dataclass
class Pushed:
    image: str                   # its id
    platform: str


class EngineDouble(Engine):
    """An engine answered from memory. `images` by id, `tags` ref -> id, `calls` every
    operation as (name, first argument)."""

    def __init__(self, kind: str = "docker", mode: str = "classic-buildkit",
                 fail_build: Callable[[BuildRequest], bool] | None = None, pullable: tuple[str, ...] = (),
                 interrupt_at: int | None = None, probe: dict | None = None):
        super().__init__(kind, f"/usr/bin/{kind}-double", mode, "double")   # type: ignore[arg-type]
        self.images: dict[str, Image] = {}
        self.tags: dict[str, str] = {}
        self.cache: dict[str, str] = {}          # inputs -> image id (the layer cache)
        self.registry: dict[str, Pushed | list[Pushed]] = {}
        self.calls: list[tuple[str, str]] = []
        self.fail_build = fail_build
        self.pullable = set(pullable)
        self.interrupt_at = interrupt_at
        self.probe = dict(PROBE if probe is None else probe)
        self.clock = 0                           # what an engine writes when it is not told an epoch
        self.containers: dict[str, Container] = {}
        self.refusals: list[str] = []            # what `rmi` said each time it refused, as docker says it

    # -------------------------------------------------------------- bookkeeping
    def _call(self, name: str, arg: str = "") -> None:
        self.calls.append((name, arg))
        if self.interrupt_at is not None and len(self.calls) == self.interrupt_at:
            os.kill(os.getpid(), signal.SIGINT)      # Ctrl-C, as it reaches this process during the step

    def called(self, name: str) -> list[str]:
        return [arg for op, arg in self.calls if op == name]

    def add(self, ref: str, files: dict[str, bytes] | None = None, labels: dict[str, str] | None = None,
            platform: str = "linux/arm64") -> str:
        """An image in the store under `ref` (a base image, say); its id."""
        layer = layer_tar(files or {"etc/os-release": b"ID=debian\n"})
        image = Image(_config(platform, labels or {}, [diff_id(layer)]), [layer])
        self.images[image.id] = image
        self.tags[ref] = image.id
        return image.id

    def add_container(self, ref: str, running: bool = True) -> str:
        """A container made from the image `ref` names (running, or stopped); its id."""
        found = self._resolve(ref)
        assert found is not None, f"no image {ref} to make a container of"
        cid = hashlib.sha256(f"container {len(self.containers)} {found.id}".encode()).hexdigest()
        self.containers[cid] = Container(found.id, running)
        return cid

    def relabel(self, image_id: str, labels: dict[str, str]) -> str:
        """The image with more labels, as a new image its tags move to; the new id."""
        old = self.images.pop(image_id)
        config = json.loads(_canonical(old.config))
        config["config"]["Labels"] = dict(sorted({**config["config"]["Labels"], **labels}.items()))
        new = Image(config, old.layers)
        self.images[new.id] = new
        self.tags = {t: (new.id if i == image_id else i) for t, i in self.tags.items()}
        return new.id

    def _resolve(self, ref: str) -> Image | None:
        ref = ref.removeprefix("localhost/")
        key = self.tags.get(ref) or (ref if ref in self.images else None) or \
            next((i for i in self.images if i.removeprefix("sha256:").startswith(ref.removeprefix("sha256:"))
                  and len(ref.removeprefix("sha256:")) >= 12), None)
        return self.images.get(key) if key else None

    def untagged(self) -> set[str]:
        """Ids of images no tag names (what a build should not leave behind)."""
        return set(self.images) - set(self.tags.values())

    # -------------------------------------------------------------- building
    def build(self, req: BuildRequest, log: Path | None = None, show_line=None) -> int:
        self._call("build", str(req.dockerfile))
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(f"$ build {req.dockerfile} (engine double)\n")
        if self.fail_build and self.fail_build(req):
            if log is not None:
                log.write_text(log.read_text() + "#9 ERROR: process \"/bin/sh -c false\" did not complete\n")
            return 1
        base_ref = (req.build_args.get("CANDIDATE") or req.build_args.get("BASE_IMAGE") or req.build_args.get("RUNTIME_IMAGE")
                    or "scratch")
        base = self._resolve(base_ref)
        if base is None and base_ref in self.pullable:
            self.pull(base_ref, req.platform)
            base = self._resolve(base_ref)
        if base is None and base_ref != "scratch":
            if log is not None:
                log.write_text(log.read_text() + f"ERROR: pull access denied for {base_ref}\n")
            return 1
        inputs = {"dockerfile": Path(req.dockerfile).read_text() if Path(req.dockerfile).is_file() else "",
                  "args": req.build_args, "labels": req.labels, "target": req.target,
                  "context": {str(p.relative_to(req.context)): hashlib.sha256(p.read_bytes()).hexdigest()
                              for p in sorted(Path(req.context).rglob("*")) if p.is_file()},
                  "base": base.id if base else None}
        key = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
        if not req.no_cache and key in self.cache and self.cache[key] in self.images:
            image_id = self.cache[key]
        else:
            files = {".double/build.json": json.dumps(inputs, sort_keys=True).encode()}
            if req.epoch is None:
                self.clock += 1
                files[".double/written-at"] = str(self.clock).encode()
            layers = list(base.layers) if base else []
            layers.append(layer_tar(files))
            finish = Path(req.context) / FINISH_TAR
            if req.build_args.get("CANDIDATE") and finish.is_file():
                layers.append(finish.read_bytes())
            labels = {**((base.config["config"].get("Labels") or {}) if base else {}), **req.labels}
            image = Image(_config(req.platform, labels, [diff_id(layer) for layer in layers]), layers)
            self.images[image.id] = image
            image_id = self.cache[key] = image.id
        for tag in req.tags:
            self.tags[tag] = image_id
        if req.iidfile:
            Path(req.iidfile).write_text(image_id)
        return 0

    # -------------------------------------------------------------- the image store
    def image(self, ref: str) -> dict | None:
        self._call("inspect", ref)
        found = self._resolve(ref)
        if found is None:
            return None
        return {"Id": found.id, "RepoTags": sorted(t for t, i in self.tags.items() if i == found.id),
                "Architecture": found.config["architecture"],
                "Config": {"Labels": dict(found.config["config"].get("Labels") or {}),
                           "Env": list(found.config["config"].get("Env") or [])},
                "RootFS": {"Type": "layers", "Layers": list(found.config["rootfs"]["diff_ids"])}}

    def tag(self, image: str, tag: str) -> bool:
        self._call("tag", tag)
        found = self._resolve(image)
        if found is None:
            return False
        self.tags[tag.removeprefix("localhost/")] = found.id
        return True

    def remove(self, *refs: str, force: bool = False) -> bool:
        ok = True
        for ref in refs:
            self._call("remove", ref)
            refused = self._remove_one(ref, force)
            if refused:
                self.refusals.append(f"Error response from daemon: {refused}")
                ok = False
        return ok

    def _remove_one(self, ref: str, force: bool) -> str | None:
        """Remove one ref as docker's daemon does (daemon/images/image_delete.go): None, or
        why it refused. A running container holds its image even against --force; a
        stopped one holds it without."""
        found = self._resolve(ref)
        if found is None:
            return f"No such image: {ref}"
        users = {cid: c for cid, c in self.containers.items() if c.image == found.id}
        running = next((cid for cid, c in users.items() if c.running), None)
        held = running is not None or (bool(users) and not force)
        short = found.id.removeprefix("sha256:")[:12]
        if ref.removeprefix("localhost/") in self.tags:
            ref = ref.removeprefix("localhost/")
            last = [t for t, i in self.tags.items() if i == found.id] == [ref]
            if last and users and not force:
                return (f'conflict: unable to remove repository reference "{ref}" (must force) - container '
                        f"{next(iter(users))[:12]} is using its referenced image {short}")
            del self.tags[ref]
            if last and not held:
                del self.images[found.id]
            return None
        if not force and found.id in self.tags.values():
            return (f"conflict: unable to delete {short} (must be forced) - image is referenced in one or more "
                    f"repositories")
        if held:
            state, cid = ("running", running) if running else ("stopped", next(iter(users)))
            return (f"conflict: unable to delete {short} ({'cannot' if running else 'must'} be forced) - image is "
                    f"being used by {state} container {cid[:12]}")
        for tag in [t for t, i in self.tags.items() if i == found.id]:
            del self.tags[tag]
        del self.images[found.id]
        return None

    def images(self, repository: str | None = None) -> list[str]:
        self._call("images", repository or "")
        return sorted(t for t in self.tags if repository is None or t.rsplit(":", 1)[0] == repository)

    def pull(self, ref: str, platform: str) -> str | None:
        self._call("pull", ref)
        if ref not in self.pullable:
            return f"Error response from daemon: pull access denied for {ref} (engine double: no registry here)"
        if self._resolve(ref) is None:
            self.add(ref, platform=platform)
        return None

    @contextmanager
    def save(self, ref: str) -> Iterator[IO[bytes]]:
        self._call("save", ref)
        found = self._resolve(ref)
        if found is None:
            raise UserError(f"`{self.client} save {ref}` failed: no such image")
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w") as tar:
            config = _canonical(found.config)
            members = [(f"{found.id[7:]}.json", config)]
            members += [(f"{diff_id(layer)[7:]}/layer.tar", layer) for layer in found.layers]
            members.append(("manifest.json", json.dumps([{
                "Config": f"{found.id[7:]}.json", "RepoTags": [t for t, i in self.tags.items() if i == found.id],
                "Layers": [f"{diff_id(layer)[7:]}/layer.tar" for layer in found.layers]}]).encode()))
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        out.seek(0)
        yield out

    def load(self, archive: IO[bytes]) -> None:
        self._call("load")
        with tarfile.open(fileobj=archive, mode="r:") as tar:
            manifest = json.load(tar.extractfile("manifest.json"))       # type: ignore[arg-type]
            config_bytes = tar.extractfile(manifest[0]["Config"]).read()  # type: ignore[union-attr]
            layers = [tar.extractfile(name).read() for name in manifest[0]["Layers"]]  # type: ignore[union-attr]
        config = json.loads(config_bytes)
        if [diff_id(layer) for layer in layers] != config["rootfs"]["diff_ids"]:
            raise EngineError("engine double: the archive's layers are not the ones its config names")
        image = Image(config, layers)
        if image.id != "sha256:" + hashlib.sha256(config_bytes).hexdigest():
            # The archive's config bytes are its id; keep them exactly (canonical JSON here).
            raise EngineError("engine double: load takes configs written as canonical JSON")
        self.images[image.id] = image
        for tag in manifest[0].get("RepoTags") or []:
            self.tags[tag] = image.id

    # -------------------------------------------------------------- containers
    def run_container(self, spec: RunSpec, timeout: float | None = 600,
                      input: str | None = None) -> subprocess.CompletedProcess:
        self._call("run", spec.image)
        found = self._resolve(spec.image)
        if found is None:
            return subprocess.CompletedProcess([], 125, "", f"Unable to find image '{spec.image}' locally")
        if spec.detach or not spec.remove:      # what stays of it: running (-d), or stopped (no --rm)
            cid = self.add_container(found.id, running=spec.detach)
            if spec.detach:
                return subprocess.CompletedProcess([], 0, cid + "\n", "")
        if spec.entrypoint == "python" and spec.command[:1] == ("-c",):
            globs = json.loads(spec.command[2]) if len(spec.command) > 2 else []
            home = self.probe["toolkit_home"]
            answer = {**self.probe, "files": {(g if g.startswith("/") else f"{home}/{g}"): "version=double\n"
                                              for g in globs if "*" not in g}}
            return subprocess.CompletedProcess([], 0, json.dumps(answer), "")
        if spec.entrypoint == "cat":
            text = _file_in(found, spec.command[0])
            return subprocess.CompletedProcess([], 0 if text is not None else 1, text or "", "")
        return subprocess.CompletedProcess([], 0, "", "")

    def containers_of(self, image: str) -> list[str]:
        self._call("containers", image)
        found = self._resolve(image)
        return sorted(cid for cid, c in self.containers.items() if found and c.image == found.id)

    def remove_containers(self, *ids: str) -> bool:
        for cid in ids:
            self._call("rm", cid)
        gone = [self.containers.pop(cid, None) for cid in ids]
        return None not in gone

    def answers(self) -> bool:
        return True

    def runtimes(self) -> frozenset[str]:
        return frozenset({"runc"})

    # -------------------------------------------------------------- registries
    def push(self, ref: str, registry: str) -> int:
        self._call("push", ref)
        found = self._resolve(ref)
        if found is None:
            return 1
        self.registry[ref] = Pushed(found.id, f"{found.config['os']}/{found.config['architecture']}")
        return 0

    def registry_manifest(self, ref: str, registry: str) -> dict | None:
        self._call("registry", ref)
        held = self.registry.get(ref)
        if held is None:
            return None
        if isinstance(held, list):
            return {"manifests": [{"platform": dict(zip(("os", "architecture"), p.platform.split("/")))}
                                  for p in held]}
        return {"config": {"digest": held.image}}

    def join(self, target: str, parts: list[str], registry: str) -> None:
        self._call("join", target)
        held = [self.registry[p] for p in parts]
        if any(isinstance(h, list) for h in held):
            raise EngineError("engine double: a manifest list of manifest lists")
        self.registry[target] = [h for h in held if isinstance(h, Pushed)]


def _config(platform: str, labels: dict[str, str], diff_ids: list[str]) -> dict:
    return {"architecture": platform.split("/")[1], "os": "linux",
            "config": {"Labels": dict(sorted(labels.items())), "Env": ["PATH=/usr/bin:/bin"]},
            "rootfs": {"type": "layers", "diff_ids": diff_ids}, "history": []}


def _file_in(image: Image, path: str) -> str | None:
    """The file at `path` in the image's top-most layer that has it."""
    for layer in reversed(image.layers):
        with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
            try:
                member = tar.getmember(path.lstrip("/"))
            except KeyError:
                continue
            data = tar.extractfile(member)
            return data.read().decode() if data else None
    return None


__all__ = ["Container", "EngineDouble", "Image", "PROBE", "layer_tar"]
