"""Each rank's cores (cluster/binding.py) over stand-in host trees (tests/doubles/host_roots.py:
a Kunpeng 920 with 8 cards, an A3 server with 16, cgroups that allow part of the cores, a
card without NUMA information); the refusals, each with what was found and what would work;
torch_npu's CPU_AFFINITY_CONF mode per stack of the matrix; the per-rank wrapper binding
real processes on this machine; and `invoke run` printing and applying the plan."""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ascend_build.cluster import binding as b
from ascend_build.cluster.launch import RANK_WRAPPER
from ascend_build.errors import UserError
from ascend_build.host.topology import read_topology
from ascend_build.matrix import load_matrix
from tests import forked
from tests.doubles.host_roots import a3_server, add_numa, kunpeng_920, make_host

ROOT = Path(__file__).resolve().parents[2]
GUIDE = [f"{24 * i}-{24 * i + 23}" for i in range(8)]      # taskset -c $((24*i))-$((24*i+23))


def invoke(*args: str) -> subprocess.CompletedProcess:
    return forked.invoke(*args)


def numa(root: Path, cards: list[int], spec: str = "numa", nproc: int | None = None) -> b.Plan:
    return b.plan(b.parse_bind(spec), read_topology(root), cards, nproc)


@pytest.mark.parametrize("topo", [False, True], ids=["sysfs", "npu-smi-topo"])
def test_a_kunpeng_920_gets_the_guides_24_core_slices(tmp_path, topo):
    plan = numa(kunpeng_920(tmp_path, topo=topo), list(range(8)))
    assert [r.cpulist for r in plan.ranks] == GUIDE
    assert [r.node for r in plan.ranks] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert plan.source == ("npu-smi info -t topo" if topo else "sysfs: each card's PCI numa_node")
    assert plan.cpuset == "0-191" and plan.rank_cpus() == " ".join(GUIDE)
    assert plan.affinity_conf(2) == "2," + ",".join(f"npu{i}:{c}" for i, c in enumerate(GUIDE))
    assert plan.affinity_conf(1).startswith("1,npu0:0-23,npu1:24-47,") and plan.affinity_conf(0) is None
    assert plan.msrun_bind_core().startswith('{"device0":["0-23"],"device1":["24-47"],')
    # `even` slices the same 192 cores into the same 8 x 24 here.
    assert [r.cpulist for r in numa(tmp_path, list(range(8)), "even").ranks] == GUIDE


def test_two_launches_on_one_host_never_share_a_core(tmp_path):
    root = kunpeng_920(tmp_path)
    for mode in ("numa", "even"):
        low, high = numa(root, [0, 1, 2, 3], mode), numa(root, [4, 5, 6, 7], mode)
        assert not set(c for r in low.ranks for c in r.cpus) & set(c for r in high.ranks for c in r.cpus)
        assert [r.cpulist for r in high.ranks] == GUIDE[4:]       # card 4 keeps card 4's slice
        assert [r.rank for r in high.ranks] == [0, 1, 2, 3]        # local ranks: npu0..3 in the container


def test_an_a3_server_in_even_slices(tmp_path):
    plan = numa(a3_server(tmp_path), list(range(16)), "even")
    assert [r.cpulist for r in plan.ranks] == [f"{10 * i}-{10 * i + 9}" for i in range(16)]
    assert plan.mode == "even" and plan.cpuset == "0-159"


def test_a_cgroup_allowing_half_the_cores(tmp_path):
    root = kunpeng_920(tmp_path, allowed="0-95")
    with pytest.raises(UserError) as refused:
        numa(root, list(range(8)))
    text = str(refused.value)
    assert "cards 4, 5, 6, 7 are on NUMA nodes 2 (CPUs 96-143), 3 (CPUs 144-191), and this process may use none" \
           in text and "allowed: 0-95, from cgroup /sys/fs/cgroup/cpuset.cpus.effective" in text
    assert "What would work: --bind even (12 cores each); --devices 0-3; --bind off" in text
    assert [r.cpulist for r in numa(root, [0, 1, 2, 3]).ranks] == GUIDE[:4]
    assert [r.cpulist for r in numa(root, list(range(8)), "even").ranks] == [f"{12 * i}-{12 * i + 11}"
                                                                            for i in range(8)]


