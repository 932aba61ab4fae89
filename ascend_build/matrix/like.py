"""`invoke build --like TAG`: an official image's tag, resolved to the matrix's cell. Upstream
names its torch-npu images `<torch_npu>-cann<CANN>-<chip>-<os>-py<X.Y>` (quay.io/ascend/torch-npu)
and its CANN images `<cann>-<chip>-<os>-py<X.Y>` (quay.io/ascend/cann: the CANN-only stacks,
written in cann_stacks: or derived from the import); from 9.2.0 Huawei's SWR registry has CANN
images with dated tags, `<cann>_<YYYYMMDDhhmmss>-<chip>-<os>-py<X.Y>[-devel]` (the date is the
image's build: the same cell, the date in a label). official.py reads each form; FORMS says
which forms are taken and why the others are not (docs/support.md shows it). vLLM-Ascend's
images (quay.io/ascend/vllm-ascend) are `v<release>[-<variant>]`, one variant per Dockerfile of
the release (its image workflow's tag suffixes): the release's serving image on the chip and
OS of that Dockerfile, as the import read it."""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from ..errors import UserError
from .eras import cann_key
from .frameworks import CANN, TORCH
from .model import Matrix
from .official import (
    CANN_FORM,
    DATED_FORM,
    RELEASE,
    TORCH_NPU_FORM,
    OfficialTag,
    cann_tag,
    dated_tag,
    torch_npu_tag,
)
from .records import Stack


@dataclass(frozen=True)
class Like:
    """The cell an official tag names: the stack, OS, Python and chip to build."""
    stack: Stack
    os: str
    python: str
    chip: str
    devel: bool = False     # a cann:<tag>-devel: the CANN-only image and its devel image on it
    built: str = ""         # a dated tag's build time (ISO 8601): the upstream image's, for a label
    vllm: str = ""          # a vllm-ascend:<tag>: the vLLM-Ascend release whose serving image it is

    def __str__(self) -> str:
        return (f"stack {self.stack.name}, --os {self.os}, --python {self.python}, --chip {self.chip}"
                + (", --devel" if self.devel else "") + (f", --vllm {self.vllm}" if self.vllm else "")
                + (f" (the official image built {self.built})" if self.built else ""))


# The official images, by registry and repository path: --like names one of them by its tag
# (nothing is pulled: the tag says which cell to build here). The registry may be left out
# (ascend/cann:TAG); another registry's image of the same path is not the official one
# (a mirror's copy names the same cell by the same tag on quay.io).
REGISTRY = "quay.io"
REPOSITORIES = ("ascend/torch-npu", "ascend/cann", "ascend/vllm-ascend")
# vLLM-Ascend's tag suffixes, each the Dockerfile its image is built from (its image workflow).
VLLM_VARIANTS = {"": "Dockerfile", "openeuler": "Dockerfile.openEuler", "a3": "Dockerfile.a3",
                 "a3-openeuler": "Dockerfile.a3.openEuler", "310p": "Dockerfile.310p",
                 "310p-openeuler": "Dockerfile.310p.openEuler", "a5": "Dockerfile.a5",
                 "a5-openeuler": "Dockerfile.a5.openEuler"}
VLLM_FORM = "v<release>[-<variant>] (e.g. v0.23.0-a3-openeuler; variants: " + ", ".join(
    v for v in VLLM_VARIANTS if v) + ")"
# Huawei's SWR registry, where the CANN images from 9.2.0 are, with dated tags; named with
# their registry (another registry's atlas_inference/cann is not theirs).
SWR_REGISTRIES = ("swr.cn-north-12.myhuaweicloud.com",)
SWR_REPOSITORY = "atlas_inference/cann"
SWR = " or ".join(f"{r}/{SWR_REPOSITORY}:{DATED_FORM.split(' ')[0]}" for r in SWR_REGISTRIES)
ACCEPTED = (" or ".join(f"{REGISTRY}/{r}:TAG" for r in REPOSITORIES) + " (the registry may be left out), or "
            + SWR)


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
    if registry in SWR_REGISTRIES:
        return _dated(matrix, ref, registry, repository, tag)
    if repository == SWR_REPOSITORY:
        raise UserError(f"--like {ref[:200]}: {registry or 'no registry'} is not where Huawei's dated CANN images "
                        f"are: --like takes {ACCEPTED}")
    if repository == MANYLINUX and registry in ("", REGISTRY):
        raise UserError(_manylinux(matrix, ref, tag))
    if repository == DOCKERHUB and registry in ("", "docker.io"):
        raise UserError(f"--like {ref[:200]}: {DOCKERHUB} is the CANN images' copy on Docker Hub (their "
                        f"repository's README names it); --like takes the same tag on {REGISTRY}: --like "
                        f"{REGISTRY}/ascend/cann:{tag[:120]}")
    if repository not in REPOSITORIES:
        raise UserError(f"--like {ref[:200]}: the official images are {ACCEPTED}; {repository[:80]} is neither")
    if registry not in ("", REGISTRY):
        raise UserError(f"--like {ref[:200]}: {registry} is not the official registry: --like takes {ACCEPTED} "
                        f"(nothing is pulled; a mirror's copy is the same cell by the same tag on {REGISTRY})")
    if repository == "ascend/cann":
        return _cann_only(matrix, ref, tag)
    if repository == "ascend/vllm-ascend":
        return _vllm_ascend(matrix, ref, tag)
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
    if dated_tag(tag) is not None:
        raise UserError(f"--like {ref}: a dated tag is Huawei's SWR registry's form, not {REGISTRY}'s: --like "
                        f"{SWR_REGISTRIES[0]}/{SWR_REPOSITORY}:{tag}")
    found = cann_tag(tag)
    if found is None:
        raise UserError(f"--like {ref}: a CANN tag reads {CANN_FORM}" + _short(matrix, tag))
    if found.pre_release:
        raise UserError(_pre_release(matrix, ref, found))
    return _on_cann_stack(matrix, ref, found)


