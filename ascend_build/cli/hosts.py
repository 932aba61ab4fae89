"""The tasks for the hosts images run on: a container with the host's NPUs (one card, all
of them, or many servers through the image's launcher), the host's checks, the HCCL rank
table, the Kubernetes jobs."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .. import console
from .. import engine as eng
from ..chips import known
from ..errors import UserError
from ..matrix import load_matrix
from .options import Engine, choice, group, help_of, k8s_name, matrix_file, number, opt, required, size
from .wrap import exit_with

if TYPE_CHECKING:
    from ..cluster import k8s
    from ..cluster import serving as sv
    from ..host.doctor import ImageFacts
    from ..host.serving import Serve

IMAGE_EXAMPLE = "ascend-runtime:torch2.1.0-arm64"


@dataclass(frozen=True)
class RunOptions:
    engine: Engine = group(Engine)
    image: str | None = opt(None, "the image to run")
    devices: str = opt("all", "all (default), a list like 0,1 or a range like 0-3")
    runtime: str = opt("auto", "auto (Ascend Docker Runtime when installed), ascend, or runc (device flags)")
    shm_size: str = opt("16g", "shared memory for data loaders (default 16g)")
    network_host: bool = opt(False, "use the host network")
    host_root: str = opt("/", "read the host's devices and driver files below this folder (default /)")
    dry: bool = opt(False, "print the run command only")
    force: bool = opt(False, "run even when the image needs a newer driver or another chip than the host has")
    # How ranks start (`invoke run` only: LAUNCH_ONLY below).
    hostfile: str | None = opt(None, "many servers: one host per line (the first is the master); prints each node's "
                                     "command")
    torchrun: bool = opt(False, "start the command with the image's launcher on every chosen card of this host: "
                                "torchrun (hccl backend), or msrun for a MindSpore image")
    msrun: bool = opt(False, "as --torchrun, for a MindSpore image (the same as --torchrun --framework mindspore)")
    framework: str = opt("auto", "auto (default: the image's labels, else its name), torch or mindspore: which "
                                 "launcher (a CANN-only image, cann, has none)")
    nproc_per_node: str | None = opt(None, "processes per host (default: the number of --devices, 8 for all)")
    master_port: str = opt("29500", "the launcher's port on the master: torchrun's rendezvous, msrun's scheduler "
                                    "(default 29500)")
    hccl_timeout: str = opt("1800", "HCCL_CONNECT_TIMEOUT in seconds (default 1800; torch_npu warns below 300)")
    rank_table: str | None = opt(None, "an hccl.json (invoke ranktable) mounted and named by RANK_TABLE_FILE")
    node_rank: str | None = opt(None, "with --hostfile: run this node's command here")
    ssh: bool = opt(False, "with --hostfile: run every node's command over ssh (BatchMode), and wait for all")
    bind: str = opt("numa", "with a launcher, each rank's cores: numa (default: its card's NUMA node, split between "
                            "the cards on it), even (equal slices), off, or ranges per card like 0:0-23,1:24-47")
    bind_min_cores: str = opt("5", "the fewest cores a rank may get (default 5: vllm-ascend's floor per NPU)")
    # A serving image's server (`invoke run` only: LAUNCH_ONLY below).
    serve: str | None = opt(None, "serve this model folder with vLLM (a serving image): `vllm serve` on the chosen "
                                  "cards (--tensor-parallel-size: their number), the folder read-only at "
                                  "/models/<its name>; options after -- go to vllm serve")
    port: str | None = opt(None, "with --serve: the API's port, in the container and published on the host "
                                 "(default 8000)")
    publish_address: str | None = opt(None, "with --serve: the host address the port is published on (default "
                                             "127.0.0.1, this host only: vLLM's API has no authentication by default; "
                                             "0.0.0.0 for every interface)")


# The options only `invoke run` has (a shell starts no ranks and serves nothing: they keep their defaults).
LAUNCH_ONLY = ("hostfile", "torchrun", "msrun", "framework", "nproc_per_node", "master_port", "hccl_timeout",
               "rank_table", "node_rank", "ssh", "bind", "bind_min_cores", "serve", "port", "publish_address")
# The launch options --serve cannot go with: each starts training ranks on the cards vLLM would use.
_NOT_WITH_SERVE = ("hostfile", "torchrun", "msrun", "nproc_per_node", "rank_table", "node_rank", "ssh")


def run(o: RunOptions, command: list[str], matrix: Path, interactive: bool = False) -> None:
    """The image on this host's NPUs; with a launcher (or a hostfile), its ranks on every card."""
    if o.msrun and o.framework not in ("auto", "mindspore"):
        raise UserError(f"--msrun is MindSpore's launcher; --framework {o.framework} says otherwise")
    serve = _serve(o, command)
    if o.hostfile or o.torchrun or o.msrun:
        return _launch(o, command, matrix)
    from ..host import doctor as doc
    from ..host.layout import for_chip
    from ..host.run import RunOptions as Compose
    from ..host.run import compose, host_cards
    image = eng.check_ref(required(o.image, "--image", IMAGE_EXAMPLE), "--image")
    shm = _check_run(o)
    engine = o.engine.for_task(o.dry)
    facts = doc.read_image(engine, image)
    if facts is None:
        console.warn(f"{image} is not here to read its labels: its driver and chip needs are not checked")
    if serve and facts:
        _check_serving_image(facts)
    elif serve and not o.dry:
        raise UserError(f"--serve: {image} is not here, so its labels cannot say it is a serving image; pull it "
                        f"first (`{engine.client} pull {image}`), then run it")
    if facts is not None and not o.force:
        problems = [ch for ch in doc.examine(Path(o.host_root), "root", facts) if ch.blocking
                    and ch.name.startswith("image")]
        if problems:
            raise UserError("this host cannot run the image (`invoke doctor --image` for every check; --force to "
                            "run anyway):\n  " + "\n  ".join(f"{p.cause}: {p.fix}" for p in problems))
    runtimes = engine.runtimes() if not o.dry or o.runtime == "auto" else frozenset()
    opts = Compose(image=image, command=tuple(command), devices=o.devices, interactive=interactive,
                   shm_size=shm, network_host=o.network_host, runtime=o.runtime, serve=serve)
    chip = facts.chip if facts else None
    cmd = compose(engine, opts, Path(o.host_root), runtimes, preview=o.dry, chip=chip)
    if o.dry:
        if not host_cards(Path(o.host_root)):
            layout = for_chip(chip)     # the image's chip's kind of host (its record's)
            host = (f"a {layout} with card 0 (the image's chip)" if layout.max_cards == 1
                    else "a 910B host with " + ("cards 0-7" if o.devices == "all" else f"card(s) {o.devices}"))
            console.show(f"# preview: {o.host_root} has no NPUs; this is the command for {host} and the driver in "
                         f"/usr/local/Ascend (on the host, `invoke run` reads what it has)")
        return console.show(eng.show(cmd))
    exit_with(subprocess.run(cmd).returncode)


