"""`invoke run` against a stand-in host root (tests/doubles/host_roots.py): a temporary tree
holding the device and driver paths a 910B host or a 310B board has (plain files standing in
for device nodes)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from ascend_build.engine import Engine
from ascend_build.errors import UserError
from ascend_build.host.run import RunOptions, compose
from tests import forked
from tests.doubles.host_roots import BOARD_DEVICES, make_board, make_host

DOCKER = Engine("docker", "docker", "classic-buildkit", "20.10.24")

ROOT = Path(__file__).resolve().parents[2]


def pairs(cmd: list[str], flag: str) -> list[str]:
    return [cmd[i + 1] for i, c in enumerate(cmd) if c == flag]


def test_device_flags_and_driver_mounts(tmp_path):
    root = make_host(tmp_path, cards=4, smi="/usr/local/sbin/npu-smi", install_info=True)
    cmd = compose(DOCKER, RunOptions("img", ("python", "-c", "1"), devices="0,2"), root)
    assert pairs(cmd, "--device") == ["/dev/davinci0", "/dev/davinci2", "/dev/davinci_manager", "/dev/devmm_svm",
                                      "/dev/hisi_hdc"]
    mounts = pairs(cmd, "-v")
    assert f"{root}/usr/local/Ascend/driver:/usr/local/Ascend/driver:ro" in mounts
    assert f"{root}/usr/local/sbin/npu-smi:/usr/local/sbin/npu-smi:ro" in mounts, "npu-smi from where the host has it"
    assert f"{root}/usr/local/dcmi:/usr/local/dcmi:ro" in mounts
    assert f"{root}/etc/ascend_install.info:/etc/ascend_install.info:ro" in mounts
    assert "--shm-size=16g" in cmd and "--ipc=host" in cmd
    assert cmd[-4:] == ["img", "python", "-c", "1"]


def test_all_and_ranges(tmp_path):
    root = make_host(tmp_path, cards=4)
    assert pairs(compose(DOCKER, RunOptions("img"), root), "--device")[:4] == [f"/dev/davinci{n}" for n in range(4)]
    assert pairs(compose(DOCKER, RunOptions("img", devices="1-2"), root), "--device")[:2] == ["/dev/davinci1",
                                                                                                "/dev/davinci2"]
    with pytest.raises(UserError, match="no /dev/davinci7 on this host; it has cards 0, 1, 2, 3"):
        compose(DOCKER, RunOptions("img", devices="7"), root)
    with pytest.raises(UserError, match="expected all, a list"):
        compose(DOCKER, RunOptions("img", devices="first"), root)


def test_ascend_docker_runtime_replaces_devices_and_mounts(tmp_path):
    root = make_host(tmp_path, cards=4)
    cmd = compose(DOCKER, RunOptions("img", devices="0-3"), root, frozenset({"runc", "ascend"}))
    assert cmd[cmd.index("--runtime") + 1] == "ascend"
    assert "ASCEND_VISIBLE_DEVICES=0,1,2,3" in cmd
    assert "--device" not in cmd and "-v" not in cmd
    with pytest.raises(UserError, match="no `ascend` runtime"):
        compose(DOCKER, RunOptions("img", runtime="ascend"), root, frozenset({"runc"}))
    assert "--runtime" not in compose(DOCKER, RunOptions("img", runtime="runc"), root, frozenset({"ascend"}))


def test_host_without_npu_or_driver_is_refused(tmp_path):
    with pytest.raises(UserError, match="no NPU on this host"):
        compose(DOCKER, RunOptions("img"), make_host(tmp_path / "a", cards=0))
    with pytest.raises(UserError, match="davinci_manager"):
        compose(DOCKER, RunOptions("img"), make_host(tmp_path / "b", cards=4, control=False))
    with pytest.raises(UserError, match="driver/lib64 is missing"):
        compose(DOCKER, RunOptions("img"), make_host(tmp_path / "c", cards=4, driver=None))


def test_invoke_run_dry(tmp_path):
    root = make_host(tmp_path, cards=1, smi="/usr/local/bin/npu-smi")
    out = forked.invoke("run", "--image", "ascend-runtime:torch2.1.0-arm64", "--devices", "0", "--host-root", str(root),
                        "--runtime", "runc", "--dry", "--", "python", "-c", "import torch_npu")
    assert out.returncode == 0, out.stderr
    assert "--device /dev/davinci0 --device /dev/davinci_manager" in out.stdout
    assert "/usr/local/bin/npu-smi:/usr/local/bin/npu-smi:ro" in out.stdout
    assert out.stdout.strip().endswith("ascend-runtime:torch2.1.0-arm64 python -c 'import torch_npu'")


def test_a_310b_board_gets_its_own_devices_and_driver_files(tmp_path):
    root = make_board(tmp_path)
    cmd = compose(DOCKER, RunOptions("img", ("python",)), root)
    assert pairs(cmd, "--device") == ["/dev/davinci0", "/dev/davinci_manager", "/dev/svm0", "/dev/ts_aisle",
                                      "/dev/upgrade", "/dev/sys", "/dev/vdec", "/dev/vpc", "/dev/pngd", "/dev/venc",
                                      "/dev/dvpp_cmdlist", "/dev/log_drv"]
    assert len(pairs(cmd, "--device")) == len(BOARD_DEVICES)
    assert "/dev/devmm_svm" not in cmd and "/dev/hisi_hdc" not in cmd
    mounts = [m.split(":")[1] for m in pairs(cmd, "-v")]
    assert "/usr/local/Ascend/driver/lib64" in mounts and "/usr/local/Ascend/driver" not in mounts
    for path in ("/etc/sys_version.conf", "/etc/hdcBasic.cfg", "/usr/lib64/libdcmi.so", "/usr/lib64/aicpu_kernels",
                 "/usr/lib/aarch64-linux-gnu/libcrypto.so.1.1", "/usr/local/sbin/npu-smi"):
        assert path in mounts, path
    assert "/usr/lib64/libcrypto.so.1.1" not in mounts, "only where this board's OS keeps it"
    with pytest.raises(UserError, match="no /dev/davinci1 on this host; it has cards 0"):
        compose(DOCKER, RunOptions("img", devices="0-1"), root)


def test_a_board_under_the_ascend_docker_runtime_allows_its_links(tmp_path):
    cmd = compose(DOCKER, RunOptions("img"), make_board(tmp_path), frozenset({"ascend"}))
    assert pairs(cmd, "-e") == ["ASCEND_VISIBLE_DEVICES=0", "ASCEND_ALLOW_LINK=True"]
    server = compose(DOCKER, RunOptions("img"), make_host(tmp_path / "server", cards=4), frozenset({"ascend"}))
    assert pairs(server, "-e") == ["ASCEND_VISIBLE_DEVICES=0,1,2,3"]


def test_a_preview_for_a_310b_image_on_a_machine_without_npus(tmp_path):
    (tmp_path / "dev").mkdir()
    cmd = compose(DOCKER, RunOptions("img"), tmp_path, preview=True, chip="310b")
    assert pairs(cmd, "--device")[:4] == ["/dev/davinci0", "/dev/davinci_manager", "/dev/svm0", "/dev/ts_aisle"]
    assert "/dev/davinci1" not in cmd
    server = compose(DOCKER, RunOptions("img"), tmp_path, preview=True)
    assert pairs(server, "--device")[:8] == [f"/dev/davinci{n}" for n in range(8)]


def test_a_bound_launch_gives_the_container_exactly_its_ranks_cores(tmp_path):
    root = make_host(tmp_path, cards=4)
    cmd = compose(DOCKER, RunOptions("img", ("torchrun", "train.py"), cpuset="0-23,48-71"), root)
    assert "--cpuset-cpus=0-23,48-71" in cmd and cmd.index("--cpuset-cpus=0-23,48-71") < cmd.index("img")
    assert not any(c.startswith("--cpuset-cpus") for c in compose(DOCKER, RunOptions("img"), root))


# ---------------------------------------------------------------- serving: vllm serve of a host folder

def model_dir(where: Path, name: str = "Qwen2.5-7B-Instruct") -> Path:
    (where / name).mkdir(parents=True)
    (where / name / "config.json").write_text("{}")
    return where / name


def test_serve_runs_vllm_on_the_chosen_cards_with_the_model_read_only_and_the_port_on_loopback(tmp_path):
    from ascend_build.host.serving import serve_on_host
    root = make_host(tmp_path / "host", cards=4)
    model = model_dir(tmp_path / "models")
    serve = serve_on_host(str(model), 8000, "127.0.0.1")
    cmd = compose(DOCKER, RunOptions("img", ("--max-model-len", "8192"), devices="1-2", serve=serve), root)
    at = cmd.index("img")
    assert cmd[at + 1:] == ["vllm", "serve", "/models/Qwen2.5-7B-Instruct", "--host", "0.0.0.0", "--port", "8000",
                            "--tensor-parallel-size", "2", "--max-model-len", "8192"]
    assert pairs(cmd, "-p") == ["127.0.0.1:8000:8000"] and cmd.index("-p") < at
    assert f"{model}:/models/Qwen2.5-7B-Instruct:ro" in pairs(cmd, "-v")
    # everything a run has for the cards stays: the chosen cards, the control devices, the driver
    assert pairs(cmd, "--device")[:2] == ["/dev/davinci1", "/dev/davinci2"] and "/dev/davinci_manager" in cmd
    assert f"{root}/usr/local/Ascend/driver:/usr/local/Ascend/driver:ro" in pairs(cmd, "-v")
    # its own /dev/shm (--ipc=host would replace it with the host's) and HCCL's limits across cards
    assert "--shm-size=16g" in cmd and "--ipc=host" not in cmd
    assert pairs(cmd, "--ulimit") == ["memlock=-1:-1", "nofile=65536:65536"]
    one = compose(DOCKER, RunOptions("img", devices="0", serve=serve), root)
    assert "--tensor-parallel-size" in one and one[one.index("--tensor-parallel-size") + 1] == "1"
    assert "--ulimit" not in one


def test_serve_under_the_runtime_on_the_host_network_and_on_another_address(tmp_path):
    from ascend_build.host.serving import serve_on_host
    root = make_host(tmp_path / "host", cards=4)
    model = model_dir(tmp_path / "models")
    runtime = compose(DOCKER, RunOptions("img", serve=serve_on_host(str(model), 8000, "127.0.0.1")), root,
                      frozenset({"ascend"}))
    assert "ASCEND_VISIBLE_DEVICES=0,1,2,3" in runtime and runtime[runtime.index("--tensor-parallel-size") + 1] == "4"
    assert pairs(runtime, "-v") == [f"{model}:/models/Qwen2.5-7B-Instruct:ro"]
    # on the host network docker drops -p: vLLM itself listens on the address asked for
    host_net = compose(DOCKER, RunOptions("img", network_host=True, serve=serve_on_host(str(model), 9000,
                                                                                        "127.0.0.1")), root)
    assert "-p" not in host_net and "--network=host" in host_net
    assert host_net[host_net.index("--host") + 1] == "127.0.0.1" and "9000" in host_net
    wide = compose(DOCKER, RunOptions("img", serve=serve_on_host(str(model), 8080, "::")), root)
    assert pairs(wide, "-p") == ["[::]:8080:8080"]


def test_serve_refuses_what_docker_could_not_mount_or_publish(tmp_path):
    from ascend_build.host.serving import check_extra, serve_on_host
    model = model_dir(tmp_path / "models")
    for given, port, address, message in (
            (tmp_path / "missing", 8000, "127.0.0.1", "no such folder"),
            (model / "config.json", 8000, "127.0.0.1", "a file, not a folder"),
            (model, 0, "127.0.0.1", "--port 0: expected a whole number from 1 to 65535"),
            (model, 65536, "127.0.0.1", "--port 65536"),
            (model, 8000, "localhost", "--publish-address 'localhost': an IP address")):
        with pytest.raises(UserError, match=message):
            serve_on_host(str(given), port, address)
    colon = model_dir(tmp_path / "a:b")
    with pytest.raises(UserError, match="a path with ':' or ','"):
        serve_on_host(str(colon), 8000, "127.0.0.1")
    with pytest.raises(UserError, match=r"after -- come its options .*not a command \('python'\)"):
        check_extra(("python", "serve.py"), "--serve")
    assert check_extra(("--max-model-len", "8192"), "--serve") == ("--max-model-len", "8192")


def client_double(folder: Path, labels: dict | None = None) -> tuple[Path, Path]:
    """A docker client that writes each call it gets to a file (and answers version, info and
    image inspect, with `labels` when given: else it has no image)."""
    import json
    calls = folder / "calls"
    inspect = (f"echo '{json.dumps([{'Id': 'sha256:' + '0' * 64, 'Config': {'Labels': labels}}])}'"
               if labels is not None else "echo 'Error: No such image' >&2; exit 1")
    client = folder / "docker"
    client.write_text(f"""#!/bin/sh
