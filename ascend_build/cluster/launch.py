"""A training run on many cards and many hosts with plain docker: one container per host,
each started with the flags multi-node jobs need (host network, host IPC, memlock and
open-file limits, the whole driver directory and /etc/hccn.conf, HCCL's connect timeout)
and the framework's launcher: torchrun for torch_npu's `hccl` backend, msrun for MindSpore
(node 0's msrun starts MindSpore's scheduler beside its workers); a CANN-only image has none
and is refused here (one command on its cards is `invoke run`'s). The per-node commands are
printed, or run over ssh where the user asks; nothing here schedules anything."""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .. import console
from .. import engine as eng
from ..errors import UserError
from ..matrix.frameworks import FRAMEWORKS, Framework
from ..matrix.frameworks import get as get_framework
from .binding import Plan

MASTER_PORT = 29500
# torch_npu warns below 300 s; large jobs start ranks minutes apart (EI0006 after 120 s).
HCCL_TIMEOUT = 1800
HCCL_TIMEOUT_FLOOR = 300
RANK_TABLE_IN_CONTAINER = "/etc/ascend-build/hccl.json"
MSRUN_LOG_DIR = "msrun_log"      # msrun writes scheduler.log and worker_N.log here (the working dir)
RANK_CPUS = "ASCEND_BUILD_RANK_CPUS"     # each local rank's CPU list, space-separated, in rank order

# torchrun starts every rank itself, so each is started through this (torchrun --no_python
# sh -c RANK_WRAPPER script args): it takes its own CPU list by LOCAL_RANK and execs the
# script under taskset (or numactl, whichever the image has), as torchrun would run it
# (python -u). Dataloader workers forked later inherit the binding. One line, so that a
# printed `docker run` stays one line.
RANK_WRAPPER = "; ".join([
    'cpus=""; i=0',
    'for c in ${ASCEND_BUILD_RANK_CPUS:-}; do [ "$i" = "${LOCAL_RANK:-0}" ] && cpus="$c"; i=$((i + 1)); done',
    'if [ -z "$cpus" ]; then echo "ascend-build: no cores planned for local rank ${LOCAL_RANK:-?} '
    '(ASCEND_BUILD_RANK_CPUS: ${ASCEND_BUILD_RANK_CPUS:-unset})" >&2; exit 2; fi',
    'if command -v taskset >/dev/null 2>&1; then exec taskset -c "$cpus" python -u "$0" "$@"; fi',
    'if command -v numactl >/dev/null 2>&1; then exec numactl --physcpubind="$cpus" python -u "$0" "$@"; fi',
    'echo "ascend-build: neither taskset nor numactl in the image: local rank ${LOCAL_RANK:-?} cannot be bound to '
    '$cpus (--bind off starts ranks unbound)" >&2',
    "exit 127"])


DEFAULT = next(iter(FRAMEWORKS.values()))       # an image nothing says more of: torch's


# A readable tag without a framework word after its Python: a CANN-only image's
# (cann8.0.rc3-910b-debian12-py3.11, then -nonnal, -uidN, the arch).
_BARE_TAG = re.compile(r"(^|[:/])cann[0-9][^-:/]*-[^-]+-[^-]+-py3\.[0-9]+(-nonnal)?(-uid[0-9]+)?(-arm64|-amd64)?$")


def named_in(fw: Framework, image: str) -> bool:
    """The image's name says the framework: its tag word (mindspore), or for one without a word
    (CANN only) a readable tag that names no framework."""
    if fw.tag_word:
        return fw is not DEFAULT and fw.tag_word in image.lower()
    return bool(_BARE_TAG.search(image.lower()))


def framework_of(image: str, labeled: str | None, asked: str = "auto") -> tuple[Framework, str]:
    """(framework, why): as asked, else the image's own label, else its name (its framework's
    word in it: mindspore<release>; a readable tag with none: CANN only), else the first
    framework (torch)."""
    if asked != "auto":
        return get_framework(asked), "--framework"
    if labeled in FRAMEWORKS:
        return FRAMEWORKS[labeled], "the image's labels"
    named = [f for f in FRAMEWORKS.values() if named_in(f, image)]
    if named:
        return named[0], "the image's name (not here to read its labels)"
    others = ", ".join(f"--framework {f.name} for {f.title}" for f in FRAMEWORKS.values()
                       if f is not DEFAULT and f.launcher)     # the choice is of a launcher
    return DEFAULT, f"default (the image is not here to read its labels; {others})"


