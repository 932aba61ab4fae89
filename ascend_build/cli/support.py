"""The "supported lines and images" page (docs/support.md), generated from matrix.yaml by
`invoke render` and checked current with the Dockerfiles: every line with its releases,
CANN, driver, Pythons, chips, OSes and toolchain; every image `images:` builds with its
tags; and which cells the test suite here builds and tests for real, versus rendered only."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..chips import DEFAULT as DEFAULT_CHIP
from ..chips import known
from ..images.kinds import RUNTIME, readable_tag
from ..matrix import Cell, Matrix
from ..matrix.like import FORMS
from ..matrix.report import mindspore_rows, mindspore_unpaired, stack_rows

PAGE = Path("docs/support.md")


@dataclass(frozen=True)
class Tested:
    """A cell the test suite builds, tests and tags for real (CANN as the test double)."""
    stack: str
    os: str
    python: str
    chip: str
    platform: str
    modules: tuple[str, ...]    # tests/integration/<module>.py that build it
    how: str

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return (self.stack, self.os, self.python, self.chip, self.platform)


A2 = DEFAULT_CHIP.name

# What `invoke test` builds (tests/unit/test_support.py holds each entry to its modules).
TESTED_HERE = (
    Tested("2.1.0", "debian12", "3.11", A2, "linux/arm64",
           ("test_build_arm64", "test_fast_path", "test_user_layer"),
           "--no-cache behind a proxy and a private index (doubles); its first Python layer again with pip in "
           "the image, and with a user layer on it"),
    Tested("cann8.0.RC3", "debian12", "3.11", A2, "linux/arm64", ("test_podman",),
           "the CANN-only image, with podman, --reproducible, rebuilt by `invoke verify` to the same image ID"),
    Tested("2.1.0", "debian11", "3.9", A2, "linux/arm64", ("test_source_build",),
           "torch_npu and apex built from a stand-in source in the Debian 11 gcc 10 builder"),
    Tested("2.1.0-cann8.0.0", "debian12", "3.11", "310b", "linux/arm64", ("test_310b",),
           "the 310b kernels, hand-recorded and pinned on first use; interrupted with Ctrl-C, then built again "
           "from the cache"),
    Tested("2.10.0-26.1.0", "debian13", "3.13", A2, "linux/arm64", ("test_build_train_26",),
           "a 26.1.0 tag on CANN 9.1.0 with NNAL; torch from PyPI in place of PyTorch's CPU index (not reachable "
           "from CI); the stand-in torch_npu compiled in the Debian 13 gcc 13 builder loads in it"),
    Tested("mindspore2.9.0", "debian12", "3.11", A2, "linux/arm64", ("test_mindspore",),
           "MindSpore's real aarch64 wheel from PyPI (Huawei's sha256) on the CANN 9.0.0 doubles, handed in as "
           ".zip files as Huawei publishes them"),
)


def markdown(rows: list[dict[str, str]]) -> str:
    if not rows:
        return "(none)"
    cols = list(rows[0])
    def cell(v: str) -> str:
        return v.replace("|", "\\|")
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(r[c]) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def _oses(matrix: Matrix, stack) -> str:
    return ", ".join(os.name for os in matrix.os.values() if matrix.allows(stack, os))


def _tag(matrix: Matrix, t: Tested) -> str:
    cell = matrix.cell(t.stack, t.os, t.python, t.chip, t.platform)
    return readable_tag(RUNTIME.repository, cell.name, cell.target)


def _cann_only_section(matrix: Matrix) -> list[str]:
    return [
        "## CANN-only lines of every release",
        "",
        "Every CANN release the import knows has a CANN-only line (`invoke build --cann RELEASE`): written in",
        "`cann_stacks:` above, or derived from the import, its Pythons from the source named here. A derived",
        "line builds on the OSes its release's official images use and on the Debian releases debootstrap makes;",
        "its environment is its release's (imported.yaml, from the official images).",
        "",
        markdown(cann_only_rows(matrix)),
        "",
    ]


def cann_only_rows(matrix: Matrix) -> list[dict[str, str]]:
    """Each release's CANN-only line: the written one, else the derived one."""
    from ..matrix.eras import cann_key
    from ..matrix.frameworks import CANN
    rows = []
    for version in sorted(matrix.cann, key=cann_key):
        st = matrix.stacks.get(CANN.stack_name(version)) or matrix.derived.get(CANN.stack_name(version))
        if st is None:
            continue
        rows.append({"CANN": f"`--cann {version}`", "line": "derived" if st.derived else "`cann_stacks:`",
                     "Python": f"{st.python_min}-{st.python_max} (default {st.python_default})",
                     "Pythons from": st.derived_from or f"`{st.key_path}.python`",
                     "OS (Dockerfiles)": _oses(matrix, st)})
    return rows


def chip_rows(matrix: Matrix) -> list[dict[str, str]]:
    """Each chip's record, and how many lines build images for it."""
    rows = []
    for c in known():
        lines = sum(c.name in matrix.chips(st) for st in matrix.stacks.values())
        rows.append({"chip": c.name + (f" ({', '.join(c.spellings)})" if c.spellings else ""), "products": c.title,
                     "npu-smi names it": f"`{c.smi}`" if c.smi else "not recognized", "host": c.host,
                     "rank table": c.rank_table or "-",
                     "Kubernetes": f"`{c.resource}`, ring `{c.ring}`" if c.job else "-",
                     "lines": f"{lines} of {len(matrix.stacks)}"})
    return rows


