"""The frameworks an image carries on CANN, one record each: what the rest of the package
would otherwise ask "is it torch?" for. A stack holds its framework's record; the lock
asks it for its layers, the render for its template block, the launchers for its
launcher, the labels for its keys. A third framework is a record here, its template
block (templates/framework-<name>.j2) and its tests (docs/adding.md)."""
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


@dataclass(frozen=True)
class Framework:
    name: str                    # torch, mindspore: --framework's value; the image's framework label
    title: str                   # how messages and titles name it
    flag: str                    # the option naming one of its stacks: --torch 2.1.0, --mindspore 2.9.0
    section: str                 # where its stacks are written in matrix.yaml
    stack_prefix: str            # a stack's name is this + its key (mindspore2.9.0): images/, locks/, tags
    tag_word: str                # an image's readable tag names it so: ...-py3.11-torch2.1.0
    package: str                 # what Huawei pairs with a CANN release and publishes wheel sums for
    package_title: str           # how messages name that package
    package_key: str             # the key of a stack's entry naming that release ("": the entry's own key)
    releases: str                # imported.yaml's section of those releases
    layers: tuple[str, ...]      # the image's Python package layers after CANN's, one lock file each
    lock: LockSpec               # what each of those layers asks for, before resolution
    launcher: str                # cluster/launchers.py: how `invoke run` and `invoke job` start its ranks
    template: str                # templates/<template>: its steps and labels in the runtime image
    release_label: str           # the label an image of it carries with its release: how an image is known
    operator_label: str          # the Ascend operator's framework label on an AscendJob
    builds: tuple[str, ...] = ()     # wheels compiled from source in a builder (torch_npu, apex); (): none
    # NNAL is on where CANN publishes it and the framework loads it: from this release of
    # `package` (torch_npu's ATB plugin, in its wheels from 2.5.1); "": every release.
    nnal_from: str = ""

    def stack_name(self, key: str) -> str:
        """The stack a `section` key names."""
        return self.stack_prefix + key

    @property
    def has_builder(self) -> bool:
        return bool(self.builds)


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

# In the order lines are listed (torch's first).
FRAMEWORKS: dict[str, Framework] = {f.name: f for f in (TORCH, MINDSPORE)}


def get(name: str) -> Framework:
    from ..errors import UserError
    if name not in FRAMEWORKS:
        raise UserError(f"--framework {name}: one of {', '.join(FRAMEWORKS)}")
    return FRAMEWORKS[name]
