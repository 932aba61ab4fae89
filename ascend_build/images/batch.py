"""Images built together: one cell's runtime image and then the images of the kinds that
extend it (user layers, a serving image), and every cell of the matrix's `images:` list
(`invoke build --all`), where one failing does not stop the others. The runtime build
(build.py) knows nothing of what extends it; each extension (userlayer.py, serving.py)
is prepared (locked, or refused) before anything is built and stands on a runtime that
was built and tested."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal, Protocol, Sequence

from .. import console
from ..engine import Engine, interrupts
from ..errors import UserError
from ..inputs.options import Inputs, Site
from ..matrix import Cell, Matrix
from . import build as runtime_build
from . import userlayer
from .steps import Built, Extension

Status = Literal["tagged", "failed"]


@dataclass(frozen=True)
class Outcome:
    image: str
    platform: str
    status: Status
    detail: str
    log: Path | None
    code: int = 0           # its error's exit code (README's table): a dry --all ends with the worst


class Request(Protocol):
    """What asks for an image FROM the cell's runtime: userlayer.LayerRequest, serving.ServingRequest."""
    def prepare(self, matrix: Matrix, cell: Cell, site: Site, inputs: Inputs) -> Extension: ...


def prepare(matrix: Matrix, cell: Cell, site: Site, inputs: Inputs, requests: Sequence[Request]) -> list[Extension]:
    """Each extension locked, or refused, before anything is built."""
    return [req.prepare(matrix, cell, site, inputs) for req in requests]


def build_cell(matrix: Matrix, cell: Cell, site: Site, inputs: Inputs, extensions: list[Extension], engine: Engine,
               run_tests=None) -> list[Built]:
    """The runtime image, then each extension on it; the first failure stops (and says why).
    A dry run plans them all, then ends where the real run would stop first."""
    runtime = runtime_build.build(matrix, cell, site, inputs, engine, run_tests)
    built = [runtime] + [ext.build(runtime, engine, run_tests) for ext in extensions]
    stop = next((b.stop for b in built if b.stop is not None), None)
    if stop is not None:
        raise stop
    return built


def build_many(matrix: Matrix, cells: list[Cell], site: Site, inputs: Inputs, engine: Engine,
               run_tests=None) -> list[Outcome]:
    """Every cell and its layers (`images:` ... `layers:`); one failing does not stop the
    others. Ctrl-C stops them all (nothing half-built is tagged) and names the ones not built."""
    outcomes: list[Outcome] = []
    for index, cell in enumerate(cells):
        log = runtime_build.work_dir(site, cell, engine.kind) / "build.log"
        log.unlink(missing_ok=True)
        try:
            ready = _prepare_each(matrix, cell, site, inputs, outcomes)
            runtime = _attempt(outcomes, cell.name, cell.platform, log,
                               partial(runtime_build.build, matrix, cell, site, inputs, engine, run_tests))
            for ext in ready if runtime is not None else []:
                _attempt(outcomes, ext.name, cell.platform, None, partial(ext.build, runtime, engine, run_tests))
        except KeyboardInterrupt:
            if outcomes:
                console.note("\n" + summary(outcomes))
            rest = [f"{c.name} ({c.platform})" for c in cells[index:]]
            raise interrupts.Interrupted("not built: " + ", ".join(rest)) from None
    return outcomes


def _attempt(outcomes: list[Outcome], name: str, platform: str, log: Path | None, run) -> Built | None:
    """One image's row; a dry run's plan that a real run would stop is a failed row, and what
    stands on it is planned all the same."""
    try:
        built = run()
    except UserError as exc:
        outcomes.append(_failed(name, platform, exc, log if log and log.exists() else None))
        return None
    if built.stop is not None:
        outcomes.append(_failed(name, platform, built.stop, None))
    else:
        outcomes.append(Outcome(name, platform, "tagged", built.tags.readable, built.log))
    return built


def _failed(name: str, platform: str, exc: UserError, log: Path | None) -> Outcome:
    console.error(str(exc))
    return Outcome(name, platform, "failed", str(exc).splitlines()[0][:160], log, exc.exit_code)


def worst(outcomes: list[Outcome]) -> int:
    """The code a dry `--all`, which builds nothing, ends with: the highest of its failed rows'
    codes (README's table: 2 bad input, 3 a CANN package, 6 the engine, ...); 0: none failed."""
    return max((o.code for o in outcomes if o.status == "failed"), default=0)


def _prepare_each(matrix: Matrix, cell: Cell, site: Site, inputs: Inputs, outcomes: list[Outcome]) -> list[Extension]:
    """The cell's layers, each locked or refused; a refused one is a failed row, and the
    runtime image is built all the same."""
    ready = []
    for layer in cell.layers:
        name = f"{cell.name}-{layer.name or Path(layer.requirements).stem}"
        try:
            req = userlayer.LayerRequest.of(matrix.path.parent / layer.requirements, layer.name)
            ready.append(req.prepare(matrix, cell, site, inputs))
        except UserError as exc:
            outcomes.append(_failed(name, cell.platform, exc, None))
    return ready


def summary(outcomes: list[Outcome]) -> str:
    from ..matrix.report import table
    return table([{"image": o.image, "platform": o.platform, "status": o.status,
                   "log": str(o.log) if o.log else "-", "detail": o.detail} for o in outcomes])
