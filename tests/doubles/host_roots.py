"""Stand-in 910B host roots (test doubles): a temporary tree with what doctor and run
read on a host: /dev/davinci* (plain files standing in for device nodes), the driver's
and firmware's version.info, /etc/group, npu-smi (a script printing an `npu-smi info`
table for the chip given), /etc/docker/daemon.json. Never used by the build system."""
from __future__ import annotations

import json
from pathlib import Path

SMI = """#!/bin/sh
# npu-smi TEST DOUBLE
cat <<'TABLE'
+------------------------------------------------------------------------------------------------+
| npu-smi {driver}                   Version: {driver}                                               |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
+===========================+===============+====================================================+
| 0     {chip:<20}| OK            | 98.1        32                0    / 0             |
+===========================+===============+====================================================+
TABLE
"""


def make_host(root: Path, driver: str | None = "25.5.0", cards: int = 8, control: bool = True,
              members: tuple[str, ...] = ("alice",), group: bool = True, chip: str | None = "910B2",
              runtime: bool = False, firmware: str | None = "7.7.0.1.231", smi: str = "/usr/local/bin/npu-smi",
              install_info: bool = False) -> Path:
    """`smi`: where npu-smi is (hosts differ: /usr/local/bin or /usr/local/sbin); none without
    `chip`. `install_info`: the driver installer's /etc/ascend_install.info and /usr/local/dcmi,
    which `invoke run` mounts where a host has them."""
    (root / "dev").mkdir(parents=True)
    for n in range(cards):
        (root / f"dev/davinci{n}").touch()
    if control:
        for name in ("davinci_manager", "devmm_svm", "hisi_hdc"):
            (root / "dev" / name).touch()
    if driver:
        (root / "usr/local/Ascend/driver/lib64").mkdir(parents=True)
        (root / "usr/local/Ascend/driver/version.info").write_text(
            f"Version={driver}\nascendhal_version=7.35.23\naicpu_version=1.0\n")
    if firmware:
        (root / "usr/local/Ascend/firmware").mkdir(parents=True)
        (root / "usr/local/Ascend/firmware/version.info").write_text(f"Version={firmware}\n")
    (root / "etc").mkdir(exist_ok=True)
    lines = ["root:x:0:", "users:x:100:"] + ([f"HwHiAiUser:x:1000:{','.join(members)}"] if group else [])
    (root / "etc/group").write_text("\n".join(lines) + "\n")
    if install_info:
        (root / "usr/local/dcmi").mkdir(parents=True)
        (root / "etc/ascend_install.info").write_text("Driver_Install_Path_Param=/usr/local/Ascend\n")
    if chip:
        script = root / smi.lstrip("/")
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(SMI.format(driver=driver or "?", chip=chip))
        script.chmod(0o755)
    if runtime:
        (root / "etc/docker").mkdir(parents=True)
        (root / "etc/docker/daemon.json").write_text(json.dumps(
            {"runtimes": {"ascend": {"path": "/usr/local/Ascend/Ascend-Docker-Runtime/ascend-docker-runtime"}}}))
    return root


# The device nodes of a 310B board (host/layout.py names the source of the list).
BOARD_DEVICES = ("davinci0", "davinci_manager", "svm0", "ts_aisle", "upgrade", "sys", "vdec", "vpc", "pngd",
                 "venc", "dvpp_cmdlist", "log_drv")


def make_board(root: Path, driver: str | None = "24.1.0", chip: str = "310B4", ubuntu: bool = True,
               members: tuple[str, ...] = ("HwHiAiUser",)) -> Path:
    """A stand-in 310B board (an Orange Pi AIpro or an Atlas 200I DK A2): one davinci card,
    the board's own media and system devices and no /dev/devmm_svm or /dev/hisi_hdc, the
    driver's user-space libraries in /usr/lib64, npu-smi in /usr/local/sbin printing `chip`,
    and the crypto and YAML libraries where Ubuntu (or openEuler) keeps them."""
    make_host(root, driver=driver, cards=0, control=False, members=members, chip=chip, smi="/usr/local/sbin/npu-smi")
    for name in BOARD_DEVICES:
        (root / "dev" / name).touch()
    for lib in ("libaicpu_processer.so", "libaicpu_prof.so", "libaicpu_sharder.so", "libadump.so",
                "libtsd_eventclient.so", "libaicpu_scheduler.so", "libdcmi.so", "libmpi_dvpp_adapter.so",
                "libstackcore.so"):
        (root / "usr/lib64").mkdir(parents=True, exist_ok=True)
        (root / "usr/lib64" / lib).touch()
    (root / "usr/lib64/aicpu_kernels").mkdir()
    crypto = root / ("usr/lib/aarch64-linux-gnu" if ubuntu else "usr/lib64")
    crypto.mkdir(parents=True, exist_ok=True)
    for lib in ("libcrypto.so.1.1", "libyaml-0.so.2"):
        (crypto / lib).touch()
    for conf in ("sys_version.conf", "hdcBasic.cfg", "slog.conf"):
        (root / "etc" / conf).write_text("stand-in\n")
    return root


