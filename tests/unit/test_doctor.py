"""`invoke doctor` on stand-in host roots (tests/doubles/host_roots.py): each check's
state and its cause and fix; the image checks against the matrix's lines; `--explain` on
error texts from public issue threads; `build --for-host`; `run` refusing an image the
host's driver cannot run."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ascend_build.errors import UserError
from ascend_build.host import doctor as doc
from ascend_build.matrix import load_matrix
from tests import forked
from tests.doubles.host_roots import make_host

ROOT = Path(__file__).resolve().parents[2]
MATRIX = load_matrix(ROOT / "matrix.yaml")


def by_name(checks) -> dict[str, doc.Check]:
    return {c.name: c for c in checks}


def image(driver: str | None = "25.5.0", cann: str = "8.5.0", chip: str | None = "910b") -> doc.ImageFacts:
    return doc.ImageFacts("ascend-runtime:x", cann, chip, driver, "linux/arm64")


def test_a_healthy_910b_host_passes_every_check(tmp_path):
    checks = by_name(doc.examine(make_host(tmp_path), "alice", image(), choices=doc.lines(MATRIX),
                                 host_arch="aarch64"))
    assert not [c for c in checks.values() if c.blocking]
    assert checks["NPU driver"].found == "25.5.0" and checks["chip"].found == "910b"
    assert checks["devices"].found.startswith("NPU server: 8 cards") and checks["image driver need"].state == "ok"


def test_an_old_driver_names_the_need_and_the_image_that_would_run(tmp_path):
    checks = by_name(doc.examine(make_host(tmp_path, driver="25.0.RC1"), "alice", image(), choices=doc.lines(MATRIX)))
    need = checks["image driver need"]
    assert need.blocking
    assert need.cause == "host driver 25.0.RC1 is older than 25.5.0, which CANN 8.5.0 needs"
    assert need.fix == "upgrade the driver to 25.5.0 or newer, or use the 2.5.1 on CANN 8.1.RC1 image"


def test_no_devices_no_group_membership_no_driver(tmp_path):
    checks = by_name(doc.examine(make_host(tmp_path, driver=None, cards=0, control=False, members=()), "bob"))
    assert checks["NPU driver"].blocking and checks["devices"].blocking
    group = checks["group HwHiAiUser"]
    assert group.blocking and group.fix == "usermod -aG HwHiAiUser bob (then log in again)"
    assert "missing: /dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc" in checks["devices"].found


def test_an_a3_host_refuses_a_910b_image(tmp_path):
    checks = by_name(doc.examine(make_host(tmp_path, chip="Ascend910_9391"), "alice", image()))
    assert checks["chip"].found == "A3"
    assert checks["image chip"].blocking and "A2 and A3 need different packages" in checks["image chip"].cause


def test_a_950_host_is_named_and_refuses_a_910b_image(tmp_path):
    checks = by_name(doc.examine(make_host(tmp_path, chip="Ascend950PR"), "alice", image()))
    assert checks["chip"].found == "950"
    assert checks["image chip"].blocking and "invoke build --chip 950" in checks["image chip"].fix


def test_the_ascend_docker_runtime_is_seen_in_the_engine_config(tmp_path):
    with_runtime = by_name(doc.examine(make_host(tmp_path / "a", runtime=True), "alice"))
    without = by_name(doc.examine(make_host(tmp_path / "b"), "alice"))
    assert with_runtime["Ascend Docker Runtime"].found.startswith("present")
    assert without["Ascend Docker Runtime"].found.startswith("absent")


def test_an_image_without_labels_warns_and_does_not_guess(tmp_path):
    checks = by_name(doc.examine(make_host(tmp_path), "alice", image(driver=None, chip=None)))
    assert checks["image driver need"].state == "warn" and checks["image chip"].state == "warn"


def test_driver_versions_order_as_huawei_numbers_them():
    ordered = ["24.1.RC1", "24.1.rc2", "24.1.RC3", "24.1.0", "25.0.RC1", "25.0.rc1.b070", "25.2.0", "25.5.0", "26.0.RC1"]
    assert sorted(ordered, key=doc.driver_key) == ordered


# Error texts as users posted them (the lines that matter), with where they were posted.
REAL_ERRORS = [
    # github.com/vllm-project/vllm-ascend/issues/1440
    ("libascend_hal.so: cannot open shared object file: No such file or directory\nRuntimeError: Failed to load the "
     "backend extension: torch_npu. You can disable extension auto-loading with TORCH_DEVICE_BACKEND_AUTOLOAD=0.",
     "driver library missing"),
    # github.com/BytePioneer-AI/PaddleOCR-NPU/issues/7, github.com/vllm-project/vllm-ascend/issues/262
    ("    from torch_npu import _C\nImportError: libhccl.so: cannot open shared object file: No such file or directory",
     "CANN libraries not on the path"),
    # the protobuf 4 error text (seen with torch 2.1 + CANN, stack ref section 1)
    ("TypeError: Descriptors cannot be created directly.\nIf this call came from a _pb2.py file, your generated code "
     "is out of date and must be regenerated with protoc >= 3.19.0.", "protobuf too new"),
    # github.com/vllm-project/vllm-omni/issues/705
    ("Warning: Driver Version: 25.0.rc1.b070 is invalid or not supported yet. (function operator())",
     "driver too old for CANN"),
    ("A module that was compiled using NumPy 1.x cannot be run in\nNumPy 2.0.2 as it may crash.", "numpy 2 against a numpy 1 build"),
    ("docker: Error response from daemon: unknown or invalid runtime name: ascend.", "Ascend Docker Runtime missing"),
    ("[ERROR] drvMemGetInfo failed, devId=0, ret=87", "driver memory query failed"),
    ("EL0004: The device is occupied.", "device occupied"),
    # Serving images (vLLM + vLLM-Ascend). github.com/vllm-project/vllm-ascend/issues/855: torch_npu
    # failing at `import torch`, its cause not among the lines given.
    ("RuntimeError: Failed to load the backend extension: torch_npu. You can disable extension auto-loading with "
     "TORCH_DEVICE_BACKEND_AUTOLOAD=0.", "torch_npu backend failed to load"),
    # github.com/vllm-project/vllm-ascend/issues/1114 (and #3090, where vLLM-Ascend goes on without it)
    ("ERROR camem: Failed to import vllm_ascend_C:libvllm_ascend_kernels.so: cannot open shared object file: No "
     "such file or directory", "vLLM-Ascend custom kernels missing"),
]


@pytest.mark.parametrize("text, name", REAL_ERRORS, ids=[n for _, n in REAL_ERRORS])
def test_explain_names_cause_and_fix(text, name):
    assert [k.name for k in doc.explain(text)] == [name]


def test_a_failure_with_its_cause_in_the_log_is_explained_by_the_cause():
    """vllm-ascend #1440: the backend line follows the missing driver library; the driver is
    what to fix, so only it is said. Alone, the backend line is explained on its own."""
    both = REAL_ERRORS[0][0]
    assert "Failed to load the backend extension: torch_npu" in both
    assert [k.name for k in doc.explain(both)] == ["driver library missing"]
    outcome = next(k for k in doc.KNOWN if k.name == "torch_npu backend failed to load")
    assert outcome.outcome and "invoke doctor --image" in outcome.fix
    assert "invoke run" in doc.explain(both)[0].fix and "/usr/local/Ascend/driver" in doc.explain(both)[0].fix
    kernels = doc.explain(REAL_ERRORS[-1][0])[0]
    assert "--no-kernels" in kernels.cause and "rebuild" in kernels.fix


def test_explain_task_on_a_log_file_and_on_an_unknown_error(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("step 1\n" + REAL_ERRORS[1][0] + "\n")
    known = forked.invoke("doctor", "--explain", str(log))
    assert known.returncode == 0 and "CANN libraries not on the path" in known.stdout and "fix:" in known.stdout
    unknown = forked.invoke("doctor", "--explain", "segfault in my own code")
    assert unknown.returncode == 1 and "not a failure this tool knows; it checked for: driver library missing" \
        in unknown.stdout


def test_doctor_task_on_stand_in_roots_exits_on_blocking_problems(tmp_path):
    task = ["doctor", "--user", "alice", "--json", "--root"]
    good = forked.invoke(*task, str(make_host(tmp_path / "good")))
    assert good.returncode == 0, good.stdout + good.stderr
    assert {c["name"]: c["state"] for c in json.loads(good.stdout)["checks"]}["devices"] == "ok"
    bad = forked.invoke(*task, str(make_host(tmp_path / "bad", cards=0)))
    assert bad.returncode == 1 and any(c["blocking"] for c in json.loads(bad.stdout)["checks"])


@pytest.mark.parametrize("driver, chip, torch, expected, skipped", [
    # 9.2.0: no source names its driver, so it is never picked; 9.x: the drivers its release
    # notes list (25.5 = any 25.5.x), older releases: the driver they are paired with.
    ("26.0.RC1", "910b", None, "2.12.0", "2.14.0: no source names the driver CANN 9.2.0 needs"),
    ("25.5.0", "910b", None, "2.12.0", None),
    ("25.0.RC1", "910b", None, "2.10.0", "2.12.0: CANN 9.1.0 runs on 26.0.RC1, 25.2, 25.3, 25.5, 25.7.RC1, "
                                         "26.1.0, 26.1.1, the host has 25.0.RC1"),
    ("24.1.0", "910b", None, "2.4.0", "2.5.1: CANN 8.1.RC1 needs driver 25.0.RC1, the host has 24.1.0"),
    ("24.1.RC3", "910b", "2.1.0", "2.1.0", None),
    ("25.5.0", "A3", None, "2.12.0", None),
])
def test_for_host_picks_the_newest_line_the_driver_runs(driver, chip, torch, expected, skipped):
    picked, notes = doc.pick_stack(MATRIX, driver, chip, torch and MATRIX.stacks[torch])
    assert picked.name == expected
    if skipped:
        assert skipped in notes


def test_for_host_with_no_runnable_line_says_why():
    with pytest.raises(UserError, match="no line runs on driver 23.0.0"):
        doc.pick_stack(MATRIX, "23.0.0", "910b")


def test_build_for_host_dry_shows_the_choice(tmp_path):
    root = make_host(tmp_path / "host", driver="25.0.RC1")
    out = forked.invoke("build", "--for-host", str(root), "--dry", "--packages", str(tmp_path),
                        env={**__import__("os").environ, "ASCEND_BUILD_CACHE": str(tmp_path / "cache")})
    assert out.returncode == 0, out.stderr
    assert "for this host (driver 25.0.RC1, chip 910b): torch line 2.10.0" in out.stdout
    assert "skipped 2.12.0: CANN 9.1.0 runs on 26.0.RC1, 25.2" in out.stdout
    assert "cann9.0.0-910b-" in out.stdout


def test_run_refuses_an_image_the_host_driver_cannot_run(tmp_path):
    root = make_host(tmp_path / "host", driver="24.1.RC3")
    labels = {"io.ascend-build.cann": "9.0.0", "io.ascend-build.driver": "26.0.RC1", "io.ascend-build.chip": "910b",
              "io.ascend-build.platform": "linux/arm64"}
    client = tmp_path / "docker"     # a client double: answers version, info and image inspect
    client.write_text(f"""#!/bin/sh
