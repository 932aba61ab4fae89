"""The devel kind (`invoke build --cann 9.0.0 --devel`): the twin Huawei publishes of every
`cann:` image from CANN 9.0.0 (`cann:<tag>-devel`, Ascend/cann-container-image), built here
on the tested CANN-only image of the cell: FROM its content tag (one tested image: its
layers are reused, never rebuilt), root, bash as /bin/sh, the official devel images' build
tools and headers for the OS family, their Python build pins locked as a user layer is (every
package of the CANN-only image held), WORKDIR /opt; tested with its suite and then the
CANN-only image's, and tagged `<CANN-only image name>-devel-<arch>`."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement

from .. import atomic, console, project
from ..errors import UserError
from ..inputs.options import Site
from ..locking import layerlock
from ..locking import lock as locks
from ..matrix import Cell, Matrix, OSBase
from ..matrix.frameworks import CANN
from ..matrix.like import Like
from .kinds import RUNTIME, Asked, ImageKind, label, option
from .render import PACKAGES, Rendered, plain_dockerfile
from .steps import SCRIPTS, OnRuntime

SUFFIX = "devel"        # <CANN-only image name>-devel-<arch>
# Its lock is a layer lock (locking/layerlock.py) made by this command.
DEVEL_LAYER = layerlock.LockFor("devel layer", "invoke build --devel")


@dataclass(frozen=True)
class Pin:
    """One of the official devel images' `pip3 install` lines."""
    name: str
    version: str = ""            # their exact pin ("": none, the newest that fits)

    @property
    def text(self) -> str:
        return f"{self.name}=={self.version}" if self.version else self.name


# cann/9.0.1-*-devel/Dockerfile (every chip, OS and Python alike), in their order.
PINS = (Pin("wheel", "0.38.4"), Pin("pyyaml", "6.0.1"), Pin("setuptools", "67.4.0"), Pin("numpy", "1.26.4"),
        Pin("attrs"), Pin("decorator"), Pin("sympy"), Pin("psutil"), Pin("scipy"), Pin("protobuf"))

# Their OS packages, per package family (templates/_steps.j2 installs them). openEuler's list
# names no pkg-config: pkgconf is added, which the suite's `pkg-config gtest` needs. Then what a
# developer clones and builds with: git and wget (Huawei's base images install both, and its
# devel Dockerfiles run `git clone`), gdb, and ninja (CMake's generator the Ascend C builds use).
DEVELOPER = "git wget gdb ninja-build"
TOOLS = {
    "apt": "vim zip tree dos2unix sudo bzip2 pigz locales libgtest-dev pkg-config systemctl gawk "
           f"nlohmann-json3-dev patch {DEVELOPER}",
    "dnf": f"vim zip tree dos2unix sudo bzip2 pigz gtest gtest-devel pkgconf gawk nlohmann-json-devel patch {DEVELOPER}",
}


@dataclass(frozen=True)
class DevelFacts:
    """What a devel image's labels say (the CANN-only image's come with its image, FROM)."""
    lock: str
    content: str
    runtime: str                 # the CANN-only image it is built on


def _labels(f: DevelFacts) -> dict[str, str]:
    # user: root whoever the CANN-only image runs as (its suite, inherited, reads this label)
    return {label("kind"): "devel", label("devel-lock"): f.lock, label("content-tag"): f.content,
            label("runtime"): f.runtime, label("user"): "root", "org.opencontainers.image.base.name": f.runtime}


KIND: ImageKind[DevelFacts] = ImageKind("devel", "devel.Dockerfile.j2", "runtime", "devel_image",
                                        "ascend-runtime", _labels, extends=RUNTIME)


def dockerfile(os: OSBase) -> Rendered:
    return plain_dockerfile(KIND.template, f"images/devel/{os.name}/Dockerfile", os=os,
                            packages=PACKAGES[os.family], tools=TOOLS[os.family])


def render(matrix: Matrix) -> list[Rendered]:
    """One Dockerfile per OS (its package family's tools, its package cache): the CANN-only
    image and the lock are a build argument and a staged file."""
    return [dockerfile(os) for os in matrix.os.values()]


@dataclass(frozen=True)
class Options:
    """A devel image, the twin of Huawei's cann:<tag>-devel on the tested CANN-only image."""
    devel: bool = option(False, "with --cann: build its devel image too, as Huawei's cann:<tag>-devel (root, bash as "
                                "/bin/sh, build tools, gtest, nlohmann-json, Python build pins) on the tested CANN-only "
                                "image, locked with its packages held, tested, tagged <CANN-only name>-devel-<arch>",
                         needs=("cann", "like"), unmet="is the devel variant of a CANN-only image: give --cann RELEASE "
                                                       "(e.g. --cann 9.0.0)")