def _serve(o: RunOptions, command: list[str]) -> Serve | None:
    """--serve and its options checked, before any engine command; None without --serve."""
    from ..host.serving import DEFAULT_PORT, RUN_SETS, check_extra, serve_on_host
    if not o.serve:
        given = [f"--{name.replace('_', '-')}" for name in ("port", "publish_address") if getattr(o, name)]
        if given:
            raise UserError(f"{' and '.join(given)} {'are' if len(given) > 1 else 'is'} for a served model: give "
                            f"--serve MODEL_DIR too")
        return None
    clash = [f"--{name.replace('_', '-')}" for name in _NOT_WITH_SERVE if getattr(o, name)]
    if clash:
        raise UserError(f"--serve runs vLLM, which starts its own workers on the cards; {', '.join(clash)} "
                        f"start{'s' if len(clash) == 1 else ''} training ranks. Give one or the other (many "
                        f"servers: `invoke job --kind serving`)")
    check_extra(command, "--serve", RUN_SETS)
    port = DEFAULT_PORT if o.port is None else number(o.port, "--port", 1, 65535)
    found = serve_on_host(o.serve, port, o.publish_address or "127.0.0.1")
    if not (found.model / "config.json").is_file():
        console.warn(f"--serve {o.serve}: no config.json in it; vLLM reads a model folder's config.json (is the "
                     f"model in a folder below it?)")
    return found


