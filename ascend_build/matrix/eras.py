"""CANN eras: what changes between CANN releases, as data (stack ref, section 2). One
record per era says how its files are named, where the toolkit lands and which
set_env.sh to source; templates, the matrix checks and the image tests read it here.

- classic (up to 8.3.x): kernels packages (`Ascend-cann-kernels-<chip>_<v>_linux.run`
  without arch up to 8.0.RC2, with `-<arch>` from 8.0.RC3), the toolkit in
  /usr/local/Ascend/ascend-toolkit/<v> behind `latest`;
- 8.5 (8.5.x): operator packages `Ascend-cann-<chip>-ops_<v>_linux-<arch>.run`, the real
  tree in /usr/local/Ascend/cann-<v> (ASCEND_TOOLKIT_HOME there), `ascend-toolkit/latest`
  kept as a link to it;
- 9 (9.0.0 and later): as 8.5, plus /usr/local/Ascend/cann/set_env.sh.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..chips import find

ROOT = "/usr/local/Ascend"


@dataclass(frozen=True)
class Era:
    name: str
    kernels_file: str        # {chip} {v} {arch}
    ops: bool                # operator packages ("ops") rather than "kernels"
    tree: str                # the installed tree, relative to the install path: {v}
    toolkit_home: str        # ASCEND_TOOLKIT_HOME, as set_env.sh sets it
    set_env: str             # the set_env.sh an image sources
    # Where the operator package records its version, below the toolkit home (globs), and
    # whether that is known or only inferred (see OPS_VERSION below).
    ops_version: tuple[str, ...] = ("opp_kernel/version.info",)
    ops_version_known: bool = True
    nnal_file: str = ""      # the NNAL (ATB) installer's name: {v} {arch}; "": none in this era

    def home(self, version: str) -> str:
        return self.toolkit_home.format(root=ROOT, v=version)

    def set_env_path(self) -> str:
        return self.set_env.format(root=ROOT)

    def installed_tree(self, version: str) -> str:
        return self.tree.format(v=version)


# Up to 8.3 the kernels package writes opp_kernel/version.info (Huawei's install guides
# check it there: `cat .../ascend-toolkit/latest/opp_kernel/version.info`). For the operator
# packages from 8.5 on, no install guide names the file: the open-source operator libraries
# they bundle (cann/ops-nn, ops-math, ...) install theirs as share/info/<library>/version.info
# below the cann tree, which is what is looked for, with opp_kernel/ in case it stayed.
OPS_VERSION: dict[str, Any] = dict(ops_version=("opp_kernel/version.info", "share/info/ops*/version.info"), ops_version_known=False)
# NNAL (Ascend Transformer Boost, and SiP from 8.3): named in the official CANN images'
# Dockerfiles (Ascend/cann-container-image, 8.1.RC1 to 9.1.0-beta.3) and the 8.5+ guides.
NNAL = "Ascend-cann-nnal_{v}_linux-{arch}.run"
# Where CANN's installers log (hiascend instg_0044: ascend_seclog; ATB's and SiP's install.sh:
# cann_atb_log, cann_asdsip_log): removed in the layer that wrote them.
INSTALLER_LOGS = ("/var/log/ascend_seclog", "/var/log/cann_atb_log", "/var/log/cann_asdsip_log")
_CLASSIC: dict[str, Any] = dict(ops=False, tree="ascend-toolkit/{v}", toolkit_home="{root}/ascend-toolkit/latest",
                set_env="{root}/ascend-toolkit/set_env.sh")
ERAS = {
    "noarch": Era("noarch", "Ascend-cann-kernels-{chip}_{v}_linux.run", **_CLASSIC),
    "arch": Era("arch", "Ascend-cann-kernels-{chip}_{v}_linux-{arch}.run", **_CLASSIC),
    "8.5": Era("8.5", "Ascend-cann-{chip}-ops_{v}_linux-{arch}.run", True, "cann-{v}", "{root}/cann-{v}",
               "{root}/ascend-toolkit/set_env.sh", **OPS_VERSION, nnal_file=NNAL),
    "9": Era("9", "Ascend-cann-{chip}-ops_{v}_linux-{arch}.run", True, "cann-{v}", "{root}/cann-{v}",
             "{root}/cann/set_env.sh", **OPS_VERSION, nnal_file=NNAL),
}


def ops_version_names(text: str) -> set[str]:
    """The release names a version.info states (version=, version_dir=; any case):
    8.3's says Version=8.3.T5.0.B028 (a build number) and version_dir=8.3.RC1."""
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {v.strip().strip('"') for k, v in pairs if k.strip().lower() in ("version", "version_dir")}


def cann_key(version: str) -> tuple[int, int, int, int]:
    """A CANN version for ordering: 8.0.RC3 < 8.0.0 < 8.1.RC1 < 9.0.1 (an RC before its release);
    (0, 0, 0, 0) for a name that is not one."""
    m = re.match(r"(\d+)\.(\d+)\.(RC)?(\d+)", version, re.I)
    if not m:
        return (0, 0, 0, 0)
    return (int(m[1]), int(m[2]), 0 if m[3] else 1, int(m[4]))


def era_of(version: str) -> Era:
    major, minor, released, patch = cann_key(version)
    if (major, minor) == (0, 0):
        return ERAS["arch"]
    rc = not released
    if (major, minor) < (8, 0) or ((major, minor) == (8, 0) and rc and patch <= 2):
        return ERAS["noarch"]
    if major >= 9:
        return ERAS["9"]
    if (major, minor) >= (8, 5):
        return ERAS["8.5"]
    return ERAS["arch"]


def cann_series(version: str) -> str:
    """8.5.0 -> 8.5: what Huawei's compatibility grid and torch_atb's floor are keyed by."""
    return ".".join(version.split(".")[:2])


def expected_toolkit(version: str, arch: str) -> str:
    return f"Ascend-cann-toolkit_{version}_linux-{arch}.run"


def expected_kernels(version: str, chip: str, arch: str) -> str:
    """A chip's kernels file in a release: its era's rule, or, before the operator packages
    (8.5), the name the chip's record gives it where upstream names it otherwise (A3's
    Atlas-A3-cann-kernels_<v>_linux-<arch>.run up to 8.3)."""
    return own_kernels(version, chip, arch) or era_of(version).kernels_file.format(chip=chip, v=version, arch=arch)


def own_kernels(version: str, chip: str, arch: str) -> str:
    """The kernels file a chip's record names outside the release's era's rule, or ""."""
    record = find(chip)
    if record is None or not record.kernels_file or era_of(version).ops:
        return ""
    return record.kernels_file.format(v=version, arch=arch)
