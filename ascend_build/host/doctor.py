"""`invoke doctor`: what a 910B host has, whether an image can run there, and what a
pasted error means. Most failures Ascend users report happen on the host (a driver older
than the image's CANN needs, no devices, no group membership, the Ascend Docker Runtime
missing, A2 against A3 packages); each check says the cause and the fix in one line.
Everything is read below `root`, so a stand-in host tree can be checked."""
from __future__ import annotations

import json
import re
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

from .. import chips, console
from ..matrix import FRAMEWORKS, Framework, Matrix, Stack
from ..platforms import PLATFORMS
from .layout import layout_of
from .run import NPU_SMI, host_cards
from .topology import Topology, cpulist, read_topology

DRIVER_INFO = "usr/local/Ascend/driver/version.info"
FIRMWARE_INFO = "usr/local/Ascend/firmware/version.info"
GROUP = "HwHiAiUser"            # owns the davinci devices on a driver install
DAEMON_JSON = "etc/docker/daemon.json"


@dataclass(frozen=True)
class Check:
    name: str
    state: str           # ok | warn | fail | info
    found: str
    cause: str = ""
    fix: str = ""

    @property
    def blocking(self) -> bool:
        return self.state == "fail"


@dataclass(frozen=True)
class ImageFacts:
    """What an image's labels say it needs (None: an image built before the label)."""
    ref: str
    cann: str | None
    chip: str | None
    driver: str | None
    platform: str | None
    runs_on: tuple[str, ...] = ()     # the drivers CANN's release notes say it runs on (25.2: any 25.2.x)
    user: str | None = None           # root, or UID:GID the image's containers run as
    framework: str | None = None      # torch, mindspore or cann, by which framework label it carries
    stack: str | None = None          # the matrix stack it was built from
    torch_npu: str | None = None      # its torch_npu release (a torch image)
    kind: str | None = None           # its io.ascend-build.kind (runtime, serving, ...; None: older than the label)
    kernels: str | None = None        # a serving image: "yes" or "no", vLLM-Ascend's custom kernels built


def runs_on(driver: str, allowed: tuple[str, ...]) -> bool:
    """Is `driver` one the release notes list: exactly, or in a listed series (25.2)?"""
    series = ".".join(driver.split(".")[:2])
    return any(a.upper() == driver.upper() or a == series for a in allowed)


def driver_key(version: str) -> tuple[int, ...]:
    """Order NPU driver versions: 24.1.RC2 < 24.1.RC3 < 24.1.0 < 25.0.RC1 (an RC comes
    before the release of the same minor); later fields (24.1.rc2.1) break ties."""
    parts = version.strip().split(".")
    key = []
    for i, part in enumerate(parts):
        rc = re.fullmatch(r"[Rr][Cc](\d+)", part)
        if i == 2:
            key += [0, int(rc[1])] if rc else [1, int(re.sub(r"\D.*", "", part) or 0)]
        elif re.fullmatch(r"\d+", part):
            key.append(int(part))
        else:
            key.append(int(rc[1]) if rc else 0)
    return tuple(key)


def _kv(text: str) -> dict[str, str]:
    return {k.strip().lower(): v.strip() for k, _, v in (line.partition("=") for line in text.splitlines()) if _}


def host_driver(root: Path) -> str | None:
    path = root / DRIVER_INFO
    return _kv(path.read_text()).get("version") if path.is_file() else None