def _check_serving_image(facts: ImageFacts) -> None:
    """Only a serving image is served: one whose labels say another kind, or say no kind at
    all (built elsewhere, or before every image carried its kind), is refused."""
    from ..host.serving import KIND
    if facts.kind != KIND:
        what = (f"a {facts.kind} image (io.ascend-build.kind={facts.kind}), without vLLM" if facts.kind else
                "not labelled a serving image (no io.ascend-build.kind: built elsewhere, or before the label)")
        raise UserError(f"--serve: {facts.ref} is {what}; serve with a serving image (io.ascend-build.kind={KIND}: "
                        f"`invoke build --vllm RELEASE` builds one, on the stack that release pins)")
    if facts.kernels == "no":
        console.warn(f"{facts.ref} was built without vLLM-Ascend's custom kernels (io.ascend-build.kernels=no): "
                     f"its custom operators and sleep mode are off (`invoke build --vllm` without --no-kernels has them)")


def _check_run(o: RunOptions) -> str:
    """What reaches the engine's command line, checked against its grammar first; the
    --shm-size as it is written there (checked and written the same: ' 16g' is 16g)."""
    choice(o.runtime, "--runtime", ("auto", "ascend", "runc"))
    return size(o.shm_size, "--shm-size")


def _launch(o: RunOptions, command: list[str], matrix: Path) -> None:
    from ..cluster.launch import LaunchRequest, launch
    shm = _check_run(o)
    req = LaunchRequest(
        image=eng.check_ref(required(o.image, "--image", IMAGE_EXAMPLE), "--image"), command=tuple(command),
        devices=o.devices, runtime=o.runtime, shm_size=shm, host_root=Path(o.host_root),
        hostfile=Path(o.hostfile) if o.hostfile else None,
        nproc=number(o.nproc_per_node, "--nproc-per-node", 1, 64) if o.nproc_per_node is not None else None,
        master_port=number(o.master_port, "--master-port", 1, 65535),
        hccl_timeout=number(o.hccl_timeout, "--hccl-timeout", 1, 86400),
        rank_table=Path(o.rank_table) if o.rank_table else None,
        node_rank=number(o.node_rank, "--node-rank", 0) if o.node_rank is not None else None, ssh=o.ssh,
        framework="mindspore" if o.msrun else o.framework, bind=o.bind,
        min_cores=number(o.bind_min_cores, "--bind-min-cores", 1), matrix=matrix, dry=o.dry)
    exit_with(launch(req, o.engine.for_task(o.dry)))


@dataclass(frozen=True)
class DoctorOptions:
    engine: Engine = group(Engine)
    matrix: str = matrix_file()
    root: str = opt("/", "read the host below this folder (default /)")
    image: str | None = opt(None, "also check this image's needs (driver, chip, arch) against the host")
    json: bool = opt(False, "print the checks and this host's NPU network facts as JSON (the file `invoke "
                            "ranktable` and `doctor --cluster` read)")
    explain: str | None = opt(None, "an error text, or a file holding a log: say what it means")
    user: str | None = opt(None, "the user who will run containers (default: you)")
    cluster: list[str] | None = opt(None, "check many hosts from their `doctor --json` files (repeatable, or a "
                                          "folder of them)", iterable=True)


