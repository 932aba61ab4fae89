"""Human-readable views of the matrix: the tables `invoke matrix` prints, narrow enough for
a terminal by default, every column with --wide."""
from __future__ import annotations

import textwrap
from typing import Callable, Mapping

from packaging.utils import canonicalize_name

from .frameworks import MINDSPORE, TORCH
from .model import Matrix
from .records import Cell, Stack, minor


def apex_text(matrix: Matrix, cell: Cell) -> str:
    """Where the cell's Ascend apex comes from: the pipeline compiles it where it can."""
    if "apex" not in cell.stack.framework.builds:
        return "-"
    if matrix.apex_builds(cell):
        return "compiled by `invoke apex` (the pipeline does, before the image)"
    apex = matrix.sources["apex"]
    return f"none: Ascend apex {apex.ref[:7]} builds for Python {', '.join(apex.pythons)}"


def cell_row(matrix: Matrix, cell: Cell) -> dict[str, str]:
    py = f"{cell.python} ({'source ' + cell.python_source.version if cell.python_source else 'distro'})"
    role = {cell.toolkit.file: "toolkit", cell.kernels.file: "kernels"} | ({cell.nnal.file: "nnal"} if cell.nnal else {})
    pins = "yes" if not cell.unpinned() else "NO: " + ", ".join(role.get(n, "python source") for n in cell.unpinned())
    return {
        "image": cell.name + (f" [alias {alias_text(cell)}]" if cell.alias else ""),
        "platform": cell.platform,
        "python": py,
        "framework": cell.stack.title + ("" if not cell.stack.torch or cell.stack.torch.npu_on_pypi else " (wheelhouse)"),
        "CANN (driver)": f"{cell.cann.version}{'+NNAL' if cell.nnal else ''} ({cell.cann.driver or 'none named'})",
        "pairing": cell.pairing,
        "sha256 pinned": pins,
        "apex": apex_text(matrix, cell),
    }


def alias_text(cell: Cell) -> str:
    """An alias with the OS of the one image it tags: `images:` gives it on the default OS only,
    so `torch2.1.0` is the Ubuntu image, not the Debian 12 one README builds."""
    return f"{cell.alias} ({cell.os.name})"


def table(rows: list[dict[str, str]], width: int | None = None, keep: tuple[str, ...] = ()) -> str:
    """One line a row; with `width`, the cells of the columns not in `keep` wrapped (at
    spaces) until the lines fit it, the widest column first."""
    if not rows:
        return "(no images)"
    cols = list(rows[0])
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    if width is not None:
        _narrow(rows, widths, width, keep)
    def line(values: list[str]) -> str:
        return "  ".join(v.ljust(widths[c]) for c, v in zip(cols, values)).rstrip()
    def lines(row: dict[str, str]) -> list[str]:
        cells = [[row[c]] if width is None else _wrap(row[c], widths[c]) for c in cols]
        return [line([cell[i] if i < len(cell) else "" for cell in cells]) for i in range(max(map(len, cells)))]
    out = lines(dict(zip(cols, cols))) + [line(["-" * widths[c] for c in cols])]
    for r in rows:
        out += lines(r)
    return "\n".join(out)


def _wrap(text: str, width: int) -> list[str]:
    # Names and URLs stay whole: a word wider than its column widens it (_narrow's floor).
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]


def _narrow(rows: list[dict[str, str]], widths: dict[str, int], width: int, keep: tuple[str, ...]) -> None:
    """Columns narrowed one character at a time down to their longest word, each time the one
    that folds the fewest rows (the widest of those); the columns in `keep` stay whole."""
    floor = {c: widths[c] if c in keep else max(len(w) for r in [dict(zip(widths, widths))] + rows
                                                   for w in (r[c].split() or [""]))
             for c in widths}
    while sum(widths.values()) + 2 * (len(widths) - 1) > width:
        give = [c for c in widths if widths[c] > floor[c]]
        if not give:
            return          # a terminal too narrow for the words: the lines run over
        folded = {c: sum(len(r[c]) >= widths[c] for r in rows) for c in give}
        widths[min(give, key=lambda c: (folded[c], -widths[c]))] -= 1


