"""One small abstraction over the container engines: docker (with buildx, or a classic
client whose built-in BuildKit is enabled by DOCKER_BUILDKIT=1) and podman. Never the
legacy builder: it has no RUN --mount and no secrets, which the images depend on."""
from __future__ import annotations

import os
import platform
import shlex
import shutil
import subprocess
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from .. import console
from ..errors import EngineError
from ..platforms import get as platform_of
from ..platforms import host
from . import emulation, interrupts

EngineKind = Literal["docker", "podman"]
# How `build` runs: docker's buildx plugin, the BuildKit in docker clients before 23.0, or podman's buildah.
BuildMode = Literal["buildx", "classic-buildkit", "podman"]


@dataclass
class BuildRequest:
    dockerfile: Path
    context: Path
    platform: str
    build_args: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, Path] = field(default_factory=dict)   # id -> file: mounted, never stored
    labels: dict[str, str] = field(default_factory=dict)
    iidfile: Path | None = None
    tags: list[str] = field(default_factory=list)
    target: str | None = None          # a stage to stop at
    cache_ref: str | None = None       # a registry repository:tag for layer cache
    no_cache: bool = False
    network: str | None = None         # "host": RUN steps on the host's network
    epoch: int | None = None           # --reproducible: the time every layer and the config take (SOURCE_DATE_EPOCH)


@dataclass(frozen=True)
class Engine:
    kind: EngineKind
    client: str          # the executable
    mode: BuildMode
    version: str

    @property
    def testinfra_backend(self) -> str:
        return "podman" if self.kind == "podman" else "docker"

    def build_command(self, req: BuildRequest) -> tuple[list[str], dict[str, str]]:
        env: dict[str, str] = {}
        if self.mode == "buildx":
            # rewrite-timestamp: BuildKit >= 0.13 clamps every file's time to SOURCE_DATE_EPOCH.
            load = (["--output", "type=docker,rewrite-timestamp=true"] if req.epoch is not None else ["--load"])
            cmd = [self.client, "buildx", "build", *load, "--progress=plain"]
        elif self.mode == "classic-buildkit":
            cmd = [self.client, "build", "--progress=plain"]
            env["DOCKER_BUILDKIT"] = "1"
        else:
            cmd = [self.client, "build", "--format", "docker"]
        cmd += ["--platform", req.platform, "-f", str(req.dockerfile)]
        # What BuildKit sets by itself, given: podman expands TARGETARCH and BUILDPLATFORM
        # in FROM only when the Dockerfile declares them, and docker 20.10's BuildKit then
        # leaves them empty. QEMU_CPU: faster emulation, same bytes (emulation.py).
        args = {"TARGETARCH": req.platform.split("/")[1], "BUILDPLATFORM": _build_platform(),
                **emulation.build_args(platform_of(req.platform)), **req.build_args}
        if req.epoch is not None:
            # RUN steps see it (the stages declare the ARG): CPython then writes hash-based
            # .pyc files, not ones stamped with the time they were compiled.
            args["SOURCE_DATE_EPOCH"] = str(req.epoch)
            if self.mode == "podman":
                cmd += ["--timestamp", str(req.epoch)]     # every file of every new layer, and the config
        for key, value in sorted(args.items()):
            cmd += ["--build-arg", f"{key}={value}"]
        for key, value in sorted(req.labels.items()):
            cmd += ["--label", f"{key}={value}"]
        for sid, path in sorted(req.secrets.items()):
            cmd += ["--secret", f"id={sid},src={path}"]
        cmd += self._cache_flags(req.cache_ref) + (["--no-cache"] if req.no_cache else [])
        if req.network:
            cmd += ["--network", req.network]
            if self.mode == "buildx":       # an entitlement buildx asks for explicitly
                cmd += ["--allow", f"network.{req.network}"]
        if req.target:
            cmd += ["--target", req.target]
        if req.iidfile:
            cmd += ["--iidfile", str(req.iidfile)]
        for tag in req.tags:
            cmd += ["-t", tag]
        cmd.append(str(req.context))
        return cmd, env

    def _cache_flags(self, ref: str | None) -> list[str]:
        """Layer cache in a registry, in the form each engine supports."""
        if not ref:
            return []
        if self.mode == "buildx":
            # Exported cache (all stages); needs a buildx driver that can export (docker-container).
            return ["--cache-from", f"type=registry,ref={ref}", "--cache-to", f"type=registry,ref={ref},mode=max"]
        if self.mode == "classic-buildkit":
            # No cache export: the pushed image carries inline cache metadata, and the next
            # build reads it back from the registry.
            return ["--cache-from", ref, "--build-arg", "BUILDKIT_INLINE_CACHE=1"]
        return ["--layers", "--cache-from", ref.rsplit(":", 1)[0], "--cache-to", ref.rsplit(":", 1)[0]]

    skipped: tuple[str, ...] = ()     # clients on PATH passed over, and why

    def command(self, *args: str) -> list[str]:
        if self.kind == "podman" and args and args[0] in ("run", "create"):
            return [self.client, args[0], *_podman_limits(), *args[1:]]
        return [self.client, *args]

    def reproducible(self) -> str | None:
        """None when this engine makes a --reproducible build's layers identical run to run;
        else why it cannot."""
        if self.mode == "podman":
            return None
        if self.mode == "buildx":
            return None      # rewrite-timestamp (BuildKit >= 0.13; an older one refuses the option)
        return (f"docker {self.version}'s built-in BuildKit cannot rewrite file times (rewrite-timestamp needs "
                "buildx with BuildKit 0.13 or newer): every layer a RUN or COPY makes keeps the times its files "
                "were written, so the project writes those layers again after the build, with the epoch's times "
                "(a pass over every byte; `--engine podman` does it while building)")

    def describe(self) -> str:
        """One line for the start of a build: which client, which version, which builder."""
        how = {"buildx": "docker buildx", "classic-buildkit": "its built-in BuildKit (DOCKER_BUILDKIT=1)",
               "podman": "podman build"}[self.mode]
        passed = "".join(f"; passed over {s}" for s in self.skipped)
        return f"engine: {self.client} {self.version}, building with {how}{passed}"

    def runtimes(self) -> frozenset[str]:
        """The container runtimes the engine offers (e.g. `ascend`, the Ascend Docker Runtime).
        The Ascend Docker Runtime is docker's: podman gets the NPUs by device flags."""
        if self.kind == "podman":
            return frozenset()
        out = _output(self.command("info", "--format", "{{range $k, $v := .Runtimes}}{{$k}} {{end}}"))
        return frozenset(out.stdout.split()) if out.returncode == 0 else frozenset()


