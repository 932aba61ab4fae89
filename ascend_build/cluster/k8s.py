"""Kubernetes jobs for the engines 910B sites run, never a scheduler of our own:

- an `AscendJob` (mindxdl.gitee.com/v1) for Huawei's Ascend operator on Volcano: gang
  scheduled, the device plugin's resource and the ring label of the chip (its record in
  chips.py: `huawei.com/Ascend910`, `ascend-910b`), the rank table the
  operator writes to the ConfigMap `rings-config-<job>`, and a launch script that reads
  what the operator injects. For torch: one Master and N-1 Workers (minAvailable = N),
  torchrun from MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_WORLD_SIZE. For MindSpore:
  a Scheduler pod without NPUs and N Workers (minAvailable = N+1), the scheduler and msrun
  from MS_SCHED_HOST, MS_SCHED_PORT, MS_WORKER_NUM, MS_LOCAL_WORKER, MS_NODE_RANK;
- an indexed batch/v1 Job with a headless Service for sites without the operator: the node
  rank is the completion index, the master the index-0 pod's DNS name;
- for a serving image, the manifests cluster/serving.py writes (a Deployment of servers, or
  a LeaderWorkerSet of groups of pods, one server across several nodes).

All take the image by its content tag, so the cluster runs exactly what was tested.

Cores: each worker pod asks for whole CPUs and memory with requests equal to limits
(Guaranteed QoS), so a kubelet with the static CPU manager gives it cores of its own, and
with the topology manager (single-numa-node or restricted) on the NPUs' NUMA nodes. The
launch script then splits what the pod got, read at run time, into equal contiguous slices
per local rank, and starts each rank bound (the same per-rank wrapper as `invoke run`)."""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from ..chips import DEFAULT as DEFAULT_CHIP
from ..chips import Chip, find, known
from ..engine import check_ref
from ..errors import UserError
from ..matrix.frameworks import Framework
from .binding import MIN_CORES
from .launch import DEFAULT, HCCL_TIMEOUT, MSRUN_LOG_DIR, RANK_WRAPPER, launcher_of

OPERATOR_PORT = 2222           # the operator's default (containerPort named ascendjob-port)
RANK_TABLE_DIR = "/user/serverid/devindex/config"
ROLE_LABEL = "ascend-build/role"      # worker or scheduler: workers keep one server each

CPUS_PER_CARD = 16        # a worker pod's default CPUs per card (8 cards: 128 of a Kunpeng 920's 192,
MEMORY_PER_CARD_GI = 64   # leaving the kubelet's and the system's reserve) and memory per card
MAX_CPUS = 4096           # more whole CPUs than any node has: a typo, refused


@dataclass(frozen=True)
class PodCores:
    """What a worker pod asks for and how its ranks are bound inside it."""
    cpus: int | None = None   # whole CPUs, requests == limits (None: the default per card; 0: ask for none)
    memory: str = ""          # requests == limits ("": the default per card)
    bind: str = "numa"        # numa | even | off: in the pod both split what the pod got evenly
    min_cores: int = MIN_CORES
    affinity: int = 1         # torch_npu's CPU_AFFINITY_CONF mode (0: not set)

    def resources(self, devices: int) -> dict[str, str | int]:
        """What the pod asks for: --cpus 0 asks for no CPUs, and for memory only when given
        (kept as given: never dropped with the CPUs)."""
        if self.cpus == 0:
            return {"memory": self.memory} if self.memory else {}
        cpus = devices * CPUS_PER_CARD if self.cpus is None else self.cpus
        return {"cpu": cpus, "memory": self.memory or f"{devices * MEMORY_PER_CARD_GI}Gi"}

    def env(self) -> list[dict]:
        return [{"name": "ASCEND_BUILD_BIND", "value": self.bind},
                {"name": "ASCEND_BUILD_MIN_CORES", "value": str(self.min_cores)},
                {"name": "ASCEND_BUILD_AFFINITY", "value": str(self.affinity)}]


