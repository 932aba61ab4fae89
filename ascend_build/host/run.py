"""`docker run` for a 910B host, composed from what the host has: its davinci cards, the
driver's devices and files, npu-smi wherever it lives, or the Ascend Docker Runtime.
Everything is read below `root` so it can be checked against a stand-in host tree."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError

CONTROL_DEVICES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
DRIVER_DIR = "/usr/local/Ascend/driver"
DRIVER_LIB = "/usr/local/Ascend/driver/lib64"
# The whole driver directory goes in read-only, not lib64 alone: hccn_tool (driver/tools)
# and the topology files (driver/topo) are read by HCCL ("Failed to get device ip from
# hccn.conf and hccn_tool", EI0014). /etc/hccn.conf holds the cards' RoCE addresses.
OPTIONAL_MOUNTS = ("/usr/local/dcmi", "/etc/ascend_install.info", "/etc/hccn.conf")
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
    wanted: list[int] = []
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\s*-\s*(\d+))?\s*", part)
        if not m:
            raise UserError(f"--devices {spec!r}: expected all, a list like 0,1 or a range like 0-3")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        wanted += range(lo, hi + 1)
    missing = sorted(set(wanted) - set(available))
    if missing:
        raise UserError(f"--devices {spec}: no /dev/davinci{missing[0]} on this host; it has cards "
                        f"{', '.join(map(str, available))}")
    return sorted(set(wanted))


# What a 910B server has, for a preview composed on a machine without NPUs (a build machine).
SERVER_CARDS = list(range(8))


def compose(client: str, opts: RunOptions, root: Path = Path("/"), runtimes: frozenset[str] = frozenset(),
            preview: bool = False) -> list[str]:
    """The docker run argv for this host. Refuses a host with no NPU rather than
    starting a container that cannot see one; a `preview` (a dry run) on such a machine
    composes the command for a 910B server with the usual layout instead."""
    cards = host_cards(root)
    assumed = preview and not cards
    if assumed:
        cards = SERVER_CARDS
    elif not cards:
        raise UserError(f"no NPU on this host: no {root / 'dev'}/davinciN device. Is the Ascend driver installed "
                        f"(`npu-smi info` lists the cards)? The image runs without NPUs only as a plain "
                        f"`docker run {opts.image}`; `--dry` previews the command a 910B host would run.")
    chosen = parse_devices(opts.devices, cards)
    cmd = [client, "run", "--rm"] + (["-it"] if opts.interactive else [])
    use_runtime = opts.runtime == "ascend" or (opts.runtime == "auto" and "ascend" in runtimes)
    if opts.runtime == "ascend" and "ascend" not in runtimes:
        raise UserError("--runtime ascend: the engine has no `ascend` runtime; install the Ascend Docker Runtime "
                        "or use --runtime runc for plain device flags")
    if use_runtime:
        # The Ascend Docker Runtime adds the devices and driver mounts itself.
        cmd += ["--runtime", "ascend", "-e", f"ASCEND_VISIBLE_DEVICES={','.join(map(str, chosen))}"]
    else:
        here = (lambda path: True) if assumed else (lambda path: (root / path.lstrip("/")).exists())
        missing = [d for d in CONTROL_DEVICES if not here(d)]
        if missing:
            raise UserError(f"the host has davinci cards but not {', '.join(missing)}: the driver is not fully "
                            f"installed")
        if not assumed and not (root / DRIVER_LIB.lstrip("/")).is_dir():
            raise UserError(f"{DRIVER_LIB} is missing on the host: torch_npu needs the driver's libraries")
        for n in chosen:
            cmd += ["--device", f"/dev/davinci{n}"]
        for dev in CONTROL_DEVICES:
            cmd += ["--device", dev]
        mounts = [DRIVER_DIR] + [p for p in OPTIONAL_MOUNTS if here(p)]
        smi = next((p for p in NPU_SMI if here(p)), None)
        if smi:
            mounts.append(smi)
        for path in mounts:
            cmd += ["-v", f"{path if assumed else root / path.lstrip('/')}:{path}:ro"]
    cmd += [f"--shm-size={opts.shm_size}"]
    if opts.ipc_host:
        cmd += ["--ipc=host"]
    if opts.network_host:
        cmd += ["--network=host"]
    if opts.multi_card:
        cmd += ["--ulimit", "memlock=-1:-1", "--ulimit", "nofile=65536:65536"]
    for host_path, path in opts.mounts:
        cmd += ["-v", f"{host_path}:{path}:ro"]
    for key, value in opts.env:
        cmd += ["-e", f"{key}={value}"]
    cmd.append(opts.image)
    cmd += list(opts.command)
    return cmd
