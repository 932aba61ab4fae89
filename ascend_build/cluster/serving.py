"""Serving manifests for a cluster, from a serving image (vLLM and vLLM-Ascend): one
server on the NPUs of one node (an apps/v1 Deployment of such servers), or one server
across N nodes (a LeaderWorkerSet of groups of N pods, as vLLM-Ascend's own multi-node CI
runs it: the leader starts Ray's head and `vllm serve` with tensor and pipeline
parallelism over the group, the workers join its Ray cluster). A ClusterIP Service in
front of the servers (a group's leader), the model read from a PersistentVolumeClaim.

Every one of them has what a cluster admin asks of a pod that holds NPUs for hours: no
privilege escalation, every capability dropped, the image's own user where it has one
(the hosts' HwHiAiUser, built with --run-as) and the driver's group as a supplementary
one (root without capabilities opens /dev/davinci* through it), no service links (a
Service named `vllm` would inject VLLM_PORT=tcp://..., which vLLM refuses), the node's
arch the image's, the site's tolerations, a startup probe long enough for a large model,
and on the way out a preStop that drains: the server leaves the Service's endpoints, its
running and waiting requests finish (read from vLLM's /metrics), and a group's workers
stay until their leader is gone. Every hostPath names its type."""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Literal

from ..chips import DEFAULT as DEFAULT_CHIP
from ..errors import UserError
from ..host.serving import DEFAULT_PORT, JOB_SETS, MODELS, check_extra, model_in_claim, vllm_argv
from .k8s import ROLE_LABEL, PodCores, _bytes, _check_cores, _image, _name, _sized, job_chip, quantity

RAY_PORT = 6379                 # Ray's head (its GCS), where the workers join
DRIVER = "/usr/local/Ascend/driver"
Gang = Literal["none", "volcano"]
Parallel = Literal["pipeline", "tensor"]
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
ARCHES = ("arm64", "amd64")     # kubernetes.io/arch's values for the images built here
NPU_GID = 1000                  # the hosts' HwHiAiUser group unless the site installed the driver otherwise
LWS_API = "leaderworkerset.x-k8s.io/v1"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"           # the label the LWS controller puts on its pods
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"    # the queue of the PodGroup the controller makes
DEFAULT_CORES = PodCores()       # 16 CPUs and 64Gi per card, requests == limits


@dataclass(frozen=True)
class Toleration:
    """A taint the pods tolerate, as `kubectl taint` writes one: KEY[=VALUE]:EFFECT."""
    key: str
    value: str
    effect: str

    def manifest(self) -> dict[str, str]:
        if self.value:
            return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}
        return {"key": self.key, "operator": "Exists", "effect": self.effect}


_KEY = r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?"


def toleration(text: str) -> Toleration:
    """--toleration KEY[=VALUE]:EFFECT (a taint as kubectl writes it, e.g. dedicated=npu:NoSchedule)."""
    head, _, effect = text.rpartition(":")
    key, _, value = head.partition("=")
    if not head or effect not in EFFECTS or not re.fullmatch(_KEY, key) or not re.fullmatch(_VALUE, value):
        raise UserError(f"--toleration {text[:80]!r}: a taint as kubectl writes it, KEY[=VALUE]:EFFECT with EFFECT one "
                        f"of {', '.join(EFFECTS)}, e.g. dedicated=npu:NoSchedule")
    return Toleration(key, value, effect)


def resource_name(text: str) -> str:
    """--npu-resource: a device plugin's extended resource, DOMAIN/NAME (huawei.com/Ascend910)."""
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?", text) \
            or text.split("/")[0].endswith("kubernetes.io"):
        raise UserError(f"--npu-resource {text[:80]!r}: the device plugin's extended resource, DOMAIN/NAME, e.g. "
                        f"huawei.com/Ascend910 (MindCluster), huawei.com/ascend-1980 (CCE), huawei.com/Ascend310P")
    return text


def interface(text: str | None, option: str) -> str | None:
    """A network interface's name as Linux takes it (at most 15 characters, no '/' or space)."""
    if text is not None and not re.fullmatch(r"[A-Za-z0-9_.:-]{1,15}", text):
        raise UserError(f"{option} {text[:80]!r}: a network interface of the pods, like eth0 or net1 (Multus)")
    return text


