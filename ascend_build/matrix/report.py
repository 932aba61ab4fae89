"""Human-readable views of the matrix: the table `invoke matrix` prints."""
from __future__ import annotations

from .model import Cell, Matrix


def cell_row(cell: Cell) -> dict[str, str]:
    py = f"{cell.python} ({'source ' + cell.python_source.version if cell.python_source else 'distro'})"
    pins = "yes" if not cell.unpinned() else "NO: " + ", ".join(
        "toolkit" if n == cell.toolkit.file else "kernels" if n == cell.kernels.file else "python" for n in cell.unpinned())
    return {
        "image": cell.name + (f" (alias {cell.alias})" if cell.alias else ""),
        "platform": cell.platform,
        "python": py,
        "torch / torch_npu": f"{cell.stack.torch} / {cell.stack.torch_npu}"
                             + ("" if cell.stack.torch_npu_on_pypi else " (wheelhouse)"),
        "CANN (driver)": f"{cell.cann.version} ({cell.cann.driver})",
        "sha256 pinned": pins,
        "apex": "absent (no Ascend apex wheel)",
    }


def table(rows: list[dict[str, str]]) -> str:
    if not rows:
        return "(no images)"
    cols = list(rows[0])
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    line = lambda values: "  ".join(v.ljust(widths[c]) for c, v in zip(cols, values)).rstrip()
    out = [line(cols), line(["-" * widths[c] for c in cols])]
    out += [line([r[c] for c in cols]) for r in rows]
    return "\n".join(out)


def stacks_table(matrix: Matrix) -> str:
    """Every torch line the matrix knows, buildable or not in `images:`."""
    rows = []
    for st in matrix.stacks.values():
        cann = matrix.cann[st.cann]
        rows.append({"stack": st.name, "torch / torch_npu": f"{st.torch} / {st.torch_npu}",
                     "CANN (driver)": f"{cann.version} ({cann.driver})",
                     "Python": f"{st.python_min}-{st.python_max} (default {st.python_default})",
                     "chips": ", ".join(cann.kernels), "companions": _companions(matrix, st),
                     "toolchain": _toolchain(matrix, st)})
    return table(rows)


def _toolchain(matrix: Matrix, st) -> str:
    """The stack's gcc, its builder, and the other flavors with that gcc and one of its Pythons."""
    if not st.builder:
        return f"gcc {st.gcc}, no builder flavor (release wheel only)"
    others = [n for n, b in matrix.builders.items() if n != st.builder and b.offers(st.gcc)
              and any(p in st.pythons() for p in b.pythons)]
    return f"gcc {st.gcc}, builder {st.builder}" + (f" (also: {', '.join(others)})" if others else "")


def _companions(matrix: Matrix, st) -> str:
    """Each companion at the version its lock resolved (for the default Python, aarch64)."""
    if not st.companions:
        return "-"
    from ..errors import UserError
    from .lock import normalize, pinned_versions, read
    try:
        lock = read(matrix.path.parent, st.name, st.python_default, "aarch64")
    except UserError:
        lock = None
    pins = pinned_versions(lock.files) if lock else {}
    return ", ".join(f"{c} {pins[normalize(c)]}" if normalize(c) in pins else f"{c} (no lock)" for c in st.companions)


def matrix_table(matrix: Matrix) -> str:
    cells = matrix.image_cells()
    files = {}
    for c in cells:
        files.setdefault(c.toolkit.file, c.toolkit.url)
        files.setdefault(c.kernels.file, c.kernels.url)
    text = stacks_table(matrix) + "\n\n" + table([cell_row(c) for c in cells])
    unpaired = [r for r, v in matrix.source.data["torch_npu_releases"].items() if not v["cann"]]
    if unpaired:
        text += ("\n\ntorch_npu on PyPI with no published CANN pairing (unpaired: a stack on them is refused): "
                 + ", ".join(unpaired))
    text += f"\n\n{len(cells)} images from {matrix.path}. CANN packages they need ({len(files)}):\n"
    text += "\n".join(f"  {name}  <- {url}" for name, url in sorted(files.items()))
    return text


def ci_matrix(matrix: Matrix) -> list[dict[str, str]]:
    """The CI build matrix, derived from `images:` so no image list is written twice."""
    return [{"name": f"{c.name}-{c.target.suffix}", "torch": c.stack.name, "os": c.os.name,
             "python": c.python, "chip": c.chip, "platform": c.platform, "runner": c.target.runner}
            for c in matrix.image_cells()]