def host_chip(root: Path) -> str | None:
    """The chip from `npu-smi info`: the first record (chips.py, in its order) whose npu-smi
    name the table has (910B2 -> 910b, Ascend910_9391 -> A3, 310B4 -> 310b, Ascend950PR -> 950)."""
    smi = next((root / p.lstrip("/") for p in NPU_SMI if (root / p.lstrip("/")).is_file()), None)
    if smi is None:
        return None
    try:
        out = subprocess.run([str(smi), "info"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = next((c for c in chips.known() if c.smi and re.search(c.smi, out)), None)
    return found.name if found else None


def _group(root: Path) -> tuple[bool, list[str]]:
    path = root / "etc/group"
    for line in path.read_text().splitlines() if path.is_file() else []:
        fields = line.split(":")
        if fields[0] == GROUP:
            return True, [m for m in (fields[3] if len(fields) > 3 else "").split(",") if m]
    return False, []


def _group_gid(root: Path) -> int | None:
    path = root / "etc/group"
    for line in path.read_text().splitlines() if path.is_file() else []:
        fields = line.split(":")
        if fields[0] == GROUP and len(fields) > 2 and fields[2].isdigit():
            return int(fields[2])
    return None


def _runtimes(root: Path) -> set[str]:
    path = root / DAEMON_JSON
    try:
        return set((json.loads(path.read_text()) or {}).get("runtimes", {})) if path.is_file() else set()
    except ValueError:
        return set()


def examine(root: Path, user: str, image: ImageFacts | None = None, engine_runtimes: frozenset[str] | None = None,
            choices: list[Line] | None = None, host_arch: str | None = None) -> list[Check]:
    """Every check, in the order a user would fix them. `choices`: every line of the matrix
    (`lines`), to say which image would run instead."""
    checks: list[Check] = []
    driver = host_driver(root)
    known = [(ln.stack, ln.cann, ln.driver) for ln in choices or [] if ln.driver]
    oldest = min(known, key=lambda x: driver_key(x[2])) if known else None
    if driver and oldest and driver_key(driver) < driver_key(oldest[2]):
        checks.append(Check("NPU driver", "fail", driver,
                            f"older than every line this project builds needs (the oldest, {oldest[0]} on CANN "
                            f"{oldest[1]}, needs {oldest[2]})",
                            f"upgrade the driver to {oldest[2]} or newer (Huawei's HDK for this card)"))
    elif driver:
        checks.append(Check("NPU driver", "ok", driver))
    else:
        checks.append(Check("NPU driver", "fail", f"no /{DRIVER_INFO}",
                            "the NPU driver (HDK) is not installed, or not where containers mount it from",
                            "install the Ascend driver and firmware for this card (Huawei's HDK), then reboot"))
    firmware = root / FIRMWARE_INFO
    checks.append(Check("firmware", "ok", _kv(firmware.read_text()).get("version", "?")) if firmware.is_file()
                  else Check("firmware", "warn", f"no /{FIRMWARE_INFO}", "firmware version unknown",
                             "install the firmware package that matches the driver"))
    cards = host_cards(root)
    chip = host_chip(root)
    layout = layout_of(root, chip)
    missing = [d for d in layout.control if not (root / d.lstrip("/")).exists()]
    if not cards or missing:
        checks.append(Check("devices", "fail", f"davinci cards: {len(cards)}; missing: {', '.join(missing) or '-'}",
                            "no NPU device nodes: the driver is not loaded (or this is not an NPU host)",
                            "load the driver (`npu-smi info` must list the cards), or run on the NPU host"))
    else:
        extra = [d for d in layout.extra_devices if (root / d.lstrip("/")).exists()]
        checks.append(Check("devices", "ok", f"{layout}: {len(cards)} card{'s' if len(cards) > 1 else ''} "
                            f"(davinci{cards[0]}..{cards[-1]}) + {', '.join(layout.control + tuple(extra))}"))
    smi = [p for p in NPU_SMI if (root / p.lstrip("/")).is_file()]
    checks.append(Check("npu-smi", "ok", smi[0]) if smi else
                  Check("npu-smi", "warn", "not in /usr/local/bin or /usr/local/sbin",
                        "npu-smi is not installed; `npu-smi info` in the container will not work",
                        "install the driver's tools (npu-smi comes with the HDK)"))
    checks.append(_group_check(root, user))
    runtimes = set(engine_runtimes or ()) | _runtimes(root)
    checks.append(Check("Ascend Docker Runtime", "info", "present: `invoke run` uses --runtime ascend"
                        if "ascend" in runtimes else "absent: `invoke run` passes the devices and driver mounts itself"))
    if root.resolve() == Path("/"):
        checks += _limits()
    checks.append(Check("chip", "info" if chip else "warn", chip or "unknown (npu-smi did not say)"))
    if cards:
        checks += numa_checks(read_topology(root))
    if image is not None:
        checks += _image_checks(image, driver, chip, choices or [], host_arch)
        checks += _user_check(image, _group_gid(root))
    return checks


def _group_check(root: Path, user: str) -> Check:
    exists, members = _group(root)
    if not exists:
        return Check(f"group {GROUP}", "warn", "absent", "the driver's device group does not exist",
                     f"the driver installer creates {GROUP}; reinstall it with --install-username")
    if user == "root" or user in members:
        return Check(f"group {GROUP}", "ok", f"{user} may open the devices")
    return Check(f"group {GROUP}", "fail", f"{user} is not a member",
                 f"/dev/davinci* belong to {GROUP}: opening them gives 'permission denied'",
                 f"usermod -aG {GROUP} {user} (then log in again)")


def numa_checks(topo: Topology) -> list[Check]:
    """The map `invoke run` binds ranks by: each NUMA node's CPUs (and how many of them
    this process may use) with its cards; then what stands in the way of binding."""
    allowed = set(topo.allowed)
    checks = []
    for node, cpus in topo.nodes.items():
        cards = topo.cards_on(node)
        usable = [c for c in cpus if c in allowed]
        checks.append(Check(f"NUMA node {node}", "info", f"CPUs {cpulist(cpus)} ({len(usable)} of {len(cpus)} allowed"
                            + (f": {cpulist(usable)}" if 0 < len(usable) < len(cpus) else "") + "), cards "
                            + (", ".join(map(str, cards)) or "none")))
    unknown = [c for c, n in topo.cards.items() if n is None]
    starved = [c for c, n in topo.cards.items() if n is not None and not topo.usable(n)]
    nodes = len({n for n in topo.cards.values() if n is not None})
    found = (f"{len(topo.cards)} card{'s' if len(topo.cards) > 1 else ''} on {nodes} NUMA node{'s' if nodes != 1 else ''} "
             f"(by {topo.source}); allowed CPUs {cpulist(topo.allowed) or 'none'} ({topo.allowed_from})")
    if unknown:
        checks.append(Check("core binding", "warn", found, f"no NUMA node known for card{'s' if len(unknown) > 1 else ''} "
                            f"{', '.join(map(str, unknown))}" + "".join(f"; {n}" for n in topo.notes),
                            "`invoke run` binds with equal slices instead (--bind even); or give ranges per card "
                            "(--bind 0:0-23,1:24-47)"))
    elif starved:
        checks.append(Check("core binding", "warn", found, f"this process may use none of the CPUs of the NUMA node of "
                            f"card{'s' if len(starved) > 1 else ''} {', '.join(map(str, starved))}",
                            "run where those CPUs are allowed (the cgroup's or docker's --cpuset-cpus), or bind with "
                            "--bind even; `invoke run` refuses numa binding for these cards"))
    else:
        checks.append(Check("core binding", "ok", found))
    return checks


def _limits() -> list[Check]:
    """This machine's open-file limit and shared memory (a stand-in root has neither)."""
    import os
    import resource
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    checks = [Check("open files (ulimit -n)", "ok" if soft >= 65536 or soft == resource.RLIM_INFINITY else "warn",
                    str(soft), "" if soft >= 65536 else "multi-card training with many data loader workers runs out "
                    "of file descriptors", "" if soft >= 65536 else "raise it (ulimit -n 65536; docker run "
                    "--ulimit nofile=65536:65536)")]
    try:
        st = os.statvfs("/dev/shm")
        size = st.f_frsize * st.f_blocks
        checks.append(Check("/dev/shm", "info", f"{size >> 20} MiB on the host; containers get --shm-size "
                            f"(invoke run: 16g)"))
    except OSError:
        pass
    return checks


def _image_checks(image: ImageFacts, driver: str | None, chip: str | None, choices: list[Line],
                  host_arch: str | None) -> list[Check]:
    checks = []
    # the image that would run instead: a line of its own framework (by its label; else the first's)
    mine = FRAMEWORKS.get(image.framework or "", next(iter(FRAMEWORKS.values())))
    runnable = [f"{ln.stack} on CANN {ln.cann}" for ln in choices if ln.fw is mine and ln.driver and driver
                and driver_key(ln.driver) <= driver_key(driver)]
    instead = f", or use the {runnable[-1]} image" if runnable else ""
    if image.runs_on and driver:
        if runs_on(driver, image.runs_on):
            checks.append(Check("image driver need", "ok", f"CANN {image.cann} runs on {driver} (its release notes: "
                                f"{', '.join(image.runs_on)})"))
        else:
            checks.append(Check("image driver need", "fail", f"host {driver} not in {', '.join(image.runs_on)}",
                                f"CANN {image.cann}'s release notes list the drivers it runs on, and {driver} is not "
                                f"one of them", f"install one of {', '.join(image.runs_on)} (a series like 25.2 is "
                                f"any 25.2.x){instead}"))
        return checks + _chip_and_arch(image, chip, host_arch)
    if image.driver in (None, "unknown"):
        if image.driver == "unknown":
            checks.append(Check("image driver need", "warn", f"CANN {image.cann}: no source names its driver",
                                "neither Huawei's data nor the release notes read say which driver it needs",
                                "check CANN's release notes for the driver before running it"))
            return checks + _chip_and_arch(image, chip, host_arch)
        checks.append(Check("image driver need", "warn", f"{image.ref} has no driver label",
                            "built before images carried it: cannot tell which driver it needs",
                            "rebuild it with `invoke build`, or check CANN's driver pairing by hand"))
    elif driver and driver_key(driver) < driver_key(image.driver):
        checks.append(Check("image driver need", "fail", f"host {driver} < {image.driver}",
                            f"host driver {driver} is older than {image.driver}, which CANN {image.cann} needs",
                            f"upgrade the driver to {image.driver} or newer{instead}"))
    elif driver:
        checks.append(Check("image driver need", "ok", f"CANN {image.cann} needs {image.driver}; host has {driver}"))
    return checks + _chip_and_arch(image, chip, host_arch)


def _user_check(image: ImageFacts, host_gid: int | None) -> list[Check]:
    """An image that runs as a user opens the cards through its group: it must be the
    host's HwHiAiUser gid (the driver's group, owner of /dev/davinci*)."""
    if not image.user or image.user == "root":
        return []
    gid = int(image.user.split(":")[1])
    if host_gid is None:
        return [Check("image user", "warn", f"runs as {image.user}", f"the host has no {GROUP} group to compare with",
                      f"install the driver with its {GROUP} user, or run a root image")]
    if gid != host_gid:
        return [Check("image user", "fail", f"image gid {gid}, host {GROUP} gid {host_gid}",
                      f"the image runs as {image.user}, but /dev/davinci* belong to gid {host_gid} here: permission "
                      f"denied on the cards", f"build for this host: invoke build --run-as UID:{host_gid}")]
    return [Check("image user", "ok", f"runs as {image.user}, in the host's {GROUP} group")]


def _chip_and_arch(image: ImageFacts, chip: str | None, host_arch: str | None) -> list[Check]:
    checks = []
    if image.chip and chip and chips.spelling(image.chip).lower() != chips.spelling(chip).lower():
        checks.append(Check("image chip", "fail", f"image {image.chip}, host {chip}",
                            f"the image carries {image.chip} kernels; this host's cards are {chip} "
                            f"(A2 and A3 need different packages)",
                            f"build for this host: invoke build --chip {chip}"))
    elif image.chip is None:
        checks.append(Check("image chip", "warn", "no chip label", "cannot tell which chip the image was built for"))
    arch = PLATFORMS[image.platform].arch if image.platform in PLATFORMS else None
    if arch and host_arch and arch != host_arch:
        checks.append(Check("image arch", "fail", f"image {arch}, host {host_arch}",
                            f"the image is for {arch}; on this {host_arch} host it runs under emulation at best",
                            f"build or pull the {host_arch} image (--platform)"))
    return checks


def table(checks: list[Check]) -> str:
    from ..matrix.report import table as render
    rows = [{"check": c.name, "state": c.state.upper() if c.state == "fail" else c.state, "found": c.found,
             "cause -> fix": f"{c.cause} -> {c.fix}" if c.cause else ""} for c in checks]
    return render(rows)


def as_json(checks: list[Check], facts: dict | None = None) -> str:
    """The checks; with a host's NPU network facts, {"checks": [...], "facts": {...}}: the
    file `invoke ranktable` and `invoke doctor --cluster` read."""
    listed = [{**asdict(c), "blocking": c.blocking} for c in checks]
    return json.dumps(listed if facts is None else {"checks": listed, "facts": facts}, indent=1)


def read_image(engine, ref: str) -> ImageFacts | None:
    """The image's labels (None when the engine does not have the image)."""
    from ..provenance.labels import label
    labels = engine.labels(ref)
    if labels is None:
        return None
    return ImageFacts(ref, labels.get(label("cann")), labels.get(label("chip")), labels.get(label("driver")),
                      labels.get(label("platform")), tuple((labels.get(label("runs-on")) or "").split()),
                      labels.get(label("user")),
                      next((f.name for f in FRAMEWORKS.values() if label(f.release_label) in labels), None),
                      labels.get(label("stack")), labels.get(label("torch-npu")), labels.get(label("kind")),
                      labels.get(label("kernels")))


class Line(NamedTuple):
    """A line as doctor weighs it: its stack, its CANN, the driver that CANN needs, its framework."""
    stack: str
    cann: str
    driver: str | None
    fw: Framework


def lines(matrix: Matrix) -> list[Line]:
    """Every line, by framework (torch's first), oldest first."""
    from packaging.version import Version
    order = list(FRAMEWORKS)
    stacks = sorted(matrix.stacks.values(), key=lambda st: (order.index(st.framework.name), Version(st.release),
                                                           st.name))
    return [Line(st.name, st.cann, matrix.cann[st.cann].driver, st.framework) for st in stacks]


def for_host(matrix: Matrix, root: Path, torch: Stack | None, chip: str | None) -> tuple[Stack, str | None]:
    """`invoke build --for-host ROOT`: the line and chip for the host below `root`."""
    from ..errors import UserError
    driver = host_driver(root)
    if not driver:
        raise UserError(f"--for-host {root}: no /{DRIVER_INFO} there, so no driver version to match")
    chip = chips.spelling(chip) if chip else host_chip(root)     # --chip a3: the matrix's A3
    picked, skipped = pick_stack(matrix, driver, chip, torch)
    console.say(f"for this host (driver {driver}, chip {chip or 'unknown'}): torch line {picked.name}"
                + "".join(f"\n  skipped {line}" for line in skipped))
    return picked, chip


def cann_runs(cann, driver: str) -> str | None:
    """None when a host on `driver` runs this CANN release, else why not: by the drivers its
    release notes list (runs_on) where known, else by the driver it is paired with."""
    if cann.runs_on:
        return None if runs_on(driver, cann.runs_on) else \
            f"CANN {cann.version} runs on {', '.join(cann.runs_on)}, the host has {driver}"
    if not cann.driver:
        return f"no source names the driver CANN {cann.version} needs"
    if driver_key(cann.driver) > driver_key(driver):
        return f"CANN {cann.version} needs driver {cann.driver}, the host has {driver}"
    return None


def pick_stack(matrix: Matrix, driver: str, chip: str | None,
               torch: Stack | None = None) -> tuple[Stack, list[str]]:
    """The newest line (of `torch`, if given: by its name, so --torch 2.1.0 takes the 2.1.0
    release's other stacks too, 2.1.0-cann8.0.0) whose CANN this driver runs, with the chip;
    and why each newer one was skipped. Without `torch`, only the lines' own stacks (not
    variants like 2.12.0-26.1.0) are candidates."""
    skipped = []
    for name, cann, _, _ in reversed(lines(matrix)):
        stack = matrix.stacks[name]
        if torch and stack.release != torch.name and name != torch.name:
            continue
        # without a name: the default line's framework, each line's own stack (a variant only by name)
        if not torch and (stack.key != stack.release or stack.framework is not matrix.stack().framework):
            continue
        why = cann_runs(matrix.cann[cann], driver)
        if chip and chip not in matrix.cann[cann].kernels:
            skipped.append(f"{name}: CANN {cann} has no packages for chip {chip}")
        elif why:
            skipped.append(f"{name}: {why}")
        else:
            return stack, skipped
    from ..errors import UserError
    raise UserError(f"no line{' of torch ' + torch.name if torch else ''} runs on driver {driver}"
                    + (f" with chip {chip}" if chip else "") + ":\n  " + "\n  ".join(skipped)
                    + "\nUpgrade the driver, or add a stack on an older CANN to matrix.yaml.")


# ---------------------------------------------------------------------------- --explain

@dataclass(frozen=True)
class Known:
    name: str
    pattern: str
    cause: str
    fix: str
    # What many causes end in (torch_npu failing to load): said only when no entry that names
    # its cause is in the same text, so a log with both gets the cause.
    outcome: bool = False


KNOWN = [
    # vllm-ascend #1440: `vllm serve` in a container started without the driver mounted.
    Known("driver library missing", r"libascend_hal\.so: cannot open shared object file",
          "the NPU driver's libraries are not in the container: no driver mount (a plain `docker run` of a "
          "vllm-ascend image with the devices only), or `import torch_npu` during `docker build` (no driver there)",
          "run with `invoke run` (it mounts /usr/local/Ascend/driver read-only; `invoke run --serve` for vLLM), or "
          "mount that folder yourself; in a build step set TORCH_DEVICE_BACKEND_AUTOLOAD=0 and do not import "
          "torch_npu"),
    Known("CANN libraries not on the path", r"lib(hccl|ascendcl|ge_runner|graph|acl_op_compiler)\.so: cannot open",
          "CANN's environment lives only in set_env.sh or .bashrc, so a plain `docker run` lacks it; or CANN "
          "is missing or a different release than torch_npu's",
          "use an image with the environment as ENV (every image this project builds), or `source "
          "/usr/local/Ascend/ascend-toolkit/set_env.sh`; check CANN and torch_npu pair in `invoke matrix`"),
    Known("CANN Python path missing", r"No module named '(tbe|te|acl)'",
          "CANN's Python packages are not on PYTHONPATH (environment not set)",
          "source the CANN set_env.sh, or use an image that sets it as ENV"),
    Known("device permission", r"(Permission denied|permission denied).*davinci|davinci.*(Permission denied|permission denied)",
          f"the user is not in {GROUP}, which owns /dev/davinci*",
          f"usermod -aG {GROUP} USER, or run the container as a member"),
    Known("Ascend Docker Runtime missing", r"unknown or invalid runtime name: ascend",
          "--runtime ascend was asked for but the Ascend Docker Runtime is not installed or not in daemon.json",
          "install Ascend Docker Runtime, or run without it: `invoke run --runtime runc` passes the devices itself"),
    Known("protobuf too new", r"Descriptors cannot (not )?be created directly",
          "protobuf 4+ with code generated for 3.x (torch 2.1 with CANN's Python packages)",
          "pin protobuf==3.20.3 (the 2.1.0 stacks here do)"),
    Known("numpy 2 against a numpy 1 build",
          r"compiled using NumPy 1\.x cannot be run in\s+NumPy 2|_ARRAY_API not found|numpy\.core\.multiarray failed to import",
          "numpy 2 is installed; CANN up to 8.2 and older torch builds need numpy 1",
          "pin numpy<2 (the stacks on CANN up to 8.2 here do)"),
    Known("driver memory query failed", r"drvMemGetInfo",
          "the runtime could not query device memory: a driver older than the CANN release needs, or a card "
          "that is not usable (not mounted, in a bad state)",
          "run `invoke doctor --image IMAGE` to compare the driver with the image's need; `npu-smi info` for the card"),
    Known("device occupied", r"The device is occupied|device is busy|Resource busy",
          "another process holds the card",
          "`npu-smi info` lists the processes per card; pick free cards with --devices or ASCEND_RT_VISIBLE_DEVICES"),
    # Multi-node: what HCCL and the driver print when the hosts or the launch are wrong.
    Known("HCCL connect timeout (EI0006)", r"EI0006|Getting socket times out",
          "a rank started late or cannot be reached, or HCCL_CONNECT_TIMEOUT is too low (torch_npu warns below 300)",
          "start every node (`invoke run --hostfile`), check `invoke doctor --cluster`; HCCL_CONNECT_TIMEOUT=1800 "
          "(invoke run and invoke job set it)"),
    Known("HCCL communicator setup failed", r"HcclCommPrepare|HcclCommInitRootInfo.*fail",
          "the cards' addresses in /etc/hccn.conf disagree with the cards (hccn_tool -i N -ip -g), or a link is down",
          "`invoke doctor --cluster` over every host's `doctor --json`; fix address_N in /etc/hccn.conf"),
    Known("device IP not found", r"(?i)get device ip from hccn\.conf|device ip.*hccn_tool|hccn\.conf.*not (exist|found)",
          "/etc/hccn.conf is not in the container, or the driver is mounted in pieces (hccn_tool is in driver/tools)",
          "mount /etc/hccn.conf and the whole /usr/local/Ascend/driver read-only (`invoke run` does)"),
    Known("topology file missing (EI0014)", r"EI0014",
          "HCCL cannot read the server's topology: the driver's topo folder is not in the container",
          "mount the whole /usr/local/Ascend/driver read-only, not lib64 alone (`invoke run` does)"),
    Known("rank table wrong for this container", r"device_ip' is not set correctly|server_count.*(wrong|invalid|mismatch)",
          "the container is not on the host network, so the addresses it sees are not the servers', or the rank "
          "table is stale",
          "run with --network host (`invoke run --hostfile` does) and a fresh table (`invoke ranktable`)"),
    Known("card used by another container", r"(?i)dcmi.*-80(05|20)\b|(ret|error code)\s*[=:]\s*-80(05|20)\b",
          "the card is held by another container or process (dcmi error -8005 / -8020)",
          "`npu-smi info` lists the processes per card; stop that container or choose free cards with --devices"),
    Known("daemon limits below the run's", r"error setting rlimit type [78]|setting rlimit.*operation not permitted",
          "the container engine's own open-file or locked-memory limit is lower than the --ulimit asked for "
          "(type 7: nofile, 8: memlock)",
          "raise the daemon's limits (systemd drop-in for docker.service: LimitNOFILE=1048576, "
          "LimitMEMLOCK=infinity; then systemctl daemon-reload and restart docker)"),
    Known("driver too old for CANN", r"Driver Version: \S+ is invalid or not supported",
          "the host driver is older than (or unknown to) the CANN release in the image",
          "upgrade the driver to the one CANN needs (`invoke doctor --image IMAGE` names it)"),
    # Serving images (vLLM + vLLM-Ascend). vllm-ascend #855: torch loads its NPU backend at
    # `import torch`, so any torch_npu failure surfaces as this line; the cause is above it.
    Known("torch_npu backend failed to load", r"Failed to load the backend extension: torch_npu",
          "torch_npu could not be imported when torch started: usually CANN's environment is not set in the "
          "container (set_env.sh not sourced), or torch and torch_npu are not a pair (vLLM or vLLM-Ascend "
          "reinstalled torch); the lines above it name the library or symbol",
          "use an image whose suite passed (every image built here sets CANN's environment as ENV and pins torch "
          "to its torch_npu), check it against the host with `invoke doctor --image IMAGE`; do not pip install "
          "vllm over it without its constraints", outcome=True),
    # vllm-ascend #1114: vllm-ascend reinstalled from source, or built without its kernels.
    Known("vLLM-Ascend custom kernels missing", r"libvllm_ascend_kernels\.so",
          "vLLM-Ascend was installed or built without its custom kernels (an image built with --no-kernels, "
          "whose io.ascend-build.kernels label says no, or vllm-ascend reinstalled from source without "
          "compiling them): its custom operators and sleep mode are off",
          "rebuild the serving image with its kernels (without --no-kernels; the build needs CANN's toolkit to "
          "compile them), or use one whose io.ascend-build.kernels label is yes"),
]


def explain(text: str) -> list[Known]:
    found = [k for k in KNOWN if re.search(k.pattern, text)]
    causes = [k for k in found if not k.outcome]
    return causes or found