@dataclass(frozen=True)
class ClusterSite:
    """What the site's cluster decides for every serving manifest (`invoke site` settings)."""
    npu_resource: str = ""                      # "": the chip's device plugin resource
    tolerations: tuple[Toleration, ...] = ()
    hccl_ifname: str | None = None              # HCCL_SOCKET_IFNAME (None: not set, HCCL_IF_IP decides)
    gloo_ifname: str | None = None              # GLOO_SOCKET_IFNAME and TP_SOCKET_IFNAME
    gang: Gang = "none"                         # volcano: gang-scheduled by Volcano (through the LWS controller)
    queue: str = "default"                      # the Volcano queue
    npu_gid: int = NPU_GID                      # the hosts' HwHiAiUser group, owner of /dev/davinci*


@dataclass(frozen=True)
class PodImage:
    """The serving image as the pods run it: by its content tag or digest, on nodes of its
    arch, as the user its containers run as (None: root)."""
    ref: str
    arch: str
    user: tuple[int, int] | None = None


def pod_image(ref: str, platform: str | None = None, user: str | None = None, arch: str | None = None,
              run_as: str | None = None) -> PodImage:
    """The image's arch and user: from its labels where the engine has it (`platform`,
    `user`), else from --arch and --run-as, else its arch from its tag's end (-arm64, as
    every tag here ends); a user nothing names is root."""
    _image(ref, "serves")
    labelled = platform.rpartition("/")[2] if platform else None
    tagged = next((a for a in ARCHES if ref.endswith(f"-{a}")), None)
    found = arch or labelled or tagged
    if found not in ARCHES:
        raise UserError(f"--image {ref[:120]}: its arch is not known here (neither its labels nor a -arm64/-amd64 tag "
                        f"say it); give --arch arm64 or --arch amd64")
    if arch and labelled and arch != labelled:
        raise UserError(f"--arch {arch}: the image's label says {platform}")
    said = run_as or user or "root"
    m = re.fullmatch(r"([0-9]{1,9}):([0-9]{1,9})", said)
    if said != "root" and (not m or int(m.group(1)) == 0):
        raise UserError(f"--run-as {said[:40]!r}: root, or UID:GID of the hosts' HwHiAiUser the image was built for "
                        f"(invoke build --run-as), e.g. 1000:1000")
    if run_as and user and run_as != user:
        raise UserError(f"--run-as {run_as}: the image's label says its containers run as {user}")
    return PodImage(ref, found, (int(m.group(1)), int(m.group(2))) if m else None)


@dataclass(frozen=True)
class Serving:
    """What is served and how: the model's folder inside a claim (the claim read-only at
    /models), the servers (replicas) and the nodes each spans, the API's port, the pods'
    /dev/shm, how long a server may take to load and to drain."""
    model: str                  # a relative path inside the claim
    claim: str                  # the PersistentVolumeClaim holding the models
    replicas: int = 1
    port: int = DEFAULT_PORT
    shm: str = "16Gi"           # the /dev/shm emptyDir's sizeLimit (memory: counts against the pod's)
    nodes: int = 1              # 1: a Deployment; more: a LeaderWorkerSet of groups of this size
    parallel: Parallel = "pipeline"   # across nodes: pipeline (TP = cards per node, PP = nodes) or tensor
    startup: int = 0            # seconds a server may take to load (0: 30 minutes, 60 across nodes)
    grace: int = 180            # terminationGracePeriodSeconds: the drain's whole budget
    ray_wait: int = 600         # seconds the leader waits for its workers in Ray

    @property
    def startup_seconds(self) -> int:
        return self.startup or (1800 if self.nodes == 1 else 3600)

    def sizes(self, devices: int) -> tuple[int, int]:
        """(tensor, pipeline) parallel sizes over the group's cards."""
        if self.parallel == "tensor":
            return devices * self.nodes, 1
        return devices, self.nodes


def _claim(name: str) -> str:
    # a PersistentVolumeClaim's name is a DNS subdomain: labels joined by dots
    if len(name) > 253 or not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", name):
        raise UserError(f"--model-claim {name[:80]!r}: a PersistentVolumeClaim's name (lowercase letters, digits, "
                        f"'-' and '.'), e.g. --model-claim models")
    return name