def doctor(o: DoctorOptions) -> None:
    """The host (and an image against it), many hosts, or an error explained; exit 1 when
    something blocks."""
    import getpass
    import platform as host

    from ..host import doctor as doc
    if o.explain:
        return _explain(o.explain)
    if o.cluster:
        from ..cluster import checks as cl
        from ..cluster import facts
        checks = cl.examine(facts.load(fact_files(o.cluster)))
        console.show(doc.as_json(checks) if o.json else doc.table(checks))
        return exit_with(1 if any(ch.blocking for ch in checks) else 0)
    root = Path(o.root)
    here = root.resolve() == Path("/")
    engine = o.engine.for_task(dry=not o.image) if (o.image or here) else None
    facts_of_image = doc.read_image(engine, o.image) if o.image else None
    if o.image and facts_of_image is None:
        raise UserError(f"image {o.image} is not here: pull it first")
    checks = doc.examine(root, o.user or getpass.getuser(), facts_of_image,
                         engine.runtimes() if engine and here else None, doc.lines(load_matrix(o.matrix)),
                         host.machine() if here else None)
    if o.json:
        from ..cluster.facts import read_host
        network = read_host(root, doc.host_chip(root), doc.host_driver(root))
        console.show(doc.as_json(checks, network.to_json()))
    else:
        console.show(doc.table(checks))
    exit_with(1 if any(ch.blocking for ch in checks) else 0)


def _explain(given: str) -> None:
    from ..host import doctor as doc
    path = Path(given)
    looks_like_a_path = " " not in given.strip() and "\n" not in given and ("/" in given or given.endswith(".log"))
    if path.is_dir() or (looks_like_a_path and not path.exists()):
        raise UserError(f"--explain {given}: " + ("a folder, not a log file" if path.is_dir() else
                                                  "no such file (give the log's path, or the error's text in quotes)"))
    text = path.read_text(errors="replace") if path.is_file() else given
    found = doc.explain(text)
    for k in found:
        console.show(f"{k.name}\n  cause: {k.cause}\n  fix:   {k.fix}")
    if not found:
        console.show("not a failure this tool knows; it checked for: " + ", ".join(k.name for k in doc.KNOWN))
        exit_with(1)


def fact_files(given: list[str]) -> list[Path]:
    files: list[Path] = []
    for item in given:
        p = Path(item)
        files += sorted(p.glob("*.json")) if p.is_dir() else [p]
    if not files:
        raise UserError("no host facts files: write one per host with `invoke doctor --json > HOST.json`")
    return files


def _either(words: list[str]) -> str:
    return " or ".join(filter(None, [", ".join(words[:-1]), words[-1]])) if words else "none"


# The chips `invoke ranktable` and `invoke job` take, from their records (the registry's first
# job chip is the job's default).
_TABLES = [c for c in known() if c.rank_table]
_JOBS = [c.name + (" (default)" if i == 0 else "") for i, c in enumerate(c for c in known() if c.job)]


@dataclass(frozen=True)
class RanktableOptions:
    hosts: list[str] | None = opt(None, "a host's `invoke doctor --json` file (repeatable, in rank order; or a "
                                        "folder: name order)", iterable=True)
    chip: str | None = opt(None, _either([f"{c.name} ({'rank table version ' if i == 0 else ''}{c.rank_table})"
                                          for i, c in enumerate(_TABLES)]) +
                           "; default: what the first host's npu-smi said")
    devices: str = opt("all", "the cards used on every host: all (default), a list like 0,1 or a range like 0-3")
    output: str | None = opt(None, "write hccl.json here (default: print it)")


def ranktable(o: RanktableOptions) -> None:
    """The HCCL rank table for hosts, from their `invoke doctor --json` files."""
    from ..cluster import facts
    from ..cluster import ranktable as rt
    from ..host.run import parse_devices
    found = facts.load(fact_files(o.hosts or []))
    wanted = None if o.devices == "all" else parse_devices(o.devices, sorted({c.id for h in found for c in h.cards}))
    table = rt.build(found, o.chip, wanted)
    text = rt.dumps(table)
    if o.output:
        Path(o.output).write_text(text)
        console.show(f"wrote {o.output}: {table['server_count']} servers, {rt.world_size(table)} ranks (version "
                     f"{table['version']})")
    else:
        console.show(text.rstrip("\n"))