def test_a_cgroup_allowing_half_of_each_node_splits_what_each_node_has(tmp_path):
    root = kunpeng_920(tmp_path, allowed="0-11,48-59,96-107,144-155")
    assert [r.cpulist for r in numa(root, list(range(8))).ranks] == \
        ["0-5", "6-11", "48-53", "54-59", "96-101", "102-107", "144-149", "150-155"]


def test_a_card_without_numa_information(tmp_path):
    root = add_numa(make_host(tmp_path / "two", cards=2), {0: "0-23", 1: "24-47"}, [0, None])
    plan = numa(root, [0, 1])
    assert plan.mode == "even" and [r.cpulist for r in plan.ranks] == ["0-23", "24-47"]
    assert plan.ranks[1].node is None
    assert "card 1: no NUMA node known" in plan.notes[-1] and "even slices" in plan.notes[-1]
    # One node only: a card without numa_node (-1) can be on no other.
    one = add_numa(make_host(tmp_path / "one", cards=2), {0: "0-15"}, [None, None])
    plan = numa(one, [0, 1])
    assert plan.mode == "numa" and [(r.node, r.cpulist) for r in plan.ranks] == [(0, "0-7"), (0, "8-15")]


def test_too_few_cores_per_rank_is_refused_with_what_would_work(tmp_path):
    root = kunpeng_920(tmp_path, allowed="0-3,48-51,96-99,144-147")
    with pytest.raises(UserError) as refused:
        numa(root, list(range(8)))
    text = str(refused.value)
    assert "numa binding leaves ranks under 5 cores: card 0 gets 2 (0-1)" in text
    assert "--bind-min-cores 2" in text and "--bind off" in text and "--bind even" not in text
    assert [r.cpulist for r in b.plan(b.parse_bind("numa", 2), read_topology(root), [0, 1]).ranks] == ["0-1", "2-3"]
    with pytest.raises(UserError, match="ranks 8-9 have no card of their own"):
        numa(root, list(range(8)), nproc=10)


def test_explicit_ranges_are_checked(tmp_path):
    root = kunpeng_920(tmp_path, allowed="0-95")
    plan = numa(root, [0, 1], "0:0-11,24-35,1:12-23,36-47")
    assert plan.mode == "explicit" and [r.cpulist for r in plan.ranks] == ["0-11,24-35", "12-23,36-47"]
    assert plan.affinity_conf(2) == "2,npu0:0-11,npu0:24-35,npu1:12-23,npu1:36-47"
    assert plan.msrun_bind_core() == '{"device0":["0-11","24-35"],"device1":["12-23","36-47"]}'
    with pytest.raises(UserError, match="core 5 is given to card 0 and to card 1"):
        numa(root, [0, 1], "0:0-5,1:5-10")
    with pytest.raises(UserError, match="card 1's cores 96-99 are not ones this process may use"):
        numa(root, [0, 1], "0:0-5,1:96-99")
    with pytest.raises(UserError, match="no cores given for 1"):
        numa(root, [0, 1], "0:0-5")
    for bad in ("nonsense", "", "0-5", "0:a-b", "0:0-5,0:6-9"):
        with pytest.raises(UserError, match="--bind"):
            b.parse_bind(bad)


def test_torch_npu_is_told_the_mode_its_release_reads():
    stacks = load_matrix(ROOT / "matrix.yaml").stacks
    mode = {name: b.torch_npu_binding(b.extension_release(st.torch.npu_branch), st.cann).mode
            for name, st in stacks.items() if st.torch}
    assert mode["1.11.0"] == 0            # v1.11.0-6.0.rc1: before CPU_AFFINITY_CONF
    assert mode["2.1.0"] == 1             # v2.1.0-6.0.rc3: coarse only
    assert mode["2.1.0-cann8.0.0"] == 2   # v2.1.0-6.0.0: fine-grained
    assert mode["2.7.1"] == 2             # v26.0.0-pytorch2.7.1
    assert b.extension_release("v2.11.0-26.2.0") == "26.2.0" and b.extension_release("v2.1.0") is None
    # Without the release, the CANN the image carries decides; without either, coarse.
    assert b.torch_npu_binding(None, "8.0.RC3").mode == 1 and b.torch_npu_binding(None, "8.0.0").mode == 2
    assert b.torch_npu_binding(None, "8.0.RC1").mode == 0 and b.torch_npu_binding(None, None).mode == 1
    from ascend_build.host.doctor import ImageFacts
    facts = ImageFacts("x", "8.0.RC3", "910b", None, None, stack="2.1.0-cann8.0.0", torch_npu="2.1.0.post10")
    assert b.for_image(facts, stacks).mode == 2         # the stack's branch beats the CANN label


