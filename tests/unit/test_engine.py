"""Engine detection against client doubles (small scripts standing in for docker
clients of known versions), and the command forms for each mode."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from ascend_build.engine import BuildRequest, Engine, RunSpec, detect
from ascend_build.errors import EngineError


def client_double(folder: Path, version: str, buildx: bool) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "docker"
    script.write_text(f"""#!/bin/sh
# docker CLIENT DOUBLE for engine detection tests
case "$1" in
  version) echo {version} ;;
  --version) echo "Docker version {version}, build test" ;;
  buildx) {'echo buildx v0.12' if buildx else 'echo "docker: unknown command: docker buildx" >&2; exit 1'} ;;
  info) echo 20.10.24 ;;
  *) exit 1 ;;
esac
""")
    script.chmod(0o755)
    return script


@pytest.fixture
def path_of(monkeypatch):
    def set_path(*folders: Path):
        monkeypatch.setenv("PATH", os.pathsep.join(str(f) for f in folders))
    return set_path


def test_new_client_without_buildx_is_skipped_for_an_older_buildkit_client(tmp_path, path_of):
    new, old = tmp_path / "a", tmp_path / "b"
    client_double(new, "28.2.2", buildx=False)
    client_double(old, "20.10.24", buildx=False)
    path_of(new, old)
    engine = detect("docker")
    assert engine.mode == "classic-buildkit" and engine.client == str(old / "docker")


def test_buildx_preferred(tmp_path, path_of):
    client_double(tmp_path / "a", "28.2.2", buildx=True)
    path_of(tmp_path / "a")
    assert detect("docker").mode == "buildx"


def test_never_the_legacy_builder(tmp_path, path_of):
    client_double(tmp_path / "a", "28.2.2", buildx=False)
    path_of(tmp_path / "a")
    with pytest.raises(EngineError, match="legacy builder"):
        detect("docker")


def test_explicit_client(tmp_path, path_of):
    path_of(tmp_path)
    chosen = client_double(tmp_path / "x", "20.10.24", buildx=False)
    assert detect("docker", str(chosen)).client == str(chosen)
    with pytest.raises(EngineError, match="not found"):
        detect("docker", str(tmp_path / "nope"))


def test_command_forms_carry_secrets_only_as_secret_mounts(tmp_path):
    req = BuildRequest(dockerfile=Path("images/x/Dockerfile"), context=tmp_path, platform="linux/arm64",
                       build_args={"A": "1"}, secrets={"ca-bundle": Path("/ca.pem")}, labels={"l": "v"},
                       iidfile=tmp_path / "iid")
    cmd, env = Engine("docker", "docker", "classic-buildkit", "20.10").build_command(req)
    assert env == {"DOCKER_BUILDKIT": "1"} and cmd[:2] == ["docker", "build"]
    assert ["--secret", "id=ca-bundle,src=/ca.pem"] == cmd[cmd.index("--secret"):cmd.index("--secret") + 2]
    assert not any("/ca.pem" in c for c in cmd if not c.startswith("id="))
    cmd, env = Engine("docker", "docker", "buildx", "28").build_command(req)
    assert cmd[:4] == ["docker", "buildx", "build", "--load"] and env == {}
    cmd, _ = Engine("podman", "podman", "podman", "4").build_command(req)
    assert cmd[:2] == ["podman", "build"] and "--platform" in cmd


@pytest.mark.parametrize("machine, qemu, platform, expected", [
    ("x86_64", (7, 2), "linux/arm64", "max,pauth-impdef=on"),    # emulated, qemu has the property
    ("x86_64", (5, 2), "linux/arm64", None),                     # too old: the property is unknown
    ("x86_64", None, "linux/arm64", None),                       # version unreadable: nothing passed
    ("aarch64", (7, 2), "linux/arm64", None),                    # native: no qemu at all
])
def test_emulated_builds_get_the_fast_pointer_auth_cpu(tmp_path, monkeypatch, machine, qemu, platform, expected):
    from ascend_build.engine import emulation
    monkeypatch.setattr(emulation.Platform, "emulated", lambda self, host_machine=None: machine != self.arch)
    monkeypatch.setattr(emulation, "qemu_version", lambda arch: qemu)
    req = BuildRequest(dockerfile=Path("D"), context=tmp_path, platform=platform)
    for engine in (Engine("docker", "docker", "classic-buildkit", "20.10"), Engine("podman", "podman", "podman", "4")):
        cmd, _ = engine.build_command(req)
        args = [cmd[i + 1] for i, c in enumerate(cmd) if c == "--build-arg"]
        assert [a for a in args if a.startswith("QEMU_CPU=")] == ([f"QEMU_CPU={expected}"] if expected else [])


@pytest.mark.parametrize("machine, platform, env, composed, expected", [
    ("x86_64", "linux/arm64", (), False, ["QEMU_CPU=max,pauth-impdef=on"]),       # the project's own container
    ("aarch64", "linux/arm64", (), False, []),                                     # native: no qemu
    ("x86_64", "linux/amd64", (), False, []),
    ("x86_64", "linux/arm64", (), True, []),                                       # a user's line: theirs to set
    ("x86_64", "linux/arm64", (("QEMU_CPU", "cortex-a72"),), False, ["QEMU_CPU=cortex-a72"]),  # the spec's wins
    ("x86_64", None, (), False, []),                                               # no platform: nothing known
])
def test_emulated_containers_get_the_fast_pointer_auth_cpu(monkeypatch, machine, platform, env, composed, expected):
    """Image suites and builder containers run the image's binaries under qemu too: the
    same CPU model as the builds, in the container's environment."""
    from ascend_build.engine import emulation
    monkeypatch.setattr(emulation.Platform, "emulated", lambda self, host_machine=None: machine != self.arch)
    monkeypatch.setattr(emulation, "qemu_version", lambda arch: (7, 2))
    spec = RunSpec("img:1", ("true",), platform=platform, env=env)
    for engine in (Engine("docker", "docker", "buildx", "28"), Engine("podman", "podman", "podman", "4")):
        argv = engine.run_argv(spec, composed=composed)
        assert [argv[i + 1] for i, a in enumerate(argv) if a == "-e" and argv[i + 1].startswith("QEMU_CPU=")] \
            == expected, argv