# Runs in the pod (python -c, the image's Python): this pod's CPUs (sched_getaffinity:
# what the kubelet's cpuset gave it) in equal contiguous slices per local rank, printed as
# shell assignments the launch script evaluates. Too few CPUs, or any failure: the ranks
# start unbound, and it says so; the job is never stopped over its binding.
PLANNER = r"""import json, os, shlex, sys


def runs(cpus):
    out = []
    for c in cpus:
        if out and c == out[-1][1] + 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def text(cpus):
    return ",".join(str(a) if a == b else "{}-{}".format(a, b) for a, b in runs(cpus))


def plan(cpus, nproc, least):
    size = len(cpus) // nproc if nproc > 0 else 0
    return [cpus[r * size:(r + 1) * size] for r in range(nproc)] if size >= least else None


def main(nproc, affinity):
    least = int(os.environ.get("ASCEND_BUILD_MIN_CORES") or 5)
    mode = int(os.environ.get("ASCEND_BUILD_AFFINITY") or 0)
    cpus = sorted(os.sched_getaffinity(0))
    slices = plan(cpus, nproc, least)
    say = lambda line: print("ascend-build launch: " + line, file=sys.stderr)
    if slices is None:
        say("this pod may use {} CPUs ({}), under {} for each of its {} ranks: they start unbound "
            "(invoke job --cpus asks for more)".format(len(cpus), text(cpus), least, nproc))
        return []
    for r, s in enumerate(slices):
        say("local rank {}: cores {} ({})".format(r, text(s), len(s)))
    out = ["export ASCEND_BUILD_RANK_CPUS=" + shlex.quote(" ".join(text(s) for s in slices))]
    if affinity == "affinity" and mode:
        ranges = ["npu{}:{}-{}".format(r, a, b) for r, s in enumerate(slices) for a, b in runs(s)]
        out.append("export CPU_AFFINITY_CONF=" + shlex.quote(",".join([str(mode)] + ranges)))
    if affinity == "bind_core":
        bind = {"device{}".format(r): ["{}-{}".format(a, b) for a, b in runs(s)] for r, s in enumerate(slices)}
        out.append("ASCEND_BUILD_MSRUN_BIND=" + shlex.quote(json.dumps(bind, separators=(",", ":"))))
    return out


if __name__ == "__main__":
    try:
        print("\n".join(main(int(sys.argv[1]), sys.argv[2])))
    except Exception as exc:
        print("ascend-build launch: no binding ({}): ranks start unbound".format(exc), file=sys.stderr)
"""

# The launch scripts' binding part: the per-rank wrapper and the planner as quoted
# here-documents (nothing in them is expanded), then the plan for this pod's ranks.
BIND = r"""wrapper=$(cat <<'ASCEND_BUILD_WRAPPER'
%(wrapper)s
ASCEND_BUILD_WRAPPER
)
planner=$(cat <<'ASCEND_BUILD_PLANNER'
%(planner)sASCEND_BUILD_PLANNER
)
if [ "${ASCEND_BUILD_BIND:-numa}" = off ]; then
    echo "ascend-build launch: --bind off: every rank starts unbound"
else
    plan=$(python -c "${planner}" "${nproc}" %(binds)s) || plan=""
    case "${plan}" in
        "" | "export ASCEND_BUILD_RANK_CPUS="*) eval "${plan}" ;;
        *) echo "ascend-build launch: no binding (the planner printed: ${plan}): ranks start unbound" >&2 ;;
    esac
fi
"""

