"""Kubernetes jobs for the engines 910B sites run, never a scheduler of our own:

- an `AscendJob` (mindxdl.gitee.com/v1) for Huawei's Ascend operator on Volcano: gang
  scheduled (minAvailable = nodes), one Master and N-1 Workers, the device plugin's
  `huawei.com/Ascend910` resource, the rank table the operator writes to the ConfigMap
  `rings-config-<job>`, and a launch script that reads what the operator injects
  (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_WORLD_SIZE);
- an indexed batch/v1 Job with a headless Service for sites without the operator: the node
  rank is the completion index, the master the index-0 pod's DNS name.

Both take the image by its content tag, so the cluster runs exactly what was tested."""
from __future__ import annotations

import re

from ..errors import UserError
from .launch import HCCL_TIMEOUT

RESOURCE = "huawei.com/Ascend910"
OPERATOR_PORT = 2222           # the operator's default (containerPort named ascendjob-port)
RANK_TABLE_DIR = "/user/serverid/devindex/config"

# Runs in the container: torchrun for this pod's node. From the operator: WORLD_SIZE (all
# processes), LOCAL_WORLD_SIZE (this pod's), RANK (this pod's node rank); from an indexed
# Job or plain docker: NNODES, NODE_RANK, NPROC_PER_NODE. HCCL's connect timeout at least
# 300 s unless the job sets it.
LAUNCH = r"""set -eu
nproc="${LOCAL_WORLD_SIZE:-${NPROC_PER_NODE:-1}}"
if [ -n "${LOCAL_WORLD_SIZE:-}" ]; then nnodes=$(( WORLD_SIZE / LOCAL_WORLD_SIZE )); node="${RANK}";
else nnodes="${NNODES:-1}"; node="${NODE_RANK:-${JOB_COMPLETION_INDEX:-0}}"; fi
export HCCL_CONNECT_TIMEOUT="${HCCL_CONNECT_TIMEOUT:-%(timeout)d}"
if [ -f "%(table)s/hccl.json" ]; then export RANK_TABLE_FILE="%(table)s/hccl.json"; fi
echo "ascend-build launch: node ${node} of ${nnodes}, ${nproc} processes, master ${MASTER_ADDR}:${MASTER_PORT}"
exec torchrun --nnodes="${nnodes}" --node_rank="${node}" --nproc_per_node="${nproc}" \
    --master_addr="${MASTER_ADDR}" --master_port="${MASTER_PORT}" "$@"
"""


def launch_script(timeout: int = HCCL_TIMEOUT) -> str:
    return LAUNCH % {"timeout": timeout, "table": RANK_TABLE_DIR}


def _name(name: str) -> str:
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,50}[a-z0-9])?", name):
        raise UserError(f"--name {name!r}: a Kubernetes name is lowercase letters, digits and '-' (at most 52)")
    return name


