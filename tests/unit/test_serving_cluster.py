"""Serving on a cluster: `invoke job --kind serving` writes a Deployment of servers (one
node each) or, with --nodes N, a LeaderWorkerSet whose groups of N pods run one server over
Ray; both hold what a cluster admin asks of them. The manifests are checked offline against
Kubernetes' own schemas (kubernetes-validate) and against the LeaderWorkerSet and Volcano
PodGroup CRD schemas checked in under tests/data/k8s (their README names source and
version), read strictly: a field the CRD does not name is refused, as the API server's
strict field validation refuses it. The scripts the pods run are run here with stand-ins
for ray, vllm and sleep, and the drain against a stand-in of vLLM's API."""
from __future__ import annotations

import copy
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from ascend_build.cluster import k8s
from ascend_build.cluster import serving as sv
from ascend_build.errors import UserError
from tests import forked

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "k8s"
SERVING = "registry.example.com/ascend-serving:sha-0123456789abcdef-arm64"
K8S = "1.30"


def invoke(*args: str) -> subprocess.CompletedProcess:
    return forked.invoke(*args)


def strict(schema: dict) -> dict:
    """A CRD's structural schema as the API server's strict field validation reads it: an
    object's fields are those it names, unless it keeps unknown fields or is a map."""
    out = copy.deepcopy(schema)

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if ("properties" in node and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(out)
    return out


LWS_SCHEMA = strict(json.loads((DATA / "leaderworkerset-v1.schema.json").read_text()))
PODGROUP_SCHEMA = strict(json.loads((DATA / "volcano-podgroup-v1beta1.schema.json").read_text()))


_VALIDATORS: dict[int, object] = {}


def crd_valid(item: dict, schema: dict) -> None:
    """jsonschema.validate, its validator made once per schema (the LWS schema is large)."""
    import jsonschema
    if id(schema) not in _VALIDATORS:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        _VALIDATORS[id(schema)] = cls(schema)
    _VALIDATORS[id(schema)].validate(item)  # type: ignore[attr-defined]


def pods_valid(item: dict) -> None:
    """Every pod template of a manifest, as Kubernetes' own PodTemplate checks it."""
    import kubernetes_validate
    for template in templates(item):
        kubernetes_validate.validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
                                      "template": template}, K8S, strict=True)


def templates(item: dict) -> list[dict]:
    if item["kind"] == "LeaderWorkerSet":
        group = item["spec"]["leaderWorkerTemplate"]
        return [group["leaderTemplate"], group["workerTemplate"]]
    return [item["spec"]["template"]]


def lws(**more) -> dict:
    made = sv.manifests("qwen", sv.PodImage(SERVING, "arm64"), 8,
                        sv.Serving("Qwen3-235B-A22B", "models", nodes=2), ["--max-model-len", "8192"], **more)
    return made


# ------------------------------------------------------------------ many nodes: the LeaderWorkerSet