# The pinned versions a stack's lock resolved (name -> version), or {} without a lock: given
# by the caller (locking reads the locks; the matrix's views do not reach up to it).
PinsOf = Callable[[Stack], Mapping[str, str]]


def stack_rows(matrix: Matrix, pins_of: PinsOf | None = None) -> list[dict[str, str]]:
    """Every line the matrix knows (torch, MindSpore, CANN only), buildable or not in `images:`;
    the companions at their locked versions when `pins_of` reads the locks."""
    rows = []
    for st in matrix.stacks.values():
        cann = matrix.cann[st.cann]
        kind = (matrix.pairing(st) or ("unpaired", ""))[0]
        nnal = "+NNAL" if matrix.nnal(st, cann, "aarch64") or matrix.nnal(st, cann, "x86_64") else ""
        rows.append({"stack": st.name, "framework": st.title,
                     "CANN": f"{cann.version}{nnal} ({kind})",
                     "driver (runs on)": f"{cann.driver or 'none named'}"
                                         + (f" ({', '.join(cann.runs_on)})" if cann.runs_on else ""),
                     "Python": _pythons(matrix, st),
                     "chips": ", ".join(matrix.chips(st)), "companions": _companions(st, pins_of),
                     "toolchain": _toolchain(matrix, st)})
    return rows


def stacks_table(matrix: Matrix, pins_of: PinsOf | None = None) -> str:
    return table(stack_rows(matrix, pins_of))


def _pythons(matrix: Matrix, st, narrow: bool = False) -> str:
    """The range, and the Python an image on the default OS gets (its distro's when it fits);
    for a line the default OS cannot carry (below NNAL's glibc floor), on the first OS that can.
    `narrow`: the OS only where it is not the default, "source" where it is compiled."""
    os = matrix.os[matrix.defaults.os]
    if not matrix.allows(st, os):
        os = next((o for o in matrix.os.values() if matrix.allows(st, o) and o.python in st.pythons()),
                  next((o for o in matrix.os.values() if matrix.allows(st, o)), os))
    default = st.python_for(os)
    if narrow:
        where = [] if os.name == matrix.defaults.os else [f"on {os.name}"]
        return f"{st.python_min}-{st.python_max} ({', '.join([default, *where] + ([] if default == os.python else ['source']))})"
    how = "the distro's" if default == os.python else "built from source"
    return f"{st.python_min}-{st.python_max} ({default} on {os.name}, {how})"


def _toolchain(matrix: Matrix, st) -> str:
    """The stack's gcc, its builder, and the other flavors that serve it (its gcc, one of its
    Pythons, its CANN era)."""
    if st.torch is None:
        return "none (release wheel only)" if st.framework.layers else "none (no framework)"
    if not st.torch.builder:
        return f"gcc {st.torch.gcc}, no builder flavor (release wheel only)"
    others = [n for n, b in matrix.builders.items() if n != st.torch.builder and b.serves(st)]
    return f"gcc {st.torch.gcc}, builder {st.torch.builder}" + (f" (also: {', '.join(others)})" if others else "")


def _companions(st: Stack, pins_of: PinsOf | None) -> str:
    """Each companion at the version its lock resolved, where the caller read the locks."""
    companions = st.torch.companions if st.torch else ()
    if not companions:
        return "-"
    if pins_of is None:
        return ", ".join(companions)
    pins = pins_of(st)
    return ", ".join(f"{c} {pins[canonicalize_name(c)]}" if canonicalize_name(c) in pins else f"{c} (no lock)"
                     for c in companions)


def matrix_table(matrix: Matrix, pins_of: PinsOf | None = None, width: int | None = None) -> str:
    """Every table with every column, one line a row (`invoke matrix --wide`: what tools read);
    with `width`, the narrow view that fits it (the default)."""
    if width is not None:
        return narrow_view(matrix, width)
    cells = matrix.image_cells()
    files = {name: url + ("   [no published sum: `invoke pin` on first use]" if unpinned else "")
             for name, (url, unpinned) in _packages(cells).items()}
    text = stacks_table(matrix, pins_of) + "\n\n" + table([cell_row(matrix, c) for c in cells])
    text += _unpaired(matrix)
    text += torch_npu_table(matrix)
    text += mindspore_table(matrix)
    text += serving_table(matrix)
    text += cann_table(matrix)
    text += f"\n\n{len(cells)} images from {matrix.path}. CANN packages they need ({len(files)}):\n"
    text += "\n".join(f"  {name}  <- {url}" for name, url in sorted(files.items()))
    return text


