"""Stand-in NPU servers for the cluster tests (TEST DOUBLES): a host root (tests/doubles/
host_roots.make_host) plus /etc/hccn.conf and an `hccn_tool` double in the driver's tools
folder that answers -ip/-link/-net_health/-tls -g per card from small files, so that
`invoke doctor --json` reads a stand-in server as it reads a real one. Faults are planted
by arguments. Never used by the build system."""
from __future__ import annotations

from pathlib import Path

from tests.doubles.host_roots import make_host

HCCN_TOOL = r"""#!/bin/sh
# hccn_tool TEST DOUBLE: answers from hccn-double/<card>.<what>
dir="$(dirname "$0")/hccn-double"
[ "$1" = "-i" ] || { echo "usage: hccn_tool -i N -ip|-link|-net_health|-tls -g" >&2; exit 1; }
card="$2"; what="$3"
[ -f "$dir/$card.ip" ] || { echo "device $card not found" >&2; exit 1; }
case "$what" in
    -ip) echo "ipaddr:$(cat "$dir/$card.ip")"; echo "netmask:255.255.255.0" ;;
    -link) echo "link status: $(cat "$dir/$card.link")" ;;
    -net_health) echo "net health status: $(cat "$dir/$card.health")" ;;
    -tls) echo "dev_id:$card, tls switch[$(cat "$dir/$card.tls")](0:disable, 1:enable), tls preconfigured[1]" ;;
    *) echo "unsupported: $what" >&2; exit 1 ;;
esac
"""


def make_server(root: Path, server: int, cards: int = 8, driver: str = "25.5.0", chip: str = "910B2",
                address: str | None = None, stale: dict[int, str] | None = None, down: tuple[int, ...] = (),
                tls: str = "0", old_table: bool = False, tool: bool = True) -> Path:
    """Server `server` of a cluster: cards get 192.168.<server>.<card+10>; `stale` plants an
    hccn.conf address that differs from the card; `down` links down; `tls` the TLS switch
    of every card; `old_table` an /etc/hccl.json left behind."""
    make_host(root, driver=driver, cards=cards, chip=chip)
    (root / "etc/ascend-build").mkdir(parents=True, exist_ok=True)
    (root / "etc/ascend-build/address").write_text((address or f"10.0.0.{10 + server}") + "\n")
    conf = []
    tools = root / "usr/local/Ascend/driver/tools"
    (tools / "hccn-double").mkdir(parents=True)
    for n in range(cards):
        ip = f"192.168.{server}.{n + 10}"
        conf.append(f"address_{n}={(stale or {}).get(n, ip)}")
        conf.append(f"netmask_{n}=255.255.255.0")
        for what, value in (("ip", ip), ("link", "DOWN" if n in down else "UP"), ("health", "Success"),
                            ("tls", tls)):
            (tools / "hccn-double" / f"{n}.{what}").write_text(value + "\n")
    (root / "etc/hccn.conf").write_text("\n".join(conf) + "\n")
    if tool:
        (tools / "hccn_tool").write_text(HCCN_TOOL)
        (tools / "hccn_tool").chmod(0o755)
    if old_table:
        (root / "etc/hccl.json").write_text('{"status": "completed", "server_list": []}\n')
    return root