# Runs in the container: torchrun for this pod's node. From the operator: WORLD_SIZE (all
# processes), LOCAL_WORLD_SIZE (this pod's), RANK (this pod's node rank); from an indexed
# Job or plain docker: NNODES, NODE_RANK, NPROC_PER_NODE. HCCL's connect timeout at least
# 300 s unless the job sets it. Bound ranks are started through the wrapper (--no_python).
LAUNCH = r"""set -eu
nproc="${LOCAL_WORLD_SIZE:-${NPROC_PER_NODE:-1}}"
if [ -n "${LOCAL_WORLD_SIZE:-}" ]; then nnodes=$(( WORLD_SIZE / LOCAL_WORLD_SIZE )); node="${RANK}";
else nnodes="${NNODES:-1}"; node="${NODE_RANK:-${JOB_COMPLETION_INDEX:-0}}"; fi
export HCCL_CONNECT_TIMEOUT="${HCCL_CONNECT_TIMEOUT:-%(timeout)d}"
if [ -f "%(table)s/hccl.json" ]; then export RANK_TABLE_FILE="%(table)s/hccl.json"; fi
%(bind)sif [ -n "${ASCEND_BUILD_RANK_CPUS:-}" ]; then set -- --no_python sh -c "${wrapper}" "$@"; fi
echo "ascend-build launch: node ${node} of ${nnodes}, ${nproc} processes, master ${MASTER_ADDR}:${MASTER_PORT}"
exec torchrun --nnodes="${nnodes}" --node_rank="${node}" --nproc_per_node="${nproc}" \
    --master_addr="${MASTER_ADDR}" --master_port="${MASTER_PORT}" "$@"
"""


# MindSpore's: from the operator (MS_* above; the Scheduler pod, marked by ASCEND_BUILD_ROLE,
# runs the script as MindSpore's scheduler, MS_ROLE=MS_SCHED, which starts no worker), or as
# torch's from an indexed Job (node 0's msrun starts the scheduler: MASTER_ADDR is its own).
# msrun binds its workers itself, from --bind_core's ranges per device.
LAUNCH_MINDSPORE = r"""set -eu
export HCCL_CONNECT_TIMEOUT="${HCCL_CONNECT_TIMEOUT:-%(timeout)d}"
table=""
if [ -f "%(table)s/hccl.json" ]; then export RANK_TABLE_FILE="%(table)s/hccl.json"; table="--rank_table_file=${RANK_TABLE_FILE}"; fi
if [ -n "${MS_SCHED_HOST:-}" ]; then
    workers="${MS_WORKER_NUM}"; nproc="${MS_LOCAL_WORKER:-0}"; node="${MS_NODE_RANK:--1}"
    master="${MS_SCHED_HOST}"; port="${MS_SCHED_PORT}"
else
    nproc="${NPROC_PER_NODE:-1}"; node="${NODE_RANK:-${JOB_COMPLETION_INDEX:-0}}"
    workers=$(( ${NNODES:-1} * nproc )); master="${MASTER_ADDR}"; port="${MASTER_PORT}"
fi
if [ "${ASCEND_BUILD_ROLE:-worker}" = scheduler ]; then
    echo "ascend-build launch: MindSpore scheduler for ${workers} workers on ${master}:${port}"
    export MS_ROLE=MS_SCHED MS_SCHED_HOST="${master}" MS_SCHED_PORT="${port}" MS_WORKER_NUM="${workers}"
    exec python "$@"
fi
%(bind)sbindcore=()
if [ -n "${ASCEND_BUILD_MSRUN_BIND:-}" ]; then bindcore=("--bind_core=${ASCEND_BUILD_MSRUN_BIND}"); fi
echo "ascend-build launch: node ${node}, ${nproc} of ${workers} workers, scheduler ${master}:${port}"
exec msrun --worker_num="${workers}" --local_worker_num="${nproc}" --master_addr="${master}" \
    --master_port="${port}" --node_rank="${node}" --log_dir=%(logs)s --join=True \
    --cluster_time_out="${HCCL_CONNECT_TIMEOUT}" ${bindcore[@]+"${bindcore[@]}"} ${table} "$@"
"""


