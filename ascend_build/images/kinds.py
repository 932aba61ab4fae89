"""What every kind of image has (cibuildwheel's platform data): its template, the kind it
takes input from and the one it is built FROM, its labels, its test suite and its tags;
and what a kind built on a tested runtime image declares of the command line: its options
(`option`) and what they ask for (`Asked`). The kinds themselves are modules, each holding
its ImageKind; catalog.py lists them, and rendering, building, testing and tagging loop
over that list."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterator, TypeVar

from ..matrix import BuilderCell, Cell, Stack
from ..platforms import Platform
from ..provenance.labels import LABEL_PREFIX, label  # noqa: F401  (named below the builds; importers read them here too)


@dataclass(frozen=True)
class Tags:
    """The tags of one image: the readable tag (what is inside), the content tag (what went
    in), and the alias where one is set; iterated in the order they are set."""
    readable: str
    content: str
    alias: str | None = None

    def __iter__(self) -> Iterator[str]:
        yield self.readable
        yield self.content
        if self.alias:
            yield self.alias


@dataclass(frozen=True)
class RuntimeFacts:
    """What a runtime image's labels say: its cell and what its build found and decided."""
    cell: Cell
    content: str                 # the content tag
    base: str                    # the base image it is built FROM
    apex: str                    # the apex wheel's name, or "absent"
    packages: str                # the CANN installers' file names
    lock: str                    # which lock, and its inputs' digest ("none": not locked)
    cann_sums: str               # the CANN installers as the build verified them (JSON, for the SBOM)
    epoch: int | None = None     # --reproducible: the SOURCE_DATE_EPOCH `invoke verify` rebuilds with
    test_only: str = ""          # why the image is not one to ship (torch from the test-only switch)


@dataclass(frozen=True)
class BuilderFacts:
    cell: BuilderCell
    content: str
    base: str


@dataclass(frozen=True)
class LayerFacts:
    """A user layer says what it added; the runtime's labels come with its image (FROM)."""
    name: str
    lock: str
    content: str
    runtime: str                 # the runtime image it is built on


F = TypeVar("F")


@dataclass(frozen=True)
class ImageKind(Generic[F]):
    name: str                    # the value of the io.ascend-build.kind label
    template: str                # templates/<template>
    parent: str | None           # the kind whose output it consumes (runtime <- builder: wheels)
    suite: str                   # tests/<suite>: run on every candidate before its tag
    repository: str              # the default local repository
    labels: Callable[[F], dict[str, str]]   # the labels set at build time, from the kind's facts
    extends: ImageKind[Any] | None = None   # the kind it is built FROM: its tests are inherited, run after its own

    def tags(self, repository: str, name: str, content: str, target: Platform, alias: str | None = None) -> Tags:
        """readable (what is inside), content (what went in), and the alias where one is set."""
        return Tags(readable_tag(repository, name, target), readable_tag(repository, content, target),
                    readable_tag(repository, alias, target) if alias else None)


def readable_tag(repository: str, name: str, target: Platform) -> str:
    """One arch's tag; the arches of a name are joined under `repository:name`."""
    return f"{repository}:{name}-{target.suffix}"


# A dry run stands in for what only the real run has (a package not here, a release file
# not fetched, a lock not made yet) with a value in angle brackets, shown as it is; a tag
# computed from such a stand-in would name an image no real run makes, so none is.
UNKNOWN = "<unknown>"
NO_CONTENT_TAG = "sha-unknown"


def content_tag(dockerfile_text: str, build_args: dict[str, str], hashes: dict[str, str]) -> str:
    """An immutable tag from what goes into the image: the rendered Dockerfile, every
    build arg, and the sha256 of every staged file (NO_CONTENT_TAG while one is a stand-in)."""
    if any((v.startswith("<") and v.endswith(">")) or f":{NO_CONTENT_TAG}-" in v     # or built on such a plan
           for v in (*build_args.values(), *hashes.values())):
        return NO_CONTENT_TAG
    digest = hashlib.sha256()
    digest.update(dockerfile_text.encode())
    digest.update(json.dumps(build_args, sort_keys=True).encode())
    digest.update(json.dumps(hashes, sort_keys=True).encode())
    return "sha-" + digest.hexdigest()[:16]


def _common(platform: str, content: str, base: str) -> dict[str, str]:
    return {label("platform"): platform, label("content-tag"): content, "org.opencontainers.image.base.name": base}


