"""Many cards and many servers, on stand-in servers (tests/doubles/cluster_hosts.py): each
host's facts by `invoke doctor --json`, the rank table from them, the checks across hosts
with planted faults, the per-node launch, and the Kubernetes manifests against their
schemas."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ascend_build.cluster import facts, k8s
from ascend_build.cluster import ranktable as rt
from ascend_build.cluster.launch import RANK_WRAPPER
from ascend_build.errors import UserError
from ascend_build.matrix import frameworks
from ascend_build.matrix.frameworks import MINDSPORE
from tests import forked
from tests.doubles.cluster_hosts import make_server

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "registry.example.com/ascend-runtime:sha-0123456789abcdef-arm64"


def invoke(*args: str) -> subprocess.CompletedProcess:
    return forked.invoke(*args)


def facts_file(tmp_path: Path, name: str, **planted) -> Path:
    """`invoke doctor --json` on a stand-in server, written as the site would copy it."""
    root = make_server(tmp_path / name, **planted)
    out = invoke("doctor", "--user", "alice", "--json", "--root", str(root))
    assert out.stdout.startswith("{"), out.stdout + out.stderr
    path = tmp_path / f"{name}.json"
    path.write_text(out.stdout)
    return path


def test_a_2x8_rank_table_for_910b_from_each_hosts_doctor_json(tmp_path):
    a, b = facts_file(tmp_path, "node-a", server=1), facts_file(tmp_path, "node-b", server=2)
    out = invoke("ranktable", "--hosts", str(a), "--hosts", str(b), "--output", str(tmp_path / "hccl.json"))
    assert out.returncode == 0, out.stderr
    assert "2 servers, 16 ranks (version 1.0)" in out.stdout
    table = json.loads((tmp_path / "hccl.json").read_text())
    assert table["status"] == "completed" and table["version"] == "1.0" and table["server_count"] == "2"
    assert [s["server_id"] for s in table["server_list"]] == ["10.0.0.11", "10.0.0.12"]
    devices = [d for s in table["server_list"] for d in s["device"]]
    assert [d["rank_id"] for d in devices] == [str(r) for r in range(16)]
    assert devices[0] == {"device_id": "0", "device_ip": "192.168.1.10", "rank_id": "0"}
    assert devices[15] == {"device_id": "7", "device_ip": "192.168.2.17", "rank_id": "15"}
    # A range of cards: the same cards on every host, ranks still without gaps.
    half = rt.build(facts.load([a, b]), devices=[4, 5, 6, 7])
    assert [(d["device_id"], d["rank_id"]) for d in half["server_list"][1]["device"]] == \
        [("4", "4"), ("5", "5"), ("6", "6"), ("7", "7")]


def test_an_a3_table_is_version_1_2_with_super_device_ids(tmp_path):
    hosts = facts.load([facts_file(tmp_path, "a3-a", server=1, chip="Ascend910_9391"),
                        facts_file(tmp_path, "a3-b", server=2, chip="Ascend910_9391")])
    assert hosts[0].chip == "A3"
    # The facts reader has no source for super_device_id (npu-smi's super-pod query was not
    # seen here): without it an A3 table is refused, naming the card.
    with pytest.raises(UserError, match="a3-a card 0: an A3 table needs its super_device_id"):
        rt.build(hosts)
    for h, host in enumerate(hosts):
        for card in host.cards:
            card.super_device_id = h * 8 + card.id
    table = rt.build(hosts)
    assert table["version"] == "1.2"
    assert table["server_list"][1]["device"][0] == {"device_id": "0", "device_ip": "192.168.2.10", "rank_id": "8",
                                                    "super_device_id": "8"}


def test_a_table_is_refused_with_every_problem_named(tmp_path):
    a = facts.load([facts_file(tmp_path, "a", server=1)])[0]
    b = facts.load([facts_file(tmp_path, "b", server=1)])[0]      # same addresses as a
    with pytest.raises(UserError) as info:
        rt.build([a, b])
    assert "b card 0: device IP 192.168.1.10 is also a card 0's" in str(info.value)
    assert "two hosts give one server address" in str(info.value)
    with pytest.raises(UserError, match="a: no card 9"):
        rt.build([a], devices=[9])


@pytest.mark.parametrize("planted, check, found", [
    (dict(stale={3: "192.168.9.99"}), "node-b: card 3 IP", "hccn_tool 192.168.2.13, hccn.conf 192.168.9.99"),
    (dict(tls="1"), "TLS across hosts", "node-a: 0; node-b: 1"),
    (dict(down=(5,)), "node-b: card 5 link", "DOWN"),
    (dict(old_table=True), "node-b: /etc/hccl.json", "present"),
    (dict(address="172.17.0.3"), "node-b: host network", "server address 172.17.0.3"),
    (dict(tool=False, stale={0: "192.168.2.10"}), "node-b: hccn_tool", "not found"),
], ids=["stale-ip", "tls-differs", "link-down", "stale-rank-table", "no-host-network", "no-hccn-tool"])
def test_doctor_cluster_finds_each_planted_fault(tmp_path, planted, check, found):
    a = facts_file(tmp_path, "node-a", server=1)
    b = facts_file(tmp_path, "node-b", server=2, **planted)
    out = invoke("doctor", "--cluster", str(a), "--cluster", str(b), "--json")
    results = {c["name"]: c for c in json.loads(out.stdout)}
    assert check in results, out.stdout
    assert results[check]["found"] == found and results[check]["cause"] and results[check]["fix"]
    blocking = any(c["blocking"] for c in results.values())
    assert out.returncode == (1 if blocking else 0)
    assert results[check]["state"] in ("fail", "warn")


def test_doctor_cluster_passes_a_healthy_pair_and_reads_a_folder(tmp_path):
    folder = tmp_path / "facts"
    folder.mkdir()
    for n, name in enumerate(("node-a", "node-b"), 1):
        facts_file(tmp_path, name, server=n).rename(folder / f"{name}.json")
    out = invoke("doctor", "--cluster", str(folder))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 hosts agree (TLS, driver, cards, addresses)" in out.stdout and "FAIL" not in out.stdout


def test_a_file_that_is_not_host_facts_is_refused(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('[{"name": "devices"}]')
    out = invoke("ranktable", "--hosts", str(bad))
    assert out.returncode != 0 and "not a host facts file" in out.stderr and "invoke doctor --json" in out.stderr


def test_run_hostfile_prints_each_nodes_command_with_the_multi_node_flags(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# two 910B servers\nnode-a slots=8\nnode-b\n")
    table = tmp_path / "hccl.json"
    table.write_text("{}")
    out = invoke("run", "--dry", "--image", "img", "--hostfile", str(hostfile), "--runtime", "runc",
                 "--host-root", str(tmp_path), "--rank-table", str(table), "--", "train.py", "--epochs", "1")
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if not line.startswith("# binding") and
             not line.startswith("#   rank") and not line.startswith("# torch_npu")]
    assert lines[0] == "# node 0 of 2: on node-a (master)" and lines[2] == "# node 1 of 2: on node-b"
    node1 = shlex.split(lines[3])
    for flag in ("--network=host", "--ipc=host", "memlock=-1:-1", "nofile=65536:65536",
                 "/usr/local/Ascend/driver:/usr/local/Ascend/driver:ro", "/dev/davinci7",
                 f"{table}:/etc/ascend-build/hccl.json:ro", "HCCL_CONNECT_TIMEOUT=1800", "NODE_RANK=1",
                 "MASTER_ADDR=node-a", "WORLD_SIZE=16", "RANK_TABLE_FILE=/etc/ascend-build/hccl.json"):
        assert flag in node1, flag
    # No NPU here: bound as the usual 910B server would be (4 NUMA nodes x 48 cores, 2 cards each),
    # each rank started through the wrapper, torch_npu told the same ranges (coarse: the image's
    # torch_npu is not here to read).
    assert "# binding: numa, from preview: the usual 910B server" in out.stdout
    assert "--cpuset-cpus=0-191" in node1
    assert "ASCEND_BUILD_RANK_CPUS=" + " ".join(f"{24 * i}-{24 * i + 23}" for i in range(8)) in node1
    assert "CPU_AFFINITY_CONF=1," + ",".join(f"npu{i}:{24 * i}-{24 * i + 23}" for i in range(8)) in node1
    assert node1[node1.index("img") + 1:] == ["torchrun", "--nnodes=2", "--node_rank=1", "--nproc_per_node=8",
                                               "--master_addr=node-a", "--master_port=29500", "--no_python", "sh",
                                               "-c", RANK_WRAPPER, "train.py", "--epochs", "1"]
    unbound = invoke("run", "--dry", "--image", "img", "--hostfile", str(hostfile), "--runtime", "runc",
                     "--host-root", str(tmp_path), "--bind", "off", "--", "train.py", "--epochs", "1")
    assert "# binding: off (--bind off): every rank starts unbound" in unbound.stdout
    plain = shlex.split(unbound.stdout.splitlines()[-1])
    assert not any(a.startswith(("--cpuset-cpus", "CPU_AFFINITY_CONF", "ASCEND_BUILD_RANK_CPUS")) for a in plain)
    assert plain[plain.index("img") + 1:] == ["torchrun", "--nnodes=2", "--node_rank=1", "--nproc_per_node=8",
                                               "--master_addr=node-a", "--master_port=29500", "train.py",
                                               "--epochs", "1"]
    low = invoke("run", "--dry", "--image", "img", "--hostfile", str(hostfile), "--runtime", "runc",
                 "--host-root", str(tmp_path), "--hccl-timeout", "120", "--", "train.py")
    assert low.returncode == 0 and "below 300 s torch_npu warns" in low.stderr


def test_the_launch_script_reads_the_operators_environment(tmp_path):
    """The script an AscendJob runs, with a stand-in of what the operator injects (the
    second of 2 pods, 8 cards each) and its rank table ConfigMap: torchrun gets node 1 of 2."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "torchrun").write_text('#!/bin/sh\necho "torchrun $* RANK_TABLE_FILE=${RANK_TABLE_FILE:-none} '
                                   'HCCL_CONNECT_TIMEOUT=$HCCL_CONNECT_TIMEOUT"\n')
    (fake / "torchrun").chmod(0o755)
    table_dir = tmp_path / "config"
    table_dir.mkdir()
    (table_dir / "hccl.json").write_text("{}")
    script = k8s.launch_script().replace(k8s.RANK_TABLE_DIR, str(table_dir))
    env = {"PATH": f"{fake}:/usr/bin:/bin", "MASTER_ADDR": "default-test-pytorch-master-0", "MASTER_PORT": "2222",
           "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "RANK": "1"}
    out = subprocess.run(["bash", "-c", script, "ascend-launch", "train.py", "--lr", "0.1"], env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert ("torchrun --nnodes=2 --node_rank=1 --nproc_per_node=8 --master_addr=default-test-pytorch-master-0 "
            f"--master_port=2222 train.py --lr 0.1 RANK_TABLE_FILE={table_dir}/hccl.json HCCL_CONNECT_TIMEOUT=1800"
            ) in out.stdout
    # An indexed Job: the completion index is the node rank.
    plain = {**env, "NNODES": "2", "NPROC_PER_NODE": "4", "JOB_COMPLETION_INDEX": "1", "HCCL_CONNECT_TIMEOUT": "600"}
    for key in ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "RANK"):
        plain.pop(key)
    out = subprocess.run(["bash", "-c", script, "ascend-launch", "train.py"], env=plain, capture_output=True, text=True)
    assert "--nnodes=2 --node_rank=1 --nproc_per_node=4" in out.stdout and "HCCL_CONNECT_TIMEOUT=600" in out.stdout


def test_the_ascendjob_is_valid_against_the_operators_crd_schema(tmp_path):
    import jsonschema
    schema = json.loads((ROOT / "tests/data/k8s/ascendjob-v1.schema.json").read_text())
    made = k8s.ascend_job("llama-2x8", IMAGE, 2, 8, ["train.py"])
    config, job = made["items"]
    jsonschema.validate(job, schema)
    assert config["metadata"]["name"] == "rings-config-llama-2x8"
    spec = job["spec"]
    assert spec["schedulerName"] == "volcano" and spec["runPolicy"]["schedulingPolicy"]["minAvailable"] == 2
    assert spec["replicaSpecs"]["Master"]["replicas"] == 1 and spec["replicaSpecs"]["Worker"]["replicas"] == 1
    container = spec["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert container["name"] == "ascend" and container["image"] == IMAGE
    # Whole CPUs and memory, requests equal to limits: Guaranteed QoS (16 CPUs, 64Gi per card).
    assert container["resources"]["limits"] == {"huawei.com/Ascend910": 8, "cpu": 128, "memory": "512Gi"}
    assert container["resources"]["requests"] == container["resources"]["limits"]
    # Something the schema refuses is refused (the check can fail).
    broken = json.loads(json.dumps(job))
    broken["spec"]["replicaSpecs"]["Master"]["replicas"] = "one"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)
    out = invoke("job", "--image", IMAGE, "--nodes", "2", "--output", str(tmp_path / "job.yaml"), "--", "train.py")
    assert out.returncode == 0 and "ConfigMap, AscendJob" in out.stdout, out.stderr


def test_the_indexed_job_is_valid_against_kubernetes_schemas():
    import kubernetes_validate
    service, job = k8s.indexed_job("train", IMAGE, 2, 8, ["train.py"])["items"]
    for item in (service, job):
        kubernetes_validate.validate(item, "1.30", strict=True)
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["completions"] == 2
    broken = json.loads(json.dumps(job))
    broken["spec"]["completionMode"] = 7
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.30", strict=True)


def test_a_job_names_its_image_by_content_tag(tmp_path):
    with pytest.raises(UserError, match="name it by its content tag"):
        k8s.ascend_job("train", "ascend-runtime:torch2.1.0-arm64", 2, 8, ["train.py"])


# ---------------------------------------------------------------- MindSpore: msrun and its scheduler

def test_run_hostfile_launches_a_mindspore_image_with_msrun(tmp_path):
    """A MindSpore image (known here by its name: the engine does not have it) gets msrun on
    every node: all workers counted, this node's share and rank, the scheduler on the
    master, msrun waiting for its workers, HCCL's time-out as msrun's, the rank table."""
    hostfile = tmp_path / "hosts"
    hostfile.write_text("node-a\nnode-b\n")
    table = tmp_path / "hccl.json"
    table.write_text("{}")
    # A registry name no engine here holds (a built MindSpore image would be known by its label).
    image = "never-built.invalid/ascend-runtime:cann9.0.0-910b-debian12-py3.11-mindspore2.9.0-arm64"
    out = invoke("run", "--dry", "--image", image, "--hostfile", str(hostfile), "--runtime", "runc",
                 "--host-root", str(tmp_path), "--rank-table", str(table), "--", "train.py", "--epochs", "1")
    assert out.returncode == 0, out.stderr
    assert "# launcher: msrun (mindspore, by the image's name" in out.stderr
    node1 = shlex.split(out.stdout.splitlines()[-1])
    assert "NODE_RANK=1" in node1 and "RANK_TABLE_FILE=/etc/ascend-build/hccl.json" in node1
    # msrun binds its workers itself, from each device's ranges (msrun takes them as lo-hi only).
    bind = "{" + ",".join(f'"device{i}":["{24 * i}-{24 * i + 23}"]' for i in range(8)) + "}"
    assert node1[node1.index(image) + 1:] == [
        "msrun", "--worker_num=16", "--local_worker_num=8", "--master_addr=node-a", "--master_port=29500",
        "--node_rank=1", "--log_dir=msrun_log", "--join=True", "--cluster_time_out=1800", f"--bind_core={bind}",
        "--rank_table_file=/etc/ascend-build/hccl.json", "train.py", "--epochs", "1"]
    assert "--cpuset-cpus=0-191" in node1 and not any(a.startswith("CPU_AFFINITY_CONF") for a in node1)
    # One host, four cards, asked for by --msrun on an image whose name says nothing.
    one = invoke("run", "--dry", "--image", "img", "--msrun", "--devices", "0-3", "--runtime", "runc",
                 "--host-root", str(tmp_path), "--", "train.py")
    argv = shlex.split(one.stdout.splitlines()[-1])
    assert argv[argv.index("img") + 1:argv.index("img") + 4] == ["msrun", "--worker_num=4", "--local_worker_num=4"]
    # The same image without a hint is torch's, and the choice is said.
    plain = invoke("run", "--dry", "--image", "img", "--torchrun", "--runtime", "runc", "--host-root", str(tmp_path),
                   "--", "train.py")
    assert "torchrun" in plain.stdout and "# launcher: torchrun (torch, by default" in plain.stderr
    clash = invoke("run", "--dry", "--image", "img", "--msrun", "--framework", "torch", "--", "train.py")
    assert clash.returncode != 0 and "--msrun is MindSpore's launcher" in clash.stderr


def _stand_ins(tmp_path: Path) -> dict[str, str]:
    """msrun and python that print what they were started with (and MindSpore's variables)."""
    fake = tmp_path / "bin"
    fake.mkdir(parents=True)
    for tool in ("msrun", "python"):
        (fake / tool).write_text(f'#!/bin/sh\necho "{tool} $* MS_ROLE=${{MS_ROLE:-none}} '
                                 'MS_WORKER_NUM=${MS_WORKER_NUM:-none} RANK_TABLE_FILE=${RANK_TABLE_FILE:-none}"\n')
        (fake / tool).chmod(0o755)
    return {"PATH": f"{fake}:/usr/bin:/bin"}


def test_the_mindspore_launch_script_reads_the_operators_ms_variables(tmp_path):
    """What the Ascend operator injects into a MindSpore AscendJob's pods (the scheduler's
    address and port, all workers, this pod's and its node rank): a worker pod runs msrun
    with them, the Scheduler pod runs the script as MindSpore's scheduler."""
    table_dir = tmp_path / "config"
    table_dir.mkdir()
    (table_dir / "hccl.json").write_text("{}")
    script = k8s.launch_script(framework=MINDSPORE).replace(k8s.RANK_TABLE_DIR, str(table_dir))
    operator = {**_stand_ins(tmp_path), "MS_SCHED_HOST": "10.0.0.5", "MS_SCHED_PORT": "2222", "MS_WORKER_NUM": "16",
                "MS_LOCAL_WORKER": "8", "MS_NODE_RANK": "1"}
    out = subprocess.run(["bash", "-c", script, "ascend-launch", "train.py", "--lr", "0.1"], env=operator,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert (f"msrun --worker_num=16 --local_worker_num=8 --master_addr=10.0.0.5 --master_port=2222 --node_rank=1 "
            f"--log_dir=msrun_log --join=True --cluster_time_out=1800 --rank_table_file={table_dir}/hccl.json "
            f"train.py --lr 0.1 MS_ROLE=none") in out.stdout, out.stdout
    sched = subprocess.run(["bash", "-c", script, "ascend-launch", "train.py"], capture_output=True, text=True,
                           env={**operator, "ASCEND_BUILD_ROLE": "scheduler", "MS_LOCAL_WORKER": "0"})
    assert "python train.py MS_ROLE=MS_SCHED MS_WORKER_NUM=16" in sched.stdout, sched.stdout + sched.stderr
    assert "msrun" not in sched.stdout
    # An indexed Job (no operator): node 0's msrun hosts the scheduler at MASTER_ADDR.
    (table_dir / "hccl.json").unlink()
    plain = {**_stand_ins(tmp_path / "2"), "NNODES": "2", "NPROC_PER_NODE": "4", "JOB_COMPLETION_INDEX": "0",
             "MASTER_ADDR": "train-0.train", "MASTER_PORT": "29500"}
    out = subprocess.run(["bash", "-c", script, "ascend-launch", "train.py"], env=plain, capture_output=True, text=True)
    assert ("msrun --worker_num=8 --local_worker_num=4 --master_addr=train-0.train --master_port=29500 --node_rank=0 "
            "--log_dir=msrun_log --join=True --cluster_time_out=1800 train.py MS_ROLE=none MS_WORKER_NUM=none "
            "RANK_TABLE_FILE=none") in out.stdout, out.stdout


def test_a_mindspore_ascendjob_has_a_scheduler_without_npus_and_a_worker_per_server(tmp_path):
    import jsonschema
    import kubernetes_validate
    schema = json.loads((ROOT / "tests/data/k8s/ascendjob-v1.schema.json").read_text())
    config, job = k8s.ascend_job("ms-2x8", IMAGE, 2, 8, ["train.py"], framework=MINDSPORE)["items"]
    jsonschema.validate(job, schema)
    spec = job["spec"]
    assert job["metadata"]["labels"]["framework"] == "mindspore"
    assert set(spec["replicaSpecs"]) == {"Scheduler", "Worker"} and spec["replicaSpecs"]["Worker"]["replicas"] == 2
    assert spec["runPolicy"]["schedulingPolicy"]["minAvailable"] == 3        # gang: the scheduler and both workers
    sched = spec["replicaSpecs"]["Scheduler"]["template"]["spec"]
    assert "resources" not in sched["containers"][0] and "affinity" not in sched
    assert {"name": "ASCEND_BUILD_ROLE", "value": "scheduler"} in sched["containers"][0]["env"]
    worker = spec["replicaSpecs"]["Worker"]["template"]["spec"]
    assert worker["containers"][0]["resources"]["limits"] == {"huawei.com/Ascend910": 8, "cpu": 128, "memory": "512Gi"}
    assert "msrun" in worker["containers"][0]["command"][2]
    # The indexed Job for MindSpore: the same launch script, valid for Kubernetes.
    service, indexed = k8s.indexed_job("ms", IMAGE, 2, 8, ["train.py"], framework=MINDSPORE)["items"]
    for item in (service, indexed):
        kubernetes_validate.validate(item, "1.30", strict=True)
    assert "msrun" in indexed["spec"]["template"]["spec"]["containers"][0]["command"][2]
    with pytest.raises(UserError, match="--framework jax: one of torch, mindspore"):
        frameworks.get("jax")
    refused = invoke("job", "--image", IMAGE, "--framework", "jax", "--", "train.py")
    assert refused.returncode == 2 and "--framework jax: one of torch, mindspore" in refused.stderr
    out = invoke("job", "--image", IMAGE.replace("ascend-runtime", "ascend-mindspore"), "--nodes", "2",
                 "--output", str(tmp_path / "job.yaml"), "--", "train.py")
    assert out.returncode == 0 and "# framework: mindspore (by the image's name" in out.stderr, out.stderr
    assert "Scheduler:" in (tmp_path / "job.yaml").read_text()


# ---------------------------------------------------------------- cores in a pod

TORCHRUN_SPAWNS = r"""#!/bin/bash
# torchrun STAND-IN: prints how it was started, then starts each local rank as torchrun
# does (LOCAL_RANK set; --no_python: the command itself, else python -u SCRIPT)
echo "torchrun $*"
nproc=1; direct=0; args=()
for a in "$@"; do
    case "$a" in --nproc_per_node=*) nproc=${a#*=} ;; --no_python) direct=1 ;; --*) ;; *) args+=("$a") ;; esac
done
for ((r = 0; r < nproc; r++)); do
    if [ "$direct" = 1 ]; then LOCAL_RANK=$r "${args[@]}"; else LOCAL_RANK=$r python -u "${args[@]}"; fi
done
"""
SHOW = ('import os; print(f"local {os.environ[\'LOCAL_RANK\']} cores {sorted(os.sched_getaffinity(0))} '
        'conf {os.environ.get(\'CPU_AFFINITY_CONF\', \'none\')}")')


def _pod(tmp_path: Path, cores: list[int], **env: str) -> subprocess.CompletedProcess:
    """The torch launch script in a stand-in pod of 2 processes whose cgroup allows `cores`
    (taskset here), with a torchrun that really starts the ranks."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "torchrun").write_text(TORCHRUN_SPAWNS)
    (fake / "torchrun").chmod(0o755)
    if not (fake / "python").exists():
        (fake / "python").symlink_to(sys.executable)
    (tmp_path / "show.py").write_text(SHOW)
    base = {"PATH": f"{fake}:/usr/bin:/bin", "MASTER_ADDR": "train-0.train", "MASTER_PORT": "29500", "NNODES": "1",
            "NPROC_PER_NODE": "2"}
    return subprocess.run(["taskset", "-c", ",".join(map(str, cores)), "bash", "-c", k8s.launch_script(),
                           "ascend-launch", str(tmp_path / "show.py")], env={**base, **env}, capture_output=True,
                          text=True, cwd=tmp_path)


def test_the_launch_script_binds_each_rank_within_what_the_pod_got(tmp_path):
    cores = sorted(os.sched_getaffinity(0))[:2]
    if len(cores) < 2:
        pytest.skip("the tests may use 1 core here")
    out = _pod(tmp_path, cores, ASCEND_BUILD_MIN_CORES="1", ASCEND_BUILD_AFFINITY="2")
    assert out.returncode == 0, out.stderr
    conf = f"2,npu0:{cores[0]}-{cores[0]},npu1:{cores[1]}-{cores[1]}"
    assert f"local 0 cores [{cores[0]}] conf {conf}" in out.stdout and f"local 1 cores [{cores[1]}] conf {conf}" \
        in out.stdout, out.stdout + out.stderr
    assert f"ascend-build launch: local rank 1: cores {cores[1]} (1)" in out.stderr
    # Under the minimum (5 by default): said, and the ranks start unbound.
    few = _pod(tmp_path, cores)
    assert "under 5 for each of its 2 ranks: they start unbound" in few.stderr
    assert f"local 1 cores {cores} conf none" in few.stdout and "--no_python" not in few.stdout
    off = _pod(tmp_path, cores, ASCEND_BUILD_BIND="off", ASCEND_BUILD_MIN_CORES="1")
    assert "--bind off: every rank starts unbound" in off.stdout and f"local 0 cores {cores}" in off.stdout


def test_the_mindspore_launch_script_gives_msrun_each_devices_cores(tmp_path):
    cores = sorted(os.sched_getaffinity(0))[:2]
    if len(cores) < 2:
        pytest.skip("the tests may use 1 core here")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "msrun").write_text('#!/bin/sh\necho "msrun $*"\n')
    (fake / "msrun").chmod(0o755)
    (fake / "python").symlink_to(sys.executable)
    env = {"PATH": f"{fake}:/usr/bin:/bin", "NNODES": "1", "NPROC_PER_NODE": "2", "MASTER_ADDR": "ms-0.ms",
           "MASTER_PORT": "29500", "ASCEND_BUILD_MIN_CORES": "1"}
    out = subprocess.run(["taskset", "-c", ",".join(map(str, cores)), "bash", "-c",
                          k8s.launch_script(framework=MINDSPORE), "ascend-launch", "train.py"], env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    bind = f'--bind_core={{"device0":["{cores[0]}-{cores[0]}"],"device1":["{cores[1]}-{cores[1]}"]}}'
    assert f"--cluster_time_out=1800 {bind} train.py" in out.stdout, out.stdout + out.stderr


def test_the_in_pod_planner_splits_the_pods_cores_evenly():
    space: dict = {}
    exec(compile(k8s.PLANNER, "planner", "exec"), space)        # __name__ is not __main__: nothing runs
    slices = space["plan"](list(range(96, 192)), 4, 5)
    assert [space["text"](s) for s in slices] == ["96-119", "120-143", "144-167", "168-191"]
    assert space["plan"](list(range(8)), 2, 5) is None
    assert space["text"]([0, 1, 2, 7, 9, 10]) == "0-2,7,9-10"


def test_job_pods_ask_for_whole_cpus_and_memory_with_requests_equal_to_limits(tmp_path):
    import kubernetes_validate
    cores = k8s.PodCores(96, "768Gi", "even", 5, 2)
    service, job = k8s.indexed_job("train", IMAGE, 2, 8, ["train.py"], cores=cores)["items"]
    kubernetes_validate.validate(job, "1.30", strict=True)
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"] == container["resources"]["limits"] == \
        {"huawei.com/Ascend910": 8, "cpu": 96, "memory": "768Gi"}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (env["ASCEND_BUILD_BIND"], env["ASCEND_BUILD_MIN_CORES"], env["ASCEND_BUILD_AFFINITY"]) == ("even", "5", "2")
    # --cpus 0: nothing asked (Burstable, as before); the ranks still split what the pod may use.
    none = k8s.ascend_job("train", IMAGE, 2, 8, ["train.py"], cores=k8s.PodCores(0))["items"][1]
    master = none["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert master["resources"]["limits"] == {"huawei.com/Ascend910": 8}
    for bad, message in ((k8s.PodCores(16), "--cpus 16 for 8 cards: 2 each, under the 5 each rank needs. Ask for at "
                                            "least 40"),
                         (k8s.PodCores(bind="0:0-23"), "explicit host ranges cannot be given"),
                         (k8s.PodCores(memory="lots"), "--memory 'lots': a Kubernetes quantity"),
                         (k8s.PodCores(-2), "--cpus -2")):
        with pytest.raises(UserError, match=re.escape(message)):
            k8s.indexed_job("train", IMAGE, 2, 8, ["train.py"], cores=bad)
    out = invoke("job", "--image", IMAGE, "--kind", "indexed", "--cpus", "64", "--memory", "256Gi", "--devices", "4",
                 "--output", str(tmp_path / "job.yaml"), "--", "train.py")
    assert out.returncode == 0, out.stderr
    assert "# torch_npu: CPU_AFFINITY_CONF mode 1 (the image is not here to read which torch_npu it has" in out.stderr
    text = (tmp_path / "job.yaml").read_text()
    assert "cpu: 64\n" in text and "memory: 256Gi\n" in text and "value: numa\n" in text
