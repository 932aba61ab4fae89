"""The tasks that build: runtime images (one, or every image of `images:`) and the images
of the kinds built on them (their options collected from the catalog, each kind's declared
in its module), the check of a reproducible image against its rebuild, builder images and
the wheels compiled in them, Debian base images."""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import console
from ..errors import BuildFailed, UserError
from ..images import batch, catalog, finish
from ..images.catalog import OnRuntimeModule
from ..images.kinds import Asked, options_of
from ..inputs.options import Inputs, Site
from ..matrix import Matrix, load_matrix
from ..matrix.like import Like
from .options import DRY, Choice, Engine, Network, Output, flags, group, help_of, matrix_file, opt, path


@dataclass(frozen=True)
class Packages:
    """Where the CANN files come from, and how strictly they are checked."""
    packages: list[str] | None = opt(
        None, "folder holding CANN files, the .zip Huawei publishes or the .run in it (repeatable; default "
              "./packages)", iterable=True, site=True)
    offline: bool = opt(False, "never download CANN packages", site=True)
    require_pins: bool = opt(False, "refuse any file without a sha256 in the matrix", site=True)

    def site(self) -> dict[str, Any]:
        return dict(packages=tuple(Path(p) for p in self.packages or ["packages"]), offline=self.offline,
                    require_pins=self.require_pins)


@dataclass(frozen=True)
class Wheels:
    """Wheels given instead of the ones the build would download."""
    wheelhouse: str | None = opt(None, "folder of wheels pip may use (torch, torch_npu, ...)", site=True)
    torch_npu_wheel: str | None = opt(None, "install this torch_npu wheel instead of the release")
    apex_wheel: str | None = opt(None, "an Ascend apex wheel to fill the apex slot")

    def inputs(self, **more: Any) -> Inputs:
        return Inputs(wheelhouse=path(self.wheelhouse), torch_npu_wheel=path(self.torch_npu_wheel),
                      apex_wheel=path(self.apex_wheel), **more)


@dataclass(frozen=True)
class Steps:
    """How an image is made and kept: the runtime image, the builder (and the wheels' tasks
    say so: they build the builder first)."""
    retest: bool = opt(False, "an image with the same content tag is here (tested when tagged): run its suite again")
    keep_failed: bool = opt(False, "keep an image whose tests failed, to debug it (removed otherwise)")
    no_cache: bool = opt(False, "rebuild every step (ignore the layer cache) and download every file again")
    pip_on: str = opt("auto", "where pip installs the Python packages: auto (default: on the build machine when it "
                              "cross-builds), native (on the build machine, for the image's arch: no qemu) or "
                              "target (in the image)")
    os_on: str = opt("auto", "where apt fetches and unpacks the OS packages: auto (default: on the build machine when "
                             "it cross-builds; their maintainer scripts still run as the image's machine), native or "
                             "target (apt in the image)")

    def site(self) -> dict[str, Any]:
        return dict(retest=self.retest, keep_failed=self.keep_failed, no_cache=self.no_cache, pip_on=self.pip_on,
                    os_on=self.os_on)


def _heading(kind: OnRuntimeModule) -> str:
    """The help's heading of a kind's options: its name, and what its Options record says."""
    said = " ".join((kind.Options.__doc__ or "").split()).rstrip(".")
    return f"the {kind.KIND.name} kind" + (f" ({said[:1].lower()}{said[1:]})" if said else "")


# The options of every kind built on a runtime image, its module's `Options` record a group
# under its kind's name (the help lists each group under its heading), in the catalog's order.
KindOptions = dataclasses.make_dataclass(
    "KindOptions", [(k.KIND.name, k.Options, group(k.Options, _heading(k))) for k in catalog.ON_RUNTIME], frozen=True)


