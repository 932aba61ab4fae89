"""`invoke build ... --requirements FILE`: a team's own packages as a layer on top of a
tested runtime image. The layer is locked against the runtime (locking/layerlock.py)
before any docker command; it is built FROM the runtime's content tag, tested with the
runtime suite again plus its own (tests/layer_image: each requirement imports, its
packages are the lock's), and only then tagged `<runtime name>-<layer>-<arch>` and with
a content tag."""
from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from .. import console
from .. import engine as eng
from ..errors import UserError
from ..hashing import files_in
from ..inputs.options import Inputs, Site
from ..locking import layerlock
from ..locking import lock as locks
from ..matrix import Cell, Matrix
from . import finish, steps
from .kinds import LAYER, LayerFacts, content_tag, readable_tag
from .render import ROOT, Rendered, layer_dockerfile
from .steps import Built, Extension

KIND = LAYER        # this module is the user layer kind (catalog.py)


def render(matrix: Matrix) -> list[Rendered]:
    """One Dockerfile for every user layer (the runtime and the lock are a build arg and a file)."""
    return [layer_dockerfile(matrix)]


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

    @classmethod
    def from_options(cls, requirements: str | None, name: str | None = None, wheelhouse: str | None = None
                     ) -> list[LayerRequest]:
        """`invoke build --requirements FILE [--layer-name] [--layer-wheelhouse]`: the one
        layer asked for, or none; the layer options without a file are refused."""
        if not requirements:
            if name or wheelhouse:
                raise UserError("--layer-name and --layer-wheelhouse are for a user layer: give its --requirements "
                                "FILE")
            return []
        return [cls.of(requirements, name, wheelhouse)]

    def prepare(self, matrix: Matrix, cell: Cell, site: Site, inputs: Inputs) -> Extension:
        """Locked (or refused) now; built on the runtime later (batch.py)."""
        lock = prepare(matrix, cell, site, inputs, self)[0]
        return Extension(f"{cell.name}-{self.name}", partial(_build_on, matrix, cell, site, inputs, self, lock))


def prepare(matrix: Matrix, cell: Cell, site: Site, inputs: Inputs, req: LayerRequest
            ) -> tuple[layerlock.LayerLock, list[layerlock.Line]]:
    """Parse, check and lock the layer: every refusal happens here, before the runtime or
    the layer is built."""
    lines = layerlock.parse(req.requirements)
    # The runtime's lock, found as its build finds it (beside the matrix, or the project's); a layer
    # has none to hold without it, --unlocked or not.
    hold = layerlock.held(cell, locks.find(matrix, cell, ROOT).lock)
    # --offline is about CANN packages; the layer resolves against the site's pip index,
    # as the runtime's pip steps install from it (a current lock needs no network at all).
    lock, said = _lock(req, lines, cell, hold, site.net, req.wheelhouse, site.dry)
    for line in said:
        console.say(line)
    return lock, lines


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


def build(matrix: Matrix, cell: Cell, site: Site, inputs: Inputs, runtime: Built, req: LayerRequest,
          lock: layerlock.LayerLock, engine: eng.Engine, run_tests=None) -> Built:
    rendered = layer_dockerfile(matrix)
    base = readable_tag(inputs.repository, runtime.content_tag, cell.target)    # one tested image
    build_args = {"RUNTIME_IMAGE": base}
    content = content_tag(rendered.text, build_args, {"lock/layer.txt": lock.sha256, "layer-name": req.name})
    tags = LAYER.tags(inputs.repository, f"{cell.name}-{req.name}", content, cell.target)
    work = site.work_dir(f"{cell.name}-{cell.target.suffix}-{req.name}", engine.kind)
    plan = steps.OnRuntime(KIND, cell, steps.current_dockerfile(rendered), build_args, content, tags,
                           LAYER.labels(LayerFacts(req.name, f"{lock.path.name} sha256:{lock.sha256[:16]}", content,
                                                   base)),
                           work, f"user layer {req.name} on {cell.name} ({cell.platform})", f"{lock.path} as lock/layer.txt")
    test = run_tests or partial(steps.run_image_tests, kind=KIND)
    return steps.build_on(plan, site, engine, lambda image: test(image, matrix.path, engine),
                          lambda ctx: _stage(ctx, lock, req.wheelhouse),
                          lambda image: finish.layer(engine, image, cell, req.name, lock.text, tags.readable,
                                                     work).image)


def _build_on(matrix, cell, site, inputs, req, lock, runtime: Built, engine: eng.Engine, run_tests=None) -> Built:
    return build(matrix, cell, site, inputs, runtime, req, lock, engine, run_tests)


def _stage(ctx: Path, lock: layerlock.LayerLock, wheelhouse: Path | None) -> None:
    """lock/layer.txt, and the layer wheelhouse's wheels the lock names (a team's own)."""
    (ctx / "lock").mkdir(parents=True)
    (ctx / "lock" / "layer.txt").write_text(lock.text)
    shutil.copy2(Path(__file__).with_name("wheel_arch.py"), ctx / "wheel_arch.py")
    (ctx / "wheels").mkdir()
    for wheel in layerlock.named_wheels(lock.text, wheelhouse):
        shutil.copy2(wheel, ctx / "wheels" / wheel.name)