def _queue(name: str) -> str:
    # Volcano's PodGroup takes a queue by this pattern (its CRD's spec.queue)
    if len(name) > 253 or not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", name):
        raise UserError(f"--queue {name[:80]!r}: a Volcano queue's name (lowercase letters, digits, '-' and '.')")
    return name


def _checked(serve: Serving, devices: int, extra: tuple[str, ...] | list[str], site: ClusterSite,
             cores: PodCores) -> tuple[Serving, PodCores, tuple[str, ...]]:
    if devices < 1 or serve.replicas < 1 or serve.nodes < 1:
        raise UserError("--devices, --replicas and --nodes are at least 1")
    if not 1 <= serve.port <= 65535 or serve.port == RAY_PORT and serve.nodes > 1:
        raise UserError(f"--port {serve.port}: expected a whole number from 1 to 65535"
                        + (f", not Ray's {RAY_PORT}" if serve.port == RAY_PORT else ""))
    if serve.grace < 30 or serve.startup and serve.startup < 60:
        raise UserError("--grace-period is at least 30 seconds and --startup-timeout at least 60: a server drains and "
                        "loads a model in no less")
    model_in_claim(serve.model), _claim(serve.claim), _queue(site.queue)
    if site.gang not in ("none", "volcano"):
        raise UserError(f"--gang {site.gang[:40]!r}: none or volcano")
    extra = check_extra(extra, "--kind serving", JOB_SETS)
    serve, cores = dataclasses.replace(serve, shm=quantity(serve.shm, "--shm-size")), _sized(cores)
    _check_cores(dataclasses.replace(cores, bind="off"), devices)     # vLLM binds its own workers
    memory = cores.resources(devices).get("memory")
    if isinstance(memory, str) and _bytes(serve.shm) >= _bytes(memory):
        raise UserError(f"--shm-size {serve.shm}: a memory-backed /dev/shm counts against the pod's memory "
                        f"({memory}); give less, or more --memory")
    return serve, cores, extra


def manifests(name: str, image: PodImage, devices: int, serve: Serving, extra: list[str] | tuple[str, ...] = (),
              chip: str = DEFAULT_CHIP.name, cores: PodCores = DEFAULT_CORES, site: ClusterSite = ClusterSite()) -> dict:
    """The Service and the Deployment (one node per server) or LeaderWorkerSet (--nodes N)."""
    name = _name(name, service=True)
    serve, cores, extra = _checked(serve, devices, extra, site, cores)
    resource = site.npu_resource or job_chip(chip).resource
    asked = {resource: devices, **cores.resources(devices)}
    if serve.nodes == 1:
        made = _deployment(name, image, devices, serve, extra, asked, site)
    else:
        made = _leader_worker_set(name, image, devices, serve, extra, asked, site)
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": _labels(name)},
               "spec": {"type": "ClusterIP", "selector": _labels(name, "leader" if serve.nodes > 1 else ""),
                        "ports": [{"name": "http", "port": serve.port, "targetPort": "http", "protocol": "TCP"}]}}
    return {"items": [service, made]}


def _labels(name: str, role: str = "") -> dict[str, str]:
    # fresh objects for each place (shared ones would be written as YAML anchors and aliases)
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/component": "serving",
            **({ROLE_LABEL: role} if role else {})}


def _deployment(name: str, image: PodImage, devices: int, serve: Serving, extra: tuple[str, ...],
                asked: dict, site: ClusterSite) -> dict:
    container = _server(image, serve, list(vllm_argv(f"{MODELS}/{serve.model}", "0.0.0.0", serve.port, devices, extra)),
                        asked, env=[])
    spec = _pod(image, serve, site, container, many=False)
    queue = {"annotations": {QUEUE_ANNOTATION: site.queue}} if site.gang == "volcano" else {}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": _labels(name)},
            "spec": {"replicas": serve.replicas, "selector": {"matchLabels": _labels(name)},
                     # NPUs are scarce: an update replaces a pod at a time instead of asking for more cards
                     "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
                     "template": {"metadata": {"labels": _labels(name), **queue}, "spec": spec}}}


