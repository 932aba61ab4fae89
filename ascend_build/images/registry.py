"""Pushing tested images: per-arch tags go to the registry, a build whose content tag
is already there is skipped, and the arches of one tag are joined into a manifest list
(how each engine writes and reads one: engine/engine.py). An image labelled test-only (made
under a test switch, e.g. torch from PyPI in place of PyTorch's CPU index) is never pushed."""
from __future__ import annotations

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


def in_registry(engine: eng.Engine, ref: str, registry: str) -> bool:
    return engine.registry_manifest(ref, registry) is not None


def refuse_test_only(ref: str, labels: dict[str, str]) -> None:
    """An image made under a test-only switch says so in a label; it is not one to ship."""
    said = labels.get(label("test-only"))
    if said:
        raise UserError(f"{ref} carries the label {label('test-only')} ({said}); it is not pushed. Build it "
                        f"without the test-only switch to publish it")


def refuse_without_kernels(ref: str, labels: dict[str, str], allowed: bool) -> None:
    """A serving image built --no-kernels lacks vLLM-Ascend's custom operators: pushed only when asked."""
    if labels.get(label("kernels")) == "no" and not allowed:
        raise UserError(f"{ref} was built without vLLM-Ascend's custom kernels (--no-kernels: label "
                        f"{label('kernels')}=no); it is not pushed unless you say so: --without-kernels-ok")


def push(engine: eng.Engine, cells: list[Cell], local_repository: str, registry: str, dry: bool = False,
         join_lists: bool = True, suffix: str = "", without_kernels_ok: bool = False) -> PushReport:
    """Push every tested local image of `cells` to `registry` (e.g. 127.0.0.1:5000/ascend-runtime)
    and join the arches of each readable tag and alias into one manifest list. `suffix`: the
    images built on them (a serving image: -vllm0.23.0), which have no alias."""
    report = PushReport()
    for cell in cells:
        local = readable_tag(local_repository, cell.tag_name + suffix, cell.target)
        labels = engine.labels(local) or {}
        content = labels.get(label("content-tag"), "")
        if not content:
            report.missing.append(local)
            continue
        refuse_test_only(local, labels)
        refuse_without_kernels(local, labels, without_kernels_ok)
        # The same tags the build set locally (kinds.ImageKind.tags), content tag first.
        tags = RUNTIME.tags(registry, cell.tag_name + suffix, content, cell.target, None if suffix else cell.alias_name)
        remotes = [tags.content, tags.readable] + ([tags.alias] if tags.alias else [])
        if not dry and in_registry(engine, tags.content, registry):
            report.skipped.append(f"{local} (content {content} already in {registry})")
        else:
            for remote in remotes:
                if dry:
                    console.show(eng.show(engine.tag_argv(local, remote)))
                    console.show(eng.show(engine.push_argv(remote, registry)))
                elif not engine.tag(local, remote) or engine.push(remote, registry) != 0:
                    raise EngineError(f"push of {remote} failed")
                report.pushed.append(remote)
                interrupts.record(f"pushed {remote}")
    if join_lists:
        report.lists = join_all(engine, cells, registry, dry, suffix)
    return report


def join_all(engine: eng.Engine, cells: list[Cell], registry: str, dry: bool = False, suffix: str = "") -> list[str]:
    """For every readable tag and alias of `cells`, one manifest list of the arches the
    registry holds (CI pushes each arch from its own runner, then joins once)."""
    wanted: dict[str, set[str]] = {}
    for cell in cells:
        names = [cell.tag_name + suffix] if suffix else [cell.tag_name] + ([cell.alias_name] if cell.alias_name else [])
        for name in names:
            wanted.setdefault(name, set()).add(cell.platform)
    written = []
    for name, platforms in sorted(wanted.items()):
        parts = [readable_tag(registry, name, PLATFORMS[p]) for p in sorted(platforms)]
        if not dry:
            parts = [p for p in parts if _joinable(engine, p, registry)]
        if parts:
            join(engine, f"{registry}:{name}", parts, registry, dry)
            written.append(f"{registry}:{name}")
    return written


def _joinable(engine: eng.Engine, ref: str, registry: str) -> bool:
    """In the registry, and not a test-only image (its config's labels say)."""
    found = engine.registry_manifest(ref, registry)
    if found is None:
        return False
    local = engine.labels(ref)
    if local is not None:
        refuse_test_only(ref, local)
    return True


def join(engine: eng.Engine, target: str, parts: list[str], registry: str, dry: bool = False) -> None:
    if dry:
        for cmd in engine.join_argvs(target, parts, registry):
            console.show(eng.show(cmd))
        return
    engine.join(target, parts, registry)


def platforms_of(engine: eng.Engine, ref: str, registry: str) -> list[str]:
    """The os/arch entries of a manifest list in the registry."""
    data = engine.registry_manifest(ref, registry)
    if data is None:
        raise UserError(f"{ref} is not in the registry")
    return sorted(f"{m['platform']['os']}/{m['platform']['architecture']}" for m in data.get("manifests", []))