def _runtime_labels(f: RuntimeFacts) -> dict[str, str]:
    cell = f.cell
    # kind: every image says what it is (a CANN-only image is the runtime kind on the CANN stack)
    return {**_common(cell.platform, f.content, f.base), label("kind"): RUNTIME_KIND, label("stack"): cell.stack.name,
            label("os"): cell.os.name,
            label("python"): cell.python, label("chip"): cell.chip, label("apex"): f.apex,
            label("cann-packages"): f.packages, label("lock"): f.lock,
            label("cann-sha256"): f.cann_sums, "org.opencontainers.image.version": cell.name,
            # published: torch_npu was released for this CANN; compatible: Huawei's grid says so.
            label("pairing"): cell.pairing, label("runs-on"): " ".join(cell.cann.runs_on),
            label("nnal"): f"{cell.cann.version} cxx_abi_{cell.abi}" if cell.nnal else "none",
            label("user"): cell.run_as,
            # what `invoke verify` and the image suite read back: only where it applies
            **({label("source-date-epoch"): str(f.epoch)} if f.epoch is not None else {}),
            **({label("torch-atb"): "yes"} if cell.stack.torch_atb else {}),
            **({label("nnal-left-out"): "yes"} if cell.nnal_left_out else {}),     # --no-nnal
            **({label("like"): cell.like} if cell.like else {}),                  # --like
            **({label("like-built"): cell.like_built} if cell.like_built else {}),
            **({label("test-only"): f.test_only} if f.test_only else {})}


def _builder_labels(f: BuilderFacts) -> dict[str, str]:
    return {**_common(f.cell.platform, f.content, f.base), label("kind"): BUILDER_KIND,
            label("pythons"): " ".join(f.cell.pythons)}


def _layer_labels(f: LayerFacts) -> dict[str, str]:
    return {label("kind"): "layer", label("layer"): f.name, label("layer-lock"): f.lock,
            label("content-tag"): f.content, label("runtime"): f.runtime,
            "org.opencontainers.image.base.name": f.runtime}


BUILDER_KIND, RUNTIME_KIND = "builder", "runtime"     # their io.ascend-build.kind labels
BUILDER: ImageKind[BuilderFacts] = ImageKind(BUILDER_KIND, "builder.Dockerfile.j2", None, "builder_image",
                                              "ascend-builder", _builder_labels)
RUNTIME: ImageKind[RuntimeFacts] = ImageKind(RUNTIME_KIND, "runtime.Dockerfile.j2", "builder", "image",
                                             "ascend-runtime", _runtime_labels)
# A team's requirements on a tested runtime image: the runtime suite runs again on it.
LAYER: ImageKind[LayerFacts] = ImageKind("layer", "layer.Dockerfile.j2", "runtime", "layer_image",
                                         "ascend-runtime", _layer_labels, extends=RUNTIME)


def suites(kind: ImageKind[Any]) -> list[str]:
    """The test suites an image of this kind passes: its own first (what the image adds, the
    likelier to fail and the quicker to say so), then those of the kinds it extends."""
    return [kind.suite] + (suites(kind.extends) if kind.extends else [])


# ------------------------------------------------------------------ a kind's options of `invoke build`
OPTION = "ascend_build.kind_option"      # the metadata key of a field that is a kind's option


@dataclass(frozen=True)
class KindOption:
    """An option a kind adds to `invoke build`, declared in its module (a field of its
    `Options` record: `option`); the command line collects them from the catalog, as
    cibuildwheel collects its platforms, and refuses them as declared here."""
    help: str
    needs: tuple[str, ...] = ()     # options of `invoke build`, one of which it goes with (--no-kernels: --vllm)
    unmet: str = ""                 # what is said after its name when none of them is given
    with_all: bool = False          # `--all` takes it: the kind's image on each image of `images:` (else
                                    # refused there: its image stands on one runtime image)


def option(default: Any, help: str, *, needs: tuple[str, ...] = (), unmet: str = "", with_all: bool = False) -> Any:
    """A field of a kind's `Options` record that is an option of `invoke build`: its default and
    help, what it needs and whether `--all` takes it, once."""
    if not help.strip():
        raise TypeError("an option's help says what it does: give option() its text")
    if isinstance(default, str) and not default.strip():
        raise TypeError("an option's default is None or a value, never empty text (cli/options.py's opt says why)")
    if bool(needs) != bool(unmet.strip()):
        raise TypeError("an option that needs others says what a command line without them is told: give "
                        "option() both needs= and unmet=")
    return dataclasses.field(default=default, metadata={OPTION: KindOption(help, tuple(needs), unmet, with_all)})


def options_of(record: type) -> dict[str, KindOption]:
    """A kind's `Options` record, field by field (each declared with `option`)."""
    found = {}
    for f in dataclasses.fields(record):
        if OPTION not in f.metadata:
            raise TypeError(f"{record.__name__}.{f.name}: declare a kind's option with option(default, help)")
        found[f.name] = f.metadata[OPTION]
    return found


@dataclass(frozen=True)
class Asked:
    """What a kind's options ask for (its module's `ask`), before the cell is resolved."""
    what: Any = None                # the kind's own record of it, which its `request` takes
    stack: Stack | None = None      # the stack it is made for, where it pins one (a vLLM-Ascend release)
    python: str | None = None       # the Python it is made for when none is asked (its release's images')