def _build_platform() -> str:
    here = host()
    return here.docker if here else f"linux/{platform.machine()}"


def _podman_limits() -> list[str]:
    """Containers get the open-file and process limits podman's own process has, as
    docker's get dockerd's. Rootful podman otherwise asks for 1048576 of each, which runc
    can only set with CAP_SYS_RESOURCE: where root lacks it (a container, a locked-down
    node) every `podman run` fails with "error setting rlimits". podman holds its own
    process limit at kernel.pid_max (seen with podman 4.3), so that caps nproc too."""
    import resource
    flags = []
    for name, which in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC)):
        hard = resource.getrlimit(which)[1]
        if which == resource.RLIMIT_NPROC:
            try:
                pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
                hard = pid_max if hard == resource.RLIM_INFINITY else min(hard, pid_max)
            except (OSError, ValueError):
                pass
        value = -1 if hard == resource.RLIM_INFINITY else hard
        flags += ["--ulimit", f"{name}={value}:{value}"]
    return flags


def show(cmd: list[str], env: dict[str, str] | None = None) -> str:
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    return (prefix + " " if prefix else "") + " ".join(shlex.quote(c) for c in cmd)


def _output(cmd: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                              env={**os.environ, **(env or {})})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(cmd, 127, "", str(exc))


def _candidates(name: str) -> list[str]:
    """Every `name` executable on PATH, first first, without duplicates."""
    seen, found = set(), []
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        path = os.path.join(folder, name)
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            real = os.path.realpath(path)
            if real not in seen:
                seen.add(real)
                found.append(path)
    return found


def engine_kind(kind: str) -> EngineKind:
    """An --engine value, checked."""
    if kind == "docker":
        return "docker"
    if kind == "podman":
        return "podman"
    raise EngineError(f"unknown engine {kind!r}; choose docker or podman")