def _server(image: PodImage, serve: Serving, command: list[str], asked: dict, env: list[dict]) -> dict:
    """The container that serves the API: vllm serve, its probes on /health, its drain."""
    def health(**more: int) -> dict:
        return {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10, "timeoutSeconds": 5, **more}
    return {
        "name": "vllm", "image": image.ref, "imagePullPolicy": "IfNotPresent", "command": command,
        **({"env": env} if env else {}),
        "ports": [{"name": "http", "containerPort": serve.port, "protocol": "TCP"}],
        "resources": {"limits": dict(asked), "requests": dict(asked)},
        # /health answers once the model is loaded: the startup probe allows that long before
        # liveness may restart the pod
        "startupProbe": health(failureThreshold=-(-serve.startup_seconds // 10)),
        "readinessProbe": health(failureThreshold=3),
        "livenessProbe": health(failureThreshold=6),
        "lifecycle": {"preStop": {"exec": {"command": ["python3", "-c", DRAIN, "serve", str(serve.port),
                                                       str(serve.grace - 15)]}}},
        "securityContext": _container_security(),
        "volumeMounts": _mounts(many=False),
    }


def _container_security() -> dict:
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def _pod_security(image: PodImage, site: ClusterSite) -> dict:
    """The image's own user where it has one; the driver's group for every pod."""
    user = ({"runAsUser": image.user[0], "runAsGroup": image.user[1], "runAsNonRoot": True} if image.user else {})
    return {**user, "supplementalGroups": [site.npu_gid], "seccompProfile": {"type": "RuntimeDefault"}}


def _mounts(many: bool) -> list[dict]:
    return [{"name": "ascend-driver", "mountPath": DRIVER, "readOnly": True},
            *([{"name": "hccn-conf", "mountPath": "/etc/hccn.conf", "readOnly": True}] if many else []),
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "models", "mountPath": MODELS, "readOnly": True}]


def _pod(image: PodImage, serve: Serving, site: ClusterSite, container: dict, many: bool, grace: int = 0) -> dict:
    return {
        "enableServiceLinks": False,
        "nodeSelector": {"kubernetes.io/arch": image.arch},
        **({"tolerations": [t.manifest() for t in site.tolerations]} if site.tolerations else {}),
        **({"schedulerName": "volcano"} if site.gang == "volcano" else {}),
        "securityContext": _pod_security(image, site),
        "terminationGracePeriodSeconds": grace or serve.grace,
        "containers": [container],
        "volumes": [{"name": "ascend-driver", "hostPath": {"path": DRIVER, "type": "Directory"}},
                    *([{"name": "hccn-conf", "hostPath": {"path": "/etc/hccn.conf", "type": "File"}}] if many else []),
                    {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": serve.shm}},
                    {"name": "models", "persistentVolumeClaim": {"claimName": serve.claim, "readOnly": True}}],
    }


# ---------------------------------------------------------------- many nodes: a LeaderWorkerSet

def _group_env(site: ClusterSite, serve: Serving, devices: int) -> list[dict]:
    """What every pod of a group is given: its own address for HCCL, vLLM and Ray; the
    site's interfaces; what the launch script waits for."""
    def pod_ip(name: str) -> dict:      # a fresh object each time: never a YAML alias
        return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    ifnames = [("HCCL_SOCKET_IFNAME", site.hccl_ifname), ("GLOO_SOCKET_IFNAME", site.gloo_ifname),
               ("TP_SOCKET_IFNAME", site.gloo_ifname)]
    return [pod_ip("POD_IP"), pod_ip("HCCL_IF_IP"), pod_ip("VLLM_HOST_IP"),
            *({"name": key, "value": value} for key, value in ifnames if value),
            # Ray would set ASCEND_RT_VISIBLE_DEVICES per actor; vLLM-Ascend picks its cards itself
            {"name": "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES", "value": "1"},
            {"name": "ASCEND_BUILD_RAY_PORT", "value": str(RAY_PORT)},
            {"name": "ASCEND_BUILD_GROUP_NPUS", "value": str(devices * serve.nodes)},
            {"name": "ASCEND_BUILD_RAY_WAIT", "value": str(serve.ray_wait)}]


def _leader_worker_set(name: str, image: PodImage, devices: int, serve: Serving, extra: tuple[str, ...],
                       asked: dict, site: ClusterSite) -> dict:
    tp, pp = serve.sizes(devices)
    argv = [*vllm_argv(f"{MODELS}/{serve.model}", "0.0.0.0", serve.port, tp),
            "--pipeline-parallel-size", str(pp), "--distributed-executor-backend", "ray", *extra]
    leader = _server(image, serve, ["/bin/bash", "-c", GROUP_SCRIPT, "ascend-serve", "leader", *argv], asked,
                     _group_env(site, serve, devices))
    leader["volumeMounts"] = _mounts(many=True)
    worker = {"name": "vllm-worker", "image": image.ref, "imagePullPolicy": "IfNotPresent",
              "command": ["/bin/bash", "-c", GROUP_SCRIPT, "ascend-serve", "worker"],
              "env": _group_env(site, serve, devices),
              "resources": {"limits": dict(asked), "requests": dict(asked)},
              # a worker stays until its leader has drained and stopped answering
              "lifecycle": {"preStop": {"exec": {"command": ["python3", "-c", DRAIN, "follow", str(serve.port),
                                                             str(serve.grace - 15)]}}},
              "securityContext": _container_security(), "volumeMounts": _mounts(many=True)}
    def template(role: str, container: dict) -> dict:
        # each pod of a set on a node of its own: a node's cards are one pod's
        spread = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {LWS_NAME: name}}, "topologyKey": "kubernetes.io/hostname"}]}}
        return {"metadata": {"labels": _labels(name, role)},
                "spec": {**_pod(image, serve, site, container, many=True), "affinity": spread}}
    return {"apiVersion": LWS_API, "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "labels": _labels(name),
                         **({"annotations": {QUEUE_ANNOTATION: site.queue}} if site.gang == "volcano" else {})},
            "spec": {"replicas": serve.replicas, "startupPolicy": "LeaderCreated",
                     "rolloutStrategy": {"type": "RollingUpdate",
                                         "rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 1}},
                     "leaderWorkerTemplate": {
                         "size": serve.nodes,
                         # one pod lost breaks the group's Ray cluster and HCCL rings: all start again
                         "restartPolicy": "RecreateGroupOnPodRestart",
                         "leaderTemplate": template("leader", leader),
                         "workerTemplate": template("worker", worker)}}}


