"""The frameworks an image carries on CANN, one record each: what the rest of the package
would otherwise ask "is it torch?" for. A stack holds its framework's record; the lock
asks it for its layers, the render for its template block, the launchers for its
launcher, the labels for its keys. "No framework" (CANN only) is one of them. Another
framework is a record here, its template block (templates/framework-<name>.j2) and its
tests (docs/adding.md)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol


class _TorchRead(Protocol):
    @property
    def version(self) -> str: ...
    @property
    def companions(self) -> tuple[str, ...]: ...


class Lockable(Protocol):
    """What a lock spec reads of a stack (records.Stack is one; named here, not imported,
    as records.py builds on this file)."""
    @property
    def package(self) -> str: ...
    @property
    def torch(self) -> _TorchRead | None: ...


# A framework's lock spec: its layers' requirements for a stack on an arch, the stack's pins
# given (CANN's layer, shared by every framework, is the lock's own).
LockSpec = Callable[[Lockable, str, "list[str]"], "dict[str, list[str]]"]


def _torch_lock(stack: Lockable, arch: str, pins: list[str]) -> dict[str, list[str]]:
    """torch with its companions and the pins, then torch_npu. x86_64's torch is the CPU
    build (PyPI's x86_64 torch is CUDA's), from the stack's torch index."""
    assert stack.torch is not None
    torch = f"torch=={stack.torch.version}" + ("+cpu" if arch == "x86_64" else "")
    return {"torch": [torch, *stack.torch.companions] + pins,
            "torch_npu": [f"torch_npu=={stack.package}", torch] + pins}


def _mindspore_lock(stack: Lockable, arch: str, pins: list[str]) -> dict[str, list[str]]:
    return {"mindspore": [f"mindspore=={stack.package}"] + pins}


def _cann_lock(stack: Lockable, arch: str, pins: list[str]) -> dict[str, list[str]]:
    """No layer of its own: CANN's (the lock's own) is the image's only one, and takes the pins."""
    return {}


@dataclass(frozen=True)
class Framework:
    name: str                    # torch, mindspore, cann: --framework's value
    title: str                   # how messages and titles name it
    flag: str                    # the option naming one of its stacks: --torch 2.1.0, --mindspore 2.9.0
    section: str                 # where its stacks are written in matrix.yaml
    stack_prefix: str            # a stack's name is this + its key (mindspore2.9.0): images/, locks/, tags
    tag_word: str                # an image's readable tag names it so: ...-py3.11-torch2.1.0 ("": not at all)
    package: str                 # what Huawei pairs with a CANN release and publishes wheel sums for ("": none)
    package_title: str           # how messages name that package
    package_key: str             # the key of a stack's entry naming that release ("": the entry's own key)
    releases: str                # imported.yaml's section of those releases ("": no package, nothing to pair)
    layers: tuple[str, ...]      # the image's Python package layers after CANN's, one lock file each
    lock: LockSpec               # what each of those layers asks for, before resolution
    launcher: str                # cluster/launch.py: how `invoke run` and `invoke job` start its ranks ("": none)
    template: str                # templates/<template>: its steps and labels in the runtime image
    release_label: str           # the label an image of it carries with its release: how an image is known
    operator_label: str          # the Ascend operator's framework label on an AscendJob ("": no job to run)
    builds: tuple[str, ...] = ()     # wheels compiled from source in a builder (torch_npu, apex); (): none
    # NNAL is on where CANN publishes it and the framework loads it: from this release of
    # `package` (torch_npu's ATB plugin, in its wheels from 2.5.1); "": every release.
    nnal_from: str = ""
    # NNAL's cxx_abi tree where no binary of the framework decides it (None: each stack names
    # its framework's ABI per arch, cxx11_abi:).
    cxx11_abi: bool | None = None

    def stack_name(self, key: str) -> str:
        """The stack a `section` key names."""
        return self.stack_prefix + key

    @property
    def has_builder(self) -> bool:
        return bool(self.builds)

    @property
    def paired(self) -> bool:
        """It has a package of its own, released for CANN releases: a stack of it must pair with
        its CANN. Without one (CANN only), a stack is keyed by its CANN release."""
        return bool(self.releases)


TORCH = Framework(
    name="torch", title="torch", flag="--torch", section="stacks", stack_prefix="", tag_word="torch",
    package="torch_npu", package_title="torch_npu", package_key="torch_npu",
    releases="torch_npu_releases", layers=("torch", "torch_npu"), lock=_torch_lock,
    launcher="torchrun",
    template="framework-torch.j2", release_label="torch", operator_label="pytorch", builds=("torch_npu", "apex"), nnal_from="2.5.1")
MINDSPORE = Framework(
    name="mindspore", title="MindSpore", flag="--mindspore", section="mindspore_stacks", stack_prefix="mindspore",
    tag_word="mindspore", package="mindspore", package_title="MindSpore", package_key="",
    releases="mindspore_releases", layers=("mindspore",), lock=_mindspore_lock,
    launcher="msrun", template="framework-mindspore.j2", release_label="mindspore", operator_label="mindspore")
# No framework: OS + Python + CANN (+ NNAL), the base Huawei's cann:<ver>-<chip>-<os>-py<ver>
# images are, for vLLM, MindIE, one's own operators or another framework. Its stack is a
# CANN release (cann8.0.RC3), its release and package that release; no launcher (ranks are
# the framework's to start); NNAL at cxx_abi_1, the tree NNAL's set_env.sh takes when no torch
# says otherwise.
CANN = Framework(
    name="cann", title="CANN only", flag="--cann", section="cann_stacks", stack_prefix="cann", tag_word="",
    package="", package_title="CANN", package_key="", releases="", layers=(), lock=_cann_lock, launcher="",
    template="framework-cann.j2", release_label="cann", operator_label="", cxx11_abi=True)

# In the order lines are listed (torch's first). CANN only comes last: every image carries the
# label it is known by (.cann), so an image is the first framework whose label it has.
FRAMEWORKS: dict[str, Framework] = {f.name: f for f in (TORCH, MINDSPORE, CANN)}


def get(name: str) -> Framework:
    from ..errors import UserError
    if name not in FRAMEWORKS:
        raise UserError(f"--framework {name}: one of {', '.join(FRAMEWORKS)}")
    return FRAMEWORKS[name]
