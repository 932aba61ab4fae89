"""Each rank's cores, planned on the host from its topology (host/topology.py), never
inside the container: torch_npu's own guide warns that a container may see another
card-to-NUMA mapping than the host's, and recommends explicit ranges from the host.

Modes (`--bind`):
- `numa` (the default): a card's NUMA node, split evenly between all the host's cards on
  that node (on a Kunpeng 920 with 8 cards: 24 cores each, the 8-card guide's
  `taskset -c $((24*i))-$((24*i+23))`);
- `even`: the allowed CPUs in equal contiguous slices, one per card of the host (what
  vllm-ascend does on A3, whose cards are not tied to one node each);
- explicit ranges, `CARD:CPUS[,CARD:CPUS...]` with CPUS a CPU list (`0:0-23,1:24-47`);
- `off`: every rank starts unbound.

Slices are taken per card of the host, not per launched rank, so two containers on one
host (cards 0-3 and 4-7) never share a core. Every rank gets at least MIN_CORES."""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError
from ..host.doctor import ImageFacts, driver_key
from ..host.topology import PREVIEW, Topology, cpulist, parse_cpulist, ranges, read_topology
from ..matrix import Stack

# vllm-ascend's floor per NPU (MIN_CPUS_PER_NPU = 5: two for the card's interrupts, the
# main thread, ACL's and the release thread). For training it is also what torch_npu's
# fine binding needs: its main thread on the first core, its dispatch pipeline threads on
# the next ones, and dataloader workers on what is left.
MIN_CORES = 5
MODES = ("numa", "even", "off")


@dataclass(frozen=True)
class RankCores:
    rank: int                     # local rank: LOCAL_RANK, and npu<rank> to torch_npu in the container
    card: int                     # the host's card (/dev/davinci<card>)
    node: int | None              # its NUMA node (None: not known)
    cpus: tuple[int, ...]

    @property
    def cpulist(self) -> str:
        return cpulist(self.cpus)


@dataclass(frozen=True)
class BindRequest:
    mode: str                                             # numa | even | explicit | off
    explicit: dict[int, tuple[int, ...]] = field(default_factory=dict)   # card -> its CPUs
    min_cores: int = MIN_CORES


@dataclass(frozen=True)
class Plan:
    mode: str                     # numa | even | explicit | off
    ranks: tuple[RankCores, ...] = ()
    source: str = ""              # the topology it was planned from
    notes: tuple[str, ...] = ()
    min_cores: int = MIN_CORES

    @property
    def bound(self) -> bool:
        return self.mode != "off" and bool(self.ranks)

    @property
    def cpuset(self) -> str:
        """Every core of the plan: the container's --cpuset-cpus."""
        return cpulist([c for r in self.ranks for c in r.cpus])

    def rank_cpus(self) -> str:
        """Each local rank's CPU list, in rank order, space-separated (the per-rank wrapper reads it)."""
        return " ".join(r.cpulist for r in self.ranks)

    def affinity_conf(self, mode: int) -> str | None:
        """torch_npu's CPU_AFFINITY_CONF with the plan's explicit ranges (None for mode 0)."""
        if not mode:
            return None
        return ",".join([str(mode)] + [f"npu{r.rank}:{lo}-{hi}" for r in self.ranks for lo, hi in ranges(r.cpus)])

    def msrun_bind_core(self) -> str:
        """msrun's --bind_core as a dict: device<local rank> -> ["lo-hi", ...] (each range
        written lo-hi, a single core as n-n: msrun's parser takes only that form)."""
        return json.dumps({f"device{r.rank}": [f"{lo}-{hi}" for lo, hi in ranges(r.cpus)] for r in self.ranks},
                          separators=(",", ":"))

    def lines(self) -> list[str]:
        """One line per rank, for --dry and the log."""
        if not self.bound:
            return ["binding: off (--bind off): every rank starts unbound, the container gets every core"]
        head = (f"binding: {self.mode}, from {self.source}; {len(self.ranks)} rank{'s' if len(self.ranks) > 1 else ''}, "
                f"at least {self.min_cores} core{'s' if self.min_cores > 1 else ''} each, none shared")
        rows = [f"  rank {r.rank}: card {r.card} (NUMA node {'?' if r.node is None else r.node}), cores {r.cpulist} "
                f"({len(r.cpus)})" for r in self.ranks]
        return [head] + rows + [f"  note: {n}" for n in self.notes]


