"""The serving images' pairing: a vLLM-Ascend release (imported.yaml's vllm_ascend_releases)
on the stack of its pins (the torch and torch_npu its requirements name) on the CANN its own
images use (its Dockerfile's FROM), with the vLLM release it pairs with; or a refusal that
names what is missing and what would pair. Where no stack of matrix.yaml is that stack, one
is derived from the release's data (`derive`), as the CANN-only stacks are derived from the
official images: its torch line's toolchain, the release's torch_npu, CANN, Pythons and OSes.
Which chips a release serves, and the SOC_VERSION of each, are its Dockerfiles' (`image`)."""
from __future__ import annotations

import dataclasses
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Protocol

from packaging.version import InvalidVersion, Version

from ..chips import find as find_chip
from ..errors import UserError
from .eras import cann_series
from .frameworks import TORCH
from .official import RELEASE
from .records import CannRelease, Files, PackageRelease, ReleaseImage, ServingRelease, Stack, VllmAscendRelease, minor

PROJECT = "vllm-ascend"


class MatrixView(Protocol):
    """What the pairing reads of the matrix (model.Matrix, which calls it, has them)."""
    @property
    def vllm_ascend(self) -> Mapping[str, VllmAscendRelease]: ...

    @property
    def stacks(self) -> Mapping[str, Stack]: ...

    @property
    def derived(self) -> Mapping[str, Stack]: ...

    @property
    def cann(self) -> Mapping[str, CannRelease]: ...

    @property
    def files(self) -> Files: ...

    @property
    def path(self) -> Path: ...

    def pairing(self, st: Stack) -> tuple[str, str] | None: ...


@dataclass(frozen=True)
class Refusal:
    """Why a release cannot be served here: in a few words (`invoke matrix`), and in full
    with what would fix it (Matrix.serving's error)."""
    short: str
    text: str


def distance(a: str, b: str) -> tuple[int, ...]:
    """How far apart two releases are, part by part of their release numbers (0.23.0 is
    nearer 0.23.0.post1 than 0.22.0): for naming the nearest ones first."""
    try:
        va, vb = Version(a), Version(b)
    except (InvalidVersion, ValueError):
        return (1 << 30,)
    x, y = va.release + (va.post or 0,), vb.release + (vb.post or 0,)
    n = max(len(x), len(y))
    x, y = x[:-1] + (0,) * (n - len(x)) + x[-1:], y[:-1] + (0,) * (n - len(y)) + y[-1:]     # the post part last
    return tuple(abs(p - q) for p, q in zip(x, y))


def nearest(versions: list[str], wanted: str) -> list[str]:
    """`versions`, the nearest to `wanted` first (the newer first where two are as near)."""
    return sorted(versions, key=lambda v: (distance(v, wanted), -_order(versions, v)))


def _order(versions: list[str], v: str) -> int:
    ranked = sorted(versions, key=Version)
    return ranked.index(v)


# What a release number may look like before it is compared with any (packaging's Version
# would take a 5,000-digit part to an int and fail): PEP 440's characters, a sane length.
_RELEASE = re.compile(r"v?[0-9][0-9A-Za-z.+!_-]{0,63}")


def resolve(m: MatrixView, version: str) -> ServingRelease:
    if not _RELEASE.fullmatch(version):
        shown = repr(version[:60]) + (f"... ({len(version)} characters)" if len(version) > 60 else "")
        raise UserError(f"--vllm {shown}: not a {PROJECT} release number (like 0.23.0: digits and dots, "
                        f"at most 64 characters)")
    rel = m.vllm_ascend.get(_normal(version))
    if rel is None:
        raise UserError(_unknown(m, version))
    found = _pair(m, rel)
    if isinstance(found, Refusal):
        paired = _paired(m, rel.version)
        more = f" and {len(paired) - 6} more (`invoke matrix`)" if len(paired) > 6 else ""
        raise UserError(found.text + (f"; or take a release that pairs here: {', '.join(paired[:6])}{more}" if paired
                                 else f"; no release in {m.files.imported.name} pairs here yet"))
    return found


def pairable(m: MatrixView) -> list[ServingRelease]:
    return [r for r in (_pair(m, m.vllm_ascend[v]) for v in sorted(m.vllm_ascend, key=Version, reverse=True))
            if isinstance(r, ServingRelease)]