@dataclass(frozen=True)
class JobOptions:
    name: str | None = opt(None, "the job's name (lowercase, digits, '-'; default train, serve for --kind serving)")
    image: str | None = opt(None, "the image by content tag (REPO:sha-...) or digest")
    nodes: str | None = opt(None, "servers (pods) of a training job, default 2; --kind serving: the nodes one server "
                                  "spans (default 1: a Deployment of servers; 2 or more: a LeaderWorkerSet whose groups "
                                  "run one server over Ray)")
    devices: str = opt("8", "NPUs per server (default 8); --kind serving: per pod (one node's cards), the tensor "
                            "parallel size")
    kind: str = opt("ascendjob", "ascendjob (Ascend operator on Volcano, default), indexed (a plain indexed Job), "
                                 "or serving (a serving image's vLLM: a Deployment or a LeaderWorkerSet, and a "
                                 "ClusterIP Service)")
    chip: str = opt(next(c.name for c in known() if c.job),       # the one its help calls the default
                    _either(_JOBS) + ": the operator's ring label and the device plugin's resource")
    queue: str = opt("default", "Volcano queue (default: default); --kind serving with --gang volcano")
    hccl_timeout: str = opt("1800", help_of(RunOptions, "hccl_timeout"))
    framework: str = opt("auto", "auto (default: the image's labels when the engine has it, else its name), torch "
                                 "or mindspore (a CANN-only image, cann, has no launcher to run a job with)")
    output: str | None = opt(None, "write the manifests here (default: print them)")
    cpus: str | None = opt(None, "whole CPUs per worker pod, requests = limits (default 16 per card; 0 asks for "
                                 "none)")
    memory: str | None = opt(None, "memory per worker pod, requests = limits, e.g. 512Gi (default 64Gi per card)")
    bind: str = opt("numa", "numa (default) or even: each rank bound to an equal slice of the pod's cores; off: "
                            "unbound")
    bind_min_cores: str = opt("5", help_of(RunOptions, "bind_min_cores"))
    # The site's cluster (every job kind asks for the resource and tolerates the taints).
    npu_resource: str | None = opt(None, "the device plugin's NPU resource every request and limit names (default: "
                                         "the chip's, huawei.com/Ascend910 of MindCluster; CCE's "
                                         "huawei.com/ascend-1980; 310P's huawei.com/Ascend310P)", site=True)
    toleration: list[str] | None = opt(None, "a taint the pods tolerate, KEY[=VALUE]:EFFECT as kubectl writes it "
                                             "(repeatable), e.g. dedicated=npu:NoSchedule", iterable=True, site=True)
    # --kind serving only (SERVING_ONLY below; the site's settings are taken where they apply).
    model: str | None = opt(None, "--kind serving: the model's folder inside --model-claim (served as "
                                  "/models/<this>)")
    model_claim: str | None = opt(None, "--kind serving: the PersistentVolumeClaim holding the models, mounted "
                                        "read-only at /models")
    replicas: str | None = opt(None, "--kind serving: servers behind the Service (default 1), each on --devices NPUs "
                                     "of --nodes nodes")
    port: str | None = opt(None, "--kind serving: the API's port in the pod and on the Service (default 8000)")
    shm_size: str | None = opt(None, "--kind serving: the pod's /dev/shm, a memory emptyDir (default 16Gi; it "
                                     "counts against --memory)")
    parallel: str | None = opt(None, "--kind serving with --nodes 2 or more: pipeline (default: tensor parallel over "
                                     "each node's cards, one pipeline stage per node) or tensor (over every card)")
    startup_timeout: str | None = opt(None, "--kind serving: seconds a server may take to load its model before "
                                            "liveness may restart it (default 1800; 3600 across nodes)")
    grace_period: str | None = opt(None, "--kind serving: seconds a stopping server has to drain its requests "
                                         "(terminationGracePeriodSeconds, default 180)")
    run_as: str | None = opt(None, "--kind serving: who the image's containers run as where the engine does not "
                                   "have the image to read its label: root (default) or UID:GID (invoke build "
                                   "--run-as); the pods run as it, non-root")
    arch: str | None = opt(None, "--kind serving: arm64 or amd64, the nodes' kubernetes.io/arch (default: the "
                                 "image's label, else its tag's -arm64/-amd64)")
    hccl_socket_ifname: str | None = opt(None, "--kind serving across nodes: HCCL_SOCKET_IFNAME, the pods' interface "
                                               "for HCCL's sockets (default: not set; HCCL_IF_IP, the pod's address, "
                                               "decides)", site=True)
    gloo_socket_ifname: str | None = opt(None, "--kind serving across nodes: GLOO_SOCKET_IFNAME and "
                                               "TP_SOCKET_IFNAME, the pods' interface for gloo (default: not set)",
                                         site=True)
    gang: str = opt("none", "--kind serving: none (default) or volcano: the pods scheduled by Volcano in --queue, a "
                            "LeaderWorkerSet's groups gang-scheduled (its controller run with Volcano as its "
                            "gangSchedulingManagement provider)", site=True)
    npu_gid: str = opt("1000", "--kind serving: the hosts' HwHiAiUser GID, owner of /dev/davinci*, a supplementary "
                               "group of every serving pod (default 1000)", site=True)