def _packages(cells: list[Cell]) -> dict[str, tuple[str, bool]]:
    """The CANN files the cells need, as Huawei publishes them (the .zip where its sum is
    known): name -> (URL, whether no sum is published)."""
    files: dict[str, tuple[str, bool]] = {}
    for c in cells:
        for f in c.cann_files:
            files.setdefault(f.zip if f.zip_sha256 else f.file,
                             (f.zip_url if f.zip_sha256 else f.url, not (f.zip_sha256 or f.sha256)))
    return dict(sorted(files.items()))


def cann_table(matrix: Matrix, width: int | None = None) -> str:
    """Every CANN release the data knows, a stack on it or not, with where it was read (that
    column --wide's only: its sources run to 200 characters)."""
    from .eras import cann_key
    def stacks(v: str) -> str:
        return ", ".join([st.name for st in matrix.stacks.values() if st.cann == v]
                         + [f"{st.name}*" for st in matrix.derived.values() if st.cann == v]) or "-"
    rows = [{"CANN": v, "chips with kernels": ", ".join(c.kernels), "NNAL": "yes" if c.nnal else "-",
             "driver": c.driver or "-", "stacks": stacks(v), "source": c.source}
            for v, c in sorted(matrix.cann.items(), key=lambda kv: cann_key(kv[0]))]
    note = ("* a CANN-only line derived from the import (no `cann_stacks:` entry): `invoke build --cann RELEASE` "
            "builds it on the OSes its release's official images use and on Debian 11, 12 and 13"
            if matrix.derived else "")
    if width is not None:
        note = "\n".join(textwrap.wrap(note, width))
        shown = table([{k: v for k, v in r.items() if k != "source"} for r in rows], width, keep=("CANN",))
        return "\n\nCANN releases (imported.yaml):\n" + shown + ("\n\n" + note if note else "")
    return ("\n\nCANN releases (imported.yaml, each with where `invoke update` read it):\n" + table(rows)
            + ("\n\n" + note if note else ""))


def _unpaired(matrix: Matrix) -> str:
    """torch_npu releases with no CANN pairing, split into those older than the data the
    import reads (a bare release before the first post of its line) and the rest."""
    from packaging.version import Version
    releases = matrix.releases[TORCH.name]
    unpaired = [r for r, v in releases.items() if not v.cann]
    first: dict[str, str] = {}
    for r, v in releases.items():
        if v.cann:
            base = Version(r).base_version
            first[base] = min(first.get(base, r), r, key=Version)
    older = [r for r in unpaired if Version(r).base_version in first and Version(r) < Version(first[Version(r).base_version])]
    newer = [r for r in unpaired if r not in older]
    compatible = [r for r in newer if matrix.compatible.get(releases[r].series)]
    refused = [r for r in newer if r not in compatible]
    text = ""
    if compatible:
        text += ("\n\ntorch_npu published for no CANN, compatible by Huawei's grid (a stack may take them on a CANN "
                 "the grid names): " + ", ".join(f"{r} (TorchNPU {releases[r].torchnpu}: CANN "
                                                 f"{', '.join(x + '.x' for x in matrix.compatible[releases[r].series])})"
                                                 for r in compatible))
    if refused:
        text += ("\n\ntorch_npu on PyPI with no CANN pairing and no compatibility grid (unpaired: a stack on them "
                 "is refused): " + ", ".join(refused))
    if older:
        text += ("\n\ntorch_npu on PyPI older than the pairings the imported data covers (each before the first "
                 "paired release of its line): " + ", ".join(f"{r} (data starts at {first[Version(r).base_version]})"
                                                          for r in older))
    return text