def test_every_emulated_stage_declares_qemu_cpu():
    """A build arg reaches RUN only in stages that declare it: every stage that runs the
    image's own binaries does, the build machine's stages do not need it."""
    from ascend_build.images.catalog import render_all
    from ascend_build.matrix import load_matrix
    root = Path(__file__).resolve().parents[2]
    for r in render_all(load_matrix(root / "matrix.yaml")):
        stages = r.text.split("\nFROM ")[1:]
        for stage in stages:
            native = stage.startswith(("--platform=${BUILDPLATFORM}", "native-"))
            runs = "\nRUN " in stage
            if runs and not native:
                assert "\nARG QEMU_CPU\n" in stage, f"{r.path}: stage {stage.splitlines()[0]!r}"


def test_registry_layer_cache_per_mode(tmp_path):
    req = BuildRequest(dockerfile=Path("D"), context=tmp_path, platform="linux/arm64", cache_ref="reg/x:buildcache-a")
    cmd, _ = Engine("docker", "docker", "buildx", "28").build_command(req)
    assert "type=registry,ref=reg/x:buildcache-a" in cmd and "type=registry,ref=reg/x:buildcache-a,mode=max" in cmd
    cmd, _ = Engine("docker", "docker", "classic-buildkit", "20.10").build_command(req)
    assert cmd[cmd.index("--cache-from") + 1] == "reg/x:buildcache-a" and "BUILDKIT_INLINE_CACHE=1" in cmd
    cmd, _ = Engine("podman", "podman", "podman", "4").build_command(req)
    assert "--layers" in cmd and cmd[cmd.index("--cache-to") + 1] == "reg/x"
    req.cache_ref = None
    assert "--cache-from" not in Engine("docker", "docker", "buildx", "28").build_command(req)[0]


def test_host_network_per_mode(tmp_path):
    req = BuildRequest(dockerfile=Path("D"), context=tmp_path, platform="linux/arm64", network="host")
    cmd, _ = Engine("docker", "docker", "classic-buildkit", "20.10").build_command(req)
    assert cmd[cmd.index("--network") + 1] == "host" and "--allow" not in cmd
    cmd, _ = Engine("docker", "docker", "buildx", "28").build_command(req)
    assert cmd[cmd.index("--allow") + 1] == "network.host"
    req.network = None
    assert "--network" not in Engine("docker", "docker", "buildx", "28").build_command(req)[0]


