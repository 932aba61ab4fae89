"""`docker run` for an NPU host, composed from what the host has: its davinci cards, the
devices and files of its kind (a 910B-class server or a 310B board: host/layout.py),
npu-smi wherever it lives, or the Ascend Docker Runtime; for a serving image, `vllm serve`
of a host folder on a published port (host/serving.py). Everything is read below `root`
so it can be checked against a stand-in host tree."""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from ..engine import Engine, Mount, RunSpec
from ..errors import UserError
from .layout import DRIVER_DIR, DRIVER_LIB, for_chip, layout_of
from .serving import Serve, vllm_argv

# What every 910B-class server has (kept for the cluster code and doctor's messages).
NPU_SMI = ("/usr/local/bin/npu-smi", "/usr/local/sbin/npu-smi")   # hosts differ


@dataclass(frozen=True)
class RunOptions:
    image: str
    command: tuple[str, ...] = ()
    devices: str = "all"          # "all", "0,1", "0-3"
    interactive: bool = True
    shm_size: str = "16g"         # PyTorch data loaders need more than docker's 64 MB
    ipc_host: bool = True
    network_host: bool = False
    runtime: str = "auto"         # auto | ascend | runc
    # Many cards: HCCL pins memory and opens many files; limits a training run needs.
    multi_card: bool = False
    env: tuple[tuple[str, str], ...] = ()
    mounts: tuple[tuple[str, str], ...] = ()      # (host path, container path), read-only
    cpuset: str = ""              # --cpuset-cpus: the cores of the container's ranks ("": every core)
    serve: Serve | None = None    # `vllm serve` of a host folder; `command` then holds vllm serve's own options


def host_cards(root: Path) -> list[int]:
    found = []
    for dev in (root / "dev").glob("davinci*"):
        m = re.fullmatch(r"davinci(\d+)", dev.name)
        if m:
            found.append(int(m.group(1)))
    return sorted(found)


def parse_devices(spec: str, available: list[int]) -> list[int]:
    if spec == "all":
        return available
    if not spec.strip():
        raise UserError("--devices '': expected all, a list like 0,1 or a range like 0-3")
    wanted: list[int] = []
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\s*-\s*(\d+))?\s*", part)
        if not m:
            raise UserError(f"--devices {spec!r}: expected all, a list like 0,1 or a range like 0-3")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if lo > hi:
            raise UserError(f"--devices {spec!r}: the range {lo}-{hi} runs backwards; write {hi}-{lo}")
        wanted += range(lo, hi + 1)
    missing = sorted(set(wanted) - set(available))
    if missing:
        raise UserError(f"--devices {spec}: no /dev/davinci{missing[0]} on this host; it has cards "
                        f"{', '.join(map(str, available))}")
    return sorted(set(wanted))


# What a 910B server has, for a preview composed on a machine without NPUs (a build machine).
SERVER_CARDS = list(range(8))


def compose(engine: Engine, opts: RunOptions, root: Path = Path("/"), runtimes: frozenset[str] = frozenset(),
            preview: bool = False, chip: str | None = None) -> list[str]:
    """The `run` argv for this host (the engine writes the flags from a RunSpec). Refuses a host with no NPU rather than
    starting a container that cannot see one; a `preview` (a dry run) on such a machine
    composes the command for a host of the image's `chip` (a 910B server, or a 310B board)
    with the usual layout instead."""
    cards = host_cards(root)
    assumed = preview and not cards
    layout = for_chip(chip) if assumed else layout_of(root)
    if assumed:
        cards = SERVER_CARDS[:layout.max_cards]
    elif not cards:
        raise UserError(f"no NPU on this host: no {root / 'dev'}/davinciN device. Is the Ascend driver installed "
                        f"(`npu-smi info` lists the cards)? The image runs without NPUs only as a plain "
                        f"`docker run {opts.image}`; `--dry` previews the command a 910B host would run.")
    chosen = parse_devices(opts.devices, cards)
    devices: list[str] = []
    mounts: list[Mount] = []
    env: list[tuple[str, str]] = []
    runtime = None
    use_runtime = opts.runtime == "ascend" or (opts.runtime == "auto" and "ascend" in runtimes)
    if opts.runtime == "ascend" and "ascend" not in runtimes:
        raise UserError("--runtime ascend: the engine has no `ascend` runtime; install the Ascend Docker Runtime "
                        "or use --runtime runc for plain device flags")
    if use_runtime:
        # The Ascend Docker Runtime adds the devices and driver mounts itself.
        runtime = "ascend"
        env += [("ASCEND_VISIBLE_DEVICES", ",".join(map(str, chosen))), *layout.runtime_env]
    else:
        here = (lambda path: True) if assumed else (lambda path: (root / path.lstrip("/")).exists())
        missing = [d for d in layout.control if not here(d)]
        if missing:
            raise UserError(f"the host ({layout}) has davinci cards but not {', '.join(missing)}: the driver is not "
                            f"fully installed")
        if not assumed and not (root / DRIVER_LIB.lstrip("/")).is_dir():
            raise UserError(f"{DRIVER_LIB} is missing on the host: torch_npu needs the driver's libraries")
        devices += [f"/dev/davinci{n}" for n in chosen]
        devices += [*layout.control, *(d for d in layout.extra_devices if here(d))]
        # The server's driver directory is required (checked above); the rest where present.
        host_mounts = [m for m in layout.mounts if m == DRIVER_DIR or here(m)]
        smi = next((p for p in NPU_SMI if here(p)), None)
        if smi:
            host_mounts.append(smi)
        mounts = [Mount(str(path if assumed else root / path.lstrip("/")), path) for path in host_mounts]
    opts = _serving(opts, len(chosen)) if opts.serve else opts
    argv = engine.run_argv(RunSpec(
        opts.image, tuple(opts.command), devices=tuple(devices), runtime=runtime, interactive=opts.interactive,
        # What every run takes besides the NPUs: memory, IPC, network, limits, cores, mounts, env.
        shm_size=opts.shm_size, ipc="host" if opts.ipc_host else None, network="host" if opts.network_host else None,
        ulimits=(("memlock", "-1:-1"), ("nofile", "65536:65536")) if opts.multi_card else (),
        cpuset=opts.cpuset or None, mounts=(*mounts, *(Mount(h, p) for h, p in opts.mounts)),
        env=(*env, *opts.env)), composed=True)
    if opts.serve and not opts.network_host:
        # RunSpec has no published ports: -p goes in just before the image
        image_at = len(argv) - len(opts.command) - 1
        argv[image_at:image_at] = ["-p", opts.serve.publish()]
    return argv


def _serving(opts: RunOptions, cards: int) -> RunOptions:
    """The run of `vllm serve` on `cards` NPUs: the user's command is vllm serve's options."""
    serve = opts.serve
    assert serve is not None
    # On the host network vLLM listens on the publish address itself (docker ignores -p there).
    listen = serve.address if opts.network_host else "0.0.0.0"
    return replace(opts, command=vllm_argv(serve.target, listen, serve.port, cards, tuple(opts.command)),
                   mounts=(*opts.mounts, (str(serve.model), serve.target)),
                   # A server others reach keeps its own IPC namespace: its workers share tensors
                   # through the /dev/shm of --shm-size (which --ipc=host would replace with the host's).
                   ipc_host=False,
                   multi_card=opts.multi_card or cards > 1)     # HCCL across the cards, as a launch