@dataclass(frozen=True)
class BuildOptions:
    choice: Choice = group(Choice)
    network: Network = group(Network)
    files: Packages = group(Packages)
    wheels: Wheels = group(Wheels)
    steps: Steps = group(Steps)
    engine: Engine = group(Engine)
    output: Output = group(Output)
    matrix: str = matrix_file()
    dry: bool = opt(False, DRY)
    torch_atb: bool = opt(False, "install torch_atb too, NNAL's Python plugin (Python 3.10/3.11; glibc 2.38 from "
                                 "CANN 9.1)")
    like: str | None = opt(None, "an official image's tag to build the same cell of (quay.io/ascend/torch-npu:"
                                 "2.12.0-cann9.1.0-a3-openeuler24.03-py3.12): it names the stack, OS, Python and chip")
    no_nnal: bool = opt(False, "build without NNAL (ATB, SiP) where the line installs it: no third CANN file; the "
                               "image says so in its labels, and its suite leaves NNAL's checks out")
    repository: str = opt("ascend-runtime", "image repository to tag into (default ascend-runtime)", site=True)
    unlocked: bool = opt(False, "build a cell that has no lock (locks/ beside the matrix, or the project's made "
                                "from the same inputs): pip resolves its Python packages at build time, so two "
                                "builds may differ; without it such a cell is refused (`invoke lock` makes its "
                                "lock). A locked cell is built from its lock all the same; not with --require-pins")
    torch_npu_src: str | None = opt(None, "build torch_npu from source: PATH, URL@REF, or 'upstream' (the stack's "
                                          "release tag)")
    apex_src: str | None = opt(None, "build Ascend apex from source: PATH, URL@REF, or 'upstream' (the matrix's "
                                     "pinned ref)")
    builder_flavor: str | None = opt(None, "builder flavor for source builds (default: the stack's builder)")
    builder_repository: str = opt("ascend-builder", "the repository of the builder images for source builds "
                                                    "(default ascend-builder)", site=True)
    reproducible: bool = opt(False, "every time in the image is SOURCE_DATE_EPOCH (default: the checkout's last "
                                    "commit), so the same inputs give the same layers and image ID (podman and "
                                    "buildx while building; docker's built-in BuildKit by writing the layers again "
                                    "after the build); `invoke verify` checks such an image")
    all: bool = opt(False, "build every image of the matrix's `images:`; one failing does not stop the others")
    for_host: str | None = opt(None, "pick the newest line (of --torch, if given) whose CANN this host's driver "
                                     "runs, for its chip; the value is the host's root folder (/ for this machine)")
    cache_registry: str | None = opt(None, "registry repository for layer cache (buildx: cache tags; classic: "
                                           "inline cache of pushed images)", site=True)
    debootstrap: bool = opt(False, "make a missing Debian base image here with debootstrap (this arch's and, for a "
                                   "cross build, the build machine's): a Debian cell needs no registry")
    run_as: str | None = opt(None, "who containers run as: root, or UID:GID of the hosts' HwHiAiUser, e.g. "
                                   "1000:1000 (default: defaults.run_as in the matrix); the image's name ends "
                                   "with -uidUID")
    kinds: Any = group(KindOptions)      # each kind's own, declared in its module

    def site(self) -> Site:
        if self.files.require_pins and self.unlocked:
            raise UserError("--require-pins and --unlocked contradict each other: --require-pins refuses a cell "
                            "without a lock (and any file without a sha256), --unlocked builds one without a lock; "
                            "give one of them (--require-pins may be the site's setting, ascend_build.require_pins "
                            "in invoke's config: a site that requires pins builds no cell without a lock)")
        return self.network.site(
            self.dry, **self.files.site(), **self.steps.site(), unlocked=self.unlocked,
            cache_registry=self.cache_registry, debootstrap=self.debootstrap,
            epoch=finish.epoch() if self.reproducible else None)

    def inputs(self) -> Inputs:
        return self.wheels.inputs(repository=self.repository, torch_npu_src=self.torch_npu_src,
                                  apex_src=self.apex_src, builder_flavor=self.builder_flavor,
                                  builder_repository=self.builder_repository)


def build(o: BuildOptions) -> None:
    """One runtime image and the images its kinds' options ask for on it, or every image of
    `images:` (--all)."""
    site, inputs = o.site(), o.inputs()
    m = load_matrix(o.matrix)
    _refuse_kind_options(o)
    if o.all:
        return _build_all(m, o, site, inputs)
    found = _like(m, o)
    asked = _asked(m, o, found)
    # the stack a kind's release pins (a vLLM-Ascend release), when no framework option names one
    stack = o.choice.stack(m) or next((a.stack for _, a in asked if a.stack), None)
    chip = o.choice.chip
    if o.for_host:
        from ..host import doctor as doc
        stack, chip = doc.for_host(m, Path(o.for_host), stack, chip)
    # and, on that stack, the Python its release's own images have when none is asked (0.23.0: 3.12)
    os_name = o.choice.os
    python = o.choice.python or next((a.python for _, a in asked
                                      if a.python and stack and a.stack and a.stack.name == stack.name), None)
    if found is not None:
        stack, os_name, python, chip = found.stack, found.os, found.python, found.chip
    cell = m.cell(stack, os_name, python, chip, o.choice.platform, torch_atb=o.torch_atb, run_as=o.run_as,
                  no_nnal=o.no_nnal)
    if found is not None and o.like:      # the tag asked for, and the date of the image it names
        cell = dataclasses.replace(cell, like=o.like, like_built=found.built)
    if o.reproducible and asked:
        console.note("note: --reproducible makes the runtime image's bits identical; the images built on it are "
                     "built as always (their times are their builds')")
    requests = [(kind, kind.request(m, cell, a.what)) for kind, a in asked]    # every refusal before any lock
    ready = batch.prepare(m, cell, site, requests)
    batch.build_cell(m, cell, site, inputs, ready, o.engine.for_task(o.dry))


