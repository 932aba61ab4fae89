"""`invoke build --like TAG`: an official image's tag, resolved to the matrix's cell. Upstream
names its torch-npu images `<torch_npu>-cann<CANN>-<chip>-<os>-py<X.Y>` (quay.io/ascend/torch-npu)
and its CANN images `<cann>-<chip>-<os>-py<X.Y>` (quay.io/ascend/cann: the CANN-only stacks);
chips in lower case."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UserError
from .frameworks import CANN, TORCH
from .model import Matrix

_TORCH_NPU = re.compile(r"^(?P<package>\d[\w.+]*)-cann(?P<cann>\d[\w.]*)-(?P<chip>[A-Za-z0-9]+)-"
                        r"(?P<os>[a-z]+\d[\d.]*)-py(?P<python>3\.\d+)$")
_CANN = re.compile(r"^(?P<cann>\d[\w.]*)-(?P<chip>[A-Za-z0-9]+)-(?P<os>[a-z]+\d[\d.]*)-py(?P<python>3\.\d+)"
                   r"(?P<devel>-devel)?$")


@dataclass(frozen=True)
class Like:
    """The cell an official tag names: the stack, OS, Python and chip to build."""
    stack: str
    os: str
    python: str
    chip: str

    def __str__(self) -> str:
        return f"stack {self.stack}, --os {self.os}, --python {self.python}, --chip {self.chip}"


def resolve(matrix: Matrix, ref: str) -> Like:
    """The matrix's cell for an official tag, or why there is none (with the nearest)."""
    repo, _, tag = ref.rpartition(":")
    name = repo.rsplit("/", 1)[-1]
    if not tag or "/" in tag or not name:
        raise UserError(f"--like {ref!r}: not an image reference with a tag (like "
                        f"quay.io/ascend/torch-npu:2.12.0-cann9.1.0-910b-ubuntu22.04-py3.12)")
    if name == "cann":
        return _cann_only(matrix, ref, tag)
    if name != "torch-npu":
        raise UserError(f"--like {ref}: the official repositories are quay.io/ascend/torch-npu and "
                        f"quay.io/ascend/cann; {name} is neither")
    found = _TORCH_NPU.match(tag)
    if not found:
        raise UserError(f"--like {ref}: a torch-npu tag reads <torch_npu>-cann<CANN>-<chip>-<os>-py<X.Y> "
                        f"(e.g. 2.12.0-cann9.1.0-a3-openeuler24.03-py3.12)")
    cann = _cann(matrix, found["cann"])
    torch = [st for st in matrix.stacks.values() if st.framework is TORCH]
    exact = [st for st in torch if st.package == found["package"] and st.cann == cann]
    if not exact:
        same_package = [f"{st.flag} (CANN {st.cann})" for st in torch if st.package == found["package"]]
        same_cann = [f"{st.flag} (torch_npu {st.package})" for st in torch if st.cann == cann]
        raise UserError(f"--like {ref}: no stack pairs torch_npu {found['package']} with CANN {cann}. Nearest: "
                        + ("; ".join(filter(None, [", ".join(same_package), ", ".join(same_cann)]))
                           or "none: `invoke matrix` lists the stacks"))
    if found["os"] not in matrix.os:
        raise UserError(f"--like {ref}: no OS {found['os']} in the matrix ({', '.join(matrix.os)})")
    return Like(exact[0].name, found["os"], found["python"], found["chip"])


def _cann_only(matrix: Matrix, ref: str, tag: str) -> Like:
    """An official CANN image's tag: the CANN-only stack of that release (cann_stacks:)."""
    found = _CANN.match(tag)
    if not found:
        raise UserError(f"--like {ref}: a CANN tag reads <cann>-<chip>-<os>-py<X.Y> (e.g. 9.0.1-a3-ubuntu22.04-"
                        f"py3.11)")
    if found["devel"]:
        raise UserError(f"--like {ref}: a -devel tag names a variant of Huawei's image this project does not build; "
                        f"--like without -devel builds the CANN-only image of that cell")
    cann = _cann(matrix, found["cann"])
    stack = matrix.stacks.get(CANN.stack_name(cann))
    if stack is None:
        have = [st.key for st in matrix.stacks.values() if st.framework is CANN]
        on = [st.flag for st in matrix.stacks.values() if st.cann == cann]
        raise UserError(f"--like {ref}: no CANN-only stack of CANN {cann} ({CANN.section}: has "
                        f"{', '.join(have) or 'none'}); add a `{CANN.section}:` entry keyed {cann}"
                        + (f", or build a framework image on it: {', '.join(on)}" if on else ""))
    if found["os"] not in matrix.os:
        raise UserError(f"--like {ref}: no OS {found['os']} in the matrix ({', '.join(matrix.os)})")
    return Like(stack.name, found["os"], found["python"], found["chip"])


def _cann(matrix: Matrix, spelled: str) -> str:
    """Upstream's lower-case CANN version (8.3.rc2) as the matrix names it (8.3.RC2)."""
    for version in matrix.cann:
        if version.lower() == spelled.lower():
            return version
    raise UserError(f"CANN {spelled}: not a release the matrix knows ({', '.join(matrix.cann)}); "
                    f"`invoke update` imports new ones")
