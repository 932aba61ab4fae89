"""One host's NPU network, as `invoke doctor --json` writes it there and `invoke ranktable`
and `invoke doctor --cluster` read it elsewhere (air-gapped sites copy the files; no ssh).

Each card's RoCE address comes from `hccn_tool -i N -ip -g` (the live value), else from
`address_N` in /etc/hccn.conf (what the driver configured at boot); both are kept, so a
stale hccn.conf can be told. Everything is read below `root`, so a stand-in host (tests)
is read the same way."""
from __future__ import annotations

import json
import re
import socket
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import UserError
from ..host.run import host_cards
from ..host.topology import read_topology

# hccn_tool lives in the driver's tools folder (mount the whole driver directory, not lib64).
HCCN_TOOL = ("usr/local/Ascend/driver/tools/hccn_tool", "usr/local/bin/hccn_tool", "usr/bin/hccn_tool")
HCCN_CONF = "etc/hccn.conf"
FACTS_VERSION = 1


@dataclass
class Card:
    id: int
    ip: str | None = None            # hccn_tool -ip -g (live)
    conf_ip: str | None = None       # /etc/hccn.conf address_N
    link: str | None = None          # UP | DOWN (hccn_tool -link -g)
    health: str | None = None        # hccn_tool -net_health -g: Success, or what it says
    tls: str | None = None           # hccn_tool -tls -g: the switch state, as printed
    super_device_id: int | None = None    # A3 (version 1.2 rank tables)

    @property
    def address(self) -> str | None:
        return self.ip or self.conf_ip


@dataclass
class HostFacts:
    name: str                        # hostname
    address: str                     # the server's own IP: server_id in the rank table
    chip: str | None
    driver: str | None
    cards: list[Card] = field(default_factory=list)
    rank_tables: list[str] = field(default_factory=list)     # /etc/hccl*.json found (read at start)
    tool: str | None = None          # where hccn_tool was found
    numa: dict | None = None         # host/topology.py's Topology.to_json(): cards' NUMA nodes, nodes' CPUs

    def to_json(self) -> dict:
        return {"ascend_build_host_facts": FACTS_VERSION, **asdict(self)}

    @classmethod
    def from_json(cls, data, where: str) -> HostFacts:
        if not isinstance(data, dict):
            data = {}
        if "ascend_build_host_facts" not in data:
            # `invoke doctor --json` writes {"checks": [...], "facts": {...}}
            data = data.get("facts") if isinstance(data.get("facts"), dict) else {}
        version = data.get("ascend_build_host_facts")
        if isinstance(version, int) and not isinstance(version, bool) and version > FACTS_VERSION:
            raise UserError(f"{where}: host facts of version {version}, newer than this release reads "
                            f"({FACTS_VERSION}); update ascend-build here, or write the file with this release")
        if version != FACTS_VERSION:
            raise UserError(f"{where}: not a host facts file; write one on each host with "
                            f"`invoke doctor --json > HOST.json`")
        try:
            cards = [Card(**c) for c in data["cards"]]
            facts = cls(data["name"], data["address"], data.get("chip"), data.get("driver"), cards,
                        list(data.get("rank_tables") or []), data.get("tool"), data.get("numa"))
        except (KeyError, TypeError) as exc:
            raise UserError(f"{where}: a host facts file without {exc}") from None
        facts.check(where)
        return facts

    def check(self, where: str) -> None:
        """The shapes the rank table and the checks rely on: card ids whole numbers, unique;
        addresses real IPv4 or IPv6 addresses."""
        problems = []
        for field_name in ("name", "address"):
            if not isinstance(getattr(self, field_name), str):
                problems.append(f"{field_name} {getattr(self, field_name)!r} is not text")
        if self.address and not _is_ip(self.address):
            problems.append(f"address {self.address!r} is not an IP address")
        ids = [c.id for c in self.cards]
        problems += [f"card id {i!r} is not a whole number" for i in ids if not isinstance(i, int) or isinstance(i, bool)
                     or i < 0]
        if len(set(map(repr, ids))) != len(ids):
            problems.append(f"card ids repeat: {sorted(map(str, ids))}")
        for card in self.cards:
            for label, value in (("ip", card.ip), ("conf_ip", card.conf_ip)):
                if value is not None and not (isinstance(value, str) and _is_ip(value)):
                    problems.append(f"card {card.id!r}: {label} {value!r} is not an IP address")
        if problems:
            raise UserError(f"{where}: not a host facts file this release can use:\n  " + "\n  ".join(problems))