# ---------------------------------------------------------------- NUMA: sysfs, cgroup, npu-smi's topology

# `npu-smi info -t topo` as vllm-ascend parses it (rows NPU<n>, the last column "CPU
# Affinity"); the layout was not seen on a real host (docs/unverified.md).
TOPO_SMI = """#!/bin/sh
# npu-smi TEST DOUBLE, answering `info -t topo` too
if [ "$1 $2 $3" = "info -t topo" ]; then
cat <<'TOPO'
{topo}
Legend:

  X    = Self
  SYS  = Path traversing PCIe and NUMA nodes. Nodes are connected through SMP, such as QPI, UPI.
  PHB  = Path traversing PCIe and the PCIe host bridge of a CPU.
  PIX  = Path traversing a single PCIe switch
  PXB  = Path traversing multipul PCIe switches
  HCCS = Connection traversing HCCS.
  NA   = Unknown relationship.
TOPO
exit 0
fi
""" + SMI.split("\n", 2)[2]


def topo_table(affinity: list[str]) -> str:
    """The matrix npu-smi prints: one row per card, HCCS between cards, its CPU affinity last."""
    n = len(affinity)
    head = " " * 11 + "".join(f"NPU{i:<8}" for i in range(n)) + "CPU Affinity"
    rows = [f"NPU{i:<8}" + "".join(f"{'X' if i == j else 'HCCS':<11}" for j in range(n)) + cpus
            for i, cpus in enumerate(affinity)]
    return "\n".join([head] + rows)


def add_numa(root: Path, nodes: dict[int, str], card_nodes: list[int | None], allowed: str | None = None,
             topo: list[str] | None = None, nic: bool = True, chip: str = "910B2") -> Path:
    """NUMA facts on a host root: each node's cpulist, one NPU PCI function per card (in
    bus order, its numa_node; None writes -1, as a kernel without NUMA information does),
    a Huawei NIC beside them (not an NPU: doctor must skip it), the cgroup's allowed CPUs
    (cgroup v2 cpuset.cpus.effective) and, with `topo`, an npu-smi that answers
    `info -t topo` with these CPU affinities per card."""
    for node, cpus in nodes.items():
        folder = root / f"sys/devices/system/node/node{node}"
        folder.mkdir(parents=True)
        (folder / "cpulist").write_text(cpus + "\n")
    pci = root / "sys/bus/pci/devices"
    for i, node in enumerate(card_nodes):
        dev = pci / f"0000:{0x10 + 8 * i:02x}:00.0"
        dev.mkdir(parents=True)
        (dev / "vendor").write_text("0x19e5\n")
        (dev / "class").write_text("0x120000\n")
        (dev / "numa_node").write_text(f"{-1 if node is None else node}\n")
    if nic:
        dev = pci / "0000:3d:00.0"
        dev.mkdir(parents=True)
        (dev / "vendor").write_text("0x19e5\n")
        (dev / "class").write_text("0x020000\n")
        (dev / "numa_node").write_text("3\n")
    if allowed is not None:
        (root / "sys/fs/cgroup").mkdir(parents=True, exist_ok=True)
        (root / "sys/fs/cgroup/cpuset.cpus.effective").write_text(allowed + "\n")
    if topo is not None:
        smi = root / "usr/local/bin/npu-smi"
        smi.parent.mkdir(parents=True, exist_ok=True)
        smi.write_text(TOPO_SMI.replace("{topo}", topo_table(topo)).format(driver="25.5.0", chip=chip))
        smi.chmod(0o755)
    return root


def kunpeng_920(root: Path, allowed: str | None = None, topo: bool = False, **host) -> Path:
    """An Atlas 800T A2 as the 8-card guide describes it: Kunpeng 920, 4 NUMA nodes x 48
    cores (192), 8 cards, cards 2n and 2n+1 on node n."""
    make_host(root, cards=8, **host)
    nodes = {n: f"{48 * n}-{48 * n + 47}" for n in range(4)}
    return add_numa(root, nodes, [c // 2 for c in range(8)], allowed,
                    [nodes[c // 2] for c in range(8)] if topo else None)


def a3_server(root: Path, allowed: str | None = None) -> Path:
    """An Atlas A3 server's shape: 16 NPUs (8 modules of 2 dies), 4 Kunpeng CPUs, one NUMA
    node each. The 40 cores per node are stand-in numbers (no A3 spec sheet was read here)."""
    make_host(root, cards=16, chip="Ascend910_9391")
    return add_numa(root, {n: f"{40 * n}-{40 * n + 39}" for n in range(4)}, [c // 4 for c in range(16)], allowed)