case "$1" in
  version) echo 20.10.24 ;;
  info) echo "runc " ;;
  image) echo '{json.dumps([{"Id": "sha256:" + "0" * 64, "Config": {"Labels": labels}}])}' ;;
  *) exit 1 ;;
esac
""")
    client.chmod(0o755)
    cmd = ["run", "--image", "ascend-runtime:torch2.10.0-arm64", "--host-root", str(root), "--docker", str(client),
           "--runtime", "runc", "--dry"]
    refused = forked.invoke(*cmd)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "host driver 24.1.RC3 is older than 26.0.RC1, which CANN 9.0.0 needs" in refused.stderr
    forced = forked.invoke(*cmd, "--force")
    assert forced.returncode == 0 and "--device /dev/davinci0" in forced.stdout, forced.stderr


def test_a_driver_too_old_for_every_line_is_flagged_without_an_image(tmp_path):
    """23.0.3 runs no CANN the matrix has (the oldest line, 1.11.0 on CANN 8.0.RC1, needs
    24.1.RC1): doctor says so on the host alone."""
    checks = doc.examine(make_host(tmp_path / "old", driver="23.0.3"), "alice", choices=doc.lines(MATRIX))
    driver = next(c for c in checks if c.name == "NPU driver")
    assert driver.state == "fail" and "older than every line this project builds needs" in driver.cause
    assert "1.11.0 on CANN 8.0.RC1, needs 24.1.RC1" in driver.cause
    ok = doc.examine(make_host(tmp_path / "new", driver="24.1.RC1"), "alice", choices=doc.lines(MATRIX))
    assert next(c for c in ok if c.name == "NPU driver").state == "ok"


def test_an_image_that_runs_as_a_user_needs_the_hosts_hwhiaiuser_gid(tmp_path):
    """The cards belong to HwHiAiUser (gid 1000 in the stand-in host): an image built
    --run-as 1000:1000 opens them, one built for gid 2000 is refused with the fix."""
    root = make_host(tmp_path / "host", driver="24.1.RC3")
    def image(user):
        return doc.ImageFacts("img", "8.0.RC3", "910b", "24.1.RC3", "linux/arm64", (), user)
    ok = {c.name: c for c in doc.examine(root, "alice", image("1000:1000"))}
    assert ok["image user"].state == "ok"
    bad = {c.name: c for c in doc.examine(root, "alice", image("1000:2000"))}
    assert bad["image user"].state == "fail" and "invoke build --run-as UID:1000" in bad["image user"].fix
    assert "image user" not in {c.name for c in doc.examine(root, "alice", image("root"))}


def test_a_310b_board_is_recognised_and_refuses_a_910b_image(tmp_path):
    from tests.doubles.host_roots import make_board
    board = make_board(tmp_path / "board")
    checks = by_name(doc.examine(board, "HwHiAiUser", image(driver="24.1.0", cann="8.0.0", chip="910b")))
    assert checks["chip"].found == "310b"
    assert checks["devices"].state == "ok"
    assert checks["devices"].found.startswith("310B board: 1 card (davinci0..0) + /dev/davinci_manager, /dev/svm0, "
                                              "/dev/ts_aisle, /dev/upgrade")
    assert checks["image chip"].blocking and checks["image chip"].fix == "build for this host: invoke build --chip 310b"
    ok = by_name(doc.examine(board, "HwHiAiUser", image(driver="24.1.0", cann="8.0.0", chip="310b")))
    assert "image chip" not in ok, "doctor names the chip only when it disagrees"
    # And the other way round: a 910B server refuses a 310b image.
    server = by_name(doc.examine(make_host(tmp_path / "server"), "alice", image(chip="310b")))
    assert server["image chip"].blocking and "image 310b, host 910b" in server["image chip"].found


def test_a_board_missing_its_own_devices_is_not_taken_for_a_server(tmp_path):
    from tests.doubles.host_roots import make_board
    board = make_board(tmp_path)
    (board / "dev/ts_aisle").unlink()
    checks = by_name(doc.examine(board, "HwHiAiUser"))
    assert checks["devices"].blocking and checks["devices"].found == "davinci cards: 1; missing: /dev/ts_aisle"


def test_build_for_host_on_a_310b_board_takes_the_newest_line_with_310b_kernels(tmp_path):
    """The 310B's kernels are recorded for CANN 8.0.0, 8.1.RC1, 8.5.0 and 9.0.0 (cann_chips:):
    on driver 24.1.0 the newest line is 2.4.0 on 8.0.0; newer lines say why they were
    skipped (their CANN needs a newer driver, or has no 310b packages)."""
    from tests.doubles.host_roots import make_board
    picked, skipped = doc.pick_stack(MATRIX, "24.1.0", "310b")
    assert picked.name == "2.4.0"
    assert any(s.startswith("2.5.1: ") and "310b" not in s for s in skipped), skipped
    assert "2.14.0: CANN 9.2.0 has no packages for chip 310b" in skipped
    assert doc.pick_stack(MATRIX, "24.1.0", "310b", torch=MATRIX.stacks["2.1.0"])[0].name == "2.1.0-cann8.0.0"
    root = make_board(tmp_path / "board", driver="24.1.0")
    out = forked.invoke("build", "--for-host", str(root), "--dry", "--packages", str(tmp_path),
                        env={**__import__("os").environ, "ASCEND_BUILD_CACHE": str(tmp_path / "cache")})
    assert out.returncode == 0, out.stderr
    assert "for this host (driver 24.1.0, chip 310b): torch line 2.4.0" in out.stdout
    assert "cann8.0.0-310b-" in out.stdout and "linux/arm64" in out.stdout


# ---------------------------------------------------------------- NUMA: which cores each card's ranks get

def test_doctor_shows_each_numa_node_with_its_cpus_and_cards(tmp_path):
    from tests.doubles.host_roots import kunpeng_920
    checks = by_name(doc.examine(kunpeng_920(tmp_path), "alice"))
    assert checks["NUMA node 0"].found == "CPUs 0-47 (48 of 48 allowed), cards 0, 1"
    assert checks["NUMA node 3"].found == "CPUs 144-191 (48 of 48 allowed), cards 6, 7"
    binding = checks["core binding"]
    assert binding.state == "ok", binding
    # The Huawei NIC beside the NPUs (class 0x02) is not taken for a card: 8 cards, in bus order.
    assert binding.found == ("8 cards on 4 NUMA nodes (by sysfs: each card's PCI numa_node); allowed CPUs 0-191 "
                             "(online CPUs)")


def test_npu_smis_topology_comes_first_and_a_cgroup_that_starves_a_node_is_named(tmp_path):
    from tests.doubles.host_roots import kunpeng_920
    checks = by_name(doc.examine(kunpeng_920(tmp_path, allowed="0-95", topo=True), "alice"))
    assert checks["NUMA node 2"].found == "CPUs 96-143 (0 of 48 allowed), cards 4, 5"
    binding = checks["core binding"]
    assert binding.state == "warn" and "by npu-smi info -t topo" in binding.found
    assert "allowed CPUs 0-95 (cgroup /sys/fs/cgroup/cpuset.cpus.effective)" in binding.found
    assert binding.cause == "this process may use none of the CPUs of the NUMA node of cards 4, 5, 6, 7"
    assert "--bind even" in binding.fix


def test_a_card_without_numa_information_is_said(tmp_path):
    from tests.doubles.host_roots import add_numa
    root = add_numa(make_host(tmp_path, cards=2), {0: "0-23", 1: "24-47"}, [0, None])
    checks = by_name(doc.examine(root, "alice"))
    assert checks["core binding"].state == "warn" and checks["core binding"].cause == "no NUMA node known for card 1"
    assert checks["NUMA node 1"].found == "CPUs 24-47 (24 of 24 allowed), cards none"


def test_the_allowed_cpus_come_from_this_processs_cgroup(tmp_path):
    from ascend_build.host import topology
    v2 = tmp_path / "v2"
    (v2 / "proc/self").mkdir(parents=True)
    (v2 / "proc/self/cgroup").write_text("0::/kubepods.slice/pod1/ctr\n")
    (v2 / "sys/fs/cgroup/kubepods.slice/pod1").mkdir(parents=True)
    (v2 / "sys/fs/cgroup/cpuset.cpus.effective").write_text("0-191\n")
    # The container's own cgroup has no cpuset file (controller off there): its parent's counts.
    (v2 / "sys/fs/cgroup/kubepods.slice/pod1/cpuset.cpus.effective").write_text("4-7,100\n")
    assert topology.cgroup_cpus(v2) == ((4, 5, 6, 7, 100), "/sys/fs/cgroup/kubepods.slice/pod1/cpuset.cpus.effective")
    v1 = tmp_path / "v1"
    (v1 / "proc/self").mkdir(parents=True)
    (v1 / "proc/self/cgroup").write_text("12:cpuset:/docker/abc\n11:memory:/docker/abc\n")
    (v1 / "sys/fs/cgroup/cpuset/docker/abc").mkdir(parents=True)
    (v1 / "sys/fs/cgroup/cpuset/docker/abc/cpuset.effective_cpus").write_text("0-3\n")
    assert topology.cgroup_cpus(v1) == ((0, 1, 2, 3), "/sys/fs/cgroup/cpuset/docker/abc/cpuset.effective_cpus")
    # On the host itself the process's own affinity counts too.
    here = topology.read_topology(Path("/"))
    assert set(here.allowed) <= os.sched_getaffinity(0) and "this process's affinity" in here.allowed_from


def test_npu_smis_topology_table_is_read_by_its_cpu_affinity_column():
    from ascend_build.host import topology
    text = ("        NPU0   NPU1   CPU Affinity   NUMA Affinity\n"
            "NPU0    X      HCCS   0-23,96-119    0\n"
            "NPU1    HCCS   X      24-47          1\n"
            "Legend:\n  X    = Self\n")
    assert topology.parse_topo(text) == {0: tuple(range(24)) + tuple(range(96, 120)), 1: tuple(range(24, 48))}
    assert topology.parse_topo("+---+\n| NPU Name |\n") == {}
    assert topology.cpulist((0, 1, 2, 5, 7, 8)) == "0-2,5,7-8" and topology.parse_cpulist("0-2,5,7-8") == \
        (0, 1, 2, 5, 7, 8)


def test_doctor_json_carries_the_numa_facts_and_cluster_checks_compare_them(tmp_path):
    from ascend_build.cluster import checks as cl
    from ascend_build.cluster import facts
    from tests.doubles.cluster_hosts import make_server
    from tests.doubles.host_roots import add_numa
    nodes = {n: f"{48 * n}-{48 * n + 47}" for n in range(4)}
    written = []
    for n, allowed in ((1, None), (2, "0-95")):
        root = add_numa(make_server(tmp_path / f"node-{n}", n), nodes, [c // 2 for c in range(8)], allowed)
        out = forked.invoke("doctor", "--user", "alice", "--json", "--root", str(root))
        written.append(tmp_path / f"node-{n}.json")
        written[-1].write_text(out.stdout)
    a, b = facts.load(written)
    assert a.numa is not None and a.numa["cards"]["7"] == 3 and a.numa["nodes"]["3"] == "144-191"
    assert b.numa is not None and b.numa["allowed"] == "0-95"
    found = by_name(cl.examine([a, b]))["NUMA across hosts"]
    assert found.state == "warn" and found.found == "node-1: 4 nodes, allowed 0-191; node-2: 4 nodes, allowed 0-95"
    assert "--node-rank N" in found.fix
    # A facts file written before the NUMA facts still reads.
    old = json.loads(written[0].read_text())
    del old["facts"]["numa"]
    assert facts.HostFacts.from_json(old, "old.json").numa is None