def _container(image: str, devices: int, command: list[str], timeout: int, extra_env: list[dict]) -> dict:
    return {
        "name": "ascend",                   # the operator looks for this name
        "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/bash", "-c", launch_script(timeout), "ascend-launch"], "args": list(command),
        "env": extra_env + [{"name": "XDL_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}],
        "resources": {"limits": {RESOURCE: devices}, "requests": {RESOURCE: devices}},
        "volumeMounts": [{"name": "ascend-driver", "mountPath": "/usr/local/Ascend/driver", "readOnly": True},
                         {"name": "hccn-conf", "mountPath": "/etc/hccn.conf", "readOnly": True},
                         {"name": "dshm", "mountPath": "/dev/shm"}],
    }


def _volumes() -> list[dict]:
    return [{"name": "ascend-driver", "hostPath": {"path": "/usr/local/Ascend/driver"}},
            {"name": "hccn-conf", "hostPath": {"path": "/etc/hccn.conf", "type": "File"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory"}}]


def _check(image: str, nodes: int, devices: int, command: list[str]) -> None:
    if nodes < 1 or devices < 1:
        raise UserError("--nodes and --devices are at least 1")
    if not command:
        raise UserError("nothing to run: put the training script after --, e.g. -- train.py")
    if "@sha256:" not in image and ":sha-" not in image:
        raise UserError(f"--image {image}: name it by its content tag (REPO:sha-...) or digest (REPO@sha256:...), "
                        f"so the cluster runs exactly the image that was tested")


def ascend_job(name: str, image: str, nodes: int, devices: int, command: list[str], chip: str = "910b",
               queue: str = "default", timeout: int = HCCL_TIMEOUT) -> dict:
    _check(image, nodes, devices, command)
    name = _name(name)
    ring = f"ascend-{chip.lower()}"
    container = _container(image, devices, command, timeout, [
        {"name": "ASCEND_VISIBLE_DEVICES",
         "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{RESOURCE}']"}}}])
    container["ports"] = [{"containerPort": OPERATOR_PORT, "name": "ascendjob-port"}]
    container["volumeMounts"].append({"name": "ranktable", "mountPath": RANK_TABLE_DIR})

    def replica(count: int) -> dict:
        return {"replicas": count, "restartPolicy": "Never", "template": {
            "metadata": {"labels": {"ring-controller.atlas": ring}},
            "spec": {"nodeSelector": {"host-arch": "huawei-arm"},
                     "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                         "labelSelector": {"matchExpressions": [{"key": "job-name", "operator": "In",
                                                                 "values": [name]}]},
                         "topologyKey": "kubernetes.io/hostname"}]}},
                     "containers": [container],
                     "volumes": _volumes() + [{"name": "ranktable",
                                               "configMap": {"name": f"rings-config-{name}"}}]}}}
    replicas = {"Master": replica(1)}
    if nodes > 1:
        replicas["Worker"] = replica(nodes - 1)
    job = {"apiVersion": "mindxdl.gitee.com/v1", "kind": "AscendJob",
           "metadata": {"name": name, "labels": {"framework": "pytorch", "ring-controller.atlas": ring}},
           "spec": {"schedulerName": "volcano",
                    "runPolicy": {"schedulingPolicy": {"minAvailable": nodes, "queue": queue}},
                    "successPolicy": "AllWorkers", "replicaSpecs": replicas}}
    # The operator writes the rank table into this ConfigMap once the pods are placed.
    table = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": f"rings-config-{name}", "labels": {"ring-controller.atlas": ring}},
             "data": {"hccl.json": '{"status":"initializing"}'}}
    return {"items": [table, job]}


def indexed_job(name: str, image: str, nodes: int, devices: int, command: list[str],
                timeout: int = HCCL_TIMEOUT, port: int = 29500) -> dict:
    """For sites without the operator: an indexed Job (one pod per node, the completion
    index is the node rank) and the headless Service that gives pod 0 a DNS name."""
    _check(image, nodes, devices, command)
    name = _name(name)
    env = [{"name": "NNODES", "value": str(nodes)}, {"name": "NPROC_PER_NODE", "value": str(devices)},
           {"name": "MASTER_ADDR", "value": f"{name}-0.{name}"}, {"name": "MASTER_PORT", "value": str(port)}]
    container = _container(image, devices, command, timeout, env)
    container["ports"] = [{"containerPort": port, "name": "rendezvous"}]
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
           "spec": {"completionMode": "Indexed", "completions": nodes, "parallelism": nodes, "backoffLimit": 0,
                    "template": {"metadata": {"labels": {"job-name": name}},
                                 "spec": {"subdomain": name, "restartPolicy": "Never",
                                          "containers": [container], "volumes": _volumes()}}}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
               "spec": {"clusterIP": "None", "selector": {"job-name": name},
                        "ports": [{"name": "rendezvous", "port": port}]}}
    return {"items": [service, job]}


def dump(manifests: dict) -> str:
    import yaml
    return "---\n".join(yaml.safe_dump(item, sort_keys=False) for item in manifests["items"])
