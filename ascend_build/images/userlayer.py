"""`invoke build ... --requirements FILE`: a team's own packages as a layer on top of a
tested runtime image. The layer is locked against the runtime (locking/layerlock.py)
before any docker command; it is built FROM the runtime's content tag, tested with the
runtime suite again plus its own (tests/layer_image: each requirement imports, its
packages are the lock's), and only then tagged `<runtime name>-<layer>-<arch>` and with
a content tag."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .. import console, project
from ..errors import UserError
from ..hashing import files_in
from ..inputs.options import Site
from ..locking import layerlock
from ..locking import lock as locks
from ..matrix import Cell, Matrix
from ..matrix.like import Like
from .kinds import LAYER, Asked, LayerFacts, option
from .render import Rendered, layer_dockerfile
from .steps import SCRIPTS, OnRuntime

KIND = LAYER        # this module is the user layer kind (catalog.py)


def render(matrix: Matrix) -> list[Rendered]:
    """One Dockerfile for every user layer (the runtime and the lock are a build arg and a file)."""
    return [layer_dockerfile(matrix)]


NEEDS_FILE = "is for a user layer: give its --requirements FILE"


@dataclass(frozen=True)
class Options:
    """A user layer, a team's own packages on the tested runtime image."""
    requirements: str | None = option(None, "a requirements file: build a user layer on top of the runtime image, "
                                            "locked (FILE.lock/) with every runtime package held, tested, tagged "
                                            "<runtime name>-<layer>-<arch>")
    layer_name: str | None = option(None, "the user layer's name in its tag (default: the requirements file's name)",
                                    needs=("requirements",), unmet=NEEDS_FILE)
    layer_wheelhouse: str | None = option(None, "folder of the team's own wheels the requirements may name (for the "
                                                "user layer only)", needs=("requirements",), unmet=NEEDS_FILE)


_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,39}$")


@dataclass(frozen=True)
class LayerRequest:
    requirements: Path
    name: str
    wheelhouse: Path | None = None      # the team's own wheels (not the runtime's --wheelhouse)

    @classmethod
    def of(cls, requirements: str | Path, name: str | None = None, wheelhouse: str | Path | None = None
           ) -> LayerRequest:
        path = Path(requirements)
        if wheelhouse and not Path(wheelhouse).is_dir():
            raise UserError(f"--layer-wheelhouse {wheelhouse}: no such folder")
        if wheelhouse:
            files_in(Path(wheelhouse), "*.whl")      # each a regular file of the folder, before anything runs
        name = name or path.stem
        if not _NAME.match(name):
            raise UserError(f"user layer name {name!r}: use lowercase letters, digits, '.', '_' or '-' (it becomes "
                            "part of the image tag); pass --layer-name NAME")
        return cls(path, name, Path(wheelhouse) if wheelhouse else None)


def ask(matrix: Matrix, options: Options, like: Like | None) -> Asked | None:
    """`--requirements FILE [--layer-name] [--layer-wheelhouse]`: the one layer asked for, or none."""
    if not options.requirements:
        return None
    return Asked(LayerRequest.of(options.requirements, options.layer_name, options.layer_wheelhouse))


def request(matrix: Matrix, cell: Cell, asked: LayerRequest) -> LayerRequest:
    """A layer fits any runtime: what it asks is checked against the runtime's lock (`prepare`)."""
    return asked


@dataclass(frozen=True)
class Ready:
    request: LayerRequest
    lock: layerlock.LayerLock


def prepare(matrix: Matrix, cell: Cell, site: Site, req: LayerRequest) -> Ready:
    """Parse, check and lock the layer: every refusal happens here, before the runtime or
    the layer is built."""
    lines = layerlock.parse(req.requirements)
    # The runtime's lock, found as its build finds it (beside the matrix, or the project's); a layer
    # has none to hold without it, --unlocked or not.
    hold = layerlock.held(cell, locks.find(matrix, cell, project.root()).lock)
    # --offline is about CANN packages; the layer resolves against the site's pip index,
    # as the runtime's pip steps install from it (a current lock needs no network at all).
    lock, said = _lock(req, lines, cell, hold, site.net, req.wheelhouse, site.dry)
    for line in said:
        console.say(line)
    return Ready(req, lock)


def _lock(req, lines, cell, hold, net, wheelhouse, dry):
    from ..locking.layer_resolve import lock_layer
    if dry:
        # A dry run resolves nothing and writes nothing: it says what the real run does.
        path = layerlock.path_for(req.requirements, cell)
        conflicts = layerlock.direct_conflicts(lines, hold, req.requirements)
        if conflicts:
            raise layerlock.LayerConflict("\n".join(conflicts))
        old = layerlock.read(path)
        return (old or layerlock.LayerLock(path, "")), [f"# the real run checks or makes {path}"]
    return lock_layer(req.name, req.requirements, lines, cell, hold, net, wheelhouse)


def image(matrix: Matrix, cell: Cell, site: Site, ready: Ready) -> OnRuntime:
    """Its lock as lock/layer.txt, and the layer wheelhouse's wheels the lock names (a team's own)."""
    req, lock = ready.request, ready.lock
    wheels = layerlock.named_wheels(lock.text, req.wheelhouse)
    return OnRuntime(
        KIND, suffix=req.name, rendered=layer_dockerfile(matrix), lock=lock, own=f"layer-{req.name}", build_args={},
        hashes={"lock/layer.txt": lock.sha256, "layer-name": req.name},
        labels=lambda content, base: KIND.labels(LayerFacts(req.name, lock.label, content, base)),
        what=f"user layer {req.name}", staged=f"{lock.path} as lock/layer.txt",
        context={"lock/layer.txt": lock.text, "wheel_arch.py": SCRIPTS / "wheel_arch.py",
                 **{f"wheels/{wheel.name}": wheel for wheel in wheels}}, folders=("wheels",))
