"""The NPU chips, one record each: what a chip is to every part of the package (how the
matrix and upstream spell it, how npu-smi names it, its hosts' layout, its HCCL rank table,
its Kubernetes resource, where its kernels install). Nothing else in the package holds a
table of chips; adding one is a record here, plus its kernels in the matrix's data."""
from __future__ import annotations

from dataclasses import dataclass

from .errors import UserError


@dataclass(frozen=True)
class Chip:
    name: str                   # as matrix.yaml, imported.yaml and Huawei's files spell it: 910b, A3
    title: str                  # Huawei's product series (CANN's product support tables)
    spellings: tuple[str, ...] = ()   # upstream's other spellings (the container tags' a3); looked up in any case
    smi: str = ""               # how `npu-smi info` names it, a regex (910B2, Ascend910_9391); "": not recognized
    host: str = "server"        # its hosts' kind: a layout in host/layout.py (server, board)
    npus: int = 0               # NPUs a server of it has: `invoke job --devices` at most (0: no job for it)
    rank_table: str = ""        # the HCCL rank table version its servers use; "": none is written for it
    resource: str = ""          # the device plugin's Kubernetes resource; "": no job for it
    ring: str = ""              # the Ascend operator's ring-controller.atlas label
    kernel_folder: str = ""     # where its kernels install: opp/built-in/op_impl/ai_core/tbe/kernel/<this>
    kernels_file: str = ""      # its kernels file where upstream names it outside its era's rule ({v} {arch})

    def __str__(self) -> str:
        return self.name

    @property
    def job(self) -> bool:
        """Can `invoke job` run on it: the operator's resource and ring label are known."""
        return bool(self.resource and self.ring and self.npus)


# The order npu-smi's names are tried in (doctor's host_chip): the most specific first, and
# 910 after every other 910 (its pattern matches a bare 910, which others' tables may print).
# Sources: npu-smi's names from the hosts' tables (910B2, Ascend910_9391, 310B4, Ascend950PR);
# the kernel folders as installed CANN trees have them (ascend910_93 under cann-8.5.0,
# ascend950 under 9.2.0); the rank table versions from HCCL's guide (1.0 for A2, 1.2 for A3
# with super_device_id); the resource from MindCluster's device plugin (huawei.com/Ascend910
# for its training products). The ring labels are ascend-<chip> as the jobs wrote them before
# this record: MindX DL 6.0.RC3's operator table gives ascend-910b for A3 SuperPoD systems,
# which is not checked here, so A3's stays ascend-a3. vLLM-Ascend's SOC_VERSION per chip is
# no record's: each release's Dockerfiles set it (imported, matrix/serving.py).
CHIPS: dict[str, Chip] = {c.name: c for c in (
    Chip("910b", "Atlas A2 training and inference products", smi=r"\b910B\d?\b", npus=8, rank_table="1.0",
         resource="huawei.com/Ascend910", ring="ascend-910b", kernel_folder="ascend910b"),
    # An A3 server has 16 NPUs; up to CANN 8.3 its kernels came as Atlas-A3-cann-kernels.
    Chip("A3", "Atlas A3 training and inference products", spellings=("a3",), smi=r"910_?93\d*|\bA3\b", npus=16,
         rank_table="1.2", resource="huawei.com/Ascend910", ring="ascend-a3", kernel_folder="ascend910_93",
         kernels_file="Atlas-A3-cann-kernels_{v}_linux-{arch}.run"),
    # A board (Atlas 200I/500 A2, Orange Pi AIpro): one card, devices of its own.
    Chip("310b", "Atlas 200I/500 A2 inference products", smi=r"\b310B\d?\b", host="board",
         kernel_folder="ascend310b"),
    Chip("950", "Ascend 950PR/950DT", smi=r"\b(Ascend)?950[A-Z]*\b", npus=8, resource="huawei.com/Ascend910",
         ring="ascend-950", kernel_folder="ascend950"),
    Chip("910", "Atlas training products", smi=r"\b(Ascend)?910[A-Z]?\b", npus=8, resource="huawei.com/Ascend910",
         ring="ascend-910", kernel_folder="ascend910"),
    Chip("310p", "Atlas inference products", kernel_folder="ascend310p"),
)}

# The chip meant where none is named (a job, an indexed Job, the lines tested here): the
# Atlas A2 (910B) servers most users train on.
DEFAULT = CHIPS["910b"]


def known() -> tuple[Chip, ...]:
    """Every chip, in the registry's order (read at each call, so a test may plant one)."""
    return tuple(CHIPS.values())


def find(name: str | None) -> Chip | None:
    """The chip a name (any spelling, any case: a3, A3, 910B) names, or None."""
    wanted = (name or "").lower()
    return next((c for c in CHIPS.values() if wanted in {s.lower() for s in (c.name, *c.spellings)}), None) \
        if wanted else None


def chip(name: str | None) -> Chip:
    """The chip a name names, or a clear error naming the known ones."""
    found = find(name)
    if found is None:
        raise UserError(f"unknown chip {name!r}; the chips known: {', '.join(CHIPS)}")
    return found


def spelling(name: str) -> str:
    """The matrix's spelling of a chip (a3 -> A3); a name no record has, as given."""
    found = find(name)
    return found.name if found else name