OFF = Plan("off")


def parse_bind(spec: str, min_cores: int = MIN_CORES) -> BindRequest:
    """numa | even | off | CARD:CPUS[,CPUS][,CARD:CPUS...] (a word without ':' continues the card before)."""
    if min_cores < 1:
        raise UserError(f"--bind-min-cores {min_cores}: at least 1")
    if spec in MODES:
        return BindRequest(spec, min_cores=min_cores)
    explicit: dict[int, list[int]] = {}
    card = None
    for word in spec.split(","):
        m = re.fullmatch(r"(?:(\d+):)?(\d+(?:-\d+)?)", word.strip())
        if not m or (m.group(1) is None and card is None):
            raise UserError(f"--bind {spec[:80]!r}: numa, even, off, or ranges per card like 0:0-23,1:24-47 "
                            f"(CARD:CPUS, more CPUS after a comma)")
        if m.group(1) is not None:
            card = int(m.group(1))
            if card in explicit:
                raise UserError(f"--bind: card {card} is given twice")
            explicit[card] = []
        assert card is not None
        explicit[card] += parse_cpulist(m.group(2))
    return BindRequest("explicit", {c: tuple(sorted(set(v))) for c, v in explicit.items()}, min_cores)


def plan(request: BindRequest, topo: Topology, cards: list[int], nproc: int | None = None,
         explain: bool = True) -> Plan:
    """Each local rank's cores: rank i on cards[i]. Refused (UserError) when the binding
    cannot be had, with what was found and (`explain`) what would work."""
    if request.mode == "off":
        return OFF
    nproc = len(cards) if nproc is None else nproc
    if nproc > len(cards):
        raise UserError(f"cannot bind {nproc} processes per node to {len(cards)} card{'s' if len(cards) > 1 else ''} "
                        f"({', '.join(map(str, cards))}): ranks {len(cards)}-{nproc - 1} have no card of their own. "
                        f"Start one process per card, or --bind off")
    cards = cards[:nproc]
    notes: list[str] = []
    if request.mode == "explicit":
        ranks = _explicit(request, topo, cards, explain)
    elif request.mode == "numa":
        ranks, notes = _numa(topo, cards, explain, request.min_cores)
    elif request.mode == "even":
        ranks = _even(topo, cards)
    else:
        raise UserError(f"--bind {request.mode}: numa, even, off or ranges per card")
    made = Plan("even" if request.mode == "numa" and notes else request.mode, tuple(ranks),
                "your ranges (--bind)" if request.mode == "explicit" else topo.source,
                tuple(list(topo.notes) + notes), request.min_cores)
    _check(made, request, topo, cards, explain)
    return made


def _numa(topo: Topology, cards: list[int], explain: bool, min_cores: int) -> tuple[list[RankCores], list[str]]:
    unknown = [c for c in cards if topo.cards.get(c) is None]
    if unknown:
        # As vllm-ascend does without a topology: even slices, said out loud.
        return _even(topo, cards), [f"card{'s' if len(unknown) > 1 else ''} {', '.join(map(str, unknown))}: no NUMA "
                                    f"node known ({topo.source}), so even slices of the allowed CPUs instead"]
    starved = [c for c in cards if not topo.usable(topo.cards[c] or 0)]
    if starved:
        nodes = sorted({topo.cards[c] or 0 for c in starved})
        fed = [c for c in cards if c not in starved]
        raise UserError(_refusal(
            f"card{'s' if len(starved) > 1 else ''} {', '.join(map(str, starved))} "
            f"{'are' if len(starved) > 1 else 'is'} on NUMA node{'s' if len(nodes) > 1 else ''} "
            f"{', '.join(f'{n} (CPUs {cpulist(topo.nodes.get(n, ()))})' for n in nodes)}, and this process may use "
            f"none of them (allowed: {cpulist(topo.allowed) or 'none'}, from {topo.allowed_from})",
            _alternatives(BindRequest("numa", min_cores=min_cores), topo, cards, *([f"--devices {cpulist(fed)}"] if fed else []))
            if explain else []))
    ranks = []
    for rank, card in enumerate(cards):
        node = topo.cards[card]
        assert node is not None
        sharing = topo.cards_on(node)
        usable = topo.usable(node)
        size = len(usable) // len(sharing)
        i = sharing.index(card)
        ranks.append(RankCores(rank, card, node, usable[i * size:(i + 1) * size]))
    return ranks, []