def refused(m: MatrixView) -> dict[str, Refusal]:
    """The imported releases that cannot be served here, and why, newest first."""
    found = {v: _pair(m, m.vllm_ascend[v]) for v in sorted(m.vllm_ascend, key=Version, reverse=True)}
    return {v: r for v, r in found.items() if isinstance(r, Refusal)}


def _pair(m: MatrixView, rel: VllmAscendRelease) -> ServingRelease | Refusal:
    """The release on its stack, or why not (what would fix it, but for the other releases)."""
    problems = disagreements(rel)
    if problems:
        return Refusal("pins disagree: " + "; ".join(problems),
                       f"{PROJECT} {rel.version}'s pins disagree with each other ({rel.source}): "
                       + "; ".join(problems) + ". A serving image cannot hold them all")
    main = rel.main()
    if main is None:
        return Refusal("no Dockerfile imported", f"{PROJECT} {rel.version}: no Dockerfile of its sdist was read "
                       f"({rel.source}), so the CANN its images use is not known; `invoke update` reads them")
    if not main.soc_version:
        return Refusal(f"its {main.dockerfile} sets no SOC_VERSION",
                       f"{PROJECT} {rel.version}: its {main.dockerfile} sets no SOC_VERSION (ARG SOC_VERSION, which the "
                       f"import reads: {rel.source}), so the chip its kernels are compiled for is not known")
    cann, why = cann_of(m.cann, main)
    if cann is None:
        return Refusal(why, f"{PROJECT} {rel.version}: {why}; its serving image is built on the CANN its own images "
                            f"use")
    stack = stack_for(m, rel, cann)
    if stack is None:
        return Refusal(f"no stack of torch_npu {rel.pins['torch_npu']} on CANN {cann}", _no_stack(m, rel, cann))
    if m.pairing(stack) is None:
        return Refusal(f"torch_npu {stack.package} is not for CANN {cann}",
                       f"{PROJECT} {rel.version}: torch_npu {stack.package} was not released for CANN {cann}, and "
                       f"Huawei's compatibility grid does not pair its series with {cann} ({rel.source})")
    if rel.vllm is None:
        return Refusal(f"no vllm {paired_number(rel.version)}",
                       f"{PROJECT} {rel.version} has no vllm release to pair with ({rel.vllm_note or 'none imported'}), "
                       f"and a serving image installs vllm's release of its plugin's number")
    out = ServingRelease(version=rel.version, vllm=rel.vllm.version, stack=stack, pins=dict(rel.pins),
                         requires_python=rel.requires_python, wheels=rel.wheels, sdist=rel.sdist,
                         sdist_sha256=rel.sdist_sha256, vllm_sdist=rel.vllm.sdist,
                         vllm_sdist_sha256=rel.vllm.sdist_sha256, vllm_requires_python=rel.vllm.requires_python,
                         source=rel.source, images=rel.images, ray=rel.ray, candidate=rel.candidate)
    if not out.pythons():
        return Refusal(f"no Python of stack {stack.name} fits",
                       f"{PROJECT} {rel.version} on stack {stack.name}: no Python fits all three: the stack takes "
                       f"{stack.python_min}-{stack.python_max}, {PROJECT} requires {rel.requires_python or 'any'}, "
                       f"vllm {rel.vllm.version} requires {rel.vllm.requires_python or 'any'}; widen the stack's "
                       f"python range ({stack.python_path})")
    return out


def paired_number(version: str) -> str:
    """vLLM's release number a vLLM-Ascend release pairs with (0.23.0.post1, 0.25.1rc1: their base)."""
    try:
        return Version(version).base_version
    except InvalidVersion:
        return version


def cann_of(cann: Mapping[str, CannRelease], image: ReleaseImage) -> tuple[str | None, str]:
    """The matrix's CANN release an image of the release builds on (a dated build is its
    release's), or why there is none to build on."""
    if not image.cann:
        return None, f"its {image.dockerfile} builds FROM {image.base}, not an official CANN image"
    if not RELEASE.fullmatch(image.cann):
        return None, (f"its {image.dockerfile} builds on CANN {image.cann}, a pre-release, whose files are not "
                      f"published for download")
    found = next((v for v in cann if v.lower() == image.cann.lower()), None)
    if found is None:
        return None, (f"its {image.dockerfile} builds on CANN {image.cann} ({image.base}), which the imported facts "
                      f"do not list: `invoke update` imports a CANN release once Huawei publishes its files")
    return found, ""