def launcher_of(framework: Framework, why: str = "") -> Launcher:
    """The framework's launcher, or why there is none: a CANN-only image has no ranks to start."""
    if framework.launcher in LAUNCHERS:
        return LAUNCHERS[framework.launcher]
    having = ", ".join(f"{f.title} ({f.launcher})" for f in FRAMEWORKS.values() if f.launcher)
    raise UserError(f"the image is {framework.title}" + (f", by {why}" if why else "") + ": it has no launcher "
                    f"to start ranks with (torchrun, msrun: no --torchrun, --msrun, --hostfile or `invoke job`). "
                    f"Run one command on its cards with `invoke run --image IMAGE -- CMD`, or use a framework's "
                    f"image: {having}")


def framework_for(engine, image: str, asked: str = "auto") -> tuple[Framework, str]:
    """framework_of, with the labels of the image where the engine has it (read only when
    --framework does not say already)."""
    from ..host.doctor import read_image
    facts = read_image(engine, image) if asked == "auto" else None
    return framework_of(image, facts.framework if facts else None, asked)


def read_hostfile(path: Path) -> list[str]:
    """One host per line (`host` or `host slots=8`), # comments; the first is the master."""
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise UserError(f"--hostfile {path}: {exc.strerror}") from None
    hosts = []
    for n, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        host = text.split()[0]
        if not re.fullmatch(r"[A-Za-z0-9_.:@-]+", host):
            raise UserError(f"{path}:{n}: {host!r} is not a host name or address")
        hosts.append(host)
    if not hosts:
        raise UserError(f"--hostfile {path}: no hosts in it")
    if len(set(hosts)) != len(hosts):
        raise UserError(f"--hostfile {path}: a host is listed twice")
    return hosts


@dataclass(frozen=True)
class Launch:
    command: tuple[str, ...]         # the training script and its arguments (the launcher runs it)
    hosts: tuple[str, ...] = ("localhost",)
    nproc: int = 8                   # processes (cards) per host
    master_port: int = MASTER_PORT
    hccl_timeout: int = HCCL_TIMEOUT
    rank_table: Path | None = None   # hccl.json (invoke ranktable), mounted read-only
    framework: Framework = DEFAULT
    plan: Plan | None = None         # each local rank's cores (None or off: unbound)
    affinity: int = 0                # torch_npu's CPU_AFFINITY_CONF mode (0: not set)

    @property
    def bound(self) -> bool:
        return self.plan is not None and self.plan.bound

    @property
    def master(self) -> str:
        return self.hosts[0].split("@")[-1]

    @property
    def launcher(self) -> Launcher:
        return launcher_of(self.framework)

    def check(self) -> list[str]:
        """Refusals (raised) and warnings (returned)."""
        if not self.command:
            raise UserError("nothing to run: put the training script after --, e.g. -- train.py --epochs 1")
        if self.nproc < 1:
            raise UserError(f"--nproc-per-node {self.nproc}: at least 1")
        warnings = []
        if self.hccl_timeout < HCCL_TIMEOUT_FLOOR:
            warnings.append(f"--hccl-timeout {self.hccl_timeout}: below {HCCL_TIMEOUT_FLOOR} s torch_npu warns, and "
                            f"ranks that start late fail with EI0006 (Getting socket times out)")
        low, high = self.launcher.ports
        if not low <= self.master_port <= high:
            raise UserError(f"--master-port {self.master_port}: {self.launcher.name} takes a port from {low} to {high}")
        return warnings

    def env(self, node_rank: int) -> dict[str, str]:
        """What each container gets: the launcher's rendezvous and HCCL's settings."""
        env = {"MASTER_ADDR": self.master, "MASTER_PORT": str(self.master_port), "NNODES": str(len(self.hosts)),
               "NODE_RANK": str(node_rank), "NPROC_PER_NODE": str(self.nproc),
               "WORLD_SIZE": str(len(self.hosts) * self.nproc), "HCCL_CONNECT_TIMEOUT": str(self.hccl_timeout)}
        if self.rank_table:
            env["RANK_TABLE_FILE"] = RANK_TABLE_IN_CONTAINER
        if self.plan is not None and self.bound:
            env[RANK_CPUS] = self.plan.rank_cpus()
            conf = self.plan.affinity_conf(self.affinity) if self.launcher.affinity else None
            if conf:
                env["CPU_AFFINITY_CONF"] = conf
        return env

    def argv(self, node_rank: int) -> list[str]:
        """The framework's launcher for one node, with the training command after it."""
        return self.launcher.argv(self, node_rank)

    def mounts(self) -> tuple[tuple[str, str], ...]:
        return ((str(self.rank_table), RANK_TABLE_IN_CONTAINER),) if self.rank_table else ()