def _even(topo: Topology, cards: list[int]) -> list[RankCores]:
    every = sorted(set(topo.cards) | set(cards))
    size = len(topo.allowed) // len(every)
    return [RankCores(rank, card, topo.cards.get(card), topo.allowed[every.index(card) * size:
                                                                     (every.index(card) + 1) * size])
            for rank, card in enumerate(cards)]


def _explicit(request: BindRequest, topo: Topology, cards: list[int], explain: bool) -> list[RankCores]:
    missing = [c for c in cards if c not in request.explicit]
    extra = sorted(set(request.explicit) - set(cards))
    if missing or extra:
        raise UserError(f"--bind: the launched cards are {', '.join(map(str, cards))}"
                        + (f"; no cores given for {', '.join(map(str, missing))}" if missing else "")
                        + (f"; {', '.join(map(str, extra))} not launched" if extra else "")
                        + ": give one CARD:CPUS per launched card")
    allowed = set(topo.allowed)
    for card in cards:
        outside = [c for c in request.explicit[card] if c not in allowed]
        if outside:
            raise UserError(_refusal(f"card {card}'s cores {cpulist(outside)} are not ones this process may use "
                                     f"(allowed: {cpulist(topo.allowed) or 'none'}, from {topo.allowed_from})",
                                     _alternatives(request, topo, cards) if explain else []))
    return [RankCores(rank, card, topo.cards.get(card), request.explicit[card]) for rank, card in enumerate(cards)]


def _check(made: Plan, request: BindRequest, topo: Topology, cards: list[int], explain: bool) -> None:
    seen: dict[int, int] = {}
    for r in made.ranks:
        for cpu in r.cpus:
            if cpu in seen:
                raise UserError(f"--bind: core {cpu} is given to card {seen[cpu]} and to card {r.card}; no two ranks "
                                f"may share a core")
            seen[cpu] = r.card
    short = [r for r in made.ranks if len(r.cpus) < request.min_cores]
    if short:
        found = "; ".join(f"card {r.card} gets {len(r.cpus)} ({r.cpulist or 'none'})" for r in short[:4])
        raise UserError(_refusal(
            f"{made.mode} binding leaves ranks under {request.min_cores} cores: {found} "
            f"({len(topo.allowed)} allowed CPUs: {cpulist(topo.allowed) or 'none'}, from {topo.allowed_from})",
            _alternatives(request, topo, cards) if explain else []))


def _alternatives(request: BindRequest, topo: Topology, cards: list[int], *more: str) -> list[str]:
    """What would work instead, tried for real: the other mode, a lower minimum, unbound."""
    out = []
    for mode in ("even", "numa"):
        if mode == request.mode:
            continue
        try:
            other = plan(BindRequest(mode, min_cores=request.min_cores), topo, cards, explain=False)
        except UserError:
            continue
        if other.mode == mode:            # not numa's fallback to even slices: that is --bind even
            out.append(f"--bind {mode} ({min(len(r.cpus) for r in other.ranks)} cores each)")
    if request.mode in ("numa", "even"):
        smallest = _smallest_slice(request, topo, cards)
        if 0 < smallest < request.min_cores:
            out.append(f"--bind-min-cores {smallest} (fewer than the {MIN_CORES} torch_npu's fine binding and "
                       f"vllm-ascend count on)")
    return out + list(more) + ["--bind off (ranks start unbound)"]


def _smallest_slice(request: BindRequest, topo: Topology, cards: list[int]) -> int:
    try:
        return min(len(r.cpus) for r in plan(BindRequest(request.mode, min_cores=1), topo, cards, explain=False).ranks)
    except UserError:
        return 0


def _refusal(found: str, would: list[str]) -> str:
    return f"cannot bind the ranks: {found}." + ("\nWhat would work: " + "; ".join(would) if would else "")


# ------------------------------------------------------------------ torch_npu's CPU_AFFINITY_CONF

@dataclass(frozen=True)
class TorchNpuBinding:
    mode: int             # CPU_AFFINITY_CONF's mode: 2 fine, 1 coarse, 0 not set (torch_npu has none)
    why: str


