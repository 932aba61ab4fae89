"""Where torch comes from: only the index the stack names for it (PyTorch's CPU index, or the
site's mirror of it), never a fallback. PyPI's x86_64 torch, and its aarch64 torch from 2.11,
is a CUDA build: hundreds of MB of nvidia-* and cuda-* wheels no NPU host can use, which pip
takes without a word when the CPU index does not answer (`--extra-index-url` merges indexes).
So the index is tried in seconds before anything resolves or builds, the lock takes torch's
hashes from that index alone, and a lock or an image holding CUDA packages is refused.

CI cannot reach PyTorch's index: its 26.x build stands PyPI in for it only through the
test-only switch below, which the lock's header and the image's labels then say."""
from __future__ import annotations

import os
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Iterable, Mapping

from ..engine.network import Network, redact
from ..errors import NetworkError, UserError
from ..matrix.model import Stack

# What torch's index serves for a stack: torch and its domain libraries (COMPANIONS).
TORCH_FAMILY = ("torch", "torchvision", "torchaudio")
# The test-only switch: torch from the site's index (PyPI) where the stack names another.
TEST_ONLY_SWITCH = "ASCEND_BUILD_TEST_ONLY_TORCH_FROM_PYPI"
# CUDA's wheels (nvidia-cublas-cu12, cuda-bindings, ...) and a CUDA-tagged torch (2.5.1+cu124).
_CUDA_NAME = re.compile(r"^(nvidia|cuda)-", re.I)
_CUDA_LOCAL = re.compile(r"\+cu[0-9]+$")
REACH_TIMEOUT = 5.0     # seconds: an index that answers at all answers in well under this


@dataclass(frozen=True)
class TorchSource:
    """The index torch and its companions come from for one stack and arch."""
    index: str | None        # None: the site's own index (PyPI's torch is a CPU build there)
    named: str | None        # the index the stack names (stacks.X.torch_index), before a mirror or the switch
    test_only: bool = False  # the switch stands the site's index in for `named`

    @property
    def mirrored(self) -> bool:
        return self.index is not None and self.index != self.named

    def describe(self) -> str:
        if self.test_only:
            return (f"torch: from the site's index in place of {self.named} ({TEST_ONLY_SWITCH}: a test-only "
                    f"stand-in, CUDA packages allowed, the image labelled so)")
        if self.index is None:
            return "torch: from the site's index (a CPU build there)"
        return f"torch: only from {redact(self.index)}" + (f" (the site's mirror of {self.named})" if self.mirrored
                                                           else "")


def test_only(environ: Mapping[str, str] | None = None) -> bool:
    """The switch is on only when set to exactly 1: "0", "false" or an empty value leave it off."""
    return (environ if environ is not None else os.environ).get(TEST_ONLY_SWITCH, "").strip() == "1"


def source(stack: Stack, arch: str, mirror: str | None = None, environ: Mapping[str, str] | None = None) -> TorchSource:
    """Where `stack`'s torch comes from on `arch`: the site's mirror (--torch-index-url) of the
    index the stack names, else that index; a stack that names none takes the site's index."""
    named = stack.torch.index.get(arch) if stack.torch else None
    if named is None:
        return TorchSource(None, None)
    if test_only(environ):
        return TorchSource(None, named, test_only=True)
    return TorchSource(mirror or named, named)


def check_mirror(url: str | None) -> None:
    """--torch-index-url: an http(s) URL without credentials. The torch layer's requirement
    file names it, and the image keeps its requirement files, so a password would land there."""
    if url is None:
        return
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UserError(f"--torch-index-url {url!r}: expected an http(s) URL of a PEP 503 index, like "
                        f"https://mirror.example.com/pytorch/whl/cpu")
    if parts.username or parts.password:
        raise UserError("--torch-index-url carries credentials: the torch layer's requirement file names this "
                        "index and the image keeps that file, so they would land in the image. Use a mirror that "
                        "answers without them, or put the site's mirror of PyTorch's index behind --pip-index-url's "
                        "proxy, which goes in as a secret")


def reach(src: TorchSource, net: Network, timeout: float = REACH_TIMEOUT, project: str = "torch") -> None:
    """The torch index answers for `project`, within seconds, before anything resolves or
    builds; otherwise an error naming it and the option that points at a mirror."""
    if src.index is None:
        return
    url = f"{src.index.rstrip('/')}/{project}/"
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"})
    try:
        with net.opener().open(request, timeout=timeout) as resp:
            resp.read(1)
    except (OSError, urllib.error.HTTPError) as exc:
        # An answer that is an error (404: not an index of torch) is the URL given; no answer is the network.
        answered = isinstance(exc, urllib.error.HTTPError)
        why = f"HTTP {exc.code}" if isinstance(exc, urllib.error.HTTPError) else str(getattr(exc, "reason", exc))
        raise (UserError if answered else NetworkError)(
            f"the torch index {redact(url)} does not answer ({why}, within {timeout:.0f} s). This stack takes torch "
            f"only from there: PyPI's torch is a CUDA build for this arch, so there is no fallback. Point at the "
            f"site's mirror of {src.named} with --torch-index-url URL (a PEP 503 index holding torch, its companions "
            f"and their wheels), or reach it through --proxy / --ca-bundle") from None


def cuda_packages(pins: Iterable[tuple[str, str]]) -> list[str]:
    """The CUDA packages among (name, version) pins: nvidia-*, cuda-*, a +cuNNN build."""
    return sorted(f"{n}=={v}" for n, v in pins if _CUDA_NAME.match(n) or _CUDA_LOCAL.search(v))


def refuse_cuda(found: list[str], where: str, src: TorchSource) -> None:
    if found and not src.test_only:
        shown = ", ".join(found[:6]) + (f" and {len(found) - 6} more" if len(found) > 6 else "")
        raise UserError(f"{where} would hold CUDA packages ({shown}): an NPU host cannot use them, and they mean "
                        f"torch came from an index with a CUDA build (PyPI's, for this arch). "
                        + (f"torch must come from {src.named}: check that it (or --torch-index-url's mirror) "
                           f"serves this torch release" if src.named else
                           "name a CPU index for this arch in the stack's torch_index"))

