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
              runtime: bool = False, firmware: str | None = "7.7.0.1.231") -> Path:
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
    if chip:
        smi = root / "usr/local/bin/npu-smi"
        smi.parent.mkdir(parents=True, exist_ok=True)
        smi.write_text(SMI.format(driver=driver or "?", chip=chip))
        smi.chmod(0o755)
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
    make_host(root, driver=driver, cards=0, control=False, members=members, chip=None)
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
    smi = root / "usr/local/sbin/npu-smi"
    smi.parent.mkdir(parents=True, exist_ok=True)
    smi.write_text(SMI.format(driver=driver or "?", chip=chip))
    smi.chmod(0o755)
    return root
