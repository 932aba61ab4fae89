"""Resolving a user layer (see layerlock.py): uv with every runtime package held by
a constraint, for the image's Python and arch; hashes from the index (or the site's
wheelhouse for wheels of its own). When the requirements do not resolve with the stack
held, find which requirement moves which held package, by resolving again without
that one hold: the refusal names all three."""
from __future__ import annotations

from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from .. import atomic
from ..errors import UserError
from ..hashing import files_in, sha256_of
from ..matrix.model import Cell
from .layerlock import (
    USER_LAYER,
    Held,
    LayerConflict,
    LayerLock,
    Line,
    LockFor,
    direct_conflicts,
    held_changes,
    mentioned,
    path_for,
    read,
    render,
    requirements_digest,
)
from .lock import normalize
from .resolve import (
    RESOLVE_GLIBC,
    Index,
    Network,
    _entry,
    diff_packages,
    target_tags,
    uv_compile,
    uv_version,
    wheel_hashes,
)

# Resolutions tried to find the held package a requirement moves: those the resolver's
# complaint names first, then the rest, up to this many.
_MAX_TRIES = 40


def lock_layer(name: str, file: Path, lines: list[Line], cell: Cell, hold: Held, net: Network | None,
               wheelhouse: Path | None, kind: LockFor = USER_LAYER) -> tuple[LayerLock, list[str]]:
    """The layer's lock, reused when still valid, else (re)made and written; with what
    to tell the user about it. `net` None: no index to ask, a lock that must be remade is refused.
    `kind`: the kind of layer, as its lock's header and the messages name it."""
    what = kind.what
    conflicts = direct_conflicts(lines, hold, file)
    if conflicts:
        raise LayerConflict("\n".join(conflicts) + "\nnothing was built")
    path = path_for(file, cell)
    old = read(path)
    said: list[str] = []
    if old is not None:
        if old.requirements_digest == requirements_digest(lines) and old.held == hold.versions:
            return old, [f"{what} {name!r}: {path} is current ({len(old.packages)} packages), reused"]
        moved = held_changes(old.held, hold.versions)
        said.append(f"{what} {name!r}: {path} was made for " + (
            "other requirements" if old.requirements_digest != requirements_digest(lines) else "another runtime")
            + (": the runtime changed since:" if moved else ""))
        said += [f"  {line}" for line in moved]
    if net is None:
        raise UserError("\n".join(said + [f"{path} must be remade and no package index is "
                                          "reachable: run once where it is, and commit the lock"]))
    resolved = uv_compile({"layer": [line.text for line in lines]}, cell.python, cell.arch, net,
                          constraints=[f"{n}=={v}" for n, v in sorted(hold.versions.items())],
                          prefer=old.packages if old else None, find_links=wheelhouse, glibc=layer_glibc(cell))
    if isinstance(resolved, str):
        raise LayerConflict(explain(file, lines, cell, hold, net, wheelhouse, resolved) + "\nnothing was built")
    entries = _entries(resolved, hold, cell, net, wheelhouse)
    text = render(name, cell, hold, lines, entries, uv_version(), kind)
    new = LayerLock(path, text)
    if old is not None:
        changed = diff_packages({"layer": old.text}, {"layer": text})
        said += ([f"  the layer's packages: {line}" for line in changed] if changed
                 else ["  the lock still holds: the same packages, only its record of the runtime is new"])
    else:
        said.append(f"{what} {name!r}: {path} made ({len(new.packages)} packages)")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, text)     # replaced whole: a build reading it at once sees the old or the new
    return new, said


def layer_glibc(cell: Cell) -> str:
    """A layer is resolved for its image's own OS: wheels up to that OS's glibc (llguidance
    1.7, which vLLM 0.23 asks for, has manylinux_2_31 aarch64 wheels only)."""
    if not cell.os.glibc:
        return RESOLVE_GLIBC
    return f"2_{min(int(cell.os.glibc.split('.')[1]), 40)}"     # uv's --python-platform knows up to 2_40


def _entries(resolved: dict[str, tuple[str, list[str]]], hold: Held, cell: Cell, net: Network,
             wheelhouse: Path | None) -> list[str]:
    index = Index(net)
    tags = target_tags(cell.python, cell.arch)
    local = _local_wheels(wheelhouse)
    entries = []
    for pkg, (version, _) in sorted(resolved.items()):
        if pkg in hold.versions:
            continue            # in the runtime image already, at this version (held)
        files = local.get(pkg) or index.files(pkg)
        picked = wheel_hashes(files, pkg, version, tags)
        if not picked:
            raise UserError(f"{pkg}=={version}: no wheel for CPython {cell.python} on {cell.arch} "
                            f"({'the wheelhouse' if pkg in local else 'the index'}); a user layer installs wheels "
                            "only (build one and pass --wheelhouse DIR)")
        entries.append(_entry(pkg, version, picked))
    return entries


def _local_wheels(wheelhouse: Path | None) -> dict[str, list[tuple[str, str]]]:
    found: dict[str, list[tuple[str, str]]] = {}
    for wheel in files_in(wheelhouse, "*.whl") if wheelhouse else []:
        try:
            name = normalize(str(parse_wheel_filename(wheel.name)[0]))
        except InvalidWheelFilename:
            continue
        found.setdefault(name, []).append((wheel.name, sha256_of(wheel)))
    return found


def explain(file: Path, lines: list[Line], cell: Cell, hold: Held, net: Network, wheelhouse: Path | None,
            complaint: str) -> str:
    """Which requirement would move which held package, and to what; uv's own words when
    no single hold explains it."""
    constraints = {n: f"{n}=={v}" for n, v in sorted(hold.versions.items())}
    said = []
    tries = 0
    for line in lines:
        alone = uv_compile({"layer": [line.text]}, cell.python, cell.arch, net,
                           constraints=list(constraints.values()), find_links=wheelhouse,
                           glibc=layer_glibc(cell))
        if not isinstance(alone, str):
            continue
        named = mentioned(alone, constraints)
        found = None
        for candidate in named + [n for n in constraints if n not in named]:
            if tries >= _MAX_TRIES:
                break
            tries += 1
            freed = uv_compile({"layer": [line.text]}, cell.python, cell.arch, net,
                               constraints=[c for n, c in constraints.items() if n != candidate],
                               find_links=wheelhouse, glibc=layer_glibc(cell))
            if not isinstance(freed, str):
                found = (candidate, freed.get(candidate, ("?", []))[0])
                break
        if found:
            pkg, version = found
            said.append(f"{line.where(file)} would move {pkg} from {hold.versions[pkg]} to {version}; held by "
                        f"{hold.why(pkg)}. Ask for a release of {line.name} that works with {pkg} "
                        f"{hold.versions[pkg]}, or build on a stack whose {pkg} it accepts")
        else:
            said.append(f"{line.where(file)} does not resolve for CPython {cell.python} on {cell.arch} with the "
                        f"runtime's packages held:\n{alone}")
    if not said:
        said.append(f"{file}: its requirements resolve one by one but not together with the runtime's packages "
                    f"held:\n{complaint}")
    return "\n".join(said)