def image(rel: ServingRelease, chip: str, os: str | None = None) -> ReleaseImage:
    """The release's image for a chip (on `os` where it has one there): where its SOC_VERSION
    is read. A chip it publishes no image for, or one its images build on another CANN than
    the release's stack, is refused with the reason."""
    spelled = find_chip(chip)
    mine = [i for i in rel.images if find_chip(i.chip) is not None and find_chip(i.chip) == spelled]
    if not mine:
        served = sorted({f"{i.chip} ({i.dockerfile})" for i in rel.images if i.chip})
        raise UserError(f"vLLM-Ascend {rel.version} publishes no image for chip {chip}, so no SOC_VERSION to compile "
                        f"its kernels for; its Dockerfiles serve {', '.join(served) or 'no chip'} (--chip)")
    found = next((i for i in mine if i.os == os), mine[0])
    if found.cann.lower() != rel.stack.cann.lower():
        raise UserError(f"vLLM-Ascend {rel.version} on chip {chip}: its {found.dockerfile} builds on CANN "
                        f"{found.cann}, not on CANN {rel.stack.cann}, which its stack {rel.stack.name} is on (its "
                        f"Dockerfile's); a serving image of this chip would not be the release's own")
    if not found.soc_version:
        raise UserError(f"vLLM-Ascend {rel.version}: its {found.dockerfile} sets no SOC_VERSION, which its kernels are "
                        f"compiled for on chip {chip}")
    return found


def _normal(version: str) -> str:
    """A release as imported.yaml keys it (PyPI's normal form: v0.23.0 and 0.23.0-post1 are 0.23.0.post1)."""
    try:
        return str(Version(version))
    except (InvalidVersion, ValueError):      # ValueError: a part too long for an int
        return version


def _paired(m: MatrixView, but: str = "") -> list[str]:
    return [r.version for r in pairable(m) if r.version != but]


def _unknown(m: MatrixView, version: str) -> str:
    known = list(m.vllm_ascend)
    if not known:
        return (f"unknown {PROJECT} release {version!r}: {m.files.imported.name} lists none. Name the first release "
                f"to import under upstream: in {m.path.name} (serving: {{from: \"{version}\"}}) and run `invoke "
                f"update`")
    near = nearest(known, _normal(version))
    paired = set(_paired(m))
    shown = ", ".join(v + ("" if v in paired else " (not served here)") for v in near[:6])
    more = f" and {len(near) - 6} more (`invoke matrix` lists them)" if len(near) > 6 else ""
    return (f"unknown {PROJECT} release {version!r}; {m.files.imported.name} lists, nearest first: {shown}{more}. "
            f"`invoke update` imports newer ones (from upstream.serving.from on)")


def exact(spec: str | None) -> Version | None:
    """A pin's one release ("2.10.0"), or None for a range (">=2.9") or none at all."""
    if not spec:
        return None
    try:
        return Version(spec)
    except (InvalidVersion, ValueError):
        return None


def disagreements(rel: VllmAscendRelease) -> list[str]:
    """What of its pins cannot hold together: torch and torch_npu are each one release, and
    torch_npu's is made for that torch (2.10.0.post4 for 2.10.0); torchaudio is the torch
    release's (2.x for torch 2.x), torchvision 0.(x+15) for torch 2.x (PyTorch's domain
    libraries, released in step since torch 2.0: vision's README table, 0.25 for 2.10)."""
    pins = rel.pins
    torch, npu = exact(pins.get("torch")), exact(pins.get("torch_npu"))
    out = []
    for name, got in (("torch", torch), ("torch_npu", npu)):
        if got is None:
            out.append(f"{name} is {pins[name]}, not one release" if name in pins else f"it pins no {name}")
    if torch is None or npu is None:
        return out
    if npu.base_version != torch.base_version:
        out.append(f"torch_npu {pins['torch_npu']} is made for torch {npu.base_version}, not {pins['torch']}")
    if torch.major == 2:
        audio, vision = exact(pins.get("torchaudio")), exact(pins.get("torchvision"))
        if audio is not None and audio.release[:2] != torch.release[:2]:
            out.append(f"torchaudio {pins['torchaudio']} is not torch {torch.major}.{torch.minor}'s "
                       f"(torchaudio {torch.major}.{torch.minor}.x)")
        if vision is not None and vision.release[:2] != (0, torch.minor + 15):
            out.append(f"torchvision {pins['torchvision']} is not torch {torch.major}.{torch.minor}'s "
                       f"(torchvision 0.{torch.minor + 15}.x)")
    return out