# Each launcher's script for a pod, by the launcher's name.
POD_SCRIPTS = {"torchrun": LAUNCH, "msrun": LAUNCH_MINDSPORE}


def launch_script(timeout: int = HCCL_TIMEOUT, framework: Framework = DEFAULT) -> str:
    launcher = launcher_of(framework)
    # the planner's binding: torch_npu's CPU_AFFINITY_CONF and the wrapper, or msrun's --bind_core
    bind = BIND % {"wrapper": RANK_WRAPPER, "planner": PLANNER, "binds": "affinity" if launcher.affinity else "bind_core"}
    return POD_SCRIPTS[launcher.name] % {"timeout": timeout, "table": RANK_TABLE_DIR, "logs": MSRUN_LOG_DIR,
                                         "bind": bind}


def _name(name: str, service: bool = False) -> str:
    """A job's name, by the rules of every object named after it: an RFC 1123 label (at most
    52, so `rings-config-<name>` and a pod's `<name>-<index>` stay labels); where a Service
    is named after it, DNS-1035 too: it starts with a letter."""
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,50}[a-z0-9])?", name):
        raise UserError(f"--name {name[:80]!r}: a Kubernetes name is lowercase letters, digits and '-' (at most 52)")
    if service and not name[0].isalpha():
        raise UserError(f"--name {name!r}: the job's Service is named after it, and a Service's name starts with a "
                        f"letter (DNS-1035)")
    return name


def _image(image: str, what: str = "runs") -> str:
    """The image by the one reference grammar (engine.check_ref, the one every command takes),
    and by its content tag or digest, so the cluster runs exactly what was tested."""
    check_ref(image, "--image")
    if "@sha256:" not in image and not re.search(r":sha-[0-9a-f]+", image):
        raise UserError(f"--image {image}: name it by its content tag (REPO:sha-...) or digest (REPO@sha256:...), "
                        f"so the cluster {what} exactly the image that was tested")
    return image


def quantity(value: str, option: str) -> str:
    """A Kubernetes quantity as written into a manifest: no space around it, above zero, and
    of a size a cluster can hold (at most 15 digits)."""
    text = value.strip()
    m = re.fullmatch(_QUANTITY, text)
    if not m or len(m.group(1)) > 16 or float(m.group(1)) <= 0:
        raise UserError(f"{option} {value[:80]!r}: a Kubernetes quantity above zero, e.g. "
                        + ("16Gi" if "shm" in option else "512Gi"))
    return text


def job_chip(name: str, option: str = "--chip") -> Chip:
    """The chip a job runs on: one whose record names its resource and ring label."""
    found = find(name)
    if found is None or not found.job:
        raise UserError(f"{option} {name!r}: choose one of {', '.join(c.name for c in known() if c.job)}")
    return found


