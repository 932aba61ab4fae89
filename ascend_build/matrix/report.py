"""Human-readable views of the matrix: the table `invoke matrix` prints."""
from __future__ import annotations

from typing import Callable, Mapping

from packaging.utils import canonicalize_name

from .frameworks import MINDSPORE, TORCH
from .model import Matrix
from .records import Cell, Stack


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
        "image": cell.name + (f" (alias {cell.alias})" if cell.alias else ""),
        "platform": cell.platform,
        "python": py,
        "framework": cell.stack.title + ("" if not cell.stack.torch or cell.stack.torch.npu_on_pypi else " (wheelhouse)"),
        "CANN (driver)": f"{cell.cann.version}{'+NNAL' if cell.nnal else ''} ({cell.cann.driver or 'none named'})",
        "pairing": cell.pairing,
        "sha256 pinned": pins,
        "apex": apex_text(matrix, cell),
    }


def table(rows: list[dict[str, str]]) -> str:
    if not rows:
        return "(no images)"
    cols = list(rows[0])
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    def line(values: list[str]) -> str:
        return "  ".join(v.ljust(widths[c]) for c, v in zip(cols, values)).rstrip()
    out = [line(cols), line(["-" * widths[c] for c in cols])]
    out += [line([r[c] for c in cols]) for r in rows]
    return "\n".join(out)


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


def _pythons(matrix: Matrix, st) -> str:
    """The range, and the Python an image on the default OS gets (its distro's when it fits);
    for a line the default OS cannot carry (below NNAL's glibc floor), on the first OS that can."""
    os = matrix.os[matrix.defaults.os]
    if not matrix.allows(st, os):
        os = next((o for o in matrix.os.values() if matrix.allows(st, o) and o.python in st.pythons()),
                  next((o for o in matrix.os.values() if matrix.allows(st, o)), os))
    default = st.python_for(os)
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


def matrix_table(matrix: Matrix, pins_of: PinsOf | None = None) -> str:
    cells = matrix.image_cells()
    files: dict[str, str] = {}
    for c in cells:         # what Huawei publishes: the .zip where its sum is known
        for f in c.cann_files:
            unpinned = "" if f.zip_sha256 or f.sha256 else "   [no published sum: `invoke pin` on first use]"
            files.setdefault(f.zip if f.zip_sha256 else f.file, (f.zip_url if f.zip_sha256 else f.url) + unpinned)
    text = stacks_table(matrix, pins_of) + "\n\n" + table([cell_row(matrix, c) for c in cells])
    text += _unpaired(matrix)
    text += mindspore_table(matrix)
    text += cann_table(matrix)
    text += f"\n\n{len(cells)} images from {matrix.path}. CANN packages they need ({len(files)}):\n"
    text += "\n".join(f"  {name}  <- {url}" for name, url in sorted(files.items()))
    return text


def cann_table(matrix: Matrix) -> str:
    """Every CANN release the data knows, a stack on it or not, with where it was read."""
    from .eras import cann_key
    rows = [{"CANN": v, "chips with kernels": ", ".join(c.kernels), "NNAL": "yes" if c.nnal else "-",
             "driver": c.driver or "-", "stacks": ", ".join(st.name for st in matrix.stacks.values() if st.cann == v)
             or "-", "source": c.source} for v, c in sorted(matrix.cann.items(), key=lambda kv: cann_key(kv[0]))]
    return "\n\nCANN releases (imported.yaml, each with where `invoke update` read it):\n" + table(rows)


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


def mindspore_rows(matrix: Matrix) -> list[dict[str, str]]:
    """MindSpore releases Huawei pairs with a CANN release: its driver and the Pythons its
    wheels are published for."""
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
                     "driver (runs on)": (f"{cann.driver or 'none named'}"
                                          + (f" ({', '.join(cann.runs_on)})" if cann.runs_on else "")) if cann else "-",
                     "Python (Huawei's wheels)": "; ".join(
                         f"{arch} {min(p, key=Version)}-{max(p, key=Version)}" for arch, p in sorted(pythons.items())),
                     "PyPI": "yes" if rel.on_pypi else "no (Huawei's mirror)"})
    return rows


def mindspore_unpaired(matrix: Matrix) -> list[str]:
    """PyPI's mindspore releases that no data pairs with a CANN release."""
    return [n for n, r in matrix.releases[MINDSPORE.name].items() if not r.cann and r.on_pypi]


def mindspore_table(matrix: Matrix) -> str:
    """The MindSpore lines, and PyPI's releases that no data pairs."""
    rows = mindspore_rows(matrix)
    if not rows:
        return ""
    text = "\n\nMindSpore lines (Huawei's pairings; PyPI serves their aarch64 wheels tagged `none-any`):\n" + table(rows)
    unpaired = mindspore_unpaired(matrix)
    if unpaired:
        text += "\n\nmindspore on PyPI with no CANN pairing (unpaired): " + ", ".join(unpaired)
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