def _is_ip(text: str) -> bool:
    import ipaddress
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def load(paths: list[Path]) -> list[HostFacts]:
    hosts = []
    for path in paths:
        try:
            hosts.append(HostFacts.from_json(json.loads(path.read_text()), str(path)))
        except (OSError, ValueError) as exc:
            raise UserError(f"{path}: cannot read host facts ({exc})") from None
    return hosts


def read_conf(root: Path) -> dict[int, str]:
    """address_N=IP lines of /etc/hccn.conf."""
    path = root / HCCN_CONF
    found = {}
    for line in path.read_text(errors="replace").splitlines() if path.is_file() else []:
        m = re.fullmatch(r"\s*address_(\d+)\s*=\s*(\S+)\s*", line)
        if m:
            found[int(m.group(1))] = m.group(2)
    return found


def _tool(root: Path) -> Path | None:
    return next((root / p for p in HCCN_TOOL if (root / p).is_file()), None)


def _ask(tool: Path, card: int, *args: str) -> str:
    try:
        out = subprocess.run([str(tool), "-i", str(card), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout if out.returncode == 0 else ""


def parse_ip(text: str) -> str | None:
    m = re.search(r"ipaddr\s*:\s*(\d+\.\d+\.\d+\.\d+)", text)
    return m.group(1) if m else None


def parse_link(text: str) -> str | None:
    m = re.search(r"link status\s*:\s*(\w+)", text, re.I)
    return m.group(1).upper() if m else None


def parse_health(text: str) -> str | None:
    m = re.search(r"net health status\s*:\s*(.+)", text, re.I)
    return m.group(1).strip() if m else None


def parse_tls(text: str) -> str | None:
    """`dev_id:0, tls switch[1](0:disable, 1:enable), ...` -> "1" (or `tls switch: 1`)."""
    m = re.search(r"tls switch\s*\[(\d+)\]", text, re.I) or re.search(r"tls switch\s*:\s*(\w+)", text, re.I)
    return m.group(1) if m else None


def read_host(root: Path, chip: str | None, driver: str | None, name: str | None = None,
              address: str | None = None) -> HostFacts:
    """The facts of the host below `root` (/ on the host itself)."""
    tool = _tool(root)
    conf = read_conf(root)
    cards = []
    for n in host_cards(root):
        card = Card(n, conf_ip=conf.get(n))
        if tool:
            card.ip = parse_ip(_ask(tool, n, "-ip", "-g"))
            card.link = parse_link(_ask(tool, n, "-link", "-g"))
            card.health = parse_health(_ask(tool, n, "-net_health", "-g"))
            card.tls = parse_tls(_ask(tool, n, "-tls", "-g"))
        cards.append(card)
    tables = sorted(str("/" / p.relative_to(root)) for p in (root / "etc").glob("hccl*.json"))
    here = Path(root).resolve() == Path("/")
    return HostFacts(name or (socket.gethostname() if here else root.name), address or _own_address(root),
                     chip, driver, cards, tables, str("/" / tool.relative_to(root)) if tool else None,
                     read_topology(root).to_json())


def _own_address(root: Path) -> str:
    """The address other servers reach this one on: /etc/ascend-build/address when a site
    writes it (multi-homed hosts), else the address of the default route's interface."""
    pinned = root / "etc/ascend-build/address"
    if pinned.is_file():
        return pinned.read_text().strip()
    if Path(root).resolve() != Path("/"):
        return ""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))      # TEST-NET: no packet is sent for a UDP connect
            return s.getsockname()[0]
    except OSError:
        return ""
