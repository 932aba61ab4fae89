"""A real two-node run of the launch this project generates, without NPUs: two containers
of the arm64 2.1.0 image (the lane's tested build), each on its own address of a Docker
network (its own network namespace), started with the flags and environment `invoke run
--hostfile` prints for that node, minus what needs a 910B host (the davinci devices, the
driver and hccn.conf mounts) and with the test network in place of --network host. torchrun
runs 2 processes per node with the gloo backend and checks an all_reduce over the 4 ranks.
The stand-in server has 2 NUMA nodes of 1 core each (cores 0 and 1) and 2 cards, one per
node, so the plan binds local rank 0 to core 0 and rank 1 to core 1: each rank prints the
cores it may run on and the CPU_AFFINITY_CONF it received. This proves the launch wiring
(ranks, rendezvous, environment, binding); HCCL itself cannot run without NPUs.

Then the script an AscendJob runs, inside the image, with a stand-in of what the Ascend
operator injects and its rank table ConfigMap mounted: torchrun starts with the right ranks,
each bound within the cores the container got."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
import uuid

import pytest

from ascend_build.cluster import binding, k8s
from ascend_build.matrix import load_matrix
from tests.doubles.cluster_hosts import make_server
from tests.doubles.host_roots import add_numa
from tests.integration.conftest import REPO, ROOT

ALL_REDUCE = """\
import os
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
assert value.item() == world * (world + 1) / 2, value
cores = ",".join(map(str, sorted(os.sched_getaffinity(0))))
print(f"rank {rank} of {world} on node {os.environ['NODE_RANK']} local {os.environ['LOCAL_RANK']}: all_reduce "
      f"{value.item():.0f}, table {os.environ.get('RANK_TABLE_FILE', 'none')}, cores {cores}, "
      f"conf {os.environ.get('CPU_AFFINITY_CONF', 'none')} end", flush=True)
dist.destroy_process_group()
"""

# The processes of a node print at once: their lines may run together.
REPORT = re.compile(r"rank (\d+) of (\d+) on node (\d+) local (\d+): all_reduce (\d+), table (none|/\S+?\.json), "
                    r"cores ([\d,]+), conf (none|[\d,:npu-]+?) end")

# What needs a 910B host: dropped here, each with its argument.
HOST_ONLY = ("--device",)


def _refused_ulimits(engine, image: str, cmd: list[str]) -> set[str]:
    """The generated --ulimit values this engine cannot set: a 910B host's daemon (systemd,
    LimitNOFILE/LimitMEMLOCK raised) takes them; a sandboxed daemon whose own limits are
    lower refuses them ('error setting rlimit type 7/8: operation not permitted')."""
    refused = set()
    for i, word in enumerate(cmd):
        if word == "--ulimit":
            probe = subprocess.run(engine.command("run", "--rm", "--platform", "linux/arm64", "--ulimit", cmd[i + 1],
                                                  image, "true"), capture_output=True, text=True)
            if probe.returncode != 0:
                refused.add(cmd[i + 1])
    return refused


def _without_host_only(cmd: list[str], network: str, ip: str, work: str, refused: set[str] = frozenset()) -> list[str]:
    out, skip = [], False
    for i, word in enumerate(cmd):
        if skip:
            skip = False
            continue
        if word in HOST_ONLY or (word == "--ulimit" and cmd[i + 1] in refused):
            skip = True
            continue
        if word == "-v" and ("/usr/local/Ascend" in cmd[i + 1] or "hccn" in cmd[i + 1] or "npu-smi" in cmd[i + 1]):
            skip = True
            continue
        if word == "--network=host":
            out += ["--network", network, "--ip", ip]
            continue
        out.append(word)
    run = out.index("run") + 1
    return out[:run] + ["-v", f"{work}:/check:ro", "-e", "GLOO_SOCKET_IFNAME=eth0"] + out[run:]


@pytest.fixture(scope="module")
def image(built, pinned_matrix):
    cell = load_matrix(pinned_matrix).cell("2.1.0", "debian12", "3.11", None, "linux/arm64")
    return f"{REPO}:{cell.name}-arm64"


@pytest.fixture(scope="module")
def network(engine):
    name = f"ascend-build-test-{uuid.uuid4().hex[:8]}"
    made = subprocess.run(engine.command("network", "create", "--subnet", "172.31.77.0/24", name),
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    yield name
    subprocess.run(engine.command("network", "rm", name), capture_output=True)


def _conf_mode(pinned_matrix) -> int:
    """The CPU_AFFINITY_CONF mode the 2.1.0 line's torch_npu reads (its Extension release)."""
    stack = load_matrix(pinned_matrix).stacks["2.1.0"]
    return binding.torch_npu_binding(binding.extension_release(stack.torch.npu_branch), stack.cann).mode