SERVING_ONLY = ("model", "model_claim", "replicas", "port", "shm_size", "parallel", "startup_timeout", "grace_period",
                "run_as", "arch")
# A training job's options and their defaults: a serving job refuses any other value.
_TRAINING_ONLY = {"hccl_timeout": "1800", "framework": "auto", "bind": "numa", "bind_min_cores": "5"}


def job(o: JobOptions, command: list[str], matrix: Path) -> None:
    """An AscendJob for the Ascend operator on Volcano, an indexed Job, or a serving Deployment."""
    from ..cluster import binding, k8s
    from ..cluster.launch import framework_for, launcher_of
    image = required(o.image, "--image", "registry.example.com/ascend-runtime:sha-0123456789abcdef-arm64")
    choice(o.kind, "--kind", ("ascendjob", "indexed", "serving"))
    chip = k8s.job_chip(o.chip)
    d = number(o.devices, "--devices", 1, chip.npus)       # NPUs per server, the chip's record says
    if o.kind == "serving":
        return _serving_job(o, image, d, command)
    given = [f"--{name.replace('_', '-')}" for name in SERVING_ONLY if getattr(o, name) is not None]
    if given:
        raise UserError(f"{', '.join(given)}: for --kind serving (vLLM's servers); a training job "
                        f"(--kind {o.kind}) takes none")
    name = o.name or "train"
    n, timeout = number(o.nodes or "2", "--nodes", 1, 4096), number(o.hccl_timeout, "--hccl-timeout", 1, 86400)
    k8s_name(name, "--name"), k8s_name(o.queue, "--queue")
    client = eng.for_task("docker", None, True)
    chosen, why = framework_for(client, image, o.framework)
    console.note(f"# framework: {chosen.name} (by {why})")
    affinity = binding.affinity_for(client, image, matrix) if launcher_of(chosen, why).affinity else None
    if affinity:
        console.note(f"# torch_npu: CPU_AFFINITY_CONF mode {affinity.mode} ({affinity.why})")
    cores = k8s.PodCores(None if o.cpus is None else number(o.cpus, "--cpus", 0, k8s.MAX_CPUS), o.memory or "", o.bind,
                         number(o.bind_min_cores, "--bind-min-cores"), affinity.mode if affinity else 0)
    site = _placement(o)
    made = (k8s.ascend_job(name, image, n, d, command, chip.name, o.queue, timeout, chosen, cores, site)
            if o.kind == "ascendjob" else k8s.indexed_job(name, image, n, d, command, timeout, framework=chosen,
                                                          cores=cores, chip=chip.name, site=site))
    _write(made, o.output)


