"""Which NUMA node each card sits on, which CPUs each node has, and which of them this
process may use: the facts a core binding is planned from (cluster/binding.py).

The card-to-node map comes from `npu-smi info -t topo` where it answers (its "CPU
Affinity" column: the CPUs of the card's node), otherwise from sysfs: the card's PCI
function (Huawei's vendor id, class "processing accelerator", in bus order) and its
`numa_node`, with `/sys/devices/system/node/node*/cpulist`. The usable CPUs are always cut
down to what this process may run on: its cgroup's cpuset (`cpuset.cpus.effective`, or v1's
`cpuset.effective_cpus`) and, on the host itself, `sched_getaffinity`. Everything is read
below `root`, so a stand-in host tree is read the same way."""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .run import NPU_SMI, host_cards

NODES = "sys/devices/system/node"
PCI_DEVICES = "sys/bus/pci/devices"
HUAWEI = "0x19e5"
ACCELERATOR = "0x12"          # PCI class 12xxxx: processing accelerators (the NPUs, not Huawei's NICs)
TOPO = ("info", "-t", "topo")
_CPULIST = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")


def parse_cpulist(text: str) -> tuple[int, ...]:
    """'0-3,8,10-11' -> (0, 1, 2, 3, 8, 10, 11); '' -> ()."""
    text = text.strip()
    if not text:
        return ()
    if not _CPULIST.fullmatch(text):
        raise ValueError(f"not a CPU list: {text!r}")
    cpus: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return tuple(sorted(cpus))


def ranges(cpus: tuple[int, ...] | list[int]) -> list[tuple[int, int]]:
    """Runs of consecutive CPUs: (0, 1, 2, 5) -> [(0, 2), (5, 5)]."""
    out: list[tuple[int, int]] = []
    for cpu in sorted(set(cpus)):
        if out and cpu == out[-1][1] + 1:
            out[-1] = (out[-1][0], cpu)
        else:
            out.append((cpu, cpu))
    return out


def cpulist(cpus: tuple[int, ...] | list[int]) -> str:
    """(0, 1, 2, 5) -> '0-2,5': the form taskset, docker's --cpuset-cpus and sysfs use."""
    return ",".join(f"{lo}-{hi}" if hi > lo else str(lo) for lo, hi in ranges(cpus))


@dataclass(frozen=True)
class Topology:
    nodes: dict[int, tuple[int, ...]]          # NUMA node -> all its CPUs
    cards: dict[int, int | None]               # card -> its node (None: no NUMA information)
    allowed: tuple[int, ...]                   # the CPUs this process may use
    source: str                                # where the card -> node map came from
    allowed_from: str = ""                     # where `allowed` came from
    notes: tuple[str, ...] = field(default=())

    def usable(self, node: int) -> tuple[int, ...]:
        """The node's CPUs this process may use."""
        allowed = set(self.allowed)
        return tuple(c for c in self.nodes.get(node, ()) if c in allowed)

    def cards_on(self, node: int) -> list[int]:
        return sorted(c for c, n in self.cards.items() if n == node)

    def to_json(self) -> dict:
        return {"source": self.source, "allowed": cpulist(self.allowed), "allowed_from": self.allowed_from,
                "nodes": {str(n): cpulist(cpus) for n, cpus in sorted(self.nodes.items())},
                "cards": {str(c): n for c, n in sorted(self.cards.items())}, "notes": list(self.notes)}

    @classmethod
    def from_json(cls, data: dict) -> Topology:
        return cls({int(n): parse_cpulist(c) for n, c in data["nodes"].items()},
                   {int(c): n for c, n in data["cards"].items()}, parse_cpulist(data["allowed"]),
                   data["source"], data.get("allowed_from", ""), tuple(data.get("notes") or ()))


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def numa_nodes(root: Path) -> dict[int, tuple[int, ...]]:
    """node -> its CPUs, from /sys/devices/system/node/node*/cpulist (nodes without CPUs left out)."""
    nodes = {}
    for folder in (root / NODES).glob("node*"):
        m = re.fullmatch(r"node(\d+)", folder.name)
        text = _read(folder / "cpulist") if m else None
        if m and text:
            nodes[int(m.group(1))] = parse_cpulist(text)
    return dict(sorted(nodes.items()))


def pci_numa(root: Path) -> list[int | None]:
    """Each NPU's PCI `numa_node`, in bus order (card 0 first); -1 (no NUMA information) is None."""
    found = []
    for dev in sorted((root / PCI_DEVICES).glob("*")):
        if _read(dev / "vendor") != HUAWEI or not (_read(dev / "class") or "").startswith(ACCELERATOR):
            continue
        text = _read(dev / "numa_node") or "-1"
        found.append(int(text) if text.lstrip("-").isdigit() and int(text) >= 0 else None)
    return found


def parse_topo(text: str) -> dict[int, tuple[int, ...]]:
    """card -> CPU affinity, from `npu-smi info -t topo`: a matrix whose rows start NPU<n>
    and whose "CPU Affinity" column holds a CPU list; {} when the output has none."""
    column = None
    found: dict[int, tuple[int, ...]] = {}
    for line in text.splitlines():
        words = line.split()
        if "Affinity" in words and "CPU" in words and column is None:
            column = words.index("CPU") + 1          # the header has no row label: +1 for the rows'
            continue
        m = re.fullmatch(r"NPU(\d+)", words[0]) if words else None
        if not m:
            continue
        value = words[column] if column is not None and column < len(words) else words[-1]
        if _CPULIST.fullmatch(value):
            found[int(m.group(1))] = parse_cpulist(value)
    return found