def _short(matrix: Matrix, tag: str) -> str:
    """Why a release's short tag (cann:8.5.2) or `latest` names no cell, and the full tags."""
    if tag == "latest":
        return "; `latest` moves from release to release (Huawei's publish list gives it to the newest 910b image): " \
               "it names no release, chip, OS or Python"
    if not RELEASE.fullmatch(tag):
        return ""
    release = next((v for v in matrix.cann if v.lower() == tag.lower()), None)
    tags = [str(t) for t in (matrix.cann[release].images if release else ()) if t.chip == "910b"]
    return (f"; {tag} is a release's short tag (Huawei's publish list points it at one of the release's 910b images), "
            f"which names no chip, OS or Python: give the full tag"
            + (f", e.g. {', '.join(tags[:4])}" if tags else ""))


# quay.io/ascend/manylinux: CANN on a manylinux base (Ascend/cann-container-image manylinux/,
# manylinux_2_28, manylinux_2_34 from June 2026), images to compile against CANN: refused, naming
# what this project builds in their place.
MANYLINUX = "ascend/manylinux"
DOCKERHUB = "ascendai/cann"         # Docker Hub's copy of the CANN images
_MANYLINUX_TAG = re.compile(r"(?P<cann>[0-9][0-9A-Za-z._+-]*?)-(?P<chip>[0-9A-Za-z]+)-(?P<base>manylinux_2_[0-9]+)"
                            r"-py(?P<python>3\.[0-9]+)")


def _manylinux(matrix: Matrix, ref: str, tag: str) -> str:
    found = _MANYLINUX_TAG.fullmatch(tag)
    said = (f"--like {ref[:200]}: {REGISTRY}/{MANYLINUX} is Huawei's CANN on a manylinux base, an image to compile "
            f"wheels against CANN; --like builds runtime images on a distro (it takes {ACCEPTED}). This project "
            f"compiles torch_npu and apex in its builders (`invoke builder`: flavors manylinux_2_28, manylinux_2_34)")
    if found is None:
        return said
    return (said + f"; the CANN-only image of the same release, chip and Python: invoke build --cann "
            f"{found['cann'].upper() if RELEASE.fullmatch(found['cann']) else found['cann']} --chip {found['chip']} "
            f"--python {found['python']}")


def _dated(matrix: Matrix, ref: str, registry: str, repository: str, tag: str) -> Like:
    """A CANN image on Huawei's SWR registry: its dated tag names the release, chip, OS and
    Python as quay's do; the date is the build's (the same cell: the date goes in a label)."""
    if repository != SWR_REPOSITORY:
        raise UserError(f"--like {ref[:200]}: on {registry} --like takes {SWR_REPOSITORY}:TAG, Huawei's CANN "
                        f"images ({repository[:80]} is not); the official images are {ACCEPTED}")
    found = dated_tag(tag)
    if found is None:
        undated = cann_tag(tag) is not None and "_" not in tag
        raise UserError(f"--like {ref}: a tag of {registry}/{SWR_REPOSITORY} reads {DATED_FORM} (a real date)"
                        + (f"; the undated form is {REGISTRY}/ascend/cann's: --like {REGISTRY}/ascend/cann:{tag}"
                           if undated else ""))
    if found.pre_release:
        raise UserError(f"--like {ref}: CANN {found.cann} is not a release (as Huawei's download folders name "
                        f"them: 9.2.0, 8.3.RC2); the import leaves pre-releases out")
    return dataclasses.replace(_on_cann_stack(matrix, ref, found), built=found.built_at)