def _torchrun(launch: Launch, node_rank: int) -> list[str]:
    wrapper = ["--no_python", "sh", "-c", RANK_WRAPPER] if launch.bound else []
    return ["torchrun", f"--nnodes={len(launch.hosts)}", f"--node_rank={node_rank}",
            f"--nproc_per_node={launch.nproc}", f"--master_addr={launch.master}",
            f"--master_port={launch.master_port}", *wrapper, *launch.command]


def _msrun(launch: Launch, node_rank: int) -> list[str]:
    """MindSpore's launcher: its scheduler on the master (msrun sees its own address),
    the workers' ranks by node, and it waits for them (--join) so the container's exit
    code is the job's; msrun's cluster time-out is HCCL's."""
    table = [f"--rank_table_file={RANK_TABLE_IN_CONTAINER}"] if launch.rank_table else []
    # msrun binds its workers itself, given each device's ranges (the container's cpuset holds them all).
    bind = [f"--bind_core={launch.plan.msrun_bind_core()}"] if launch.plan is not None and launch.bound else []
    return ["msrun", f"--worker_num={len(launch.hosts) * launch.nproc}", f"--local_worker_num={launch.nproc}",
            f"--master_addr={launch.master}", f"--master_port={launch.master_port}", f"--node_rank={node_rank}",
            f"--log_dir={MSRUN_LOG_DIR}", "--join=True", f"--cluster_time_out={launch.hccl_timeout}",
            *bind, *table, *launch.command]


@dataclass(frozen=True)
class Launcher:
    """How a framework's ranks start on one node (a Framework record names its launcher)."""
    name: str
    argv: Callable[[Launch, int], list[str]] = field(repr=False)
    # Each rank bound through the per-rank wrapper and torch_npu's CPU_AFFINITY_CONF;
    # otherwise the launcher binds its workers itself (msrun --bind_core).
    affinity: bool
    ports: tuple[int, int]           # the master ports it accepts
    # In an AscendJob: a Scheduler pod (no NPUs) beside the workers, rather than a Master worker.
    scheduler_pod: bool


LAUNCHERS: dict[str, Launcher] = {x.name: x for x in (
    Launcher("torchrun", _torchrun, affinity=True, ports=(1, 65535), scheduler_pod=False),
    Launcher("msrun", _msrun, affinity=False, ports=(1024, 65535), scheduler_pod=True),
)}


def over_ssh(host: str, argv: list[str]) -> list[str]:
    """The command run on `host` by ssh (BatchMode: no password prompt hangs a launch)."""
    return ["ssh", "-o", "BatchMode=yes", host, shlex.join(argv)]


def node_commands(engine: eng.Engine, launch: Launch, image: str, devices: str, root: Path,
                  runtimes: frozenset[str], runtime: str = "auto", shm_size: str = "16g") -> list[list[str]]:
    """One `docker run` per host, in node-rank order. The hosts are not read from here:
    each command is composed for the usual 910B layout (or this host's, when it has
    cards), with host networking, which HCCL needs across servers."""
    from ..host.run import RunOptions, compose
    commands = []
    for rank in range(len(launch.hosts)):
        opts = RunOptions(image=image, command=tuple(launch.argv(rank)), devices=devices, interactive=False,
                          shm_size=shm_size, network_host=True, runtime=runtime, multi_card=True,
                          env=tuple(launch.env(rank).items()), mounts=launch.mounts(),
                          cpuset=launch.plan.cpuset if launch.plan is not None and launch.bound else "")
        commands.append(compose(engine, opts, root, runtimes, preview=True))
    return commands