def torch_npu_table(matrix: Matrix) -> str:
    """Every torch_npu release the imported data knows, a stack on it or not: its pairing (the
    CANN it was released for, else the CANN series Huawei's grid says its TorchNPU series works
    with), its TorchNPU release, the Pythons PyPI has wheels for, the stacks on it, and where the
    pairing was read (`invoke matrix --wide` only: it is every release, one line each)."""
    rows = []
    for version, rel in matrix.releases[TORCH.name].items():
        grid = matrix.compatible.get(rel.series, ())
        paired = (", ".join(rel.cann) if rel.cann else
                  f"none; compatible by the grid: {', '.join(x + '.x' for x in grid)}" if grid else "none (unpaired)")
        pythons = sorted(rel.pythons("aarch64") | rel.pythons("x86_64"), key=minor)
        rows.append({"torch_npu": version, "CANN": paired, "TorchNPU": rel.torchnpu or "-",
                     "PyPI": (_span(pythons) if pythons else "no wheels") if rel.on_pypi else "no (Huawei's mirror)",
                     "stacks": ", ".join(st.name for st in matrix.stacks.values() if st.framework is TORCH
                                         and st.package == version) or "-",
                     "source": rel.source or "-"})
    return "\n\ntorch_npu releases (imported.yaml: each with its pairing and where it was read):\n" + table(rows)


def mindspore_rows(matrix: Matrix, runs_on: bool = True) -> list[dict[str, str]]:
    """MindSpore releases Huawei pairs with a CANN release: its driver (and the drivers it
    runs on) and the Pythons its wheels are published for."""
    from packaging.version import Version
    rows = []
    for name, rel in matrix.releases[MINDSPORE.name].items():
        if not rel.cann:
            continue
        cann = matrix.cann.get(rel.cann[0])
        pythons: dict[str, list[str]] = {}
        for tag in rel.wheels:
            py, arch = tag.split("-", 1)
            pythons.setdefault(arch, []).append(f"3.{py[3:]}")
        stack = f"`{MINDSPORE.flag} {name}`" if MINDSPORE.stack_name(name) in matrix.stacks else "- (no stack)"
        rows.append({"mindspore": name, "stack": stack, "CANN": rel.cann[0] + ("" if cann else " (not in cann:)"),
                     "driver (runs on)" if runs_on else "driver": (
                         f"{cann.driver or 'none named'}" + (f" ({', '.join(cann.runs_on)})" if cann.runs_on and runs_on
                                                             else "")) if cann else "-",
                     "Python (Huawei's wheels)": "; ".join(
                         f"{arch} {min(p, key=Version)}-{max(p, key=Version)}" for arch, p in sorted(pythons.items())),
                     "PyPI": "yes" if rel.on_pypi else "no (Huawei's mirror)"})
    return rows


def mindspore_unpaired(matrix: Matrix) -> list[str]:
    """PyPI's mindspore releases that no data pairs with a CANN release."""
    return [n for n, r in matrix.releases[MINDSPORE.name].items() if not r.cann and r.on_pypi]


def mindspore_table(matrix: Matrix, width: int | None = None) -> str:
    """The MindSpore lines, and PyPI's releases that no data pairs."""
    rows = mindspore_rows(matrix, runs_on=width is None)
    if not rows:
        return ""
    text = "\n\nMindSpore lines (Huawei's pairings; PyPI serves their aarch64 wheels tagged `none-any`):\n" + table(
        rows, width, keep=("mindspore",))
    unpaired = mindspore_unpaired(matrix)
    if unpaired:
        text += "\n\nmindspore on PyPI with no CANN pairing (unpaired): " + ", ".join(unpaired)
    return text


def _span(pythons: list[str]) -> str:
    from packaging.version import Version
    ordered = sorted(set(pythons), key=Version)
    return ordered[0] if len(ordered) == 1 else f"{ordered[0]}-{ordered[-1]}"


