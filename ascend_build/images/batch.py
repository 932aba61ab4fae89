"""Images built together: one cell's runtime image and then the images of the kinds built
on it (catalog.ON_RUNTIME), and every cell of the matrix's `images:` list (`invoke build
--all`), where one failing does not stop the others. The runtime build (build.py) knows
nothing of what is built on it; each such image is prepared (locked, or refused) before
anything is built, stands on a runtime that was built and tested, and is built by one
path (`build_on_runtime`) from what its kind declares."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal, Sequence

from .. import console
from ..engine import Engine, interrupts
from ..errors import UserError
from ..inputs.options import Inputs, Site
from ..matrix import Cell, Matrix
from . import build as runtime_build
from . import finish, steps, userlayer
from .catalog import OnRuntimeModule
from .kinds import Asked, content_tag, readable_tag
from .steps import Built

Status = Literal["tagged", "failed"]


@dataclass(frozen=True)
class Outcome:
    image: str
    platform: str
    status: Status
    detail: str
    log: Path | None
    code: int = 0           # its error's exit code (README's table): a dry --all ends with the worst


@dataclass(frozen=True)
class Extension:
    """An image of a kind built FROM the cell's tested runtime image, prepared (locked, or
    refused) before anything is built: its kind, and what its `prepare` returned."""
    kind: OnRuntimeModule
    ready: Any


def prepare(matrix: Matrix, cell: Cell, site: Site, requests: Sequence[tuple[OnRuntimeModule, Any]]
            ) -> list[Extension]:
    """Each kind's request (its module's `request`) locked, or refused, before anything is built."""
    return [Extension(kind, kind.prepare(matrix, cell, site, request)) for kind, request in requests]


def build_on_runtime(matrix: Matrix, cell: Cell, site: Site, inputs: Inputs, ext: Extension, runtime: Built,
                     engine: Engine, run_tests=None) -> Built:
    """One image on the cell's tested runtime image, as its kind declares it (`image`): FROM
    the runtime's content tag (one tested image: its layers reused, never rebuilt), its
    content tag from its Dockerfile, build args and inputs, reused when tested already, else
    built, tested with its suites (its own, then the runtime's), finished and tagged
    `<runtime tag name>-<suffix>-<arch>` (every word of the runtime's tag kept: -nonnal, -uidN)."""
    image = ext.kind.image(matrix, cell, site, ext.ready)
    base = readable_tag(inputs.repository, runtime.content_tag, cell.target)    # one tested image
    build_args = {"RUNTIME_IMAGE": base, **image.build_args}
    content = content_tag(image.rendered.text, build_args, {**image.hashes, finish.FINISH_KEY: finish.fingerprint()})
    tags = image.kind.tags(inputs.repository, f"{cell.tag_name}-{image.suffix}", content, cell.target)
    work = site.work_dir(f"{cell.tag_name}-{cell.target.suffix}-{image.suffix}", engine.kind)
    plan = steps.Plan(image, cell, steps.current_dockerfile(image.rendered), build_args, content, tags,
                      image.labels(content, base), work, f"{image.what} on {cell.name} ({cell.platform})")
    test = run_tests or partial(steps.run_image_tests, kind=image.kind)
    return steps.build_on(plan, site, engine, lambda candidate: test(candidate, matrix.path, engine),
                          lambda candidate: finish.layer(engine, candidate, cell, image.suffix, image.lock.text,
                                                         tags.readable, work, own=image.own).image)


def build_cell(matrix: Matrix, cell: Cell, site: Site, inputs: Inputs, extensions: list[Extension], engine: Engine,
               run_tests=None) -> list[Built]:
    """The runtime image, then each extension on it; the first failure stops (and says why).
    A dry run plans them all, then ends where the real run would stop first."""
    runtime = runtime_build.build(matrix, cell, site, inputs, engine, run_tests)
    built = [runtime] + [build_on_runtime(matrix, cell, site, inputs, ext, runtime, engine, run_tests)
                         for ext in extensions]
    stop = next((b.stop for b in built if b.stop is not None), None)
    if stop is not None:
        raise stop
    return built


def build_many(matrix: Matrix, cells: list[Cell], site: Site, inputs: Inputs, engine: Engine,
               run_tests=None, asked: Sequence[tuple[OnRuntimeModule, Asked]] = ()) -> list[Outcome]:
    """Every cell, its layers (`images:` ... `layers:`) and what `asked` asks of each kind on
    it (the options `--all` takes); one failing does not stop the others. Ctrl-C stops them
    all (nothing half-built is tagged) and names the ones not built."""
    outcomes: list[Outcome] = []
    for index, cell in enumerate(cells):
        log = runtime_build.work_dir(site, cell, engine.kind) / "build.log"
        log.unlink(missing_ok=True)
        try:
            ready = _prepare_each(matrix, cell, site, outcomes, asked)
            runtime = _attempt(outcomes, cell.name, cell.platform, log,
                               partial(runtime_build.build, matrix, cell, site, inputs, engine, run_tests))
            for name, ext in ready:
                if runtime is not None:         # what stands on a runtime that failed is not built
                    _attempt(outcomes, name, cell.platform, None,
                             partial(build_on_runtime, matrix, cell, site, inputs, ext, runtime, engine, run_tests))
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


def _prepare_each(matrix: Matrix, cell: Cell, site: Site, outcomes: list[Outcome],
                  asked: Sequence[tuple[OnRuntimeModule, Asked]]) -> list[tuple[str, Extension]]:
    """The cell's layers (`images:` ... `layers:`), then each kind's request, by their rows'
    names, each locked or refused; a refused one is a failed row, and the runtime image is
    built all the same."""
    ready = []
    for layer in cell.layers:
        name = f"{cell.name}-{layer.name or Path(layer.requirements).stem}"
        try:
            req = userlayer.LayerRequest.of(matrix.path.parent / layer.requirements, layer.name)
            ready.append((name, Extension(userlayer, userlayer.prepare(matrix, cell, site, req))))
        except UserError as exc:
            outcomes.append(_failed(name, cell.platform, exc, None))
    for kind, wanted in asked:
        name = f"{cell.name}-{kind.KIND.name}"
        try:
            request = kind.request(matrix, cell, wanted.what)
            ready.append((name, Extension(kind, kind.prepare(matrix, cell, site, request))))
        except UserError as exc:
            outcomes.append(_failed(name, cell.platform, exc, None))
    return ready


def summary(outcomes: list[Outcome]) -> str:
    from ..matrix.report import table
    return table([{"image": o.image, "platform": o.platform, "status": o.status,
                   "log": str(o.log) if o.log else "-", "detail": o.detail} for o in outcomes])