def test_two_nodes_two_processes_each_all_reduce_over_gloo_each_rank_on_its_core(engine, image, network, tmp_path,
                                                                                pinned_matrix):
    work = tmp_path / "work"
    work.mkdir()
    (work / "all_reduce.py").write_text(ALL_REDUCE)
    hosts = ["172.31.77.10", "172.31.77.11"]
    (tmp_path / "hosts").write_text("\n".join(hosts) + "\n")
    # 2 NUMA nodes x 1 core, card 0 on node 0 and card 1 on node 1 (this machine has cores 0 and 1).
    server = add_numa(make_server(tmp_path / "server", 0, cards=2), {0: "0", 1: "1"}, [0, 1], allowed="0-1")
    out = subprocess.run([sys.executable, "-m", "invoke", "run", "--dry", "--image", image, "--hostfile",
                          str(tmp_path / "hosts"), "--devices", "0-1", "--runtime", "runc", "--host-root", str(server),
                          "--hccl-timeout", "600", "--bind-min-cores", "1", "--", "/check/all_reduce.py"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    print(out.stdout)
    plan = [line for line in out.stdout.splitlines() if line.startswith("#   rank ")]
    assert plan == ["#   rank 0: card 0 (NUMA node 0), cores 0 (1)", "#   rank 1: card 1 (NUMA node 1), cores 1 (1)"]
    commands = [shlex.split(line) for line in out.stdout.splitlines() if not line.startswith("#")]
    assert len(commands) == 2 and all("--network=host" in c for c in commands)
    mode = _conf_mode(pinned_matrix)
    conf = f"{mode},npu0:0-0,npu1:1-1" if mode else "none"
    for cmd in commands:
        assert "--cpuset-cpus=0-1" in cmd and "ASCEND_BUILD_RANK_CPUS=0 1" in cmd
        assert (f"CPU_AFFINITY_CONF={conf}" in cmd) == bool(mode)
    names = [f"{network}-node{n}" for n in range(2)]
    refused = _refused_ulimits(engine, image, commands[0])
    if refused:
        print(f"NOTE: this engine's daemon runs with lower limits than {', '.join(sorted(refused))}: left out here "
              f"(`invoke doctor --explain` names the fix for a host whose daemon does this)")
    procs = []
    for n, cmd in enumerate(commands):
        cmd = _without_host_only(cmd, network, hosts[n], str(work), refused)
        cmd.insert(cmd.index("run") + 1, f"--name={names[n]}")
        cmd.insert(cmd.index("run") + 1, "--platform=linux/arm64")
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    try:
        outputs = [p.communicate(timeout=900)[0] for p in procs]
    finally:
        subprocess.run(engine.command("rm", "-f", *names), capture_output=True)
    print("\n".join(outputs))
    assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-3000:] for o in outputs)
    reports = sorted(REPORT.findall("".join(outputs)))
    # Every rank on the core of its card's node, and torch_npu told the same ranges.
    assert reports == [(str(r), "4", str(r // 2), str(r % 2), "10", "none", str(r % 2), conf) for r in range(4)], outputs


def test_the_ascendjob_launch_script_in_the_image_starts_the_right_ranks(engine, image, tmp_path):
    """A stand-in of the operator's environment for a 1-pod job of 2 processes, and its
    rank table at the ConfigMap's mount point: the script runs torchrun, the ranks meet."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "all_reduce.py").write_text(ALL_REDUCE)
    table = tmp_path / "config"
    table.mkdir()
    (table / "hccl.json").write_text('{"status": "completed", "version": "1.0", "server_count": "1"}')
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29517", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
           "RANK": "0", "NODE_RANK": "0", "ASCEND_BUILD_MIN_CORES": "1", "ASCEND_BUILD_AFFINITY": "2"}
    # The pod's cores are what its cgroup allows (the kubelet's cpuset): cores 0 and 1 here.
    cmd = engine.command("run", "--rm", "--platform", "linux/arm64", "--cpuset-cpus=0-1", "-v", f"{work}:/check:ro",
                         "-v", f"{table}:{k8s.RANK_TABLE_DIR}:ro",
                         *[x for k, v in env.items() for x in ("-e", f"{k}={v}")], image,
                         "/bin/bash", "-c", k8s.launch_script(), "ascend-launch", "/check/all_reduce.py")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "ascend-build launch: node 0 of 1, 2 processes, master 127.0.0.1:29517" in out.stdout
    assert "ascend-build launch: local rank 1: cores 1 (1)" in out.stderr, out.stderr
    reports = sorted(REPORT.findall(out.stdout))
    assert reports == [(str(r), "2", "0", str(r), "3", f"{k8s.RANK_TABLE_DIR}/hccl.json", str(r),
                        "2,npu0:0-0,npu1:1-1") for r in range(2)], out.stdout
