"""Pushing tested images: per-arch tags go to the registry, a build whose content tag
is already there is skipped, and the arches of one tag are joined into a manifest list
(`docker manifest`, which works without buildx; with podman, `podman manifest`, and
skopeo to read a registry, since `podman manifest inspect` 4.x reads local lists only)."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass, field

from .. import console
from .. import engine as eng
from ..engine import interrupts
from ..errors import EngineError, UserError
from ..matrix import Cell
from ..platforms import PLATFORMS
from .kinds import RUNTIME, label, readable_tag


@dataclass
class PushReport:
    pushed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)     # content already in the registry
    missing: list[str] = field(default_factory=list)     # no tested local image
    lists: list[str] = field(default_factory=list)       # manifest lists written


def _ok(engine: eng.Engine, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(engine.command(*args), capture_output=True, text=True)


def _loopback(registry: str) -> bool:
    return registry.split("/")[0].startswith(("127.", "localhost"))


def insecure(engine: eng.Engine, registry: str) -> list[str]:
    """Loopback registries speak plain http (docker allows it for 127.0.0.0/8 when told)."""
    if not _loopback(registry):
        return []
    return ["--tls-verify=false"] if engine.kind == "podman" else ["--insecure"]


def _inspect_remote(engine: eng.Engine, ref: str, registry: str) -> subprocess.CompletedProcess:
    if engine.kind == "podman":
        tls = ["--tls-verify=false"] if _loopback(registry) else []
        return subprocess.run(["skopeo", "inspect", "--raw", *tls, f"docker://{ref}"], capture_output=True, text=True)
    return _ok(engine, "manifest", "inspect", *insecure(engine, registry), ref)


def in_registry(engine: eng.Engine, ref: str, registry: str) -> bool:
    return _inspect_remote(engine, ref, registry).returncode == 0


def push(engine: eng.Engine, cells: list[Cell], local_repository: str, registry: str, dry: bool = False,
         join_lists: bool = True) -> PushReport:
    """Push every tested local image of `cells` to `registry` (e.g. 127.0.0.1:5000/ascend-runtime)
    and join the arches of each readable tag and alias into one manifest list."""
    report = PushReport()
    for cell in cells:
        local = readable_tag(local_repository, cell.tag_name, cell.target)
        labels = _ok(engine, "image", "inspect", "--format",
                     '{{index .Config.Labels "' + label("content-tag") + '"}}', local)
        if labels.returncode != 0 or not labels.stdout.strip():
            report.missing.append(local)
            continue
        content = labels.stdout.strip()
        # The same tags the build set locally (kinds.ImageKind.tags), content tag first.
        tags = RUNTIME.tags(registry, cell.tag_name, content, cell.target, cell.alias_name)
        remotes = [tags.content, tags.readable] + ([tags.alias] if tags.alias else [])
        if not dry and in_registry(engine, tags.content, registry):
            report.skipped.append(f"{local} (content {content} already in {registry})")
        else:
            for remote in remotes:
                push_flags = insecure(engine, registry) if engine.kind == "podman" else []
                for cmd in (engine.command("tag", local, remote), engine.command("push", *push_flags, remote)):
                    if dry:
                        console.show(eng.show(cmd))
                    elif eng.run(cmd) != 0:
                        raise EngineError(f"push of {remote} failed")
                report.pushed.append(remote)
                interrupts.record(f"pushed {remote}")
    if join_lists:
        report.lists = join_all(engine, cells, registry, dry)
    return report


def join_all(engine: eng.Engine, cells: list[Cell], registry: str, dry: bool = False) -> list[str]:
    """For every readable tag and alias of `cells`, one manifest list of the arches the
    registry holds (CI pushes each arch from its own runner, then joins once)."""
    wanted: dict[str, set[str]] = {}
    for cell in cells:
        for name in [cell.tag_name] + ([cell.alias_name] if cell.alias_name else []):
            wanted.setdefault(name, set()).add(cell.platform)
    written = []
    for name, platforms in sorted(wanted.items()):
        parts = [readable_tag(registry, name, PLATFORMS[p]) for p in sorted(platforms)]
        if not dry:
            parts = [p for p in parts if in_registry(engine, p, registry)]
        if parts:
            join(engine, f"{registry}:{name}", parts, registry, dry)
            written.append(f"{registry}:{name}")
    return written


def join(engine: eng.Engine, target: str, parts: list[str], registry: str, dry: bool = False) -> None:
    tls = insecure(engine, registry)
    if engine.kind == "podman":
        # A local list, filled from the registry, pushed, then dropped.
        if not dry:
            _ok(engine, "manifest", "rm", target)      # a list left by an earlier run; none is fine
        cmds = [engine.command("manifest", "create", target)]
        cmds += [engine.command("manifest", "add", *tls, target, f"docker://{part}") for part in parts]
        cmds.append(engine.command("manifest", "push", "--all", "--rm", *tls, target, f"docker://{target}"))
    else:
        cmds = [engine.command("manifest", "create", *tls, "--amend", target, *parts),
                engine.command("manifest", "push", *tls, "--purge", target)]
    for cmd in cmds:
        if dry:
            console.show(eng.show(cmd))
        elif eng.run(cmd) != 0:
            raise EngineError(f"could not write the manifest list {target} from {', '.join(parts)}")


def platforms_of(engine: eng.Engine, ref: str, registry: str) -> list[str]:
    """The os/arch entries of a manifest list in the registry."""
    import json
    out = _inspect_remote(engine, ref, registry)
    if out.returncode != 0:
        raise UserError(f"{ref} is not in the registry: {out.stderr.strip()}")
    data = json.loads(out.stdout)
    return sorted(f"{m['platform']['os']}/{m['platform']['architecture']}" for m in data.get("manifests", []))