def stack_for(m: MatrixView, rel: VllmAscendRelease, cann: str) -> Stack | None:
    """The stack of the release's torch and torch_npu on `cann`: the first of matrix.yaml's
    (its order), else the one derived from the release's data."""
    def fits(st: Stack) -> bool:
        return (st.torch is not None and st.torch.version == rel.pins.get("torch")
                and st.torch.npu == rel.pins.get("torch_npu") and st.cann == cann)
    return next((st for st in m.stacks.values() if fits(st)), None) or \
        next((st for st in m.derived.values() if fits(st)), None)


def _no_stack(m: MatrixView, rel: VllmAscendRelease, cann: str) -> str:
    torch, npu = rel.pins["torch"], rel.pins["torch_npu"]
    same = [f"{st.name} (torch_npu {st.torch.npu} on CANN {st.cann})" for st in m.stacks.values()
            if st.torch is not None and st.torch.version == torch]
    main = rel.main()
    return (f"{PROJECT} {rel.version} pins torch {torch} and torch_npu {npu} ({rel.source}) on CANN {cann} (its "
            f"{main.dockerfile if main else 'Dockerfile'}), and no stack in "
            f"{m.path.name} has all three; none is derived either: a derived stack takes its toolchain (gcc, "
            f"builder, torch's index, companions) from a stack of the same torch, and {m.path.name} has "
            + (f"these, none of that torch_npu on that CANN: {', '.join(same)}" if same else f"none with torch {torch}")
            + f". Add a stack with torch {torch}, torch_npu {npu} and cann {cann} (stacks:)")


def derive(written: Mapping[str, Stack], cann: Mapping[str, CannRelease],
           releases: Mapping[str, VllmAscendRelease], torch_npu: Mapping[str, PackageRelease],
           compatible: Mapping[str, tuple[str, ...]]) -> dict[str, Stack]:
    """A torch stack for each imported release whose torch and torch_npu on the CANN of its
    images no written stack is, as the release's data gives it: named <torch_npu>-cann<CANN>,
    its Pythons and OSes its images' (on that CANN), its toolchain, index, companions and pins
    those of a written stack of the same torch_npu, else of the same torch. None where the
    pins disagree, its Dockerfile sets no SOC_VERSION, the CANN is not a release the import lists, torch_npu was neither released
    for that CANN nor is paired with it by Huawei's grid, or no written stack has that torch
    (Matrix.serving then says which)."""
    out: dict[str, Stack] = {}
    for version in sorted(releases, key=Version):
        rel = releases[version]
        main = rel.main()
        found = cann_of(cann, main)[0] if main is not None and main.soc_version and not disagreements(rel) else None
        torch, npu = rel.pins.get("torch"), rel.pins.get("torch_npu")
        if main is None or found is None or any(st.torch is not None and (st.torch.version, st.torch.npu, st.cann) == (torch, npu, found)
                                for st in (*written.values(), *out.values())):
            continue
        # the toolchain of the same torch_npu where a written stack has it on another CANN, else of the same torch
        torches = [st for st in written.values() if st.torch is not None and st.torch.version == torch]
        template = next((st for st in torches if st.torch is not None and st.torch.npu == npu), None) or \
            next(iter(torches), None)
        known = torch_npu.get(npu or "")
        paired = known is not None and (found in known.cann or cann_series(found) in compatible.get(known.series, ()))
        if template is None or template.torch is None or npu is None or not paired:
            continue
        on = [i for i in rel.images if (cann_of(cann, i)[0] or "") == found and i.python]
        pythons = Counter(i.python for i in on)
        name = f"{npu}-cann{found}"
        parts = dataclasses.replace(template.torch, npu=npu, npu_branch=known.branch if known else "")
        lo, hi = min(pythons, key=minor), max(pythons, key=minor)
        out[name] = dataclasses.replace(
            template, name=TORCH.stack_name(name), key=name, package=npu, cann=found, python_min=lo, python_max=hi,
            python_default=max(pythons, key=lambda p: (pythons[p], minor(p))), torch=parts, derived=True,
            # its Dockerfile's OS first: the one it is built on where none is asked for
            oses=tuple(sorted({i.os for i in on}, key=lambda o: (o != main.os, o))))
    return out