def serving_rows(matrix: Matrix) -> list[dict[str, str]]:
    """The serving lines: each vLLM-Ascend release a serving image can take (a release
    candidate marked rc, a post release post), on its stack (derived: from the release's data),
    that stack's CANN, the chips its images serve there, the Pythons it fits and where its
    wheels stop (the rest: built from its sdist)."""
    from ..platforms import ARCHES
    rows = []
    for rel in matrix.serving_releases():
        fits = rel.pythons()
        per_arch = {arch: [p for p in fits if rel.has_wheel(p, arch)] for arch in ARCHES}
        spans: dict[str, list[str]] = {}
        for arch, wheels in per_arch.items():
            if wheels:
                spans.setdefault(_span(wheels), []).append(arch)
        sdist = [p for p in fits if not all(rel.has_wheel(p, arch) for arch in ARCHES)]
        install = "; ".join([f"wheels {span} ({', '.join(arches)})" for span, arches in spans.items()]
                            + ([f"sdist {_span(sdist)}"] if sdist else []))
        chips = sorted({i.chip for i in rel.images if i.cann.lower() == rel.stack.cann.lower() and i.soc_version})
        kind = "rc" if rel.candidate else "post" if ".post" in rel.version else "final"
        rows.append({"vllm-ascend": rel.version, "kind": kind, "vllm": rel.vllm,
                     "stack": rel.stack.name + (" (derived)" if rel.stack.derived else ""), "CANN": rel.stack.cann,
                     "chips": " ".join(chips), "Python": _span(fits), "install": install})
    return rows


def serving_table(matrix: Matrix, width: int | None = None) -> str:
    """The serving lines, and the imported releases that cannot be served here, with why."""
    from .serving import refused
    if not matrix.vllm_ascend:
        return ""
    rows = serving_rows(matrix)
    if width:           # the stack's CANN is in its name, or `--wide` says it
        rows = [{k: v for k, v in r.items() if k != "CANN"} for r in rows]
    title = ("Serving lines (vLLM-Ascend on the stack of its pins on the CANN its images use, derived from its data "
             "where matrix.yaml has none; with the vLLM it pairs with; where a wheel is missing, its sdist is built):")
    text = "\n\n" + (_fill(title, width) if width else title) + "\n" + (
        table(rows, width, keep=("vllm-ascend",)) if rows else "(none)")
    left = refused(matrix)
    if left:          # in a few words; --wide: in full, with what would fix it
        why = "; ".join(f"{v} ({r.short if width else r.text})" for v, r in left.items())
        line = f"\n\nvllm-ascend releases imported that no serving image takes here: {why}"
        text += _fill(line, width) if width else line
    return text


def ci_matrix(matrix: Matrix, cells: list[Cell] | None = None) -> list[dict[str, str]]:
    """The CI build matrix, derived from `images:` so no image list is written twice
    (`cells`: those of them CI builds, by default all)."""
    # files: the CANN files the cell's build takes, each as the one with a sum (the build job
    # fetches exactly these from the site's mirror; a name grepped out of a plan was the .run).
    # apex: "true" where Ascend apex compiles for the cell (a torch stack, a Python the pinned
    # apex's script takes): the job compiles it first, and the build fills the image's apex
    # slot with it. Elsewhere `invoke apex` would refuse the Python and fail the cell.
    return [{"name": f"{c.name}-{c.target.suffix}", "torch": c.stack.name, "os": c.os.name,
             "python": c.python, "chip": c.chip, "platform": c.platform, "runner": c.target.runner,
             "files": " ".join(f.checked_name for f in c.cann_files),
             "apex": "true" if matrix.apex_builds(c) else "false"}
            for c in (matrix.image_cells() if cells is None else cells)]


# ---------------------------------------------------------------------------- the narrow view

