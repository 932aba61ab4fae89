"""A real two-node run of the launch this project generates, without NPUs: two containers
of the arm64 2.1.0 image (the lane's tested build), each on its own address of a Docker
network (its own network namespace), started with the flags and environment `invoke run
--hostfile` prints for that node, minus what needs a 910B host (the davinci devices, the
driver and hccn.conf mounts) and with the test network in place of --network host. torchrun
runs 2 processes per node with the gloo backend and checks an all_reduce over the 4 ranks.
This proves the launch wiring (ranks, rendezvous, environment); HCCL itself cannot run
without NPUs.

Then the script an AscendJob runs, inside the image, with a stand-in of what the Ascend
operator injects and its rank table ConfigMap mounted: torchrun starts with the right ranks."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
import uuid

import pytest

from ascend_build.cluster import k8s
from ascend_build.matrix import load_matrix
from tests.doubles.cluster_hosts import make_server
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
print(f"rank {rank} of {world} on node {os.environ['NODE_RANK']}: all_reduce {value.item():.0f}, "
      f"table {os.environ.get('RANK_TABLE_FILE', 'none')}", flush=True)
dist.destroy_process_group()
"""

# The processes of a node print at once: their lines may run together.
REPORT = re.compile(r"rank (\d+) of (\d+) on node (\d+): all_reduce (\d+), table (none|/\S+?\.json)")

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


def test_two_nodes_two_processes_each_all_reduce_over_gloo(engine, image, network, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "all_reduce.py").write_text(ALL_REDUCE)
    hosts = ["172.31.77.10", "172.31.77.11"]
    (tmp_path / "hosts").write_text("\n".join(hosts) + "\n")
    server = make_server(tmp_path / "server", 0)
    out = subprocess.run([sys.executable, "-m", "invoke", "run", "--dry", "--image", image, "--hostfile",
                          str(tmp_path / "hosts"), "--devices", "0-1", "--runtime", "runc", "--host-root", str(server),
                          "--hccl-timeout", "600", "--", "/check/all_reduce.py"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    commands = [shlex.split(line) for line in out.stdout.splitlines() if not line.startswith("#")]
    assert len(commands) == 2 and all("--network=host" in c for c in commands)
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
    assert reports == [(str(r), "4", str(r // 2), "10", "none") for r in range(4)], outputs


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
           "RANK": "0", "NODE_RANK": "0"}
    cmd = engine.command("run", "--rm", "--platform", "linux/arm64", "-v", f"{work}:/check:ro",
                         "-v", f"{table}:{k8s.RANK_TABLE_DIR}:ro",
                         *[x for k, v in env.items() for x in ("-e", f"{k}={v}")], image,
                         "/bin/bash", "-c", k8s.launch_script(), "ascend-launch", "/check/all_reduce.py")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "ascend-build launch: node 0 of 1, 2 processes, master 127.0.0.1:29517" in out.stdout
    reports = sorted(REPORT.findall(out.stdout))
    assert reports == [(str(r), "2", "0", "3", f"{k8s.RANK_TABLE_DIR}/hccl.json") for r in range(2)], out.stdout