def npu_smi_topo(root: Path) -> dict[int, tuple[int, ...]]:
    smi = next((root / p.lstrip("/") for p in NPU_SMI if (root / p.lstrip("/")).is_file()), None)
    if smi is None:
        return {}
    try:
        out = subprocess.run([str(smi), *TOPO], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return parse_topo(out.stdout) if out.returncode == 0 else {}


def _cgroup_paths(root: Path) -> tuple[str, str]:
    """This process's cgroup: (the v2 path, the v1 cpuset path); '/' where none is said."""
    v2 = v1 = "/"
    for line in (_read(root / "proc/self/cgroup") or "").splitlines():
        hierarchy, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if hierarchy == "0" and controllers == "":
            v2 = path or "/"
        elif "cpuset" in controllers.split(","):
            v1 = path or "/"
    return v2, v1


def cgroup_cpus(root: Path) -> tuple[tuple[int, ...] | None, str]:
    """The CPUs this process's cgroup may use and the file that says so; (None, '') without
    a cpuset. v2 keeps the file only where the cpuset controller is on: the nearest one up
    the tree counts."""
    base = root / "sys/fs/cgroup"
    v2, v1 = _cgroup_paths(root)
    path = Path(v2)
    for folder in (path, *path.parents):
        found = base / str(folder).lstrip("/") / "cpuset.cpus.effective"
        text = _read(found)
        if text is not None:
            return parse_cpulist(text), "/" + str(found.relative_to(root))
    for name in ("cpuset.effective_cpus", "cpuset.cpus"):
        found = base / "cpuset" / v1.lstrip("/") / name
        text = _read(found)
        if text is not None:
            return parse_cpulist(text), "/" + str(found.relative_to(root))
    return None, ""


def allowed_cpus(root: Path, nodes: dict[int, tuple[int, ...]]) -> tuple[tuple[int, ...], str]:
    """The CPUs this process may use: the online ones (or every node's), within the
    cgroup's cpuset and, on the host itself, within sched_getaffinity."""
    here = root.resolve() == Path("/")
    online = _read(root / "sys/devices/system/cpu/online")
    cpus = set(parse_cpulist(online) if online else [c for cpus in nodes.values() for c in cpus])
    said = []
    cgroup, where = cgroup_cpus(root)
    if cgroup is not None:
        cpus = cpus & set(cgroup) if cpus else set(cgroup)
        said.append(f"cgroup {where}")
    if here and hasattr(os, "sched_getaffinity"):
        mine = os.sched_getaffinity(0)
        cpus = cpus & mine if cpus else set(mine)
        said.append("this process's affinity")
    return tuple(sorted(cpus)), " and ".join(said) or "online CPUs"


def _from_topo(topo: dict[int, tuple[int, ...]], nodes: dict[int, tuple[int, ...]],
               cards: list[int]) -> tuple[dict[int, int | None], dict[int, tuple[int, ...]], list[str]]:
    """npu-smi's affinity sets as nodes: sysfs's numbers where each set is a sysfs node,
    else numbered in card order (a VM or container may hide sysfs's nodes)."""
    by_cpus = {cpus: n for n, cpus in nodes.items()}
    sets = list(dict.fromkeys(topo[c] for c in cards if c in topo))
    notes = []
    if sets and all(s in by_cpus for s in sets):
        ids = {s: by_cpus[s] for s in sets}
    else:
        ids = {s: i for i, s in enumerate(sets)}
        nodes = {i: s for s, i in ids.items()}
        if sets:
            notes.append("npu-smi's CPU affinity sets are not sysfs's NUMA nodes: numbered in card order")
    missing = [c for c in cards if c not in topo]
    if missing:
        notes.append(f"npu-smi gave no CPU affinity for card{'s' if len(missing) > 1 else ''} "
                     f"{', '.join(map(str, missing))}")
    return {c: ids[topo[c]] if c in topo else None for c in cards}, nodes, notes


def _from_sysfs(root: Path, nodes: dict[int, tuple[int, ...]], cards: list[int]) -> tuple[dict[int, int | None],
                                                                                          list[str]]:
    numa = pci_numa(root)
    notes = []
    if len(numa) != len(cards):
        notes.append(f"{len(numa)} NPU PCI functions in sysfs for {len(cards)} davinci cards: the rest have no NUMA "
                     f"information")
    found = {c: numa[i] if i < len(numa) else None for i, c in enumerate(cards)}
    if len(nodes) == 1:
        # One node: a card without numa_node (-1, a kernel without NUMA) can only be on it.
        only = next(iter(nodes))
        found = {c: only if n is None else n for c, n in found.items()}
    return found, notes


def read_topology(root: Path) -> Topology:
    """The host below `root`: npu-smi's topology where it answers, else sysfs's."""
    cards = host_cards(root)
    nodes = numa_nodes(root)
    allowed, allowed_from = allowed_cpus(root, nodes)
    topo = npu_smi_topo(root)
    if topo:
        card_nodes, nodes, notes = _from_topo(topo, nodes, cards)
        source = "npu-smi info -t topo"
    else:
        card_nodes, notes = _from_sysfs(root, nodes, cards)
        source = "sysfs: each card's PCI numa_node"
    return Topology(nodes, card_nodes, allowed, source, allowed_from, tuple(notes))


# The usual 910B server (Atlas 800T A2: Kunpeng 920, 4 NUMA nodes x 48 cores, 8 cards, two
# per node): what a preview on a machine without NPUs plans for, as `invoke run` previews
# its docker run for cards 0-7.
PREVIEW = Topology({n: tuple(range(48 * n, 48 * n + 48)) for n in range(4)}, {c: c // 2 for c in range(8)},
                   tuple(range(192)), "preview: the usual 910B server (Kunpeng 920, 4 NUMA nodes x 48 cores, "
                   "cards 2n and 2n+1 on node n)", "assumed")