def test_the_engine_line_names_client_version_builder_and_what_was_passed_over():
    from ascend_build.engine import Engine
    e = Engine("docker", "/usr/bin/docker", "classic-buildkit", "20.10.24",
               skipped=("/usr/local/bin/docker: version 28.2.2 has no buildx plugin",))
    assert e.describe() == ("engine: /usr/bin/docker 20.10.24, building with its built-in BuildKit "
                            "(DOCKER_BUILDKIT=1); passed over /usr/local/bin/docker: version 28.2.2 has no buildx plugin")


def test_an_unknown_engine_is_refused_on_a_dry_run_too():
    """A dry run does without a running engine, not without a known one."""
    from ascend_build import engine as eng
    from ascend_build.errors import UserError  # bad input (exit 2), not an engine that failed (#50)
    with pytest.raises(UserError, match="--engine 'dockr': choose docker or podman"):
        eng.for_task("dockr", None, dry=True)


def test_a_container_whose_run_is_stopped_is_removed(tmp_path):
    """Ctrl-C or an image suite's time limit stops `docker run`'s client; a container whose
    process ignores the signal (the first hour's hung import) would stay running. The engine
    removes it by the name it gave it. Here the client is a stand-in that sleeps for `run` and
    records every other command."""
    import signal

    from ascend_build.engine import RunSpec
    record = tmp_path / "calls"
    client = tmp_path / "docker"
    client.write_text(f'#!/bin/sh\nif [ "$1" = run ]; then exec sleep 30; fi\necho "$@" >> {record}\n')
    client.chmod(0o755)
    engine = Engine("docker", str(client), "classic-buildkit", "20.10")

    def stop(signum, frame):
        raise KeyboardInterrupt
    before = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        with pytest.raises(KeyboardInterrupt):
            engine.run_container(RunSpec("some/image:1", ("python3", "-c", "import mindspore")))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
    calls = record.read_text().split("\n")
    assert any(c.startswith("rm --force ascend-build-") for c in calls), calls


# ------------------------------------------------------------------ a build the engine dropped
DROPPED = "#14 ERROR: rpc error: code = Internal desc = unexpected EOF\n"
STEP_FAILED = "#14 ERROR: process \"/bin/sh -c apt-get update\" did not complete successfully: exit code: 100\n"


@pytest.mark.parametrize("outputs, code, runs", [
    ([(DROPPED, 1), ("#15 DONE 2.0s\n", 0)], 0, 2),         # the engine's hiccup: built again, from the cache
    ([(STEP_FAILED, 1)], 1, 1),                              # the Dockerfile's own failure: never again
    ([(DROPPED, 1), (DROPPED, 1)], 1, 2),                     # dropped twice: that is the failure
    ([("#14 0.3 echo 'rpc error: code = Internal desc = unexpected EOF'\n", 1)], 1, 1),  # a step's text
])
def test_a_build_the_engine_dropped_runs_once_more_and_nothing_else_does(tmp_path, monkeypatch, capsys, outputs,
                                                                         code, runs):
    from ascend_build.engine import engine as eng_module
    calls = []

    def fake_run(cmd, env, log, show_line=None):
        text, rc = outputs[len(calls)]
        calls.append(cmd)
        log.write_text("$ docker build ...\n" + text)
        return rc
    monkeypatch.setattr(eng_module, "run", fake_run)
    engine = Engine("docker", "docker", "classic-buildkit", "20.10.24")
    log = tmp_path / "build.log"
    assert engine.build(BuildRequest(Path("Dockerfile"), tmp_path, "linux/arm64"), log) == code
    assert len(calls) == runs
    said = capsys.readouterr()
    if runs == 2:
        assert (tmp_path / "build.log.dropped").read_text().endswith(DROPPED), "the dropped run's log is kept"
        assert "the engine dropped the build, not a step of it" in said.out + said.err
    else:
        assert not (tmp_path / "build.log.dropped").exists()
