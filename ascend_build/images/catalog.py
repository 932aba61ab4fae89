"""The kinds of image this project builds, each one module, listed once (as cibuildwheel
lists its platform modules): `invoke render` writes what each renders, the suites an
image passes follow its kind, `invoke test --image` finds the kind by its label, and
`invoke build` takes the options of each kind built on a tested runtime image and builds
it through one path. A new kind is a module with the attributes below, one template and
one test folder, and one line in MODULES (docs/adding.md, "An image kind")."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .. import atomic, project
from .. import engine as eng
from ..inputs.options import Site
from ..matrix import Cell, Matrix
from ..matrix.like import Like
from . import build, devel, serving, sources, userlayer
from .kinds import Asked, ImageKind
from .render import Rendered, finish_dockerfile
from .steps import OnRuntime, label_of


class KindModule(Protocol):
    """What catalog.py asks of every kind's module. The runtime's and the builder's builds
    (a cell, a builder cell) differ in what they take, so each is called by the task that
    asks for it; the kinds built on a tested runtime image are built through one path
    (OnRuntimeModule)."""
    KIND: ImageKind[Any]

    def render(self, matrix: Matrix) -> list[Rendered]:
        """The Dockerfiles of this kind `invoke render` writes into images/ (committed)."""
        ...


@runtime_checkable
class OnRuntimeModule(KindModule, Protocol):
    """A kind built FROM a cell's tested runtime image (its KIND extends the runtime's): what
    it adds to `invoke build`, and how its image is built. `invoke build` (cli/building.py)
    asks each such kind, in MODULES' order: `ask` (from its options), `request` (on the cell),
    `prepare` (every one before anything is built, images/batch.py), and after the runtime
    image is built and tested, `image`, which the one build path (batch.build_on_runtime)
    stages, builds, tests and tags. The kind's own records pass between them."""
    Options: type[Any]      # its options of `invoke build`: a record of kinds.option fields

    def ask(self, matrix: Matrix, options: Any, like: Like | None) -> Asked | None:
        """What its options (an `Options` record) ask for, None: nothing. `like`: the official
        image `--like` names, whose tag may ask for this kind (cann:<tag>-devel)."""
        ...

    def request(self, matrix: Matrix, cell: Cell, asked: Any) -> Any:
        """Its request on the cell (from `Asked.what`): every refusal the data gives (exit 2),
        before anything is locked or fetched."""
        ...

    def prepare(self, matrix: Matrix, cell: Cell, site: Site, request: Any) -> Any:
        """Locked and fetched, or refused, before anything is built; a dry run fetches and
        writes nothing."""
        ...

    def image(self, matrix: Matrix, cell: Cell, site: Site, ready: Any) -> OnRuntime:
        """What its image on the cell's runtime takes and how it is built (from what `prepare`
        returned): its Dockerfile, build args, context, lock and labels."""
        ...


# In the order `invoke render` writes them (and the suites' parents before their children).
MODULES: tuple[KindModule, ...] = (build, sources, userlayer, serving, devel)
KINDS: dict[str, ImageKind[Any]] = {m.KIND.name: m.KIND for m in MODULES}
# The kinds built on a tested runtime image: `invoke build` takes their options, in this order.
ON_RUNTIME: tuple[OnRuntimeModule, ...] = tuple(m for m in MODULES if isinstance(m, OnRuntimeModule))


def kind_of(engine: eng.Engine, image: str) -> ImageKind[Any]:
    """An image's kind, from its label (images built before the label: runtime)."""
    return KINDS.get(label_of(engine, image, "kind"), build.KIND)


def render_all(matrix: Matrix) -> list[Rendered]:
    return [r for module in MODULES for r in module.render(matrix)] + [finish_dockerfile()]


@dataclass(frozen=True)
class RenderReport:
    written: list[Path]
    stale: list[Path]       # differ from what rendering gives
    extra: list[Path]       # in images/ but rendered from nothing


def render(matrix: Matrix, root: Path | None = None, check: bool = False) -> RenderReport:
    """Write (or with `check`, compare) every generated Dockerfile, into the project's images/
    (`root`: another folder)."""
    root = project.root() if root is None else root
    outputs = render_all(matrix)
    wanted = {r.path for r in outputs}
    stale, written = [], []
    for r in outputs:
        target = root / r.path
        current = target.read_text() if target.exists() else None
        if current == r.text:
            continue
        stale.append(r.path)
        if not check:
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic.write_text(target, r.text)      # processes rendering at once each replace it whole
            written.append(r.path)
    images = root / "images"
    extra = sorted(p.relative_to(root) for p in images.rglob("Dockerfile") if p.relative_to(root) not in wanted) \
        if images.exists() else []
    if not check:
        for p in extra:
            (root / p).unlink(missing_ok=True)     # another render at once may have removed it first
            _prune_empty((root / p).parent, images)
    return RenderReport(written, stale, extra)


def _prune_empty(folder: Path, stop: Path) -> None:
    """Empty folders removed, up to `stop`; the first not empty (or gone: another render at once) ends it."""
    while folder != stop:
        try:
            folder.rmdir()
        except OSError:         # not empty, or gone already
            return
        folder = folder.parent
