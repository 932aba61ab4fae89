"""The serving images' pairing: a vLLM-Ascend release (imported.yaml's vllm_ascend_releases)
on the stack whose torch and torch_npu are the ones its sdist pins, with vLLM's release of
its number; or a refusal that names what is missing and what would pair."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Protocol

from packaging.version import InvalidVersion, Version

from ..errors import UserError
from .records import Files, ServingRelease, Stack, VllmAscendRelease

PROJECT = "vllm-ascend"


class MatrixView(Protocol):
    """What the pairing reads of the matrix (model.Matrix, which calls it, has them)."""
    @property
    def vllm_ascend(self) -> Mapping[str, VllmAscendRelease]: ...

    @property
    def stacks(self) -> Mapping[str, Stack]: ...

    @property
    def files(self) -> Files: ...

    @property
    def path(self) -> Path: ...


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
        raise UserError(found.text + (f"; or take a release that pairs here: {', '.join(paired)}" if paired
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
    stack = stack_for(m, rel)
    if stack is None:
        return Refusal(f"no stack with torch {rel.pins['torch']} and torch_npu {rel.pins['torch_npu']}",
                       _no_stack(m, rel))
    if rel.vllm is None:
        return Refusal(f"no vllm {rel.version}",
                       f"{PROJECT} {rel.version} has no vllm release of the same number ("
                       f"{rel.vllm_note or 'none imported'}), and a serving image installs vllm's release of its "
                       f"plugin's number")
    out = ServingRelease(version=rel.version, vllm=rel.vllm.version, stack=stack, pins=dict(rel.pins),
                         requires_python=rel.requires_python, wheels=rel.wheels, sdist=rel.sdist,
                         sdist_sha256=rel.sdist_sha256, vllm_sdist=rel.vllm.sdist,
                         vllm_sdist_sha256=rel.vllm.sdist_sha256, vllm_requires_python=rel.vllm.requires_python,
                         source=rel.source)
    if not out.pythons():
        return Refusal(f"no Python of stack {stack.name} fits",
                       f"{PROJECT} {rel.version} on stack {stack.name}: no Python fits all three: the stack takes "
                       f"{stack.python_min}-{stack.python_max}, {PROJECT} requires {rel.requires_python or 'any'}, "
                       f"vllm {rel.vllm.version} requires {rel.vllm.requires_python or 'any'}; widen the stack's "
                       f"python range (stacks.{stack.key}.python)")
    return out


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
    paired = _paired(m)
    return (f"unknown {PROJECT} release {version!r}; {m.files.imported.name} lists (nearest first): "
            f"{', '.join(nearest(known, _normal(version)))}; of those, a serving image can take "
            f"{', '.join(paired) or 'none'}. `invoke update` imports newer ones (from upstream.serving.from on)")


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


def stack_for(m: MatrixView, rel: VllmAscendRelease) -> Stack | None:
    """The first stack (matrix.yaml's order) whose torch and torch_npu are the release's pins."""
    return next((st for st in m.stacks.values() if st.torch is not None and st.torch.version == rel.pins.get("torch")
                 and st.torch.npu == rel.pins.get("torch_npu")), None)


def _no_stack(m: MatrixView, rel: VllmAscendRelease) -> str:
    torch, npu = rel.pins["torch"], rel.pins["torch_npu"]
    same = [f"{st.name} (torch_npu {st.torch.npu})" for st in m.stacks.values()
            if st.torch is not None and st.torch.version == torch]
    return (f"{PROJECT} {rel.version} pins torch {torch} and torch_npu {npu} ({rel.source}), and no stack in "
            f"{m.path.name} has both. Stacks with torch {torch}: {', '.join(same) or 'none'}. Add a stack with torch "
            f"{torch} and torch_npu {npu} (stacks:)")
