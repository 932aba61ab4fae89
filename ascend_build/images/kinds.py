"""The image graph as data: each kind of image this project builds, with its template,
its cell type, the kind it takes input from, its labels, its test suite and its tags.
Rendering, building, testing, tagging and pushing look a kind up here instead of
knowing it; a new kind is a new row."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Callable

from ..matrix import BuilderCell, Cell
from ..platforms import Platform

LABEL_PREFIX = "io.ascend-build"


def label(key: str) -> str:
    return f"{LABEL_PREFIX}.{key}"


class Tags(list):
    """The tags of one image, in the order they are set: the readable tag (what is inside),
    the content tag (what went in), then the alias where one is set."""

    @property
    def readable(self) -> str:
        return str(self[0])

    @property
    def content(self) -> str:
        return str(self[1])


@dataclass(frozen=True)
class ImageKind:
    name: str                    # the value of the io.ascend-build.kind label
    template: str                # templates/<template>
    cell_type: type              # what one image of the kind is resolved to
    parent: str | None           # the kind whose output it consumes (runtime <- builder: wheels)
    suite: str                   # tests/<suite>: run on every candidate before its tag
    repository: str              # the default local repository
    labels: Callable[..., dict[str, str]]   # the labels set at build time, from the cell
    extends: str | None = None   # the kind it is built FROM: its tests are inherited, run first

    def tags(self, repository: str, name: str, content: str, target: Platform, alias: str | None = None) -> Tags:
        """readable (what is inside), content (what went in), and the alias where one is set."""
        return Tags([readable_tag(repository, name, target), readable_tag(repository, content, target)]
                    + ([readable_tag(repository, alias, target)] if alias else []))


def readable_tag(repository: str, name: str, target: Platform) -> str:
    """One arch's tag; the arches of a name are joined under `repository:name`."""
    return f"{repository}:{name}-{target.suffix}"


def content_tag(dockerfile_text: str, build_args: dict[str, str], hashes: dict[str, str]) -> str:
    """An immutable tag from what goes into the image: the rendered Dockerfile, every
    build arg, and the sha256 of every staged file."""
    digest = hashlib.sha256()
    digest.update(dockerfile_text.encode())
    digest.update(json.dumps(build_args, sort_keys=True).encode())
    digest.update(json.dumps(hashes, sort_keys=True).encode())
    return "sha-" + digest.hexdigest()[:16]


def _common(platform: str, content: str, base: str) -> dict[str, str]:
    return {label("platform"): platform, label("content-tag"): content, "org.opencontainers.image.base.name": base}


def _runtime_labels(cell: Cell, content: str, base: str, apex: str, packages: str, lock: str,
                    cann_sums: str, user: str = "root") -> dict[str, str]:
    return {**_common(cell.platform, content, base), label("stack"): cell.stack.name, label("os"): cell.os.name,
            label("python"): cell.python, label("chip"): cell.chip, label("apex"): apex, label("cann-packages"): packages, label("lock"): lock,
            label("cann-sha256"): cann_sums, "org.opencontainers.image.version": cell.name,
            # published: torch_npu was released for this CANN; compatible: Huawei's grid says so.
            label("pairing"): cell.pairing, label("runs-on"): " ".join(cell.cann.runs_on),
            label("nnal"): f"{cell.cann.version} cxx_abi_{cell.abi}" if cell.nnal else "none",
            label("user"): user}


def _builder_labels(cell: BuilderCell, content: str, base: str) -> dict[str, str]:
    return {**_common(cell.platform, content, base), label("pythons"): " ".join(cell.pythons)}


def _layer_labels(cell: Cell, content: str, base: str, name: str, lock: str) -> dict[str, str]:
    # The runtime's labels come with its image (FROM); these say what the layer added.
    return {label("kind"): "layer", label("layer"): name, label("layer-lock"): lock,
            label("content-tag"): content, label("runtime"): base,
            "org.opencontainers.image.base.name": base}


KINDS: dict[str, ImageKind] = {k.name: k for k in (
    ImageKind("builder", "builder.Dockerfile.j2", BuilderCell, None, "builder_image", "ascend-builder",
              _builder_labels),
    ImageKind("runtime", "runtime.Dockerfile.j2", Cell, "builder", "image", "ascend-runtime", _runtime_labels),
    # A team's requirements on a tested runtime image: the runtime suite runs again on it.
    ImageKind("layer", "layer.Dockerfile.j2", Cell, "runtime", "layer_image", "ascend-runtime", _layer_labels,
              extends="runtime"),
)}
RUNTIME, BUILDER, LAYER = KINDS["runtime"], KINDS["builder"], KINDS["layer"]


def suites(kind: ImageKind) -> list[str]:
    """The test suites an image of this kind passes: those of the kinds it extends, then its own."""
    return (suites(KINDS[kind.extends]) if kind.extends else []) + [kind.suite]