def detect(kind: str = "docker", client: str | None = None, need_server: bool = True) -> Engine:
    """Pick a client that builds with BuildKit. `client` pins one executable; otherwise
    every matching executable on PATH is tried in order."""
    kind = engine_kind(kind)
    if client:
        resolved = shutil.which(client)
        if not resolved:
            raise EngineError(f"container client {client!r} not found")
        candidates = [resolved]
    else:
        candidates = _candidates(kind)
    if not candidates:
        raise EngineError(f"no `{kind}` client on PATH; install one (Debian: apt-get install docker.io) "
                          f"or pass --docker PATH")
    reasons = []
    for cand in candidates:
        engine, why = _probe(kind, cand)
        if engine is None:
            reasons.append(f"{cand}: {why}")
            continue
        engine = replace(engine, skipped=tuple(reasons))
        if need_server:
            # podman has no daemon: its `info` answers when its storage and runtime work.
            field = "{{.Version.Version}}" if kind == "podman" else "{{.ServerVersion}}"
            info = _output([cand, "info", "--format", field])
            if info.returncode != 0 or not info.stdout.strip():
                raise EngineError(f"{cand} cannot reach its engine: {(info.stderr or info.stdout).strip()[:300]}\n"
                                  f"Start it (e.g. `dockerd &`, or scripts/bootstrap.sh) and try again.")
        return engine
    raise EngineError("no BuildKit-capable container client found (the legacy builder is never used):\n  "
                      + "\n  ".join(reasons)
                      + "\nInstall the buildx plugin, or point --docker at a client that has BuildKit built in "
                        "(docker 18.09-22.x with DOCKER_BUILDKIT=1).")


def for_task(kind: str = "docker", client: str | None = None, dry: bool = False) -> Engine:
    """The engine a task runs with. A dry run only shows commands, so it does without a
    running engine (and without any usable client: it then shows the buildx form)."""
    if not dry:
        return detect(kind, client)
    kind = engine_kind(kind)
    try:
        return detect(kind, client, need_server=False)
    except EngineError as exc:
        console.note(f"# no usable client here ({str(exc).splitlines()[0]}); showing the buildx form")
        return Engine(kind, client or kind, "buildx" if kind == "docker" else "podman", "?")


def _probe(kind: str, client: str) -> tuple[Engine | None, str]:
    if kind == "podman":
        out = _output([client, "version", "--format", "{{.Client.Version}}"])
        if out.returncode != 0:
            return None, out.stderr.strip()[:200]
        return Engine("podman", client, "podman", out.stdout.strip()), ""
    version = _output([client, "version", "--format", "{{.Client.Version}}"])
    ver = version.stdout.strip()
    if not ver:
        # Client answers even when the server is down, but older ones exit non-zero.
        ver = _output([client, "--version"]).stdout.split("version")[-1].split(",")[0].strip()
    if not ver:
        return None, "does not answer `version`"
    if _output([client, "buildx", "version"]).returncode == 0:
        return Engine("docker", client, "buildx", ver), ""
    try:
        major = int(ver.split(".")[0])
    except ValueError:
        return None, f"unreadable version {ver!r}"
    if major < 23:
        # Clients before 23.0 carry BuildKit themselves; from 23.0 `build` needs buildx.
        return Engine("docker", client, "classic-buildkit", ver), ""
    return None, f"version {ver} has no buildx plugin, and without it `build` would use the legacy builder"


def run(cmd: list[str], env: dict[str, str] | None = None, log: Path | None = None,
        cwd: Path | None = None, inherit: bool = True, show_line: Callable[[str], str | None] | None = None) -> int:
    """Run a command, streaming its output (and into `log` when given). Returns its exit
    code; raises `Interrupted` when it ended because of Ctrl-C, whichever process the
    signal reached first (see interrupts). `env` adds to this process's environment, or
    with `inherit=False` is the whole of it. `show_line`: what to print for each line
    (None: nothing; the log still gets every line)."""
    full_env = {**os.environ, **(env or {})} if inherit else dict(env or {})
    console.command(show(cmd, env) + (f"   # log: {log}" if log else ""))
    tail: deque[str] = deque(maxlen=50)     # the last lines: a cancelled build says so there
    fh = None
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        fh = open(log, "w", buffering=1)     # line by line: `tail -f` shows progress
        fh.write("$ " + show(cmd, env) + "\n")
        fh.flush()
    try:
        proc = subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE if fh else None,
                                stderr=subprocess.STDOUT if fh else None, text=True, bufsize=1, cwd=cwd)
        try:
            with interrupts.watching(proc) as watch:
                for line in (proc.stdout if fh and proc.stdout else ()):
                    assert fh is not None
                    fh.write(line)
                    shown = show_line(line) if show_line else line
                    if shown is not None:
                        console.stream(shown)
                    tail.append(line)
                code = proc.wait()
        except KeyboardInterrupt:
            # Python's own handler (no task installed ours): stop the client, pass it on.
            with interrupts.deferred():
                proc.terminate()
                proc.wait()
            raise
    finally:
        if fh:
            fh.close()
    if watch.interrupted(code, "".join(tail)):
        interrupts.stop()
    return code
