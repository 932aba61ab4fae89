"""The kinds of image this project builds, each one module, listed once (as cibuildwheel
lists its platform modules): `invoke render` writes what each renders, the suites an
image passes follow its kind, and `invoke test --image` finds the kind by its label. A
new kind is a module with the attributes below, one template and one test folder, and
one line in MODULES (docs/adding.md, "An image kind")."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .. import atomic
from .. import engine as eng
from ..matrix import Matrix
from . import build, devel, serving, sources, userlayer
from .kinds import ImageKind
from .render import ROOT, Rendered, finish_dockerfile
from .steps import label_of


class KindModule(Protocol):
    """What catalog.py asks of a kind's module. Its builds (a runtime cell, a builder cell,
    a request on a tested runtime image) differ in what they take, so each is called by the
    task that asks for it; what every kind shares is here."""
    KIND: ImageKind[Any]

    def render(self, matrix: Matrix) -> list[Rendered]:
        """The Dockerfiles of this kind `invoke render` writes into images/ (committed)."""
        ...


# In the order `invoke render` writes them (and the suites' parents before their children).
MODULES: tuple[KindModule, ...] = (build, sources, userlayer, serving, devel)
KINDS: dict[str, ImageKind[Any]] = {m.KIND.name: m.KIND for m in MODULES}


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


def render(matrix: Matrix, root: Path = ROOT, check: bool = False) -> RenderReport:
    """Write (or with `check`, compare) every generated Dockerfile."""
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