def _asked(m: Matrix, o: BuildOptions, like: Like | None) -> list[tuple[OnRuntimeModule, Asked]]:
    """What each kind's options ask for (its module's `ask`), in the catalog's order."""
    return [(kind, a) for kind in catalog.ON_RUNTIME
            if (a := kind.ask(m, getattr(o.kinds, kind.KIND.name), like)) is not None]


def _like(m: Matrix, o: BuildOptions) -> Like | None:
    """The cell an official image's tag names (`--like`), or None."""
    if o.like is None:          # '' too: refused by resolve, never the default image (options.refuse_empty)
        return None
    c = o.choice
    if o.for_host or c.named() or any((c.os, c.python, c.chip)):
        raise UserError("--like names the stack, OS, Python and chip: leave out --torch, --mindspore, --cann, "
                        "--os, --python, --chip and --for-host (--platform picks the arch)")
    from ..matrix.like import resolve
    found = resolve(m, o.like)
    console.say(f"--like {o.like}: {found}")
    return found


def _refuse_kind_options(o: Any) -> None:
    """Each kind's options (the groups under `o.kinds`) refused as its module declares them:
    with --all, unless --all takes them (their images stand on one runtime image); without
    one of the options they need."""
    declared = flags(type(o))
    given = {x.name for x in declared if _given(functools.reduce(getattr, x.path, o), x.default)}
    for x in declared:
        if x.path[0] != "kinds" or x.name not in given:
            continue
        said = options_of(type(getattr(o.kinds, x.path[1])))[x.name]
        flag = "--" + x.name.replace("_", "-")
        if o.all and not said.with_all:
            raise UserError(f"{flag} builds on one runtime image: drop --all")
        if said.needs and not given & set(said.needs):
            raise UserError(f"{flag} {said.unmet}")


def _given(value: Any, default: Any) -> bool:
    """An option the command line gave: not its default, nor empty (a repeatable one not given is [])."""
    return value != default and value not in (None, False, [])


def _build_all(m, o: BuildOptions, site, inputs: Inputs) -> None:
    if o.choice.given():
        raise UserError("--all builds every image of `images:`; drop --torch/--mindspore/--cann/--os/--python/"
                        "--chip/--platform")
    # the kinds whose options --all takes (the others were refused): on each image of `images:`
    outcomes = batch.build_many(m, m.image_cells(o.run_as), site, inputs, o.engine.for_task(o.dry),
                                asked=_asked(m, o, None))
    console.show("\n" + batch.summary(outcomes))
    failed = [x for x in outcomes if x.status != "tagged"]
    if failed and o.dry:
        # A dry run built nothing, so not 4 (a build failed): the refusals' own code, as a real
        # run of each would end (a CI pre-flight tells a missing package, 3, from bad input, 2).
        refused = UserError(f"{len(failed)} of {len(outcomes)} images would be refused (above): a real build of "
                            f"each stops before it starts")
        refused.exit_code = batch.worst(outcomes)
        raise refused
    if failed:
        raise BuildFailed(f"{len(failed)} of {len(outcomes)} images failed (above)")


@dataclass(frozen=True)
class VerifyOptions:
    network: Network = group(Network)
    files: Packages = group(Packages)      # not require_pins: the image's labels name its files' sha256
    wheels: Wheels = group(Wheels)
    engine: Engine = group(Engine)
    output: Output = group(Output)
    matrix: str = matrix_file()
    image: str | None = opt(None, "the image to check (tag or id): a runtime image built with --reproducible")
    against: str | None = opt(None, "compare with this image instead of rebuilding (e.g. a rebuild kept with "
                                    "--keep, or another registry's copy)")
    keep: bool = opt(False, "keep the rebuild: tagged REPOSITORY:verify-CONTENT-ARCH when it is the image's bytes "
                            "(tested), else untagged (by its id)")


def verify(o: VerifyOptions) -> None:
    """Rebuild an image from the inputs its labels record and compare the two."""
    from ..images import verify as check
    if not o.image:
        raise UserError("--image REF: the image to verify")
    if o.against:
        lines = check.compare(o.engine.detect(), o.image, o.against)
    else:
        site = o.network.site(**o.files.site())
        lines = check.verify(load_matrix(o.matrix), o.image, site, o.wheels.inputs(), o.engine.detect(), o.keep)
    console.show("\n".join(lines) + f"\nverified: {o.image} is the same bytes, layer for layer")


