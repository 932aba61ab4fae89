"""`invoke verify`: is this image what its inputs make? The image's labels name the cell
(stack, OS, Python, chip, platform, user), its SOURCE_DATE_EPOCH and its content tag; its
SBOM the repository it was built into. The image is built again from them (every step,
--reproducible), after checking that the inputs here (this checkout's Dockerfile and
lock, the CANN packages, the wheels) make the same content tag, then the two are held
side by side, layer by layer: which layer differs, which files in it and how."""
from __future__ import annotations

import json
from dataclasses import dataclass, replace

from .. import console
from .. import engine as eng
from ..errors import Differs, UserError
from ..inputs import baseimage
from ..inputs.options import Inputs, Site
from ..matrix import Cell, Matrix
from ..provenance import imagediff, sbom
from . import build as runtime_build
from . import steps
from .kinds import label


@dataclass(frozen=True)
class Recorded:
    """What an image's labels say it was built from."""
    stack: str
    os: str
    python: str
    chip: str
    platform: str
    user: str
    epoch: int | None
    content: str
    torch_atb: bool
    apex: str
    no_nnal: bool
    base: str | None        # the base image it was built FROM (org.opencontainers.image.base.name)
    locked: bool = True     # its Python packages came from a lock (label lock: "none" when built --unlocked)


def recorded(engine: eng.Engine, ref: str) -> Recorded:
    labels = engine.labels(ref)
    if labels is None:
        raise UserError(f"no image {ref} in {engine.client}'s store: pull it first (`{engine.client} pull {ref}`)")
    missing = [k for k in ("stack", "os", "python", "chip", "platform", "content-tag") if label(k) not in labels]
    if missing:
        raise UserError(f"{ref} does not say what it was built from (no {', '.join(label(k) for k in missing)} "
                        f"label): `invoke verify` checks runtime images this project built")
    epoch = labels.get(label("source-date-epoch"))
    return Recorded(labels[label("stack")], labels[label("os")], labels[label("python")], labels[label("chip")],
                    labels[label("platform")], labels.get(label("user"), "root"), int(epoch) if epoch else None,
                    labels[label("content-tag")], labels.get(label("torch-atb")) == "yes",
                    labels.get(label("apex"), "absent"), labels.get(label("nnal-left-out")) == "yes",
                    labels.get("org.opencontainers.image.base.name"), labels.get(label("lock")) != "none")


def _recorded_base(cell: Cell, base: str) -> tuple[str, str | None]:
    """(the base as a --base-image pattern: its arch as {arch} again, so that a cross build's
    build-machine base is the same name for that machine's arch; the Debian suite where it is
    the base --debootstrap makes of that suite here, else None)."""
    suffix = cell.target.suffix
    pattern = base[:-len(suffix)] + "{arch}" if base.endswith("-" + suffix) else base
    suite = cell.os.suite
    return pattern, suite if suite is not None and pattern == baseimage.local_pattern(suite) else None


def with_recorded_base(site: Site, cell: Cell, base: str | None) -> Site:
    """The base the image records, unless --base-image maps the OS's image: an image made on a
    debootstrap base (ascend-build/debian:bookworm-arm64) or a mirror's is rebuilt on that, not
    on the matrix's name."""
    if not base or cell.os.image in site.base_images or base == site.base(cell.os.image, cell.target):
        return site
    pattern, suite = _recorded_base(cell, base)
    console.say(f"base image: {base}, as the image's label records"
                + (" (made by --debootstrap; made again here if it is gone)" if suite else ""))
    if suite:
        return replace(baseimage.on_local_base(site, cell.os.image, suite), debootstrap=True)
    return replace(site, base_images={**site.base_images, cell.os.image: pattern})      # a mirror's


def _base_option(cell: Cell, base: str | None) -> str:
    """The option that builds on the base the image records (none: the matrix's own)."""
    if not base or base == cell.os.image:
        return ""
    pattern, suite = _recorded_base(cell, base)
    return " --debootstrap" if suite else f" --base-image {cell.os.image}={pattern}"


def repository(engine: eng.Engine, ref: str, platform: str) -> str:
    """The repository the image was built into, as its SBOM names it (the SBOM is part of
    the image, so the rebuild must be made under the same name)."""
    text = sbom.stored(engine, ref, platform)
    try:
        name = json.loads(text or "")["metadata"]["component"]["name"]
    except (ValueError, KeyError, TypeError):
        raise UserError(f"{ref} carries no SBOM naming its repository: `invoke verify` checks runtime images this "
                        f"project built") from None
    return str(name)


