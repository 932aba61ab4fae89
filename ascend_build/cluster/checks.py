"""`invoke doctor --cluster`: the checks across hosts that multi-node jobs fail on, each with
its cause and fix (the symptoms users report, in the same words: EI0006, HcclCommPrepare,
"Failed to get device ip", a stale rank table, 'device_ip' not set...)."""
from __future__ import annotations

import ipaddress
import json
from collections import Counter

from ..host.doctor import Check
from .facts import HostFacts

# Docker's default bridge: facts read there come from a container without --network host.
DOCKER_BRIDGE = ipaddress.ip_network("172.17.0.0/16")


def examine(hosts: list[HostFacts]) -> list[Check]:
    checks: list[Check] = []
    for h in hosts:
        checks += _host(h)
    checks += _across(hosts)
    return checks


def _host(h: HostFacts) -> list[Check]:
    out = []
    who = h.name
    if not h.cards:
        out.append(Check(f"{who}: cards", "fail", "none", "no /dev/davinciN: the driver is not loaded here",
                         "load the driver (`npu-smi info` lists the cards)"))
    if h.address and _bridged(h.address):
        out.append(Check(f"{who}: host network", "fail", f"server address {h.address}",
                         "read inside a container on Docker's bridge: without --network host the rank table gets "
                         "the container's address ('device_ip' is not set correctly, server_count wrong)",
                         "run the container with --network host (`invoke run` does for every multi-card run)"))
    if h.tool is None:
        state = "fail" if not any(c.conf_ip for c in h.cards) else "warn"
        out.append(Check(f"{who}: hccn_tool", state, "not found",
                         "\"Failed to get device ip from hccn.conf and hccn_tool\": hccn_tool lives in the driver's "
                         "tools folder, so a driver mounted in pieces (lib64 only) has none",
                         "mount the whole /usr/local/Ascend/driver read-only (invoke run does) and /etc/hccn.conf"))
    for c in h.cards:
        name = f"{who}: card {c.id}"
        if c.address is None:
            out.append(Check(f"{name} IP", "fail", "none", "no device IP from hccn_tool or /etc/hccn.conf: HCCL "
                             "cannot reach this card", f"set it: hccn_tool -i {c.id} -ip -s address IP netmask MASK"))
        elif c.ip and c.conf_ip and c.ip != c.conf_ip:
            out.append(Check(f"{name} IP", "fail", f"hccn_tool {c.ip}, hccn.conf {c.conf_ip}",
                             "/etc/hccn.conf is stale against the card (HcclCommPrepare fail, slow or failing "
                             "transfers where a job reads the file)",
                             f"write address_{c.id}={c.ip} in /etc/hccn.conf (or set the card back to {c.conf_ip})"))
        if c.link and c.link != "UP":
            out.append(Check(f"{name} link", "fail", c.link, "the card's RoCE link is down: ranks on it time out "
                             "(EI0006 Getting socket times out)", f"check the cable and switch port; hccn_tool -i "
                             f"{c.id} -link -g must say UP"))
        if c.health and c.health.lower() != "success":
            out.append(Check(f"{name} net health", "warn", c.health, "the card's path to its detection address fails",
                             f"hccn_tool -i {c.id} -net_health -g; check the netdetect address and the switch"))
    for table in h.rank_tables:
        out.append(Check(f"{who}: {table}", "warn", "present", "an old rank table on the host: a runtime or a job "
                         "that mounts it reads stale servers and IPs at start",
                         f"remove {table}, or make sure jobs get the table written for them (invoke ranktable)"))
    return out


def _across(hosts: list[HostFacts]) -> list[Check]:
    out: list[Check] = []
    if len(hosts) < 2:
        return out
    tls = {h.name: tuple(sorted({c.tls for c in h.cards if c.tls})) for h in hosts}
    if len({v for v in tls.values() if v}) > 1:
        out.append(Check("TLS across hosts", "fail", "; ".join(f"{n}: {'/'.join(v) or '?'}" for n, v in tls.items()),
                         "the cards' TLS switch differs between hosts: HCCL links between them fail",
                         "set one state on every card of every host (hccn_tool -i N -tls -s enable 0|1)"))
    drivers = {h.name: h.driver for h in hosts}
    if len(set(drivers.values())) > 1:
        out.append(Check("driver across hosts", "warn", ", ".join(f"{n}: {d}" for n, d in drivers.items()),
                         "hosts run different NPU drivers", "install one driver release on every host"))
    counts = Counter(len(h.cards) for h in hosts)
    if len(counts) > 1:
        out.append(Check("cards across hosts", "warn", ", ".join(f"{h.name}: {len(h.cards)}" for h in hosts),
                         "hosts have different numbers of cards: a job with one --nproc-per-node leaves some idle "
                         "or fails", "pass --devices with a range every host has"))
    layouts = {h.name: json.dumps({k: h.numa.get(k) for k in ("nodes", "cards", "allowed")}, sort_keys=True)
               for h in hosts if h.numa}
    if len(set(layouts.values())) > 1:
        out.append(Check("NUMA across hosts", "warn", "; ".join(f"{n}: {len(json.loads(v)['nodes'])} nodes, allowed "
                                                               f"{json.loads(v)['allowed']}" for n, v in layouts.items()),
                         "the hosts' cores, NUMA nodes or cards' nodes differ: the binding printed by `invoke run "
                         "--hostfile` is planned on one host and fits only hosts like it",
                         "start each node with `invoke run --hostfile ... --node-rank N` on that host (each plans its "
                         "own), or make the hosts alike"))
    ips = Counter(c.address for h in hosts for c in h.cards if c.address)
    dup = sorted(ip for ip, n in ips.items() if n > 1)
    if dup:
        out.append(Check("device IPs across hosts", "fail", ", ".join(dup), "two cards share a device IP",
                         "give every card its own address (hccn_tool -i N -ip -s ...)"))
    addresses = Counter(h.address for h in hosts)
    if any(n > 1 for n in addresses.values()):
        out.append(Check("server addresses", "fail", ", ".join(a for a, n in addresses.items() if n > 1),
                         "two hosts report one address", "pin each host's address in /etc/ascend-build/address"))
    if not out:
        out.append(Check("across hosts", "ok", f"{len(hosts)} hosts agree (TLS, driver, cards, addresses)"))
    return out


def _bridged(address: str) -> bool:
    try:
        return ipaddress.ip_address(address) in DOCKER_BRIDGE
    except ValueError:
        return False