def podgroup(lws: dict) -> dict:
    """The Volcano PodGroup the LWS controller makes for each group of a LeaderWorkerSet
    when the site runs it with gangSchedulingManagement.schedulerProvider: volcano (its
    documented rule, lws docs/examples/sample/gang-scheduling): minMember the group's size
    (startupPolicy LeaderCreated), minResources the group's requests (the leader's and
    size-1 workers'), its queue the set's scheduling.volcano.sh/queue-name. Shown, never
    written: the controller names and owns it."""
    spec, tmpl = lws["spec"], lws["spec"]["leaderWorkerTemplate"]
    size = tmpl["size"]
    need: dict[str, float] = {}
    for pod, count in ((tmpl["leaderTemplate"], 1), (tmpl["workerTemplate"], size - 1)):
        for c in pod["spec"]["containers"]:
            for key, value in c["resources"]["requests"].items():
                need[key] = need.get(key, 0) + count * (_bytes(value) if isinstance(value, str) else value)
    queue = (lws["metadata"].get("annotations") or {}).get(QUEUE_ANNOTATION)
    group = {"minMember": size if spec.get("startupPolicy", "LeaderCreated") == "LeaderCreated" else 1,
             "minResources": {k: _quantity(v) for k, v in need.items()}, **({"queue": queue} if queue else {})}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": f"{lws['metadata']['name']}-0", "labels": {LWS_NAME: lws["metadata"]["name"]}},
            "spec": group}


def _quantity(value: float) -> int | str:
    """A sum of requests as a quantity: whole numbers as they are, memory in Gi where it divides."""
    if value >= 1024 ** 3 and value % 1024 ** 3 == 0:
        return f"{int(value // 1024 ** 3)}Gi"
    return int(value) if value == int(value) else str(value)