@dataclass(frozen=True)
class BuilderOptions:
    """The builder of a stack (and, below, the wheels compiled in it)."""
    network: Network = group(Network)
    steps: Steps = group(Steps)
    engine: Engine = group(Engine)
    output: Output = group(Output)
    matrix: str = matrix_file()
    dry: bool = opt(False, DRY)
    torch: str | None = opt(None, help_of(Choice, "torch"))
    flavor: str | None = opt(None, "builder flavor from matrix.yaml builders (default: the stack's builder; on a "
                                   "machine that would run it under qemu, a flavor that cross-compiles with its gcc, "
                                   "where one has the Python)")
    python: str | None = opt(None, "python minor version (default: all the builder and the stack share; one for "
                                   "wheels)")
    platform: str | None = opt(None, help_of(Choice, "platform"))
    repository: str = opt("ascend-builder", "the repository builder images are tagged into (default ascend-builder)",
                          site=True)
    emulated: bool = opt(False, "compile under qemu with the image's gcc, not with the flavor's cross compiler (an "
                                "aarch64 builder on another machine cross-compiles by default: about 6 times faster)")
    debootstrap: bool = opt(False, "make a missing Debian base image here with debootstrap (the offline flavors)")

    def site(self) -> Site:
        """How the builder is built (by `invoke builder`, or first by a wheel's task)."""
        return self.network.site(self.dry, debootstrap=self.debootstrap, emulated=self.emulated, **self.steps.site())


# The wheels' tasks build the stack's builder first when it is not here: its options too,
# which apply to that build (a wheel compiled before comes from the wheel cache by its key).
FIRST_BUILDER = {x.name: "the builder, when this task builds it first: " + x.help
                 for x in flags(BuilderOptions) if x.name == "debootstrap" or x.path[0] == "steps"}


@dataclass(frozen=True)
class TorchNpuOptions(BuilderOptions):
    src: str | None = opt(None, "a checkout with its submodules, a git bundle or a source tarball, or URL@REF "
                                "(default: the stack's release tag, torch_npu_tags, with its submodules at their "
                                "pinned commits)")
    submodule_src: list[str] | None = opt(
        None, "a bundle, tarball or checkout of a submodule (op-plugin, nlohmann) at its pinned commit, for a --src "
              "that lacks it (repeatable)", iterable=True)


@dataclass(frozen=True)
class ApexOptions(BuilderOptions):
    src: str | None = opt(None, "a checkout, bundle or tarball of Ascend apex, or URL@REF (default: the matrix's "
                                "pinned commit)")
    submodule_src: list[str] | None = opt(
        None, "a bundle or checkout of NVIDIA apex holding the commit apex's build script checks out: its clone "
              "reads it instead of the network", iterable=True)


def builder(o: BuilderOptions) -> None:
    from ..images.sources import build_builder, pick_flavor
    m = load_matrix(o.matrix)
    stack = m.stack(o.torch)
    flavor = pick_flavor(m, stack, o.flavor, o.python, o.platform, o.emulated)
    build_builder(m, m.builder_cell(stack, flavor, o.python, o.platform), o.site(),
                  o.engine.for_task(o.dry), o.repository)


def wheel(kind: str, o: TorchNpuOptions | ApexOptions) -> None:
    """One wheel (torch_npu or apex) compiled in the stack's builder; its path is the result."""
    from ..images.sources import WheelRequest, build_wheel, check_source
    check_source("--src", o.src, o.submodule_src or ())      # before the plan: --dry refuses it as the real run
    m = load_matrix(o.matrix)
    req = WheelRequest(kind, m.stack(o.torch), o.flavor, o.python, o.platform,
                       None if o.src in (None, "upstream") else o.src, tuple(o.submodule_src or ()))
    # The stack's builder is built first when it is not here: with the same options as `invoke builder`.
    made = build_wheel(m, req, o.site(), o.engine.for_task(o.dry), o.repository)
    console.show(str(made))


@dataclass(frozen=True)
class BaseImageOptions:
    engine: Engine = group(Engine)
    dry: bool = opt(False, DRY)
    tag: str | None = opt(None, "image tag to create; {arch} becomes arm64/amd64 (needed for more than one platform)")
    suite: str = opt("bookworm", "Debian suite (bookworm, bullseye, trixie)")
    platform: list[str] | None = opt(None, "linux/arm64 or linux/amd64 (repeatable; default: linux/arm64 and this "
                                           "machine's, which a cross build needs for the fast path)", iterable=True)
    mirror: str = opt("http://deb.debian.org/debian", "Debian mirror URL")


def base_image(o: BaseImageOptions) -> None:
    from ..inputs.baseimage import check_request, default_platforms, make_bases
    platforms = o.platform or default_platforms()
    check_request(o.suite, platforms, o.tag, o.mirror)            # before the engine is even asked
    assert o.tag is not None
    made = make_bases(o.engine.for_task(o.dry), o.suite, platforms, o.tag, o.mirror, o.dry)
    console.show("made " + ", ".join(made) + f"\nuse them with: --base-image debian:{o.suite}={o.tag}")