def support_page(matrix: Matrix) -> str:
    tested = {t.key: t for t in TESTED_HERE}
    lines = []
    for row, stack in zip(stack_rows(matrix), matrix.stacks.values()):
        row = dict(row)
        row.pop("companions")
        row["OS (Dockerfiles)"] = _oses(matrix, stack)
        lines.append(row)
    images = []
    for c in matrix.image_cells():
        key = (c.stack.name, c.os.name, c.python, c.chip, c.platform)
        tags = [readable_tag(RUNTIME.repository, c.name, c.target)]
        if c.alias:
            tags.append(readable_tag(RUNTIME.repository, c.alias, c.target))
        images.append({"tags": ", ".join(f"`{t}`" for t in tags), "platform": c.platform,
                       "Python": c.python + (" (source)" if c.python_source else ""),
                       "CANN sums": "pinned" if not c.unpinned() else "pinned on first use",
                       "apex": _apex(matrix, c), "here": "built and tested" if key in tested else "rendered only"})
    built = [{"image": f"`{_tag(matrix, t)}`", "tests": ", ".join(f"tests/integration/{m}.py" for m in t.modules), "how": t.how}
             for t in TESTED_HERE]
    return "\n".join([
        f"<!-- GENERATED by `invoke render` from {matrix.path.name}: do not edit. -->",
        "# Supported lines and images",
        "",
        "Every fact below comes from matrix.yaml; `invoke render` writes this page and CI fails when it is",
        "stale. `invoke matrix` prints the same with the CANN files each image needs.",
        "",
        "## Lines",
        "",
        "Each line a framework's release on its CANN release (torch_npu's, MindSpore's), or a CANN release alone",
        "(CANN only, `--cann`: no framework): *published* when the release was made for that CANN, *compatible*",
        "when Huawei's compatibility grid pairs them. The Python column gives the range and what an image gets.",
        "",
        markdown(lines),
        "",
        *_cann_only_section(matrix),
        "## Images",
        "",
        "What `images:` asks for (CI builds, tests and pushes these). Each also gets a content tag,",
        "`sha-<16 hex>-<arch>`, from everything that went in; the arches of a name are joined under",
        "`ascend-runtime:<name>` when pushed.",
        _apex_said(matrix),
        "",
        markdown(images),
        "",
        "## Built and tested here",
        "",
        "The cells the test suite (`invoke test`) builds, tests and tags for real on every run: linux/arm64",
        "under qemu, real torch and torch_npu wheels, CANN as the test double (no Ascend download site is",
        "reachable from CI), no NPU (the NPU smoke test skips). Every other cell is rendered and linted only.",
        "",
        markdown(built),
        "",
        *_last_sections(matrix),
    ])


def _apex(matrix: Matrix, cell: Cell) -> str:
    """Whether the image carries Ascend apex: a torch image of a Python the pinned apex's script takes."""
    if "apex" not in cell.stack.framework.builds:
        return "-"
    return "compiled" if matrix.apex_builds(cell) else f"none (Python {cell.python})"


def _apex_said(matrix: Matrix) -> str:
    apex = matrix.sources["apex"]
    return (f"A torch image carries Ascend apex (`apex`: compiled) where the pinned apex, {apex.ref[:7]} "
            f"(`sources.apex`), builds for its Python: {', '.join(apex.pythons) or 'any'}.")


def _last_sections(matrix: Matrix) -> list[str]:
    """MindSpore's lines, and the chips."""
    unpaired = mindspore_unpaired(matrix)
    return [
        "## MindSpore lines",
        "",
        "Huawei's pairings, imported. A line with a stack (`--mindspore`) builds; 2.9.0's is tested here.",
        "",
        markdown(mindspore_rows(matrix)),
        "",
        *([f"On PyPI with no CANN pairing (unpaired): {', '.join(unpaired)}.", ""] if unpaired else []),
        "## Chips",
        "",
        "Each chip's record (`ascend_build/chips.py`): how `invoke doctor` knows it from `npu-smi info`, its",
        "hosts' device layout, the HCCL rank table `invoke ranktable` writes for it, and the device plugin's",
        "resource and the operator's ring label `invoke job` asks for. *lines*: the lines that build images",
        "for it (its kernels in their CANN release, and the torch_npu it needs).",
        "",
        markdown(chip_rows(matrix)),
        "",
        "## Official tags",
        "",
        "The tag forms found in Huawei's image repositories (Ascend/cann-container-image, Ascend/pytorch",
        "docker/, the SWR registry vLLM-Ascend's Dockerfiles build on), and what `invoke build --like",
        "IMAGE:TAG` does with each (`ascend_build/matrix/like.py`): the taken ones build the cell the tag",
        "names (nothing is pulled); the others are refused with the reason and what to build instead.",
        "",
        markdown(form_rows()),
        "",
    ]


def form_rows() -> list[dict[str, str]]:
    """Each official tag form and what `--like` does with it."""
    return [{"image": f"`{f.image}`", "tag": f"`{f.form}`", "e.g.": f"`{f.example}`",
             "--like": "taken" if f.taken else "refused", "what it builds, or why not": f.does} for f in FORMS]