echo "$@" >> {calls}
case "$1" in
  version) echo 20.10.24 ;;
  info) echo "runc " ;;
  image) {inspect} ;;
  *) exit 1 ;;
esac
""")
    client.chmod(0o755)
    return client, calls


def test_invoke_run_serve_dry_and_its_refusals_before_the_engine(tmp_path):
    root = make_host(tmp_path / "host", cards=2)
    model = model_dir(tmp_path / "models")
    client, calls = client_double(tmp_path)
    task = ["run", "--image", "ascend-serving:x", "--host-root", str(root), "--runtime", "runc", "--docker",
            str(client), "--dry"]
    out = forked.invoke(*task, "--serve", str(model), "--publish-address", "0.0.0.0", "--port", "8080",
                        "--shm-size", "32g")
    assert out.returncode == 0, out.stderr
    assert "-p 0.0.0.0:8080:8080" in out.stdout and "--shm-size=32g" in out.stdout
    assert out.stdout.strip().endswith("ascend-serving:x vllm serve /models/Qwen2.5-7B-Instruct --host 0.0.0.0 "
                                       "--port 8080 --tensor-parallel-size 2")
    assert calls.exists(), "the double records the engine's calls (a dry run reads the image's labels)"
    calls.unlink()
    for extra, message in (
            (["--serve", str(tmp_path / "nope")], "--serve .*nope: no such folder"),
            (["--serve", str(model), "--port", "99999"], "--port 99999: expected a whole number from 1 to 65535"),
            (["--serve", str(model), "--torchrun"], "--serve runs vLLM.*--torchrun starts training ranks"),
            (["--serve", str(model), "--hostfile", str(tmp_path / "hosts")], "--hostfile starts training ranks"),
            (["--port", "8080"], "--port is for a served model: give --serve MODEL_DIR too"),
            (["--serve", str(model), "--", "python", "app.py"], "not a command"),
            (["--serve", str(model), "--publish-address", "every"], "--publish-address 'every'")):
        refused = forked.invoke(*task, *extra)
        assert refused.returncode == 2, (extra, refused.stdout, refused.stderr)
        assert re.search(message, refused.stderr), (message, refused.stderr)
        assert not calls.exists(), f"{extra}: the engine was called before the refusal"


def test_invoke_run_serve_refuses_an_image_without_vllm(tmp_path):
    root = make_host(tmp_path / "host", cards=1)
    model = model_dir(tmp_path / "models")
    base = {"io.ascend-build.chip": "910b", "io.ascend-build.platform": "linux/arm64"}
    task = ["run", "--image", "ascend-runtime:x", "--host-root", str(root), "--runtime", "runc", "--dry", "--serve",
            str(model)]
    (tmp_path / "a").mkdir()
    client, _ = client_double(tmp_path / "a", {**base, "io.ascend-build.kind": "runtime"})
    refused = forked.invoke(*task, "--docker", str(client))
    assert refused.returncode == 2 and "is a runtime image (io.ascend-build.kind=runtime), without vLLM" in \
        refused.stderr, refused.stderr
    (tmp_path / "b").mkdir()
    client, _ = client_double(tmp_path / "b", {**base, "io.ascend-build.kind": "serving",
                                               "io.ascend-build.kernels": "no"})
    served = forked.invoke(*task, "--docker", str(client))
    assert served.returncode == 0 and "vllm serve /models/Qwen2.5-7B-Instruct" in served.stdout, served.stderr
    assert "without vLLM-Ascend's custom kernels" in served.stderr


def test_invoke_run_serve_refuses_an_unlabelled_image_and_one_it_cannot_read(tmp_path):
    """An image without the kind label (built elsewhere, or before every image carried its
    kind) is not taken at its word: refused as a runtime image is (issue 78: CANN-only and
    runtime images had no label, and passed). One that is not here cannot be checked: a real
    run is refused before it starts; a dry run (a preview on a build machine) says so."""
    root = make_host(tmp_path / "host", cards=1)
    model = model_dir(tmp_path / "models")
    task = ["run", "--image", "ascend-runtime:x", "--host-root", str(root), "--runtime", "runc", "--serve", str(model)]
    (tmp_path / "a").mkdir()
    client, _ = client_double(tmp_path / "a", {"io.ascend-build.chip": "910b", "io.ascend-build.platform": "linux/arm64"})
    refused = forked.invoke(*task, "--dry", "--docker", str(client))
    assert refused.returncode == 2 and "is not labelled a serving image (no io.ascend-build.kind" in refused.stderr, \
        refused.stderr
    (tmp_path / "b").mkdir()
    client, calls = client_double(tmp_path / "b")       # no such image
    refused = forked.invoke(*task, "--docker", str(client))
    assert refused.returncode == 2 and "ascend-runtime:x is not here, so its labels cannot say" in refused.stderr, \
        refused.stderr
    assert " run " not in calls.read_text()
    preview = forked.invoke(*task, "--dry", "--docker", str(client))
    assert preview.returncode == 0 and "not here to read its labels" in preview.stderr, preview.stderr