def _container(image: str, devices: int, command: list[str], timeout: int, extra_env: list[dict],
               resource: str, framework: Framework = DEFAULT, cores: PodCores = PodCores()) -> dict:
    asked = {resource: devices, **cores.resources(devices)}
    return {
        "name": "ascend",                   # the operator looks for this name
        "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/bash", "-c", launch_script(timeout, framework), "ascend-launch"], "args": list(command),
        "env": extra_env + cores.env() + [{"name": "XDL_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}],
        # requests == limits for every resource: Guaranteed QoS, what the static CPU manager needs
        "resources": {"limits": dict(asked), "requests": dict(asked)},
        "volumeMounts": [{"name": "ascend-driver", "mountPath": "/usr/local/Ascend/driver", "readOnly": True},
                         {"name": "hccn-conf", "mountPath": "/etc/hccn.conf", "readOnly": True},
                         {"name": "dshm", "mountPath": "/dev/shm"}],
    }


def _volumes() -> list[dict]:
    return [{"name": "ascend-driver", "hostPath": {"path": "/usr/local/Ascend/driver", "type": "Directory"}},
            {"name": "hccn-conf", "hostPath": {"path": "/etc/hccn.conf", "type": "File"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory"}}]


def _sized(cores: PodCores) -> PodCores:
    """The pod's memory as it is written: checked and without the spaces it was given with."""
    return dataclasses.replace(cores, memory=quantity(cores.memory, "--memory")) if cores.memory else cores


def _check(image: str, nodes: int, devices: int, command: list[str], cores: PodCores = PodCores()) -> None:
    if nodes < 1 or devices < 1:
        raise UserError("--nodes and --devices are at least 1")
    if not command:
        raise UserError("nothing to run: put the training script after --, e.g. -- train.py")
    _image(image)
    _check_cores(cores, devices)


def _check_cores(cores: PodCores, devices: int) -> None:
    if cores.bind not in ("numa", "even", "off"):
        raise UserError(f"--bind {cores.bind[:80]}: numa, even or off for a job (a pod's cores are the kubelet's "
                        f"choice, so explicit host ranges cannot be given)")
    if cores.cpus is not None and not 0 <= cores.cpus <= MAX_CPUS:
        raise UserError(f"--cpus {cores.cpus}: whole CPUs per pod (at most {MAX_CPUS}), or 0 to ask for none")
    if cores.min_cores < 1:
        raise UserError(f"--bind-min-cores {cores.min_cores}: at least 1")
    cpus = cores.resources(devices).get("cpu")
    if isinstance(cpus, int) and cores.bind != "off" and cpus < devices * cores.min_cores:
        raise UserError(f"--cpus {cpus} for {devices} cards: {cpus // devices} each, under the {cores.min_cores} each "
                        f"rank needs. Ask for at least {devices * cores.min_cores} (--cpus), or --bind off")


@dataclass(frozen=True)
class Placement:
    """What the site's cluster names: its device plugin's resource ("": the chip's) and the
    taints the pods tolerate (each as a toleration's manifest)."""
    resource: str = ""
    tolerations: tuple[dict, ...] = ()

    def spec(self) -> dict:
        return {"tolerations": [dict(t) for t in self.tolerations]} if self.tolerations else {}


def ascend_job(name: str, image: str, nodes: int, devices: int, command: list[str], chip: str = DEFAULT_CHIP.name,
               queue: str = "default", timeout: int = HCCL_TIMEOUT, framework: Framework = DEFAULT,
               cores: PodCores = PodCores(), site: Placement = Placement()) -> dict:
    cores = _sized(cores)
    _check(image, nodes, devices, command, cores)
    name = _name(name)
    npu = job_chip(chip)
    ring, resource = npu.ring, site.resource or npu.resource
    worker = _container(image, devices, command, timeout, [
        {"name": "ASCEND_VISIBLE_DEVICES",
         "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{resource}']"}}}], resource,
        framework, cores)
    worker["ports"] = [{"containerPort": OPERATOR_PORT, "name": "ascendjob-port"}]
    worker["volumeMounts"].append({"name": "ranktable", "mountPath": RANK_TABLE_DIR})

    def replica(container: dict, count: int, role: str) -> dict:
        spec = {"nodeSelector": {"host-arch": "huawei-arm"}, **site.spec(), "containers": [container],
                "volumes": _volumes() + [{"name": "ranktable", "configMap": {"name": f"rings-config-{name}"}}]}
        if role == "worker":    # one worker per server; MindSpore's scheduler may share one
            spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchExpressions": [
                    {"key": "job-name", "operator": "In", "values": [name]},
                    {"key": ROLE_LABEL, "operator": "In", "values": ["worker"]}]},
                "topologyKey": "kubernetes.io/hostname"}]}}
        return {"replicas": count, "restartPolicy": "Never", "template": {
            "metadata": {"labels": {"ring-controller.atlas": ring, ROLE_LABEL: role}}, "spec": spec}}

    if launcher_of(framework).scheduler_pod:
        # MindSpore's scheduler: the same image and script, no NPU (it only coordinates).
        scheduler = _container(image, devices, command, timeout, [{"name": "ASCEND_BUILD_ROLE", "value": "scheduler"}],
                               resource, framework, cores)
        del scheduler["resources"]
        scheduler["ports"] = worker["ports"]
        replicas = {"Scheduler": replica(scheduler, 1, "scheduler"), "Worker": replica(worker, nodes, "worker")}
        pods = nodes + 1
    else:
        replicas = {"Master": replica(worker, 1, "worker")}
        if nodes > 1:
            replicas["Worker"] = replica(worker, nodes - 1, "worker")
        pods = nodes
    job = {"apiVersion": "mindxdl.gitee.com/v1", "kind": "AscendJob",
           "metadata": {"name": name, "labels": {"framework": framework.operator_label,
                                                 "ring-controller.atlas": ring}},
           "spec": {"schedulerName": "volcano",
                    "runPolicy": {"schedulingPolicy": {"minAvailable": pods, "queue": queue}},
                    "successPolicy": "AllWorkers", "replicaSpecs": replicas}}
    # The operator writes the rank table into this ConfigMap once the pods are placed.
    table = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": f"rings-config-{name}", "labels": {"ring-controller.atlas": ring}},
             "data": {"hccl.json": '{"status":"initializing"}'}}
    return {"items": [table, job]}


