"""The tasks on built images: their test suites (or the whole test suite), pushing them
and joining their arches, their SBOM."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import console, project
from ..errors import TestsFailed, UserError
from ..images import catalog, steps
from ..images.serving import suffix_of
from ..matrix import Cell, Matrix, Stack, load_matrix
from .options import DRY, Choice, Engine, Output, group, matrix_file, opt, required
from .wrap import exit_with


@dataclass(frozen=True)
class SuiteOptions:
    engine: Engine = group(Engine)
    matrix: str = matrix_file()
    image: str | None = opt(None, "test this image (id or tag) with the image suite only")


def test(o: SuiteOptions) -> None:
    """The image suite on one image, or the whole suite (its code is pytest's)."""
    if o.image == "":
        raise UserError("--image needs a value: the image (tag or id) whose suite to run")
    if o.image:
        load_matrix(o.matrix)
        found = o.engine.detect()
        if found.image_id(o.image) is None:
            raise UserError(f"no image {o.image} in {found.client}'s store: build it (`invoke build`) or pull it")
        if steps.run_image_tests(o.image, Path(o.matrix), found, kind=catalog.kind_of(found, o.image)) != 0:
            raise TestsFailed(f"the image suite failed on {o.image} (above)")
        return
    if o != SuiteOptions():
        raise UserError("--matrix, --engine and --docker choose what the image suite runs on: give --image REF "
                        "(the whole suite uses the committed matrix and starts its engines itself)")
    # Two lanes of real builds and the unit tests, side by side (tests/conftest.py: LANES);
    # at the end each module's and each lane's wall time, and the slowest tests.
    with tempfile.NamedTemporaryFile(prefix="ascend-build-timings-", suffix=".jsonl", delete=False) as fh:
        timings = fh.name
    code = subprocess.run([sys.executable, "-m", "pytest", "tests", "-p", "no:cacheprovider", "-ra",
                           "--durations=10", "-n", "3"], cwd=project.root(),
                          env={**os.environ, "ASCEND_BUILD_TEST_TIMINGS": timings}).returncode
    Path(timings).unlink(missing_ok=True)
    exit_with(code)       # pytest's own code for the whole suite


@dataclass(frozen=True)
class PushOptions:
    output: Output = group(Output)
    engine: Engine = group(Engine)
    matrix: str = matrix_file()
    dry: bool = opt(False, DRY)
    registry: str | None = opt(None, "target repository, e.g. registry.example.com/ascend/runtime or "
                                     "127.0.0.1:5000/ascend-runtime", site=True)
    repository: str = opt("ascend-runtime", "local repository the images were tagged into (default ascend-runtime)",
                          site=True)
    torch: str | None = opt(None, "only this stack (with --os etc.: one image not in `images:`)")
    mindspore: str | None = opt(None, "only the MindSpore image of this release (as --torch)")
    cann: str | None = opt(None, "only the CANN-only image of this CANN release (as --torch)")
    os: str | None = opt(None, "base OS name")
    python: str | None = opt(None, "python minor version")
    chip: str | None = opt(None, "kernels chip")
    platform: list[str] | None = opt(None, "linux/arm64 or linux/amd64 (repeatable)", iterable=True)
    join: bool = opt(True, "join the arches into manifest lists after pushing (default on)")
    vllm: str | None = opt(None, "the serving images of this vLLM-Ascend release on the images named (`invoke "
                                 "build --vllm`), in place of those images")
    without_kernels_ok: bool = opt(False, "push a serving image built --no-kernels all the same")

    def cells(self, m: Matrix) -> list[Cell]:
        """The images to push: `images:`, or the one the options name (on each --platform)."""
        choice = Choice(torch=self.torch, mindspore=self.mindspore, cann=self.cann, os=self.os, python=self.python,
                        chip=self.chip)
        stack: Stack | None
        if self.vllm and not choice.named():
            stack = m.serving(self.vllm).stack      # the stack the release pins
        elif choice.given() or self.platform:
            stack = choice.stack(m)
        else:
            return m.image_cells()
        return [m.cell(stack, self.os, self.python, self.chip, p) for p in (self.platform or [m.defaults.platform])]


# push and join read the registry with skopeo under podman: their --engine says so.
REGISTRY_ENGINE = {"engine": "docker (default) or podman (reads registries with skopeo)"}


def push(o: PushOptions) -> None:
    from ..images.registry import push as push_images
    registry = required(o.registry, "--registry", "registry.example.com/ascend/runtime")
    m = load_matrix(o.matrix)
    engine = o.engine.for_task(o.dry)
    if o.without_kernels_ok and not o.vllm:
        raise UserError("--without-kernels-ok is for serving images: give --vllm RELEASE")
    suffix = "-" + suffix_of(m.serving(o.vllm).version) if o.vllm else ""
    report = push_images(engine, o.cells(m), o.repository, registry, o.dry, o.join, suffix, o.without_kernels_ok)
    for line in report.pushed:
        console.show(f"pushed {line}")
    for line in report.skipped:
        console.show(f"skipped {line}")
    for line in report.lists:
        console.show(f"manifest list {line}")
    for line in report.missing:
        console.show(f"not built here (nothing tested to push): {line}")
    if not report.pushed and not report.skipped and not o.dry:
        raise UserError("no tested image to push: build them first (`invoke build ...` tags only tested images)")


def join(o: PushOptions) -> None:
    from ..images.registry import join_all
    registry = required(o.registry, "--registry", "registry.example.com/ascend/runtime")
    m = load_matrix(o.matrix)
    suffix = "-" + suffix_of(m.serving(o.vllm).version) if o.vllm else ""
    for line in join_all(o.engine.for_task(o.dry), o.cells(m), registry, o.dry, suffix):
        console.show(f"manifest list {line}")


@dataclass(frozen=True)
class SbomOptions:
    engine: Engine = group(Engine)
    image: str | None = opt(None, "an image this project built (tag or id)")
    output: str | None = opt(None, "write the SBOM to FILE (default: print it)")
    fresh: bool = opt(False, "make it from the image's contents even if the image carries one")


def sbom(o: SbomOptions) -> None:
    """The image's SBOM: what it carries, or made from its contents."""
    from ..images.kinds import label
    from ..provenance import sbom as sboms
    image = required(o.image, "--image", "ascend-runtime:torch2.1.0-arm64")
    e = o.engine.for_task()
    labels = sboms.inspect(e, image)["Config"].get("Labels") or {}
    if label("cann-sha256") not in labels:
        raise UserError(f"{image} was not built by this project's `invoke build` (or predates SBOMs): "
                        f"it has no {label('cann-sha256')} label")
    platform = labels[label("platform")]
    text = None if o.fresh else sboms.stored(e, image, platform)
    text = text or sboms.for_image(e, image, platform)
    if o.output:
        Path(o.output).write_text(text)
        console.show(f"wrote {o.output}")
    else:
        console.show(text)