def narrow_view(matrix: Matrix, width: int) -> str:
    """`invoke matrix` in `width` columns: the lines, the images with their aliases, the CANN
    releases and the files to fetch; what only --wide shows is said at the end."""
    cells = matrix.image_cells()
    # Each column at its shortest: the framework by its package (torch_npu 2.1.0.post8 names
    # its torch), a pairing said where it is not the usual published one.
    lines = [{"stack": st.name, "framework": f"{st.framework.package} {st.package}" if st.framework.package_key
              else st.title, "CANN": r["CANN"].replace(" (published)", ""),
              "driver": matrix.cann[st.cann].driver or "none named", "Python": _pythons(matrix, st, narrow=True)}
             for r, st in zip(stack_rows(matrix), matrix.stacks.values())]
    text = table(lines, width, keep=("stack",)) + "\n" + _fill(
        f"Python: each line's range, and in brackets the one an image on {matrix.defaults.os} gets: its distro's "
        f"python3, or compiled from source.", width) + "\n\n" + _images(matrix, cells, width)
    text += _fill(_unpaired(matrix) + mindspore_table(matrix, width), width)
    text += serving_table(matrix, width)
    text += _fill(cann_table(matrix, width), width)
    files = _packages(cells)
    folders: dict[str, list[str]] = {}
    for name, (url, unpinned) in files.items():
        folder = url[:-len(name) - 1] if url.endswith("/" + name) else url
        folders.setdefault(folder, []).append(name + ("  [no published sum: `invoke pin` on first use]" if unpinned
                                                      else ""))
    text += _fill(f"\n\n{len(cells)} images from {matrix.path}. CANN packages they need ({len(files)}), by the "
                  f"folder Huawei publishes them in:", width)
    for folder, names in sorted(folders.items()):
        text += "\n" + _fill(f"  {folder}/", width, "    ") + "".join("\n" + _fill(f"    {n}", width, "      ")
                                                                      for n in names)
    return text + "\n\n" + _fill("Every column (the hosts each driver runs on, chips, companions, toolchains, "
                                  "where each CANN release was read, each package's URL) and every torch_npu "
                                  "release with its pairing, one line a row:",
                                  width) + "\n  invoke matrix --wide"


def _images(matrix: Matrix, cells: list[Cell], width: int) -> str:
    """One line an image (its arches joined), what to know of it on the lines below: its
    alias and the OS that alias is on, apex, sums not published, a compatible pairing."""
    arches: dict[str, list[str]] = {}
    notes: dict[str, list[str]] = {}
    for c in cells:
        arches.setdefault(c.name, []).append(c.target.suffix)
        said = notes.setdefault(c.name, [])
        said += [n for n in _notes(matrix, c) if n not in said]      # an arch's own, once
    w = max(len("image"), *map(len, arches))
    out = [f"{'image'.ljust(w)}  arch", f"{'-' * w}  {'-' * max(len(', '.join(a)) for a in arches.values())}"]
    for name, arch in arches.items():
        out.append(f"{name.ljust(w)}  {', '.join(arch)}" if w + 2 + len(", ".join(arch)) <= width
                   else f"{name}\n    {', '.join(arch)}")
        out += [_fill(f"    {n}", width, "      ") for n in notes[name]]
    default = matrix.defaults.os
    text = "\n".join(out) + "\n\n" + f"An alias tags the {default} image of its line only (`images:` in {matrix.path.name})."
    aliased = next((c for c in cells if c.alias), None)
    other = next((c for c in cells if aliased and c.stack == aliased.stack and c.os.name != default
                  and c.target == aliased.target), None)
    if aliased and other:
        text += f" `{aliased.alias}` is {aliased.name}; {other.name} (--os {other.os.name}) has no alias."
    if any("apex" in c.stack.framework.builds for c in cells):
        apex = matrix.sources["apex"]
        text += (f" apex: where not said, the image has none (Ascend apex {apex.ref[:7]} builds for Python "
                 f"{', '.join(apex.pythons)} only).")
    return _fill(text, width)


def _notes(matrix: Matrix, c: Cell) -> list[str]:
    """What the narrow view says of an image below its name (--wide has a column for each)."""
    role = {c.toolkit.file: "toolkit", c.kernels.file: "kernels"} | ({c.nnal.file: "nnal"} if c.nnal else {})
    return (([f"alias {alias_text(c)}"] if c.alias else [])
            + [f"{role.get(n, 'python source')}: no published sum (`invoke pin` on first use)" for n in c.unpinned()]
            + (["apex compiled by `invoke apex`"] if matrix.apex_builds(c) else [])
            + ([f"{c.pairing} pairing"] if c.pairing != "published" else []))


def _fill(text: str, width: int, indent: str = "") -> str:
    """Prose wrapped to `width`, each paragraph and line on its own; names and URLs whole."""
    return "\n".join(textwrap.fill(line, width, subsequent_indent=indent, break_long_words=False,
                                    break_on_hyphens=False) if len(line) > width else line
                      for line in text.split("\n"))