def report(a: imagediff.Saved, b: imagediff.Saved) -> tuple[bool, list[str]]:
    """(identical, lines): each layer, the same or what differs in it, then the image IDs."""
    diffs = imagediff.compare(a, b)
    lines = [f"{'layer':>5}  {'image':<19}  {'rebuilt':<19}  made by"]
    for d in diffs:
        mark = "same" if d.same else "DIFFERS"
        lines.append(f"{d.index:>5}  {(d.a or '-')[:19]:<19}  {(d.b or '-')[:19]:<19}  {mark}: "
                     f"{(d.step or 'the base image')[:90]}")
        if not d.same:
            lines.append(f"{'':>7}{d.why(6)}")
    config = imagediff.config_differences(a, b)
    same_layers = all(d.same for d in diffs)
    if a.id == b.id:
        lines.append(f"image ID: the same, {a.id}")
    else:
        lines.append(f"image ID: {a.id} against {b.id}" + (f"; config fields that differ: {', '.join(config)}"
                                                           if config else ""))
    return same_layers and a.id == b.id, lines


def compare(engine: eng.Engine, image: str, other: str) -> list[str]:
    """Hold two images side by side; raise Differs (with the report) when they are not
    the same bytes, else return the report."""
    common = frozenset(engine.layers(image)) & frozenset(engine.layers(other))
    a, b = imagediff.load(engine, image, skip=common), imagediff.load(engine, other, skip=common)
    same, lines = report(a, b)
    if not same:
        raise Differs("\n".join([f"{image} and {other} differ:", *lines]))
    return lines


def verify(matrix: Matrix, image: str, site: Site, inputs: Inputs, engine: eng.Engine,
           keep: bool = False) -> list[str]:
    """Rebuild `image` from the inputs its labels record and compare the two."""
    rec = recorded(engine, image)
    cell = matrix.cell(rec.stack, rec.os, rec.python, rec.chip, rec.platform, torch_atb=rec.torch_atb, run_as=rec.user,
                       no_nnal=rec.no_nnal)
    if rec.epoch is None:
        raise UserError(f"{image} was not built with --reproducible: its layers hold the times of its own build, "
                        f"so no rebuild can match it. Build it with `invoke build {cell.stack.flag} --os {rec.os} "
                        f"--python {rec.python} --platform {rec.platform}{_base_option(cell, rec.base)} --reproducible`, "
                        f"then verify that image")
    repo = repository(engine, image, rec.platform)
    # An image built --unlocked is rebuilt unlocked, as its label records (no option: the image says it);
    # a locked one needs its lock here (without it, the content tag differs anyway).
    site = with_recorded_base(replace(site, epoch=rec.epoch, no_cache=True, unlocked=not rec.locked), cell, rec.base)
    inputs = replace(inputs, repository=repo)
    console.say(f"{image}: stack {rec.stack}, {rec.os}, Python {rec.python}, {rec.chip}, {rec.platform}, runs as "
                f"{rec.user}; built into {repo}; content {rec.content}; SOURCE_DATE_EPOCH={rec.epoch}")
    p = runtime_build.prepare(matrix, cell, site, inputs, engine)
    if p.plan.content != rec.content:
        base = p.plan.build_args["BASE_IMAGE"]
        which = (f"the same base image ({base})" if base == rec.base or rec.base is None else
                 f"another base image: the image records {rec.base}, here {base} (--base-image "
                 f"{cell.os.image}={rec.base})")
        raise UserError(
            f"the inputs here make {p.plan.content}, not the image's {rec.content}, from {which}: not the same "
            f"inputs, so nothing was rebuilt. The content tag hashes the rendered Dockerfile (this checkout), the CANN "
            f"packages ({', '.join(pkg.path.name for pkg in (p.plan.toolkit, p.plan.kernels, p.plan.nnal) if pkg)}), "
            f"the lock and the wheels (the image's apex: {rec.apex}): check out the project's revision that built it "
            f"and give the same packages (--packages) and wheels (--apex-wheel, --wheelhouse)")
    rebuilt = runtime_build.rebuild(matrix, p)
    try:
        lines = compare(engine, image, rebuilt)
    except Differs:
        # Not the tested image: never tagged (the rebuild was not tested), kept by id if asked.
        if keep:
            console.say(f"the rebuild differs and was not tested: kept untagged, {rebuilt}")
        else:
            steps.remove_untagged(engine, [rebuilt])
        raise
    if keep:       # the same bytes as the image, which passed its tests when it was tagged
        kept = f"{repo}:verify-{rec.content}-{p.plan.cell.target.suffix}"
        engine.tag(rebuilt, kept)
        console.say(f"the rebuild is kept as {kept}")
    else:
        steps.remove_untagged(engine, [rebuilt])
    return lines
