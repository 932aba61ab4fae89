"""What a container needs from an NPU host besides its /dev/davinciN cards, per kind of
host: a 910B-class server (the driver's three control devices and its whole directory), or
a 310B board (Atlas 200I/500 A2, Orange Pi AIpro / Kunpeng Pro), which has media and system
devices of its own and keeps part of its driver in /usr/lib64.

Sources of the 310B lists: Huawei's MindCluster documentation, "Ascend Docker Runtime
默认挂载内容" (what the Ascend Docker Runtime mounts by default), table 3, "Atlas 200I A2
加速模块和Atlas 200I DK A2 开发者套件"; and the `docker run` of Ascend Hub's
ascend-infer-310b image (23.0.RC1, CANN 6.2.RC1), which passes the same devices and files
(and /etc/slog.conf) by hand. Under the Ascend Docker Runtime a board also needs
ASCEND_ALLOW_LINK=True (its driver files are links)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..chips import find

DRIVER_DIR = "/usr/local/Ascend/driver"
DRIVER_LIB = "/usr/local/Ascend/driver/lib64"


@dataclass(frozen=True)
class HostLayout:
    kind: str
    control: tuple[str, ...]             # device nodes every container needs
    extra_devices: tuple[str, ...]       # passed where the host has them
    mounts: tuple[str, ...]              # read-only, where the host has them
    runtime_env: tuple[tuple[str, str], ...] = ()   # with the Ascend Docker Runtime
    max_cards: int = 16

    def __str__(self) -> str:
        return self.kind


SERVER = HostLayout(
    kind="NPU server",
    control=("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"),
    extra_devices=(),
    # The whole driver directory goes in read-only, not lib64 alone: hccn_tool (driver/tools)
    # and the topology files (driver/topo) are read by HCCL ("Failed to get device ip from
    # hccn.conf and hccn_tool", EI0014). /etc/hccn.conf holds the cards' RoCE addresses.
    mounts=(DRIVER_DIR, "/usr/local/dcmi", "/etc/ascend_install.info", "/etc/hccn.conf"),
)

_BOARD_LIBS = ("libaicpu_processer.so", "libaicpu_prof.so", "libaicpu_sharder.so", "libadump.so",
               "libtsd_eventclient.so", "libaicpu_scheduler.so", "libdcmi.so", "libmpi_dvpp_adapter.so",
               "libstackcore.so")
BOARD_310B = HostLayout(
    kind="310B board",
    control=("/dev/davinci_manager", "/dev/svm0", "/dev/ts_aisle"),
    extra_devices=("/dev/upgrade", "/dev/sys", "/dev/vdec", "/dev/vpc", "/dev/pngd", "/dev/venc",
                   "/dev/dvpp_cmdlist", "/dev/log_drv"),
    mounts=(DRIVER_LIB, "/etc/sys_version.conf", "/etc/hdcBasic.cfg", "/etc/slog.conf", "/usr/lib64/aicpu_kernels",
            "/var/slogd", "/var/dmp_daemon", *(f"/usr/lib64/{lib}" for lib in _BOARD_LIBS),
            # the driver's crypto and YAML libraries: /usr/lib64 on openEuler, the multiarch folder on Ubuntu
            "/usr/lib64/libcrypto.so.1.1", "/usr/lib64/libyaml-0.so.2",
            "/usr/lib/aarch64-linux-gnu/libcrypto.so.1.1", "/usr/lib/aarch64-linux-gnu/libyaml-0.so.2"),
    runtime_env=(("ASCEND_ALLOW_LINK", "True"),),
    max_cards=1,
)

# Each kind of host a chip's record names (chips.py, `host`).
LAYOUTS = {"server": SERVER, "board": BOARD_310B}


def layout_of(root: Path, chip: str | None = None) -> HostLayout:
    """The layout of the host's chip where npu-smi named it, or, without its word, the
    board's where the board's own memory device is there and the server's is not."""
    if chip is not None:
        return for_chip(chip)
    has = lambda path: (root / path.lstrip("/")).exists()   # noqa: E731
    return BOARD_310B if has("/dev/svm0") and has("/dev/ts_aisle") and not has("/dev/devmm_svm") else SERVER


def for_chip(chip: str | None) -> HostLayout:
    """The layout a host with this chip has (a preview on a machine without NPUs); a server
    for a chip no record names."""
    found = find(chip)
    return LAYOUTS[found.host] if found else SERVER