def test_the_rank_wrapper_binds_real_processes_here():
    """What torchrun starts per rank: the wrapper picks the rank's list by LOCAL_RANK and
    execs Python under taskset; the process (and what it forks) runs on those cores only."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip(f"this machine lets the tests use {len(cores)} core")
    plan = f"{cores[0]} {cores[1]}"
    # The child (a dataloader worker's stand-in) reports its cores through a pipe: one writer of stdout.
    code = ("import os\nr, w = os.pipe()\npid = os.fork()\n"
            "if pid == 0:\n    os.write(w, str(sorted(os.sched_getaffinity(0))).encode())\n    os._exit(0)\n"
            "os.close(w)\nchild = os.read(r, 200).decode()\nos.waitpid(pid, 0)\n"
            "print(sorted(os.sched_getaffinity(0)), child)")
    for rank in (0, 1):
        out = subprocess.run(["sh", "-c", RANK_WRAPPER, "-c", code], capture_output=True, text=True,
                             env={**os.environ, "LOCAL_RANK": str(rank), "ASCEND_BUILD_RANK_CPUS": plan,
                                  "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines()[0] == f"[{cores[rank]}] [{cores[rank]}]"
    missing = subprocess.run(["sh", "-c", RANK_WRAPPER, "-c", "print(1)"], capture_output=True, text=True,
                             env={**os.environ, "LOCAL_RANK": "3", "ASCEND_BUILD_RANK_CPUS": plan})
    assert missing.returncode == 2 and "no cores planned for local rank 3" in missing.stderr


def test_invoke_run_prints_the_plan_one_line_per_rank_and_applies_it(tmp_path):
    root = kunpeng_920(tmp_path / "host", topo=True)
    out = invoke("run", "--dry", "--image", "img", "--torchrun", "--devices", "2-5", "--runtime", "runc",
                 "--host-root", str(root), "--", "train.py")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("# binding: numa, from npu-smi info -t topo; 4 ranks, at least 5 cores each")
    assert lines[1:5] == [f"#   rank {r}: card {r + 2} (NUMA node {(r + 2) // 2}), cores {GUIDE[r + 2]} (24)"
                          for r in range(4)]
    cmd = shlex.split(lines[-1])
    assert "--cpuset-cpus=48-143" in cmd and "ASCEND_BUILD_RANK_CPUS=48-71 72-95 96-119 120-143" in cmd
    assert "CPU_AFFINITY_CONF=1,npu0:48-71,npu1:72-95,npu2:96-119,npu3:120-143" in cmd
    assert cmd[cmd.index("--no_python"):cmd.index("--no_python") + 5] == ["--no_python", "sh", "-c", RANK_WRAPPER,
                                                                         "train.py"]
    explicit = invoke("run", "--dry", "--image", "img", "--torchrun", "--devices", "0-1", "--runtime", "runc",
                      "--host-root", str(root), "--bind", "0:0-7,1:8-15", "--", "train.py")
    assert "--cpuset-cpus=0-15" in shlex.split(explicit.stdout.splitlines()[-1]), explicit.stderr
    half = kunpeng_920(tmp_path / "half", allowed="0-95")
    refused = invoke("run", "--dry", "--image", "img", "--torchrun", "--runtime", "runc", "--host-root", str(half),
                     "--", "train.py")
    assert refused.returncode == 2 and "error: cannot bind the ranks: cards 4, 5, 6, 7" in refused.stderr
    assert "--bind even (12 cores each)" in refused.stderr
    bad = invoke("run", "--dry", "--image", "img", "--torchrun", "--bind", "fast", "--", "train.py")
    assert bad.returncode == 2 and "--bind 'fast': numa, even, off, or ranges per card" in bad.stderr