def ask(matrix: Matrix, options: Options, like: Like | None) -> Asked | None:
    """`--devel`, or `--like` an official cann:<tag>-devel (the devel image, on its CANN-only one)."""
    return Asked() if options.devel or (like is not None and like.devel) else None


@dataclass(frozen=True)
class DevelRequest:
    """`--devel` on one CANN-only cell."""

    @classmethod
    def of(cls, matrix: Matrix, cell: Cell) -> DevelRequest:
        """Refused unless the cell is a CANN-only image (exit 2), naming the releases that have one."""
        if cell.stack.framework is not CANN:
            releases = [st.key for st in (*matrix.stacks.values(), *matrix.derived.values()) if st.framework is CANN]
            raise UserError(f"--devel is the devel variant of a CANN-only image; {cell.stack.name} is a "
                            f"{cell.stack.framework.title} stack: give --cann RELEASE --devel, RELEASE one of "
                            f"{', '.join(releases)} (cann_stacks: and those derived from the official images)")
        return cls()


def request(matrix: Matrix, cell: Cell, asked: None) -> DevelRequest:
    return DevelRequest.of(matrix, cell)


def lock_input(matrix: Matrix) -> Path:
    """Beside the matrix, as the runtimes' locks: locks/devel/devel.in, its locks in
    devel.lock/<stack>-py<X.Y>-<arch>.txt."""
    return matrix.path.parent / "locks" / "devel" / "devel.in"


INPUT_HEADER = ("# GENERATED by `invoke build --devel` from ascend_build/images/devel.py (PINS): do not edit.\n"
                "# The official devel images' Python pins; each image's lock leaves out those its CANN-only\n"
                "# image holds (they keep the image's version).\n")


def pin_lines() -> list[layerlock.Line]:
    """PINS as the input file's lines (its line numbers, for the lock's messages)."""
    skip = INPUT_HEADER.count("\n")
    return [layerlock.Line(skip + i, p.text, Requirement(p.text)) for i, p in enumerate(PINS, 1)]


def split_held(lines: list[layerlock.Line], held: dict[str, str]) -> tuple[list[layerlock.Line], list[str]]:
    """The lines to lock, and what is said of those the CANN-only image holds already."""
    kept = [f"{line.text} kept at the CANN-only image's {line.name}=={held[line.name]}"
            for line in lines if line.name in held]
    return [line for line in lines if line.name not in held], kept


def prepare(matrix: Matrix, cell: Cell, site: Site, request: DevelRequest) -> layerlock.LayerLock:
    """The pins locked with the CANN-only image's packages held, or refused, before anything
    is built. A dry run resolves and writes nothing: it says what the real run does."""
    path = lock_input(matrix)
    lock_path = layerlock.path_for(path, cell)
    found = locks.find(matrix, cell, project.root()).lock
    if site.dry:
        lines, kept = split_held(pin_lines(), locks.pinned_versions(found.files) if found else {})
        console.show(f"# devel: OS tools ({cell.os.family}): {TOOLS[cell.os.family]}; bash as /bin/sh; root; "
                     "WORKDIR /opt")
        console.show(f"# devel: Python pins {', '.join(line.text for line in lines) or 'none'}"
                     + "".join(f"; {k}" for k in kept))
        console.show(f"# devel: the real run checks or makes {lock_path}")
        return layerlock.read(lock_path) or layerlock.LayerLock(lock_path, "")
    hold = layerlock.held(cell, found)
    lines, kept = split_held(pin_lines(), hold.versions)
    for note in kept:
        console.say(f"devel: {note}")
    if not lines:
        raise UserError(f"{cell.name}: the CANN-only image holds every devel pin already; nothing to lock")
    text = INPUT_HEADER + "".join(f"{p.text}\n" for p in PINS)
    if not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(path, text)
    from ..locking.layer_resolve import lock_layer
    lock, said = lock_layer(SUFFIX, path, lines, cell, hold, site.net, None, kind=DEVEL_LAYER)
    for line in said:
        console.say(line)
    return lock


def image(matrix: Matrix, cell: Cell, site: Site, lock: layerlock.LayerLock) -> OnRuntime:
    """Its OS's Dockerfile; its lock as lock/devel.txt."""
    return OnRuntime(
        KIND, suffix=SUFFIX, rendered=dockerfile(cell.os), lock=lock, own="devel", build_args={},
        hashes={"lock/devel.txt": lock.sha256},
        labels=lambda content, base: KIND.labels(DevelFacts(lock.label, content, base)),
        what="devel image", staged=f"{lock.path} as lock/devel.txt",
        context={"lock/devel.txt": lock.text, "wheel_arch.py": SCRIPTS / "wheel_arch.py"})