# The leader's wait (python3 -c in the pod): the group's pods alive in Ray with all their NPUs,
# or after `wait` seconds a failure that says what Ray has.
WAITER = r"""import sys, time
import ray

nodes, npus, wait = (int(a) for a in sys.argv[1:4])
ray.init(address="auto", logging_level="ERROR")
deadline = time.monotonic() + wait
while True:
    alive = [n for n in ray.nodes() if n.get("Alive")]
    have = sum(n.get("Resources", {}).get("NPU", 0) for n in alive)
    if len(alive) >= nodes and have >= npus:
        print("ascend-build serve: Ray has {} pods and {:g} NPUs".format(len(alive), have))
        break
    if time.monotonic() > deadline:
        print("ascend-build serve: after {} s Ray has {} of {} pods and {:g} of {} NPUs".format(
            wait, len(alive), nodes, have, npus), file=sys.stderr)
        sys.exit(1)
    time.sleep(5)
ray.shutdown()
"""

# Runs in each pod of a group (bash -c, the image's Ray): the leader starts Ray's head on its
# own address, waits until every pod of the group has joined with its NPUs, then runs vllm
# serve (which places its workers over the group through Ray); a worker waits for the
# leader's Ray, then joins it and stays in the foreground: when Ray stops, the pod ends and
# the LeaderWorkerSet starts the whole group again.
GROUP_SCRIPT = r"""set -eu
role="$1"; shift
port="${ASCEND_BUILD_RAY_PORT:-6379}"; wait="${ASCEND_BUILD_RAY_WAIT:-600}"
case "${role}" in
leader)
    echo "ascend-build serve: Ray head on ${POD_IP}:${port} for ${LWS_GROUP_SIZE} pods, ${ASCEND_BUILD_GROUP_NPUS} NPUs"
    ray start --head --port="${port}" --node-ip-address="${POD_IP}" --include-dashboard=false --disable-usage-stats
    waiter=$(cat <<'ASCEND_BUILD_WAITER'
@WAITER@ASCEND_BUILD_WAITER
)
    python3 -c "${waiter}" "${LWS_GROUP_SIZE}" "${ASCEND_BUILD_GROUP_NPUS}" "${wait}"
    exec "$@" ;;
worker)
    leader="${LWS_LEADER_ADDRESS}:${port}"; waited=0
    until ray health-check --address="${leader}" >/dev/null 2>&1; do
        if [ "${waited}" -ge "${wait}" ]; then
            echo "ascend-build serve: no Ray head at ${leader} after ${wait} s" >&2; exit 1
        fi
        sleep 5; waited=$((waited + 5))
    done
    echo "ascend-build serve: worker ${LWS_WORKER_INDEX} of ${LWS_GROUP_SIZE} joins ${leader} from ${POD_IP}"
    exec ray start --address="${leader}" --node-ip-address="${POD_IP}" --disable-usage-stats --block ;;
*)
    echo "ascend-build serve: role ${role}: leader or worker" >&2; exit 2 ;;
esac
""".replace("@WAITER@", WAITER)

# The preStop of a server (python3 -c): `serve PORT BUDGET` waits a few seconds for the pod to
# leave the Service's endpoints, then until vLLM's /metrics says no request runs or waits (or
# the budget is spent); `follow PORT BUDGET` (a group's worker) waits while its leader's API
# still answers. A server that does not answer has nothing left to drain.
DRAIN = r"""import os, sys, time, urllib.request

mode, port, budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
deadline = time.monotonic() + budget
step = float(os.environ.get("ASCEND_BUILD_DRAIN_STEP") or 2)


def read(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.read().decode()
    except Exception:
        return None


def busy():
    text = read("http://127.0.0.1:{}/metrics".format(port))
    if text is None:
        return 0.0
    names = ("vllm:num_requests_running", "vllm:num_requests_waiting")
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.split("{")[0].split(" ")[0] in names)


if mode == "serve":
    time.sleep(min(5 * step, budget))
    while time.monotonic() < deadline and busy() > 0:
        time.sleep(step)
else:
    leader = "http://{}:{}/health".format(os.environ.get("LWS_LEADER_ADDRESS", "127.0.0.1"), port)
    while time.monotonic() < deadline and read(leader) is not None:
        time.sleep(step)
"""