def _on_cann_stack(matrix: Matrix, ref: str, found: OfficialTag) -> Like:
    """The CANN-only stack of an official CANN tag's release, and the tag's cell on it."""
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


def _vllm_ascend(matrix: Matrix, ref: str, tag: str) -> Like:
    """A vLLM-Ascend image's tag: its release's serving image, on the chip, OS and Python of
    the Dockerfile its variant is built from (as the release's sdist holds it)."""
    from .serving import image
    m = re.fullmatch(r"v(?P<release>[0-9][0-9a-z.]*?)(?:-(?P<variant>[a-z0-9-]+))?", tag)
    if m is None or (m["variant"] or "") not in VLLM_VARIANTS:
        raise UserError(f"--like {ref[:200]}: a vllm-ascend tag reads {VLLM_FORM}")
    rel = matrix.serving(m["release"])
    dockerfile = VLLM_VARIANTS[m["variant"] or ""]
    found = next((i for i in rel.images if i.dockerfile == dockerfile), None)
    if found is None:
        raise UserError(f"--like {ref[:200]}: vLLM-Ascend {rel.version}'s sdist has no {dockerfile}, so upstream "
                        f"publishes no such image of it; its Dockerfiles: {', '.join(i.dockerfile for i in rel.images)}")
    image(rel, found.chip, found.os)           # its chip served on the release's own CANN, or why not
    official = OfficialTag(found.cann, found.chip, found.os, found.python)
    _os(matrix, ref, official)
    return Like(rel.stack, found.os, found.python, found.chip, vllm=rel.version)


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


# ------------------------------------------------------------------ the forms, for docs/support.md

@dataclass(frozen=True)
class TagForm:
    """A form of tag found in Huawei's image repositories, and what `--like` does with it."""
    image: str          # registry/repository
    form: str
    example: str        # a tag of that form (tests/unit/test_like.py resolves each)
    taken: bool
    does: str           # what it builds, or why it is refused


FORMS = (
    TagForm(f"{REGISTRY}/ascend/torch-npu", TORCH_NPU_FORM.split(" ")[0], "2.12.0-cann9.1.0-910b-ubuntu22.04-py3.12",
            True, "the torch stack that pairs that torch_npu with that CANN, on the tag's chip, OS and Python"),
    TagForm(f"{REGISTRY}/ascend/cann", CANN_FORM.split(" ")[0], "9.0.1-a3-ubuntu22.04-py3.11", True,
            "the CANN-only stack of the release (cann_stacks:, or derived from the import's tags)"),
    TagForm(f"{REGISTRY}/ascend/cann", "<cann>-<chip>-<os>-py<X.Y>-devel", "9.0.1-a3-ubuntu22.04-py3.11-devel", True,
            "the same CANN-only image and the devel image built on it"),
    TagForm(f"{SWR_REGISTRIES[0]}/{SWR_REPOSITORY}", DATED_FORM.split(" ")[0],
            "9.2.0_20260930220649-910b-ubuntu22.04-py3.12", True,
            "the CANN-only stack of the release, as the undated form; the image's date goes in the label "
            "io.ascend-build.like-built"),
    TagForm(f"{REGISTRY}/ascend/vllm-ascend", VLLM_FORM.split(" ")[0], "v0.23.0-a3-openeuler", True,
            "the release's serving image on the stack of its pins, with the chip and OS of the variant's Dockerfile "
            "(every variant upstream publishes: " + ", ".join(v for v in VLLM_VARIANTS if v) + ")"),
    TagForm(f"{REGISTRY}/ascend/cann", "<cann pre-release>-<chip>-<os>-py<X.Y>[-devel]",
            "9.1.0-beta.3-910b-ubuntu22.04-py3.11", False,
            "a pre-release (alpha, beta): its files are not published for download; the release is named"),
    TagForm(f"{REGISTRY}/ascend/cann", "<cann>", "8.5.2", False,
            "a release's short tag, an alias of one of its images: it names no chip, OS or Python; full tags named"),
    TagForm(f"{REGISTRY}/ascend/cann", "latest", "latest", False, "moves from release to release: names no release"),
    TagForm(f"docker.io/{DOCKERHUB}", "<cann>-<chip>-<os>-py<X.Y>", "9.0.1-a3-ubuntu22.04-py3.11", False,
            "Docker Hub's copy of the CANN images: the same tag on quay.io/ascend/cann is named"),
    TagForm(f"{REGISTRY}/{MANYLINUX}", "<cann>-<chip>-manylinux_2_28|manylinux_2_34-py<X.Y>",
            "9.0.1-910b-manylinux_2_34-py3.11", False,
            "CANN on a manylinux base, to compile against: this project compiles in its builders "
            "(manylinux_2_28, manylinux_2_34) and names the CANN-only image of the same release"),
)