def _placement(o: JobOptions) -> k8s.Placement:
    """The site's resource and tolerations, as a training job takes them."""
    from ..cluster import k8s
    from ..cluster import serving as sv
    return k8s.Placement(sv.resource_name(o.npu_resource) if o.npu_resource else "",
                         tuple(sv.toleration(t).manifest() for t in o.toleration or ()))


def _serving_job(o: JobOptions, image: str, devices: int, command: list[str]) -> None:
    """A Deployment of vLLM servers, or a LeaderWorkerSet of server groups, and its Service."""
    from ..cluster import k8s
    from ..cluster import serving as sv
    from ..host.serving import DEFAULT_PORT
    given = [f"--{name.replace('_', '-')}" for name, default in _TRAINING_ONLY.items() if getattr(o, name) != default]
    if given:
        raise UserError(f"{', '.join(given)}: for a training job; a serving job (--kind serving) takes none")
    model = required(o.model, "--model", "Qwen2.5-7B-Instruct")
    claim = required(o.model_claim, "--model-claim", "models")
    nodes = number(o.nodes or 1, "--nodes", 1, 64)
    if o.parallel is not None and nodes == 1:
        raise UserError("--parallel: for one server across nodes (--nodes 2 or more); on one node the tensor parallel "
                        "size is --devices")
    serve = sv.Serving(model, claim, number(o.replicas or 1, "--replicas", 1, 1000),
                       number(o.port or DEFAULT_PORT, "--port", 1, 65535), o.shm_size or "16Gi", nodes,
                       choice(o.parallel or "pipeline", "--parallel", ("pipeline", "tensor")),  # type: ignore[arg-type]
                       number(o.startup_timeout or 0, "--startup-timeout", 0, 86400),
                       number(o.grace_period or 180, "--grace-period", 1, 86400))
    site = sv.ClusterSite(sv.resource_name(o.npu_resource) if o.npu_resource else "",
                          tuple(sv.toleration(t) for t in o.toleration or ()),
                          sv.interface(o.hccl_socket_ifname, "--hccl-socket-ifname"),
                          sv.interface(o.gloo_socket_ifname, "--gloo-socket-ifname"),
                          choice(o.gang, "--gang", ("none", "volcano")), o.queue,  # type: ignore[arg-type]
                          number(o.npu_gid, "--npu-gid", 1, 2**31 - 1))
    if o.queue != "default" and site.gang != "volcano":
        raise UserError(f"--queue {o.queue[:40]}: a Volcano queue, for --gang volcano")
    cores = k8s.PodCores(None if o.cpus is None else number(o.cpus, "--cpus", 0, k8s.MAX_CPUS), o.memory or "")
    made = sv.manifests(o.name or "serve", _pod_image(o, image), devices, serve, command, o.chip, cores, site)
    if site.gang == "volcano" and nodes > 1:
        group = sv.podgroup(made["items"][1])["spec"]
        console.note(f"# gang: the LeaderWorkerSet controller (with Volcano as its gang scheduling provider) makes "
                     f"each group a PodGroup in queue {site.queue}: minMember {group['minMember']}, minResources "
                     + ", ".join(f"{k}={v}" for k, v in group["minResources"].items()))
    _write(made, o.output)


def _pod_image(o: JobOptions, image: str) -> sv.PodImage:
    """The serving image's arch and user: its labels where the engine has it, else the options."""
    from ..cluster import serving as sv
    from ..cluster.k8s import _image
    from ..host.doctor import read_image
    _image(image, "serves")
    if o.arch is not None:
        choice(o.arch, "--arch", sv.ARCHES)
    facts = read_image(eng.for_task("docker", None, True), image)
    return sv.pod_image(image, facts.platform if facts else None, facts.user if facts else None, o.arch, o.run_as)


def _write(made: dict, output: str | None) -> None:
    from ..cluster import k8s
    text = k8s.dump(made)
    if output:
        Path(output).write_text(text)
        console.show(f"wrote {output} ({', '.join(i['kind'] for i in made['items'])})")
    else:
        console.show(text.rstrip("\n"))