def indexed_job(name: str, image: str, nodes: int, devices: int, command: list[str],
                timeout: int = HCCL_TIMEOUT, port: int = 29500, framework: Framework = DEFAULT,
                cores: PodCores = PodCores(), chip: str = DEFAULT_CHIP.name, site: Placement = Placement()) -> dict:
    """For sites without the operator: an indexed Job (one pod per node, the completion
    index is the node rank) and the headless Service that gives pod 0 a DNS name (torch's
    rendezvous there, or MindSpore's scheduler, which node 0's msrun starts); its pods ask
    for the chip's device plugin resource."""
    cores = _sized(cores)
    _check(image, nodes, devices, command, cores)
    name = _name(name, service=True)        # the headless Service that names pod 0
    env = [{"name": "NNODES", "value": str(nodes)}, {"name": "NPROC_PER_NODE", "value": str(devices)},
           {"name": "MASTER_ADDR", "value": f"{name}-0.{name}"}, {"name": "MASTER_PORT", "value": str(port)}]
    container = _container(image, devices, command, timeout, env, site.resource or job_chip(chip).resource, framework,
                           cores)
    container["ports"] = [{"containerPort": port, "name": "rendezvous"}]
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
           "spec": {"completionMode": "Indexed", "completions": nodes, "parallelism": nodes, "backoffLimit": 0,
                    "template": {"metadata": {"labels": {"job-name": name}},
                                 "spec": {"subdomain": name, "restartPolicy": "Never", **site.spec(),
                                          "containers": [container], "volumes": _volumes()}}}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
               "spec": {"clusterIP": "None", "selector": {"job-name": name},
                        "ports": [{"name": "rendezvous", "port": port}]}}
    return {"items": [service, job]}


# ---------------------------------------------------------------- quantities

_QUANTITY = r"([0-9]+(?:\.[0-9]+)?)([KMGTPE]i|[kMGTPE])?"
_UNITS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
          **{u + "i": 1024 ** (n + 1) for n, u in enumerate("KMGTPE")}}


def _bytes(text: str) -> float:
    m = re.fullmatch(_QUANTITY, text)
    assert m, text
    return float(m.group(1)) * _UNITS[m.group(2) or ""]


def dump(manifests: dict) -> str:
    """The manifests as YAML documents, a script of many lines as a block a reader can read."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)
    Dumper.add_representer(str, text)
    return "---\n".join(yaml.dump(item, Dumper=Dumper, sort_keys=False) for item in manifests["items"])
