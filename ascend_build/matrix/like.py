"""`invoke build --like TAG`: an official image's tag, resolved to the matrix's cell. Upstream
names its torch-npu images `<torch_npu>-cann<CANN>-<chip>-<os>-py<X.Y>` (quay.io/ascend/torch-npu)
and its CANN images `<cann>-<chip>-<os>-py<X.Y>` (quay.io/ascend/cann: the CANN-only stacks,
written in cann_stacks: or derived from the import); official.py reads both."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UserError
from .eras import cann_key
from .frameworks import CANN, TORCH
from .model import Matrix
from .official import CANN_FORM, TORCH_NPU_FORM, OfficialTag, cann_tag, torch_npu_tag
from .records import Stack


@dataclass(frozen=True)
class Like:
    """The cell an official tag names: the stack, OS, Python and chip to build."""
    stack: Stack
    os: str
    python: str
    chip: str
    devel: bool = False     # a cann:<tag>-devel: the CANN-only image and its devel image on it

    def __str__(self) -> str:
        return (f"stack {self.stack.name}, --os {self.os}, --python {self.python}, --chip {self.chip}"
                + (", --devel" if self.devel else ""))


# The official images, by registry and repository path: --like names one of them by its tag
# (nothing is pulled: the tag says which cell to build here). The registry may be left out
# (ascend/cann:TAG); another registry's image of the same path is not the official one
# (a mirror's copy names the same cell by the same tag on quay.io).
REGISTRY = "quay.io"
REPOSITORIES = ("ascend/torch-npu", "ascend/cann")
ACCEPTED = " or ".join(f"{REGISTRY}/{r}:TAG" for r in REPOSITORIES) + " (the registry may be left out)"


def _split(ref: str) -> tuple[str, str, str]:
    """(registry, repository path, tag) of a reference, its digest set aside: a digest names
    bytes, the tag the release they are of."""
    shown = ref[:120] + ("..." if len(ref) > 120 else "")
    name, _, digest = ref.partition("@")
    if digest and not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise UserError(f"--like {shown!r}: {digest[:80]!r} is not a digest (sha256: and 64 hex digits)")
    path, _, tag = name.rpartition(":") if ":" in name.rsplit("/", 1)[-1] else (name, "", "")
    if not tag:
        raise UserError(f"--like {shown!r}: not an image reference with a tag (like {REGISTRY}/ascend/torch-npu:"
                        f"2.12.0-cann9.1.0-910b-ubuntu22.04-py3.12)" + ("; a digest names bytes, not the release "
                                                                         "they are of: give the tag" if digest else ""))
    first, _, rest = path.partition("/")
    registry = first if rest and ("." in first or ":" in first or first == "localhost") else ""
    return registry, rest if registry else path, tag


def resolve(matrix: Matrix, ref: str) -> Like:
    """The matrix's cell for an official tag, or why there is none (with the nearest)."""
    registry, repository, tag = _split(ref)
    if repository not in REPOSITORIES:
        raise UserError(f"--like {ref[:200]}: the official images are {ACCEPTED}; {repository[:80]} is neither")
    if registry not in ("", REGISTRY):
        raise UserError(f"--like {ref[:200]}: {registry} is not the official registry: --like takes {ACCEPTED} "
                        f"(nothing is pulled; a mirror's copy is the same cell by the same tag on {REGISTRY})")
    if repository == "ascend/cann":
        return _cann_only(matrix, ref, tag)
    found = torch_npu_tag(tag)
    if found is None:
        raise UserError(f"--like {ref}: a torch-npu tag reads {TORCH_NPU_FORM}")
    cann = _cann(matrix, found.cann)
    torch = [st for st in matrix.stacks.values() if st.framework is TORCH]
    exact = [st for st in torch if st.package == found.torch_npu and st.cann == cann]
    if not exact:
        same_package = [f"{st.flag} (CANN {st.cann})" for st in torch if st.package == found.torch_npu]
        same_cann = [f"{st.flag} (torch_npu {st.package})" for st in torch if st.cann == cann]
        raise UserError(f"--like {ref}: no stack pairs torch_npu {found.torch_npu} with CANN {cann}. Nearest: "
                        + ("; ".join(filter(None, [", ".join(same_package), ", ".join(same_cann)]))
                           or "none: `invoke matrix` lists the stacks"))
    _os(matrix, ref, found)
    return Like(exact[0], found.os, found.python, found.chip)


def _cann_only(matrix: Matrix, ref: str, tag: str) -> Like:
    """An official CANN image's tag: the CANN-only stack of that release (cann_stacks:, or
    derived from the import)."""
    found = cann_tag(tag)
    if found is None:
        raise UserError(f"--like {ref}: a CANN tag reads {CANN_FORM}")
    if found.pre_release:
        raise UserError(_pre_release(matrix, ref, found))
    cann = _cann(matrix, found.cann)
    stack = matrix.stacks.get(CANN.stack_name(cann)) or matrix.derived.get(CANN.stack_name(cann))
    if stack is None:
        have = sorted((st.key for st in list(matrix.stacks.values()) + list(matrix.derived.values())
                       if st.framework is CANN), key=cann_key)
        on = [st.flag for st in matrix.stacks.values() if st.cann == cann]
        raise UserError(f"--like {ref}: no CANN-only stack of CANN {cann}: no official CANN image of it to derive one "
                        f"from, and no `{CANN.section}:` entry keyed {cann} (the CANN-only stacks: "
                        f"{', '.join(have) or 'none'}); add that entry"
                        + (f", or build a framework image on it: {', '.join(on)}" if on else ""))
    _os(matrix, ref, found)
    return Like(stack, found.os, found.python, found.chip, devel=found.devel)


def _pre_release(matrix: Matrix, ref: str, found: OfficialTag) -> str:
    """Why a pre-release's tag is refused, and the release to build in its place: the one it
    precedes where the matrix knows it, else the newest the matrix knows before it."""
    release = next((v for v in matrix.cann if v.upper() == found.release), None)
    if release is None:
        before = [v for v in matrix.cann if cann_key(v) < cann_key(found.release)]
        release = max(before, key=cann_key) if before else max(matrix.cann, key=cann_key)
    repo = ref.partition("@")[0].rpartition(":")[0]
    like = OfficialTag(release.lower(), found.chip, found.os, found.python)
    return (f"--like {ref}: CANN {found.cann} is a pre-release, which the import leaves out "
            f"(no files of it in {matrix.files.imported.name}); "
            f"build the release: --like {repo}:{like} (or --cann {release})")


def _os(matrix: Matrix, ref: str, found: OfficialTag) -> None:
    if found.os not in matrix.os:
        raise UserError(f"--like {ref}: no OS {found.os} in the matrix; the OSes it builds: {', '.join(matrix.os)} "
                        f"(an `os:` entry in {matrix.path.name} adds one)")


def _cann(matrix: Matrix, spelled: str) -> str:
    """Upstream's lower-case CANN version (8.3.rc2) as the matrix names it (8.3.RC2)."""
    for version in matrix.cann:
        if version.lower() == spelled.lower():
            return version
    raise UserError(f"CANN {spelled}: not a release the matrix knows ({', '.join(matrix.cann)}); "
                    f"`invoke update` imports new ones")
