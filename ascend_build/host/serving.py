"""`vllm serve` in a serving image (vLLM and vLLM-Ascend on a tested torch + torch_npu +
CANN image): the command both `invoke run --serve` (one host) and `invoke job --kind
serving` (a Kubernetes Deployment) start, and the checks on what the user gave for it.
The model is always a folder under /models in the container, mounted read-only."""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import UserError

MODELS = "/models"          # where the served model's folder is mounted
DEFAULT_PORT = 8000         # vLLM's own default
KIND = "serving"            # the io.ascend-build.kind label of an image with vLLM in it


def vllm_argv(model: str, host: str, port: int, cards: int, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """`vllm serve` of the model folder at `model` (a container path), split across `cards`
    NPUs by tensor parallelism; `extra` are the user's own vllm serve options."""
    return ("vllm", "serve", model, "--host", host, "--port", str(port), "--tensor-parallel-size", str(cards),
            *extra)


# What the commands set themselves: the model (vllm serve also takes it as --model), --host,
# --port, --tensor-parallel-size (-tp), and (one server on many nodes) the pipeline parallel
# size (-pp) and Ray as the executor. After `--`, one of them would come last and win: the
# API on every interface, a port nothing publishes, another number of cards.
SETS = ("model", "host", "port", "tensor-parallel-size", "pipeline-parallel-size", "distributed-executor-backend")
SHORT = {"-tp": "tensor-parallel-size", "-pp": "pipeline-parallel-size"}
# Which option of each command sets each of them.
_CARDS = "--devices: one shard per card"
RUN_SETS = {"model": "give the folder with --serve", "host": "give --publish-address (with --network-host vLLM "
            "listens on it)", "port": "give --port", "tensor-parallel-size": _CARDS,
            "pipeline-parallel-size": "one host's cards are one tensor parallel group (--devices)",
            "distributed-executor-backend": "one host's cards need no Ray"}
JOB_SETS = {"model": "give --model", "host": "the pod listens on 0.0.0.0, behind its Service", "port": "give --port",
            "tensor-parallel-size": _CARDS,
            "pipeline-parallel-size": "--nodes and --parallel: pipeline stages over the nodes, or tensor over all",
            "distributed-executor-backend": "across nodes it is Ray, which the pods start"}


def _sets(arg: str) -> str | None:
    """The option of SETS an argument names, in any spelling vllm serve's parser reads as it:
    --flag or --flag=value, with '_' for '-' (vLLM reads both), or a prefix of at least two
    letters (argparse takes an unambiguous abbreviation)."""
    flag = arg.split("=", 1)[0]
    if flag in SHORT:
        return SHORT[flag]
    if not flag.startswith("--"):
        return None
    name = flag[2:].replace("_", "-")
    return next((own for own in SETS if name == own or (len(name) >= 2 and own.startswith(name))), None)


def check_extra(extra: tuple[str, ...] | list[str], example: str,
                own: dict[str, str] | None = None) -> tuple[str, ...]:
    """What comes after `--` when serving: vllm serve's own options, never a command (the
    command is vllm serve), and none that the command sets itself (`own`: which of its
    options sets each)."""
    if extra and not extra[0].startswith("-"):
        raise UserError(f"serving runs `vllm serve` itself: after -- come its options (e.g. -- --max-model-len "
                        f"8192), not a command ({extra[0][:80]!r}); for a command of your own leave out {example}")
    for arg in extra:
        found = _sets(arg)
        if found is not None:
            said = (own or {}).get(found)
            raise UserError(f"-- {arg[:80]}: vllm serve's --{found} is set by this command"
                            + (f" ({said})" if said else "") + "; what follows -- cannot undo it: leave it out")
    return tuple(extra)


@dataclass(frozen=True)
class Serve:
    """A model folder of this host served on a port of one of its addresses. The address
    is loopback unless the user says otherwise: vLLM's API has no authentication."""
    model: Path                 # the host's folder, absolute
    port: int = DEFAULT_PORT
    address: str = "127.0.0.1"

    @property
    def target(self) -> str:
        return f"{MODELS}/{self.model.name}"

    def publish(self) -> str:
        """docker's -p value (an IPv6 address in brackets)."""
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{host}:{self.port}:{self.port}"


def serve_on_host(model: str, port: int, address: str) -> Serve:
    """The --serve folder and --publish-address checked as docker will take them."""
    try:
        folder = Path(model).expanduser().resolve()
        found = "folder" if folder.is_dir() else "file" if folder.exists() else ""
    except (OSError, ValueError) as exc:       # a name too long, a NUL byte: not a path of this host
        raise UserError(f"--serve {model[:80]!r}: not a folder this host can open ({exc})") from None
    if found != "folder":
        what = "a file, not a folder" if found else "no such folder"
        raise UserError(f"--serve {model[:200]}: {what}; give the folder holding the model's config.json and "
                        f"weights, e.g. --serve /data/models/Qwen2.5-7B-Instruct")
    if folder == Path(folder.anchor):
        # the host's root (given, or a link to it) would be mounted at /models/ and served whole
        raise UserError(f"--serve {model[:200]}: that is the host's root folder{' (a link to /)' if model != '/' else ''}"
                        f"; give the model's own folder, e.g. --serve /data/models/Qwen2.5-7B-Instruct")
    if ":" in str(folder) or "," in str(folder):
        # docker's -v splits on ':' (and --mount on ','): such a path cannot be mounted as given
        raise UserError(f"--serve {model}: a path with ':' or ',' cannot be mounted into a container; link or "
                        f"move the folder to a path without them")
    if not 1 <= port <= 65535:
        raise UserError(f"--port {port}: expected a whole number from 1 to 65535")
    try:
        ipaddress.ip_address(address)
    except ValueError:
        raise UserError(f"--publish-address {address!r}: an IP address of this host, e.g. 127.0.0.1 (this host "
                        f"only, the default) or 0.0.0.0 (every interface)") from None
    return Serve(folder, port, address)


def model_in_claim(model: str) -> str:
    """The folder of a model inside a volume (a claim mounted at /models): a relative path
    that stays inside it."""
    path = PurePosixPath(model)
    if path.is_absolute() or not path.parts or ".." in path.parts or "\\" in model or \
            re.search(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]", model) or len(model) > 4096:
        raise UserError(f"--model {model[:120]!r}: the model's folder inside --model-claim, a relative path like "
                        f"Qwen2.5-7B-Instruct or org/Qwen2.5-7B-Instruct (it is served as {MODELS}/<this>)")
    return str(path)
