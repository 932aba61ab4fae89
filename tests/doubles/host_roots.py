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