@dataclass(frozen=True)
class LaunchRequest:
    """`invoke run` with a launcher: the image, which cards and hosts, how ranks start and bind."""
    image: str
    command: tuple[str, ...]
    devices: str = "all"
    runtime: str = "auto"
    shm_size: str = "16g"
    host_root: Path = Path("/")
    hostfile: Path | None = None
    nproc: int | None = None
    master_port: int = MASTER_PORT
    hccl_timeout: int = HCCL_TIMEOUT
    rank_table: Path | None = None
    node_rank: int | None = None
    ssh: bool = False
    framework: str = "auto"
    bind: str = "numa"
    min_cores: int = 5
    matrix: Path = Path("matrix.yaml")       # whose stacks say which CPU_AFFINITY_CONF an image's torch_npu reads
    dry: bool = False                        # print each node's command, run none


def plan_launch(req: LaunchRequest, client: eng.Engine) -> tuple[Launch, list[list[str]]]:
    """The launch and each node's command, every rank bound to its cores: the image's
    launcher (torchrun or msrun) on every chosen card, on this host or each of a hostfile's."""
    from ..host.run import SERVER_CARDS, host_cards, parse_devices
    from . import binding
    hosts = tuple(read_hostfile(req.hostfile)) if req.hostfile else ("localhost",)
    count = req.nproc if req.nproc else len(parse_devices(req.devices, host_cards(req.host_root) or SERVER_CARDS))
    table = req.rank_table.resolve() if req.rank_table else None
    if table and not table.is_file():
        raise UserError(f"--rank-table {req.rank_table}: no such file (write one with `invoke ranktable`)")
    if req.node_rank is not None and not 0 <= req.node_rank < len(hosts):
        raise UserError(f"--node-rank {req.node_rank}: the hostfile has nodes 0-{len(hosts) - 1}")
    chosen, why = framework_for(client, req.image, req.framework)
    launcher = launcher_of(chosen, why)
    console.note(f"# launcher: {launcher.name} ({chosen.name}, by {why})")
    cores = binding.plan_for_host(binding.parse_bind(req.bind, req.min_cores), req.host_root, req.devices, count)
    affinity = (binding.affinity_for(client, req.image, req.matrix)
                if launcher.affinity and cores.bound else None)
    say = console.show if req.dry else console.note
    for line in cores.lines() + ([f"torch_npu: CPU_AFFINITY_CONF mode {affinity.mode} ({affinity.why})"]
                                 if affinity else []):
        say(f"# {line}")
    launch = Launch(req.command, hosts, count, req.master_port, req.hccl_timeout, table, chosen, cores,
                    affinity.mode if affinity else 0)
    for warning in launch.check():
        console.warn(warning)
    runtimes = client.runtimes() if not req.dry and req.runtime == "auto" else frozenset()
    return launch, node_commands(client, launch, req.image, req.devices, req.host_root, runtimes, req.runtime,
                                 req.shm_size)


def launch(req: LaunchRequest, client: eng.Engine) -> int:
    """Run (or, dry or for a hostfile without --node-rank and --ssh, print) each node's
    command; the exit code of the one run here, or of the first node over ssh that failed."""
    import subprocess
    run, commands = plan_launch(req, client)
    hosts = run.hosts
    if req.dry or (req.hostfile and req.node_rank is None and not req.ssh):
        for rank, (host, cmd) in enumerate(zip(hosts, commands)):
            console.show(f"# node {rank} of {len(hosts)}: on {host}" + (" (master)" if rank == 0 else ""))
            console.show(eng.show(over_ssh(host, cmd) if req.ssh else cmd))
        if not req.dry:
            console.show("# run each line on its host (or --node-rank N there, or --ssh from here)")
        return 0
    if req.ssh:
        procs = [subprocess.Popen(over_ssh(host, cmd)) for host, cmd in zip(hosts, commands)]
        codes = [p.wait() for p in procs]
        return next((code for code in codes if code), 0)
    return subprocess.run(commands[req.node_rank or 0]).returncode
