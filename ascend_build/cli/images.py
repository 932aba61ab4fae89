"""The tasks on built images: their test suites (or the whole test suite), pushing them
and joining their arches, their SBOM."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import console
from .. import engine as eng
from ..errors import TestsFailed, UserError
from ..images import steps
from ..images.render import ROOT
from ..matrix import Cell, Matrix, load_matrix
from .options import Choice, Output, required
from .wrap import exit_with


def test(image: str | None, matrix: str, engine: str, docker: str | None) -> None:
    """The image suite on one image, or the whole suite (its code is pytest's)."""
    if image == "":
        raise UserError("--image needs a value: the image (tag or id) whose suite to run")
    if image:
        load_matrix(matrix)
        found = eng.detect(engine, docker)
        if found.image_id(image) is None:
            raise UserError(f"no image {image} in {found.client}'s store: build it (`invoke build`) or pull it")
        if steps.run_image_tests(image, Path(matrix), found) != 0:
            raise TestsFailed(f"the image suite failed on {image} (above)")
        return
    if (matrix, engine, docker) != ("matrix.yaml", "docker", None):
        raise UserError("--matrix, --engine and --docker choose what the image suite runs on: give --image REF "
                        "(the whole suite uses the committed matrix and starts its engines itself)")
    # Two lanes of real builds and the unit tests, side by side (tests/conftest.py: LANES);
    # at the end each module's and each lane's wall time, and the slowest tests.
    with tempfile.NamedTemporaryFile(prefix="ascend-build-timings-", suffix=".jsonl", delete=False) as fh:
        timings = fh.name
    code = subprocess.run([sys.executable, "-m", "pytest", "tests", "-p", "no:cacheprovider", "-ra",
                           "--durations=10", "-n", "3"], cwd=ROOT,
                          env={**os.environ, "ASCEND_BUILD_TEST_TIMINGS": timings}).returncode
    Path(timings).unlink(missing_ok=True)
    exit_with(code)       # pytest's own code for the whole suite


@dataclass(frozen=True)
class PushOptions:
    output: Output
    registry: str | None = None
    repository: str = "ascend-runtime"
    torch: str | None = None
    mindspore: str | None = None
    cann: str | None = None
    os: str | None = None
    python: str | None = None
    chip: str | None = None
    platform: list[str] | None = None
    join: bool = True
    docker: str | None = None
    engine: str = "docker"
    dry: bool = False
    matrix: str = "matrix.yaml"

    def cells(self, m: Matrix) -> list[Cell]:
        """The images to push: `images:`, or the one the options name (on each --platform)."""
        choice = Choice(torch=self.torch, mindspore=self.mindspore, cann=self.cann, os=self.os, python=self.python,
                        chip=self.chip)
        if not (choice.given() or self.platform):
            return m.image_cells()
        stack = choice.stack(m)
        return [m.cell(stack, self.os, self.python, self.chip, p) for p in (self.platform or [m.defaults.platform])]


def push(o: PushOptions) -> None:
    from ..images.registry import push as push_images
    registry = required(o.registry, "--registry", "registry.example.com/ascend/runtime")
    m = load_matrix(o.matrix)
    engine = eng.for_task(o.engine, o.docker, o.dry)
    report = push_images(engine, o.cells(m), o.repository, registry, o.dry, o.join)
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
    for line in join_all(eng.for_task(o.engine, o.docker, o.dry), o.cells(m), registry, o.dry):
        console.show(f"manifest list {line}")


def sbom(image: str | None, output: str | None, fresh: bool, engine: str, docker: str | None) -> None:
    """The image's SBOM: what it carries, or made from its contents."""
    from ..images import sbom as sboms
    from ..images.kinds import label
    image = required(image, "--image", "ascend-runtime:torch2.1.0-arm64")
    e = eng.for_task(engine, docker)
    labels = sboms.inspect(e, image)["Config"].get("Labels") or {}
    if label("cann-sha256") not in labels:
        raise UserError(f"{image} was not built by this project's `invoke build` (or predates SBOMs): "
                        f"it has no {label('cann-sha256')} label")
    platform = labels[label("platform")]
    text = None if fresh else sboms.stored(e, image, platform)
    text = text or sboms.for_image(e, image, platform)
    if output:
        Path(output).write_text(text)
        console.show(f"wrote {output}")
    else:
        console.show(text)
