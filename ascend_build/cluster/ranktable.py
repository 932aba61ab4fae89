"""The HCCL rank table (hccl.json) for plain docker or bare metal, in the format Huawei's
Ascend operator writes on Kubernetes: status "completed"; version "1.0" (910B / Atlas A2)
or "1.2" (Atlas A3: each device also carries its super_device_id); server_count; and
server_list, each server with server_id (its IP) and its devices' device_id, device_ip and
rank_id, numbered without gaps across servers in server order. Values are strings, as
the operator writes them. (A3's super_pod_list is not written: no source read here
describes it.)"""
from __future__ import annotations

import json

from ..chips import find, known, spelling
from ..errors import UserError
from .facts import HostFacts

SUPER_DEVICES = "1.2"      # the version whose devices carry their super_device_id (A3's)


def version_of(name: str | None) -> str:
    """The rank table version of a chip (its record's), or why none is written."""
    found = find(name)
    if found is None or not found.rank_table:
        having = ", ".join(c.name for c in known() if c.rank_table)
        raise UserError(f"chip {name or 'unknown'}: rank tables are written for {having} "
                        f"(pass --chip when npu-smi did not say)")
    return found.rank_table


def build(hosts: list[HostFacts], chip: str | None = None, devices: list[int] | None = None) -> dict:
    """The table for these hosts, in this order (rank 0 is the first host's first card);
    `devices`: the cards used on every host (default: all each has)."""
    if not hosts:
        raise UserError("no hosts: pass each host's facts (`invoke doctor --json` there)")
    chip = chip or hosts[0].chip
    version = version_of(chip)
    chip = spelling(chip or "")
    problems: list[str] = []
    servers: list[dict] = []
    rank = 0
    seen_ips: dict[str, str] = {}
    for host in hosts:
        if not host.address:
            problems.append(f"{host.name}: no server address (write it to /etc/ascend-build/address there, or "
                            f"run doctor on the host itself)")
        cards = {c.id: c for c in host.cards}
        wanted = devices if devices is not None else sorted(cards)
        missing = [n for n in wanted if n not in cards]
        if missing:
            problems.append(f"{host.name}: no card {', '.join(map(str, missing))} (it has {sorted(cards)})")
            continue
        entries: list[dict[str, str]] = []
        for n in wanted:
            card = cards[n]
            if not card.address:
                problems.append(f"{host.name} card {n}: no device IP (hccn_tool -i {n} -ip -g printed none and "
                                f"/etc/hccn.conf has no address_{n})")
                continue
            other = seen_ips.setdefault(card.address, f"{host.name} card {n}")
            if other != f"{host.name} card {n}":
                problems.append(f"{host.name} card {n}: device IP {card.address} is also {other}'s")
            entry = {"device_id": str(n), "device_ip": card.address, "rank_id": str(rank)}
            if version == SUPER_DEVICES:
                if card.super_device_id is None:
                    problems.append(f"{host.name} card {n}: an {chip} table needs its super_device_id")
                entry["super_device_id"] = str(card.super_device_id)
            entries.append(entry)
            rank += 1
        servers.append({"server_id": host.address, "device": entries})
    ids: list[str] = [s["server_id"] for s in servers]
    if len(set(ids)) != len(ids):
        problems.append(f"two hosts give one server address: {', '.join(ids)}")
    if problems:
        raise UserError("cannot write the rank table:\n  " + "\n  ".join(problems))
    return {"status": "completed", "version": version, "server_count": str(len(servers)),
            "server_list": servers}


def dumps(table: dict) -> str:
    return json.dumps(table, indent=4) + "\n"


def world_size(table: dict) -> int:
    return sum(len(s["device"]) for s in table["server_list"])
