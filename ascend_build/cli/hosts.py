"""The tasks for the hosts images run on: a container with the host's NPUs (one card, all
of them, or many servers through the image's launcher), the host's checks, the HCCL rank
table, the Kubernetes jobs."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from .. import console
from .. import engine as eng
from ..errors import UserError
from ..matrix import load_matrix
from .options import choice, k8s_name, number, required, size
from .wrap import exit_with

IMAGE_EXAMPLE = "ascend-runtime:torch2.1.0-arm64"


@dataclass(frozen=True)
class RunOptions:
    image: str | None = None
    devices: str = "all"
    runtime: str = "auto"
    shm_size: str = "16g"
    network_host: bool = False
    host_root: str = "/"
    docker: str | None = None
    dry: bool = False
    force: bool = False
    engine: str = "docker"
    hostfile: str | None = None
    torchrun: bool = False
    msrun: bool = False
    framework: str = "auto"
    nproc_per_node: str | None = None
    master_port: str = "29500"
    hccl_timeout: str = "1800"
    rank_table: str | None = None
    node_rank: str | None = None
    ssh: bool = False
    bind: str = "numa"
    bind_min_cores: str = "5"


def run(o: RunOptions, command: list[str], matrix: Path, interactive: bool = False) -> None:
    """The image on this host's NPUs; with a launcher (or a hostfile), its ranks on every card."""
    if o.msrun and o.framework not in ("auto", "mindspore"):
        raise UserError(f"--msrun is MindSpore's launcher; --framework {o.framework} says otherwise")
    if o.hostfile or o.torchrun or o.msrun:
        return _launch(o, command, matrix)
    from ..host import doctor as doc
    from ..host.layout import for_chip
    from ..host.run import RunOptions as Compose
    from ..host.run import compose, host_cards
    image = eng.check_ref(required(o.image, "--image", IMAGE_EXAMPLE), "--image")
    _check_run(o)
    engine = eng.for_task(o.engine, o.docker, o.dry)
    facts = doc.read_image(engine, image)
    if facts is None:
        console.warn(f"{image} is not here to read its labels: its driver and chip needs are not checked")
    elif not o.force:
        problems = [ch for ch in doc.examine(Path(o.host_root), "root", facts) if ch.blocking
                    and ch.name.startswith("image")]
        if problems:
            raise UserError("this host cannot run the image (`invoke doctor --image` for every check; --force to "
                            "run anyway):\n  " + "\n  ".join(f"{p.cause}: {p.fix}" for p in problems))
    runtimes = engine.runtimes() if not o.dry or o.runtime == "auto" else frozenset()
    opts = Compose(image=image, command=tuple(command), devices=o.devices, interactive=interactive,
                   shm_size=o.shm_size, network_host=o.network_host, runtime=o.runtime)
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


def _check_run(o: RunOptions) -> None:
    """What reaches the engine's command line, checked against its grammar first."""
    size(o.shm_size, "--shm-size")
    choice(o.runtime, "--runtime", ("auto", "ascend", "runc"))


def _launch(o: RunOptions, command: list[str], matrix: Path) -> None:
    from ..cluster.launch import LaunchRequest, launch
    _check_run(o)
    req = LaunchRequest(
        image=eng.check_ref(required(o.image, "--image", IMAGE_EXAMPLE), "--image"), command=tuple(command),
        devices=o.devices, runtime=o.runtime, shm_size=o.shm_size, host_root=Path(o.host_root),
        hostfile=Path(o.hostfile) if o.hostfile else None,
        nproc=number(o.nproc_per_node, "--nproc-per-node", 1, 64) if o.nproc_per_node is not None else None,
        master_port=number(o.master_port, "--master-port", 1, 65535),
        hccl_timeout=number(o.hccl_timeout, "--hccl-timeout", 1, 86400),
        rank_table=Path(o.rank_table) if o.rank_table else None,
        node_rank=number(o.node_rank, "--node-rank", 0) if o.node_rank is not None else None, ssh=o.ssh,
        framework="mindspore" if o.msrun else o.framework, bind=o.bind,
        min_cores=number(o.bind_min_cores, "--bind-min-cores", 1), matrix=matrix, dry=o.dry)
    exit_with(launch(req, eng.for_task(o.engine, o.docker, o.dry)))


