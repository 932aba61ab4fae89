"""The tasks that build: runtime images (one, or every image of `images:`) with their user
layers, the check of a reproducible image against its rebuild, builder images and the
wheels compiled in them, Debian base images."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import console
from .. import engine as eng
from ..errors import BuildFailed, UserError
from ..images import batch, finish
from ..images.options import Inputs, Site
from ..images.userlayer import LayerRequest
from ..matrix import load_matrix
from .options import Choice, Network, Output, path


@dataclass(frozen=True)
class BuildOptions:
    choice: Choice
    network: Network
    output: Output
    matrix: str = "matrix.yaml"
    packages: list[str] | None = None
    offline: bool = False
    require_pins: bool = False
    unlocked: bool = False
    wheelhouse: str | None = None
    torch_npu_wheel: str | None = None
    apex_wheel: str | None = None
    repository: str = "ascend-runtime"
    engine: str = "docker"
    docker: str | None = None
    dry: bool = False
    torch_npu_src: str | None = None
    apex_src: str | None = None
    builder_flavor: str | None = None
    builder_repository: str = "ascend-builder"
    cache_registry: str | None = None
    all: bool = False
    no_cache: bool = False
    for_host: str | None = None
    pip_on: str = "auto"
    requirements: str | None = None
    layer_name: str | None = None
    layer_wheelhouse: str | None = None
    debootstrap: bool = False
    retest: bool = False
    keep_failed: bool = False
    run_as: str | None = None
    torch_atb: bool = False
    no_nnal: bool = False
    like: str | None = None
    reproducible: bool = False

    def site(self):
        if self.require_pins and self.unlocked:
            raise UserError("--require-pins and --unlocked contradict each other: --require-pins refuses a cell "
                            "without a lock (and any file without a sha256), --unlocked builds one without a lock; "
                            "give one of them (--require-pins may be the site's setting, ascend_build.require_pins "
                            "in invoke's config: a site that requires pins builds no cell without a lock)")
        return self.network.site(
            self.dry, packages=tuple(Path(p) for p in self.packages or ["packages"]), offline=self.offline,
            require_pins=self.require_pins, unlocked=self.unlocked, cache_registry=self.cache_registry,
            no_cache=self.no_cache, pip_on=self.pip_on, debootstrap=self.debootstrap, retest=self.retest,
            keep_failed=self.keep_failed, epoch=finish.epoch() if self.reproducible else None)

    def inputs(self) -> Inputs:
        return Inputs(repository=self.repository, wheelhouse=path(self.wheelhouse),
                      torch_npu_wheel=path(self.torch_npu_wheel), apex_wheel=path(self.apex_wheel),
                      torch_npu_src=self.torch_npu_src, apex_src=self.apex_src, builder_flavor=self.builder_flavor,
                      builder_repository=self.builder_repository)


def build(o: BuildOptions) -> None:
    """One runtime image (and a user layer on it), or every image of `images:` (--all)."""
    site, inputs = o.site(), o.inputs()
    m = load_matrix(o.matrix)
    if o.all:
        return _build_all(m, o, site, inputs)
    stack, chip = o.choice.stack(m), o.choice.chip
    if o.for_host:
        from ..host import doctor as doc
        stack, chip = doc.for_host(m, Path(o.for_host), stack, chip)
    c = o.choice
    os_name, python = c.os, c.python
    if o.like:
        if o.for_host or c.named() or any((c.os, c.python, c.chip)):
            raise UserError("--like names the stack, OS, Python and chip: leave out --torch, --mindspore, --cann, "
                            "--os, --python, --chip and --for-host (--platform picks the arch)")
        from ..matrix.like import resolve
        found = resolve(m, o.like)
        console.say(f"--like {o.like}: {found}")
        stack, os_name, python, chip = found.stack, found.os, found.python, found.chip
    cell = m.cell(stack, os_name, python, chip, c.platform, torch_atb=o.torch_atb, run_as=o.run_as,
                  no_nnal=o.no_nnal)
    if o.reproducible and o.requirements:
        console.note("note: --reproducible makes the runtime image's bits identical; the user layer on it is built "
                     "as always (its times are its build's)")
    layers = batch.prepare(m, cell, site, inputs, LayerRequest.from_options(o.requirements, o.layer_name,
                                                                            o.layer_wheelhouse))
    batch.build_cell(m, cell, site, inputs, layers, eng.for_task(o.engine, o.docker, o.dry))


def _build_all(m, o: BuildOptions, site, inputs: Inputs) -> None:
    if o.requirements:
        raise UserError("--requirements builds one user layer on one runtime image: drop --all")
    if o.choice.given():
        raise UserError("--all builds every image of `images:`; drop --torch/--mindspore/--cann/--os/--python/"
                        "--chip/--platform")
    outcomes = batch.build_many(m, m.image_cells(o.run_as), site, inputs, eng.for_task(o.engine, o.docker, o.dry))
    console.show("\n" + batch.summary(outcomes))
    failed = [x for x in outcomes if x.status != "tagged"]
    if failed:
        raise BuildFailed(f"{len(failed)} of {len(outcomes)} images failed (above)")


@dataclass(frozen=True)
class VerifyOptions:
    network: Network
    output: Output
    image: str | None = None
    against: str | None = None
    keep: bool = False
    packages: list[str] | None = None
    offline: bool = False
    wheelhouse: str | None = None
    apex_wheel: str | None = None
    torch_npu_wheel: str | None = None
    engine: str = "docker"
    docker: str | None = None
    matrix: str = "matrix.yaml"


def verify(o: VerifyOptions) -> None:
    """Rebuild an image from the inputs its labels record and compare the two."""
    from ..images import verify as check
    if not o.image:
        raise UserError("--image REF: the image to verify")
    if o.against:
        lines = check.compare(eng.detect(o.engine, o.docker), o.image, o.against)
    else:
        site = o.network.site(packages=tuple(Path(p) for p in o.packages or ["packages"]), offline=o.offline)
        inputs = Inputs(wheelhouse=path(o.wheelhouse), torch_npu_wheel=path(o.torch_npu_wheel),
                        apex_wheel=path(o.apex_wheel))
        lines = check.verify(load_matrix(o.matrix), o.image, site, inputs, eng.detect(o.engine, o.docker), o.keep)
    console.show("\n".join(lines) + f"\nverified: {o.image} is the same bytes, layer for layer")


@dataclass(frozen=True)
class SourceOptions:
    """The builder of a stack and the wheels compiled in it."""
    network: Network
    output: Output
    torch: str | None = None
    flavor: str | None = None
    python: str | None = None
    platform: str | None = None
    engine: str = "docker"
    docker: str | None = None
    dry: bool = False
    matrix: str = "matrix.yaml"
    repository: str = "ascend-builder"
    emulated: bool = False
    debootstrap: bool = False
    retest: bool = False
    keep_failed: bool = False
    no_cache: bool = False
    pip_on: str = "auto"
    src: str | None = None
    submodule_src: list[str] | None = None

    def site(self) -> Site:
        """How the builder is built (by `invoke builder`, or first by a wheel's task)."""
        return self.network.site(self.dry, debootstrap=self.debootstrap, retest=self.retest,
                                 keep_failed=self.keep_failed, no_cache=self.no_cache, pip_on=self.pip_on,
                                 emulated=self.emulated)


def builder(o: SourceOptions) -> None:
    from ..images.sources import build_builder, pick_flavor
    m = load_matrix(o.matrix)
    flavor = pick_flavor(m, o.torch, o.flavor, o.python, o.platform, o.emulated)
    build_builder(m, m.builder_cell(o.torch, flavor, o.python, o.platform), o.site(),
                  eng.for_task(o.engine, o.docker, o.dry), o.repository)


def wheel(kind: str, o: SourceOptions) -> None:
    """One wheel (torch_npu or apex) compiled in the stack's builder; its path is the result."""
    from ..images.sources import WheelRequest, build_wheel
    m = load_matrix(o.matrix)
    req = WheelRequest(kind, o.torch, o.flavor, o.python, o.platform, None if o.src in (None, "upstream") else o.src,
                       tuple(o.submodule_src or ()))
    # The stack's builder is built first when it is not here: with the same options as `invoke builder`.
    made = build_wheel(m, req, o.site(), eng.for_task(o.engine, o.docker, o.dry), o.repository)
    console.show(str(made))


@dataclass(frozen=True)
class BaseImageOptions:
    tag: str | None = None
    suite: str = "bookworm"
    platform: list[str] | None = None
    mirror: str = "http://deb.debian.org/debian"
    docker: str | None = None
    engine: str = "docker"
    dry: bool = False


def base_image(o: BaseImageOptions) -> None:
    from ..images.baseimage import check_request, default_platforms, make_bases
    platforms = o.platform or default_platforms()
    check_request(o.suite, platforms, o.tag, o.mirror)            # before the engine is even asked
    assert o.tag is not None
    made = make_bases(eng.for_task(o.engine, o.docker, o.dry), o.suite, platforms, o.tag, o.mirror, o.dry)
    console.show("made " + ", ".join(made) + f"\nuse them with: --base-image debian:{o.suite}={o.tag}")