def test_job_nodes_2_writes_a_leaderworkerset_of_size_2_valid_against_the_crd_and_kubernetes():
    out = invoke("job", "--kind", "serving", "--image", SERVING, "--model", "Qwen3-235B-A22B", "--model-claim",
                 "models", "--nodes", "2", "--devices", "8", "--", "--max-model-len", "8192")
    assert out.returncode == 0, out.stderr
    service, group = yaml.safe_load_all(out.stdout)
    assert (group["apiVersion"], group["kind"]) == ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
    assert group["spec"]["leaderWorkerTemplate"]["size"] == 2 and group["spec"]["replicas"] == 1
    crd_valid(group, LWS_SCHEMA)
    pods_valid(group)
    import kubernetes_validate
    kubernetes_validate.validate(service, K8S, strict=True)
    # The Service sends requests to each group's leader, the one pod with the API.
    leader, worker = templates(group)
    assert service["spec"]["selector"] == leader["metadata"]["labels"] != worker["metadata"]["labels"]
    assert service["spec"]["selector"]["ascend-build/role"] == "leader"
    # A group is started again whole: one pod lost breaks its Ray cluster and HCCL's rings.
    assert group["spec"]["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert "|\n" in out.stdout.replace("- |", "|"), "the pods' script is written as a block a reader can read"


@pytest.mark.parametrize("change", [
    lambda g: g["spec"]["leaderWorkerTemplate"].update(size="two"),
    lambda g: g["spec"]["leaderWorkerTemplate"].update(restartPolicy="Always"),
    lambda g: g["spec"].update(leaderWorkerTemplte={}),
    lambda g: g["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0].update(imagePullPolicies="x"),
    lambda g: g["spec"]["leaderWorkerTemplate"].pop("workerTemplate"),
], ids=["size-type", "restart-policy", "misspelt", "misspelt-in-pod", "no-workers"])
def test_the_crd_check_can_fail(change):
    group = lws()["items"][1]
    crd_valid(group, LWS_SCHEMA)
    broken = json.loads(json.dumps(group))
    change(broken)
    import jsonschema
    with pytest.raises(jsonschema.ValidationError):
        crd_valid(broken, LWS_SCHEMA)


def test_the_leader_runs_rays_head_and_vllm_serve_over_the_group_and_the_workers_join_it():
    group = lws()["items"][1]
    leader, worker = (t["spec"]["containers"][0] for t in templates(group))
    assert leader["command"][:3] == ["/bin/bash", "-c", sv.GROUP_SCRIPT] == worker["command"][:3]
    assert leader["command"][3:5] == ["ascend-serve", "leader"] and worker["command"][3:] == ["ascend-serve", "worker"]
    assert leader["command"][5:] == ["vllm", "serve", "/models/Qwen3-235B-A22B", "--host", "0.0.0.0", "--port", "8000",
                                     "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2",
                                     "--distributed-executor-backend", "ray", "--max-model-len", "8192"]
    tensor = sv.manifests("q", sv.PodImage(SERVING, "arm64"), 8, sv.Serving("m", "models", nodes=4, parallel="tensor"))
    argv = templates(tensor["items"][1])[0]["spec"]["containers"][0]["command"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "32" and argv[argv.index("--pipeline-parallel-size") + 1] \
        == "1"
    for container in (leader, worker):
        env = {e["name"]: e for e in container["env"]}
        for name in ("HCCL_IF_IP", "POD_IP", "VLLM_HOST_IP"):
            assert env[name]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}, name
        assert env["RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES"]["value"] == "1"
        assert env["ASCEND_BUILD_GROUP_NPUS"]["value"] == "16"
        assert "HCCL_SOCKET_IFNAME" not in env and "GLOO_SOCKET_IFNAME" not in env, "not set unless the site says"
    site = sv.ClusterSite(hccl_ifname="net1", gloo_ifname="eth0")
    for template in templates(lws(site=site)["items"][1]):
        env = {e["name"]: e.get("value") for e in template["spec"]["containers"][0]["env"]}
        assert (env["HCCL_SOCKET_IFNAME"], env["GLOO_SOCKET_IFNAME"], env["TP_SOCKET_IFNAME"]) == ("net1", "eth0",
                                                                                                  "eth0")
    # each pod of the set on a node of its own, the driver's hccn.conf as the training jobs mount it
    spec = templates(group)[1]["spec"]
    assert spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0] == {
        "labelSelector": {"matchLabels": {"leaderworkerset.sigs.k8s.io/name": "qwen"}},
        "topologyKey": "kubernetes.io/hostname"}
    assert {"name": "hccn-conf", "hostPath": {"path": "/etc/hccn.conf", "type": "File"}} in spec["volumes"]


def test_gang_scheduled_by_volcano_the_podgroup_the_controller_makes_is_valid_against_volcanos_crd():
    site = sv.ClusterSite(gang="volcano", queue="serving")
    group = lws(site=site)["items"][1]
    crd_valid(group, LWS_SCHEMA)
    assert group["metadata"]["annotations"] == {"scheduling.volcano.sh/queue-name": "serving"}
    assert all(t["spec"]["schedulerName"] == "volcano" for t in templates(group))
    made = sv.podgroup(group)
    crd_valid(made, PODGROUP_SCHEMA)
    assert made["spec"] == {"minMember": 2, "queue": "serving",
                            "minResources": {"huawei.com/Ascend910": 16, "cpu": 256, "memory": "1024Gi"}}
    # Volcano's CRD holds the queue's name to its pattern, and the minimum to a whole number.
    import jsonschema
    for change in (lambda p: p["spec"].update(queue="Serving_Queue"), lambda p: p["spec"].update(minMember="2"),
                   lambda p: p["spec"].update(minMembers=2)):
        broken = json.loads(json.dumps(made))
        change(broken)
        with pytest.raises(jsonschema.ValidationError):
            crd_valid(broken, PODGROUP_SCHEMA)
    without = lws()["items"][1]
    assert "annotations" not in without["metadata"] and all("schedulerName" not in t["spec"] for t in templates(without))
    out = invoke("job", "--kind", "serving", "--image", SERVING, "--model", "m", "--model-claim", "models",
                 "--nodes", "2", "--gang", "volcano", "--queue", "serving")
    assert out.returncode == 0 and "PodGroup in queue serving: minMember 2" in out.stderr, out.stderr


def test_npu_resource_changes_every_request_and_limit_of_every_kind():
    for made in (lws(site=sv.ClusterSite(npu_resource="huawei.com/ascend-1980")),
                 sv.manifests("q", sv.PodImage(SERVING, "arm64"), 4, sv.Serving("m", "models"),
                              site=sv.ClusterSite(npu_resource="huawei.com/ascend-1980"))):
        pods = [t["spec"] for t in templates(made["items"][1])]
        for container in (c for pod in pods for c in pod["containers"]):
            for side in ("requests", "limits"):
                assert container["resources"][side]["huawei.com/ascend-1980"] in (4, 8), (container["name"], side)
        assert "Ascend910" not in k8s.dump(made)
    out = invoke("job", "--kind", "serving", "--image", SERVING, "--model", "m", "--model-claim", "models",
                 "--nodes", "2", "--devices", "8", "--npu-resource", "huawei.com/ascend-1980")
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("huawei.com/ascend-1980: 8") == 4 and "Ascend910" not in out.stdout
    for kind in ("ascendjob", "indexed"):
        training = invoke("job", "--kind", kind, "--image", SERVING.replace("serving", "runtime"), "--framework",
                          "torch", "--npu-resource", "huawei.com/Ascend310P", "--toleration", "npu:NoSchedule",
                          "--", "train.py")
        assert training.returncode == 0, training.stderr
        assert "huawei.com/Ascend310P: 8" in training.stdout and "Ascend910" not in training.stdout, kind
        assert "- key: npu\n" in training.stdout and "operator: Exists" in training.stdout, kind


# ------------------------------------------------------------------ what an admin asks of every serving manifest

def _every_manifest(site: sv.ClusterSite, image: sv.PodImage) -> list[dict]:
    one = sv.manifests("serve", image, 2, sv.Serving("m", "models", replicas=2), site=site)
    many = sv.manifests("serve", image, 8, sv.Serving("m", "models", nodes=3), site=site)
    return [one["items"][1], many["items"][1]]


@pytest.mark.parametrize("user", [None, (1000, 1000)], ids=["root", "HwHiAiUser"])
def test_the_admins_list_holds_in_every_serving_manifest(user):
    site = sv.ClusterSite(tolerations=(sv.toleration("dedicated=npu:NoSchedule"), sv.toleration("npu:NoExecute")),
                          npu_gid=1001)
    image = sv.PodImage(SERVING.replace("arm64", "amd64"), "amd64", user)
    for item in _every_manifest(site, image):
        pods_valid(item)
        for template in templates(item):
            pod = template["spec"]
            assert pod["enableServiceLinks"] is False, "a Service named vllm would inject VLLM_PORT"
            assert pod["nodeSelector"] == {"kubernetes.io/arch": "amd64"}
            assert pod["tolerations"] == [
                {"key": "dedicated", "operator": "Equal", "value": "npu", "effect": "NoSchedule"},
                {"key": "npu", "operator": "Exists", "effect": "NoExecute"}]
            security = pod["securityContext"]
            assert security["supplementalGroups"] == [1001] and security["seccompProfile"] == {"type": "RuntimeDefault"}
            if user:
                assert (security["runAsUser"], security["runAsGroup"], security["runAsNonRoot"]) == (1000, 1000, True)
            else:
                assert "runAsUser" not in security and "runAsNonRoot" not in security
            assert pod["terminationGracePeriodSeconds"] == 180
            for volume in pod["volumes"]:
                if "hostPath" in volume:
                    assert volume["hostPath"]["type"] in ("Directory", "File"), volume
            for container in pod["containers"]:
                assert container["securityContext"] == {"allowPrivilegeEscalation": False,
                                                        "capabilities": {"drop": ["ALL"]}}
                assert container["lifecycle"]["preStop"]["exec"]["command"][:3] == ["python3", "-c", sv.DRAIN]
                if "ports" in container:        # a server: its probes fit a large model's start
                    probe = container["startupProbe"]
                    assert probe["periodSeconds"] * probe["failureThreshold"] >= \
                        (1800 if item["kind"] == "Deployment" else 3600)
                    assert probe["timeoutSeconds"] >= 5 and container["livenessProbe"]["timeoutSeconds"] >= 5


@pytest.mark.parametrize("field, where", [
    ("enableServiceLinks", "pod"), ("nodeSelector", "pod"), ("securityContext", "container"),
    ("type", "hostPath"), ("startupProbe", "container"), ("preStop", "container"),
], ids=lambda x: x)
def test_the_admins_check_can_fail(field, where):
    """Each item of the list, dropped from a manifest, is found missing by the check above."""
    item = _every_manifest(sv.ClusterSite(), sv.PodImage(SERVING, "arm64"))[1]
    pod = templates(item)[0]["spec"]
    if where == "pod":
        pod.pop(field)
    elif where == "hostPath":
        pod["volumes"][0]["hostPath"].pop("type")
    elif field == "preStop":
        pod["containers"][0].pop("lifecycle")
    else:
        pod["containers"][0].pop(field)

    def holds() -> None:
        for template in templates(item):
            p = template["spec"]
            assert p["enableServiceLinks"] is False and p["nodeSelector"]
            assert all(v["hostPath"]["type"] for v in p["volumes"] if "hostPath" in v)
            for c in p["containers"]:
                assert c["securityContext"]["capabilities"] and c["lifecycle"]["preStop"]
                assert "ports" not in c or c["startupProbe"]
    with pytest.raises((AssertionError, KeyError)):
        holds()


def test_the_image_user_and_arch_come_from_its_labels_or_are_said():
    assert sv.pod_image(SERVING) == sv.PodImage(SERVING, "arm64", None)
    assert sv.pod_image(SERVING, "linux/arm64", "1000:1000") == sv.PodImage(SERVING, "arm64", (1000, 1000))
    assert sv.pod_image(SERVING, run_as="1000:1001").user == (1000, 1001)
    digest = "registry.example.com/ascend-serving@sha256:" + "a" * 64
    assert sv.pod_image(digest, arch="amd64").arch == "amd64"
    for args, message in (((digest,), "its arch is not known here"),
                          ((SERVING, "linux/arm64", None, "amd64"), "--arch amd64: the image's label says linux/arm64"),
                          ((SERVING, None, "1000:1000", None, "root"), "its containers run as 1000:1000"),
                          ((SERVING, None, None, None, "0:0"), "--run-as '0:0'")):
        with pytest.raises(UserError, match=re.escape(message)):
            sv.pod_image(*args)


@pytest.mark.parametrize("args, message", [
    (["--nodes", "2", "--port", "6379"], "--port 6379: expected a whole number from 1 to 65535, not Ray's 6379"),
    (["--parallel", "tensor"], "--parallel: for one server across nodes"),
    (["--nodes", "2", "--parallel", "data"], "--parallel 'data': choose one of pipeline, tensor"),
    (["--queue", "prod"], "--queue prod: a Volcano queue, for --gang volcano"),
    (["--gang", "volcano", "--queue", "Prod_1"], "--queue 'Prod_1': a Volcano queue's name"),
    (["--gang", "kueue"], "--gang 'kueue': choose one of none, volcano"),
    (["--toleration", "dedicated=npu"], "--toleration 'dedicated=npu': a taint as kubectl writes it"),
    (["--npu-resource", "Ascend910"], "--npu-resource 'Ascend910': the device plugin's extended resource"),
    (["--nodes", "2", "--hccl-socket-ifname", "eth0 net1"], "--hccl-socket-ifname 'eth0 net1'"),
    (["--grace-period", "5"], "--grace-period is at least 30 seconds"),
    (["--nodes", "2", "--", "-pp", "4"], "vllm serve's --pipeline-parallel-size is set by this command (--nodes"),
    (["--nodes", "2", "--", "--distributed-executor-backend=mp"], "--distributed-executor-backend is set by this"),
    (["--hccl-timeout", "60"], "--hccl-timeout: for a training job"),
    (["--arch", "riscv64"], "--arch 'riscv64': choose one of arm64, amd64"),
])
def test_a_serving_job_refuses_bad_input(args, message):
    out = invoke("job", "--kind", "serving", "--image", SERVING, "--model", "m", "--model-claim", "models", *args)
    assert out.returncode == 2 and message in out.stderr, (args, out.stderr)
    assert "Traceback" not in out.stderr


def test_a_training_job_refuses_the_serving_options():
    out = invoke("job", "--image", SERVING.replace("serving", "runtime"), "--framework", "torch", "--parallel",
                 "tensor", "--", "train.py")
    assert out.returncode == 2 and "--parallel: for --kind serving" in out.stderr, out.stderr


# ------------------------------------------------------------------ the scripts the pods run

def _stand_ins(tmp_path: Path, nodes: list[dict], health_fails: int = 0) -> dict[str, str]:
    """ray, vllm and sleep on PATH, and a `ray` Python module, each writing what it was asked
    to a log; ray.nodes() answers `nodes`; `ray health-check` fails `health_fails` times."""
    bin_ = tmp_path / "bin"
    bin_.mkdir(parents=True)
    log = tmp_path / "log"
    (bin_ / "ray").write_text(f"""#!/bin/sh
echo "ray $*" >> {log}
if [ "$1" = health-check ]; then
    n=$(cat {tmp_path}/fails 2>/dev/null || echo 0)
    if [ "$n" -lt {health_fails} ]; then echo $((n + 1)) > {tmp_path}/fails; exit 1; fi
fi
""")
    (bin_ / "vllm").write_text(f'#!/bin/sh\necho "vllm $*" >> {log}\n')
    (bin_ / "sleep").write_text(f'#!/bin/sh\necho "sleep $*" >> {log}\n')
    for name in ("ray", "vllm", "sleep"):
        (bin_ / name).chmod(0o755)
    module = tmp_path / "py" / "ray"
    module.mkdir(parents=True)
    (module / "__init__.py").write_text(f"""import json
def init(**kw):
    open({str(log)!r}, "a").write("ray.init " + json.dumps(kw, sort_keys=True) + "\\n")
def nodes():
    return {nodes!r}
def shutdown():
    pass
""")
    python = Path(sys.executable).parent
    return {"PATH": f"{bin_}:{python}:/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "py"), "POD_IP": "10.0.0.5",
            "LWS_GROUP_SIZE": "2", "LWS_LEADER_ADDRESS": "qwen-0.qwen", "LWS_WORKER_INDEX": "1",
            "ASCEND_BUILD_GROUP_NPUS": "16", "ASCEND_BUILD_RAY_PORT": "6379", "ASCEND_BUILD_RAY_WAIT": "20"}


def _group(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    python3 = Path(env["PATH"].split(":")[1]) / "python3"
    script = sv.GROUP_SCRIPT if python3.exists() else sv.GROUP_SCRIPT.replace("python3 -c", f"{sys.executable} -c")
    return subprocess.run(["bash", "-c", script, "ascend-serve", *args], env=env, capture_output=True, text=True,
                          timeout=60)


def test_the_leader_starts_rays_head_waits_for_its_group_then_serves(tmp_path):
    alive = [{"Alive": True, "Resources": {"NPU": 8.0, "CPU": 128.0}}] * 2
    env = _stand_ins(tmp_path, alive)
    out = _group(env, "leader", "vllm", "serve", "/models/m", "--distributed-executor-backend", "ray")
    assert out.returncode == 0, out.stderr
    log = (tmp_path / "log").read_text().splitlines()
    assert log[0] == ("ray start --head --port=6379 --node-ip-address=10.0.0.5 --include-dashboard=false "
                      "--disable-usage-stats")
    assert log[1] == 'ray.init {"address": "auto", "logging_level": "ERROR"}'
    assert log[2] == "vllm serve /models/m --distributed-executor-backend ray"
    assert "Ray has 2 pods and 16 NPUs" in out.stdout


def test_the_leader_gives_up_saying_what_ray_has_when_its_group_does_not_join(tmp_path):
    env = {**_stand_ins(tmp_path, [{"Alive": True, "Resources": {"NPU": 8.0}}, {"Alive": False, "Resources": {}}]),
           "ASCEND_BUILD_RAY_WAIT": "0"}
    out = _group(env, "leader", "vllm", "serve", "/models/m")
    assert out.returncode == 1
    assert "after 0 s Ray has 1 of 2 pods and 8 of 16 NPUs" in out.stderr
    assert not any(line.startswith("vllm") for line in (tmp_path / "log").read_text().splitlines()), "no server"
    # Pods enough but NPUs missing (Ray found none in a pod) is not a group either.
    env = {**_stand_ins(tmp_path / "b", [{"Alive": True, "Resources": {"NPU": 8.0}}, {"Alive": True, "Resources": {}}]),
           "ASCEND_BUILD_RAY_WAIT": "0"}
    assert _group(env, "leader", "vllm").returncode == 1


def test_a_worker_waits_for_the_leaders_ray_then_joins_it_in_the_foreground(tmp_path):
    env = _stand_ins(tmp_path, [], health_fails=2)
    out = _group(env, "worker")
    assert out.returncode == 0, out.stderr
    log = (tmp_path / "log").read_text().splitlines()
    assert log == ["ray health-check --address=qwen-0.qwen:6379", "sleep 5"] * 2 + [
        "ray health-check --address=qwen-0.qwen:6379",
        "ray start --address=qwen-0.qwen:6379 --node-ip-address=10.0.0.5 --disable-usage-stats --block"]
    assert "worker 1 of 2 joins qwen-0.qwen:6379 from 10.0.0.5" in out.stdout
    lost = _stand_ins(tmp_path / "b", [], health_fails=100)
    out = _group({**lost, "ASCEND_BUILD_RAY_WAIT": "10"}, "worker")
    assert out.returncode == 1 and "no Ray head at qwen-0.qwen:6379 after 10 s" in out.stderr
    assert _group(lost, "scheduler").returncode == 2


class _Api(http.server.BaseHTTPRequestHandler):
    """vLLM's API as the drain reads it: /metrics with the requests running and waiting, /health."""
    running = [2.0, 1.0, 0.0]
    healthy = 3

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        cls = type(self)
        if self.path == "/metrics":
            now = cls.running.pop(0) if len(cls.running) > 1 else cls.running[0]
            body = (f'# HELP vllm:num_requests_running x\nvllm:num_requests_running{{engine="0",model_name="m"}} {now}\n'
                    f'vllm:num_requests_waiting{{engine="0",model_name="m"}} 0.0\n'
                    f'vllm:num_requests_running_total 99.0\n').encode()
        elif self.path == "/health" and cls.healthy > 0:
            cls.healthy -= 1
            body = b""
        else:
            self.send_response(503)
            self.end_headers()
            return
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _drain(mode: str, port: int, budget: int) -> tuple[float, subprocess.CompletedProcess]:
    env = {**os.environ, "ASCEND_BUILD_DRAIN_STEP": "0.05", "LWS_LEADER_ADDRESS": "127.0.0.1"}
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", sv.DRAIN, mode, str(port), str(budget)], env=env,
                         capture_output=True, text=True, timeout=60)
    return time.monotonic() - start, out


def test_the_prestop_waits_until_no_request_runs_and_a_worker_until_its_leader_is_gone():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        _Api.running = [2.0, 1.0, 0.0]
        took, out = _drain("serve", port, 30)
        assert out.returncode == 0, out.stderr
        assert _Api.running == [0.0], "read until no request ran"
        assert took < 15, "and no longer: a _total counter is not a request running"
        _Api.healthy = 3
        _, out = _drain("follow", port, 30)
        assert out.returncode == 0 and _Api.healthy == 0, "followed the leader's /health until it stopped answering"
        _Api.running = [5.0]
        took, out = _drain("serve", port, 1)
        assert out.returncode == 0 and took < 10, "the budget ends a drain that never empties"
    finally:
        server.shutdown()
        server.server_close()
    took, out = _drain("serve", port, 30)
    assert out.returncode == 0 and took < 10, "a server that does not answer has nothing to drain"


# ------------------------------------------------------------------ one node per server: the Deployment

def test_a_serving_deployment_and_service_are_valid_against_kubernetes_schemas():
    import kubernetes_validate
    made = sv.manifests("qwen", sv.PodImage(SERVING, "arm64"), 2, sv.Serving("Qwen2.5-7B-Instruct", "models", replicas=3),
                        ["--max-model-len", "8192"])
    service, deployment = made["items"]
    for item in (service, deployment):
        kubernetes_validate.validate(item, K8S, strict=True)
    assert (deployment["apiVersion"], deployment["kind"], service["kind"]) == ("apps/v1", "Deployment", "Service")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    container, = pod["containers"]
    assert spec["replicas"] == 3 and spec["selector"]["matchLabels"] == spec["template"]["metadata"]["labels"]
    assert service["spec"]["type"] == "ClusterIP" and service["spec"]["selector"] == spec["selector"]["matchLabels"]
    assert service["spec"]["ports"] == [{"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}]
    assert container["command"] == ["vllm", "serve", "/models/Qwen2.5-7B-Instruct", "--host", "0.0.0.0", "--port",
                                    "8000", "--tensor-parallel-size", "2", "--max-model-len", "8192"]
    assert container["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    # the chip's device plugin resource, as the training jobs ask for it; requests == limits
    assert container["resources"]["limits"] == {"huawei.com/Ascend910": 2, "cpu": 32, "memory": "128Gi"}
    assert container["resources"]["requests"] == container["resources"]["limits"]
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "http"}, probe
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "16Gi"}
    assert mounts["dshm"]["mountPath"] == "/dev/shm"
    assert volumes["models"]["persistentVolumeClaim"] == {"claimName": "models", "readOnly": True}
    assert mounts["models"] == {"name": "models", "mountPath": "/models", "readOnly": True}
    assert mounts["ascend-driver"]["readOnly"] and volumes["ascend-driver"]["hostPath"] == {
        "path": "/usr/local/Ascend/driver", "type": "Directory"}
    assert "&id" not in k8s.dump(made), "each manifest's objects its own, never YAML aliases"
    # The check can fail: a misspelt field, and a field of the wrong type, are refused.
    for change in (lambda d: d["spec"]["template"]["spec"]["volumes"][1]["emptyDir"].update(sizeLimt="1Gi"),
                   lambda d: d["spec"]["template"]["spec"]["containers"][0].update(readinessProbes={}),
                   lambda d: d["spec"].update(replicas="three")):
        broken = json.loads(json.dumps(deployment))
        change(broken)
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(broken, K8S, strict=True)
    broken = json.loads(json.dumps(service))
    broken["spec"]["ports"][0]["port"] = "http"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S, strict=True)


@pytest.mark.parametrize("serve, more, message", [
    (sv.Serving("../etc", "models"), {}, "--model '../etc': the model's folder inside --model-claim"),
    (sv.Serving("/abs/model", "models"), {}, "--model '/abs/model'"),
    (sv.Serving("m", "Models_1"), {}, "--model-claim 'Models_1': a PersistentVolumeClaim's name"),
    (sv.Serving("m", "models", replicas=0), {}, "--devices, --replicas and --nodes are at least 1"),
    (sv.Serving("m", "models", port=70000), {}, "--port 70000"),
    (sv.Serving("m", "models", shm="lots"), {}, "--shm-size 'lots': a Kubernetes quantity"),
    (sv.Serving("m", "models", shm="64Gi"), {"cores": k8s.PodCores(8, "32Gi")},
     "--shm-size 64Gi: a memory-backed /dev/shm counts against the pod's memory (32Gi)"),
    (sv.Serving("m", "models"), {"extra": ["python", "x.py"]}, "not a command"),
    (sv.Serving("m", "models"), {"name": "1st"}, "a Service's name starts with a letter"),
    (sv.Serving("m", "models", startup=10), {}, "--startup-timeout at least 60"),
])
def test_a_serving_manifest_refuses_bad_input(serve, more, message):
    args = {"name": "serve", "extra": [], **more}
    with pytest.raises(UserError, match=re.escape(message)):
        sv.manifests(args.pop("name"), sv.PodImage(SERVING, "arm64"), 2, serve, **args)


def test_invoke_job_kind_serving_writes_the_yaml_and_refuses_training_options(tmp_path):
    task = ["job", "--image", SERVING, "--kind", "serving", "--model", "Qwen2.5-7B-Instruct", "--model-claim",
            "models"]
    out = invoke(*task, "--devices", "4", "--replicas", "2", "--port", "9000", "--shm-size", "32Gi",
                 "--startup-timeout", "7200", "--grace-period", "600", "--", "--max-model-len", "8192")
    assert out.returncode == 0, out.stderr
    service, deployment = yaml.safe_load_all(out.stdout)
    assert (service["metadata"]["name"], deployment["metadata"]["name"]) == ("serve", "serve")
    assert deployment["spec"]["replicas"] == 2 and service["spec"]["ports"][0]["port"] == 9000
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["command"][-4:] == ["--tensor-parallel-size", "4", "--max-model-len", "8192"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}} in pod["volumes"]
    assert container["startupProbe"]["failureThreshold"] == 720 and pod["terminationGracePeriodSeconds"] == 600
    assert container["lifecycle"]["preStop"]["exec"]["command"][3:] == ["serve", "9000", "585"]
    written = invoke(*task, "--output", str(tmp_path / "serve.yaml"))
    assert written.returncode == 0 and "(Service, Deployment)" in written.stdout, written.stderr
    assert [d["kind"] for d in yaml.safe_load_all((tmp_path / "serve.yaml").read_text())] == ["Service", "Deployment"]
    for extra, message in (([], "--model-claim is required"),
                           (["--queue", "prod"], "--queue prod: a Volcano queue, for --gang volcano"),
                           (["--bind", "even"], "--bind: for a training job"),
                           (["--replicas", "x"], "--replicas 'x': expected a whole number"),
                           (["--devices", "9"], "--devices 9: expected a whole number from 1 to 8")):
        args = [a for a in task if extra or a not in ("--model-claim", "models")] + extra
        refused = invoke(*args)
        assert refused.returncode == 2 and message in refused.stderr, (extra, refused.stderr)
    training = invoke("job", "--image", SERVING, "--model", "m", "--", "train.py")
    assert training.returncode == 2 and "--model: for --kind serving" in training.stderr, training.stderr