COARSE_FROM = "6.0.RC2"     # Ascend Extension for PyTorch: CPU_AFFINITY_CONF=1 from 6.0.RC2,
FINE_FROM = "6.0.0"         # =2 (and ranges with it) from 6.0.0 (hiascend Pytorch featuresguide_00010)
# Each Extension release is made for the CANN of its step (ascend-deployer 6.0.0: 2.1.0.post8,
# 6.0.RC3, with 8.0.RC3; .post10, 6.0.0, with 8.0.0): the fallback when the release is unknown.
CANN_OF = {COARSE_FROM: "8.0.RC2", FINE_FROM: "8.0.0"}


def extension_release(branch: str) -> str | None:
    """The Ascend Extension for PyTorch release in a torch_npu branch name:
    v2.1.0-6.0.rc3 -> 6.0.rc3, v26.0.0-pytorch2.7.1 -> 26.0.0, v2.11.0-26.2.0 -> 26.2.0."""
    parts = [p for p in branch.lstrip("v").split("-") if p and not p.startswith("pytorch")]
    if len(parts) < 2 and "pytorch" not in branch:
        return None                   # a bare v2.1.0 names torch's version only
    last = parts[-1] if parts else ""
    return last if re.fullmatch(r"\d+\.\d+\.(\d+|[Rr][Cc]\d+)", last) else None


def torch_npu_binding(release: str | None, cann: str | None) -> TorchNpuBinding:
    """Which CPU_AFFINITY_CONF mode the image's torch_npu reads: by its Extension release
    where known, else by the CANN it was made for."""
    if release:
        key, said, fine, coarse = driver_key(release), f"torch_npu from the Extension's {release}", FINE_FROM, COARSE_FROM
    elif cann:
        key, said = driver_key(cann), f"an image on CANN {cann} (torch_npu's release unknown: its CANN decides)"
        fine, coarse = CANN_OF[FINE_FROM], CANN_OF[COARSE_FROM]
    else:
        return TorchNpuBinding(1, "the image is not here to read which torch_npu it has: coarse binding, which "
                                  f"every torch_npu from {COARSE_FROM} reads")
    if key >= driver_key(fine):
        return TorchNpuBinding(2, f"{said}: fine-grained binding (from {FINE_FROM})")
    if key >= driver_key(coarse):
        return TorchNpuBinding(1, f"{said}: coarse binding only (fine-grained from {FINE_FROM})")
    return TorchNpuBinding(0, f"{said}: older than {COARSE_FROM}, which brought CPU_AFFINITY_CONF; taskset alone")


def for_image(facts: ImageFacts | None, stacks: Mapping[str, Stack]) -> TorchNpuBinding:
    """The image's torch_npu binding mode from its labels and the matrix's stacks (their
    torch_npu branch names the Extension release)."""
    if facts is None:
        return torch_npu_binding(None, None)
    stack = stacks.get(facts.stack or "") or next(
        (s for s in stacks.values() if s.torch and facts.torch_npu and s.package == facts.torch_npu), None)
    branch = stack.torch.npu_branch if stack is not None and stack.torch else ""
    return torch_npu_binding(extension_release(branch) if branch else None, facts.cann)


def plan_for_host(request: BindRequest, root: Path, devices: str, nproc: int | None = None) -> Plan:
    """The plan for the chosen cards of the host below `root`; for a machine without
    cards (a preview), the usual 910B server's (as `invoke run --dry` previews its command)."""
    from ..host.run import host_cards, parse_devices
    if request.mode == "off":
        return OFF
    topo = read_topology(root) if host_cards(root) else PREVIEW
    return plan(request, topo, parse_devices(devices, sorted(topo.cards)), nproc)


def affinity_for(engine, image: str, matrix: Path) -> TorchNpuBinding:
    """The image's torch_npu binding mode, from its labels (when the engine has it) and the
    matrix's stacks (when the matrix reads)."""
    from ..host.doctor import read_image
    from ..matrix import load_matrix
    facts = read_image(engine, image)
    try:
        stacks: Mapping[str, Stack] = load_matrix(matrix).stacks
    except (UserError, OSError):
        stacks = {}
    return for_image(facts, stacks)