@dataclass(frozen=True)
class DoctorOptions:
    root: str = "/"
    image: str | None = None
    json: bool = False
    explain: str | None = None
    user: str | None = None
    matrix: str = "matrix.yaml"
    engine: str = "docker"
    docker: str | None = None
    cluster: list[str] | None = None


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
    engine = eng.for_task(o.engine, o.docker, dry=not o.image) if (o.image or here) else None
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


def ranktable(hosts: list[str] | None, chip: str | None, devices: str, output: str | None) -> None:
    """The HCCL rank table for hosts, from their `invoke doctor --json` files."""
    from ..cluster import facts
    from ..cluster import ranktable as rt
    from ..host.run import parse_devices
    found = facts.load(fact_files(hosts or []))
    wanted = None if devices == "all" else parse_devices(devices, sorted({c.id for h in found for c in h.cards}))
    table = rt.build(found, chip, wanted)
    text = rt.dumps(table)
    if output:
        Path(output).write_text(text)
        console.show(f"wrote {output}: {table['server_count']} servers, {rt.world_size(table)} ranks (version "
                     f"{table['version']})")
    else:
        console.show(text.rstrip("\n"))


@dataclass(frozen=True)
class JobOptions:
    name: str = "train"
    image: str | None = None
    nodes: str = "2"
    devices: str = "8"
    kind: str = "ascendjob"
    chip: str = "910b"
    queue: str = "default"
    hccl_timeout: str = "1800"
    framework: str = "auto"
    output: str | None = None
    cpus: str | None = None
    memory: str | None = None
    bind: str = "numa"
    bind_min_cores: str = "5"


def job(o: JobOptions, command: list[str], matrix: Path) -> None:
    """An AscendJob for the Ascend operator on Volcano, or an indexed Job."""
    from ..cluster import binding, k8s
    from ..cluster.launch import framework_for, launcher_of
    image = required(o.image, "--image", "registry.example.com/ascend-runtime:sha-0123456789abcdef-arm64")
    if o.kind not in ("ascendjob", "indexed"):
        raise UserError(f"--kind {o.kind}: ascendjob or indexed")
    chip = k8s.job_chip(o.chip)
    d = number(o.devices, "--devices", 1, chip.npus)       # NPUs per server, the chip's record says
    n, timeout = number(o.nodes, "--nodes", 1, 4096), number(o.hccl_timeout, "--hccl-timeout", 1, 86400)
    k8s_name(o.name, "--name"), k8s_name(o.queue, "--queue")
    client = eng.for_task("docker", None, True)
    chosen, why = framework_for(client, image, o.framework)
    console.note(f"# framework: {chosen.name} (by {why})")
    affinity = binding.affinity_for(client, image, matrix) if launcher_of(chosen, why).affinity else None
    if affinity:
        console.note(f"# torch_npu: CPU_AFFINITY_CONF mode {affinity.mode} ({affinity.why})")
    cores = k8s.PodCores(None if o.cpus is None else number(o.cpus, "--cpus"), o.memory or "", o.bind,
                         number(o.bind_min_cores, "--bind-min-cores"), affinity.mode if affinity else 0)
    made = (k8s.ascend_job(o.name, image, n, d, command, chip.name, o.queue, timeout, chosen, cores)
            if o.kind == "ascendjob" else k8s.indexed_job(o.name, image, n, d, command, timeout, framework=chosen,
                                                          cores=cores, chip=chip.name))
    text = k8s.dump(made)
    if o.output:
        Path(o.output).write_text(text)
        console.show(f"wrote {o.output} ({', '.join(i['kind'] for i in made['items'])})")
    else:
        console.show(text.rstrip("\n"))
