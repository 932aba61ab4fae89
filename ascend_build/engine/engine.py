"""The one room that knows the container engines' command lines: docker (with buildx, or
a classic client whose built-in BuildKit DOCKER_BUILDKIT=1 turns on) and podman. Everything
above it asks an `Engine` for an operation (build, inspect, tag, remove, pull, push, save,
load, run a container, join a manifest list) and gets typed answers; no other module of
the package assembles a docker or podman command (tests/unit/test_layering.py holds that).
Modelled on cibuildwheel's OCIContainer: one class holds all of an engine's knowledge, and
a test double (tests/doubles/engine_double.py) answers the same operations from memory."""
from __future__ import annotations

import json
import platform as py_platform
import re
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Literal

from .. import console
from ..errors import EngineError, UserError
from ..platforms import get as platform_of
from ..platforms import host
from . import emulation
from .runner import run, show

EngineKind = Literal["docker", "podman"]
# How `build` runs: docker's buildx plugin, the BuildKit in docker clients before 23.0, or podman's buildah.
BuildMode = Literal["buildx", "classic-buildkit", "podman"]

# An image reference as the distribution spec writes it (name[:tag][@digest]): lower-case
# path components, an optional registry host with a port. A value that begins with "-"
# would be read as an option, so it never reaches a command line. The one grammar: every
# reference the project takes (options, matrix.yaml's images, a job's image) is held to it,
# whole (fullmatch: a "$" would let a trailing line break through).
REFERENCE = re.compile(r"(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
                       r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
                       r"(?:@sha256:[0-9a-f]{64})?")
_ID = re.compile(r"(?:sha256:)?[0-9a-f]{12,64}")


def check_ref(ref: str, what: str = "image") -> str:
    """An image reference or id, or a UserError naming it (never an option-looking word)."""
    if not isinstance(ref, str) or not ref or len(ref) > 512 or not (_ID.fullmatch(ref) or REFERENCE.fullmatch(ref)):
        shown = repr(ref[:120]) + ("..." if isinstance(ref, str) and len(ref) > 120 else "")
        raise UserError(f"{what} {shown} is not an image reference (NAME[:TAG][@sha256:DIGEST], e.g. "
                        f"registry.example.com/ascend/runtime:torch2.1.0)")
    return ref


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
class Mount:
    source: str
    target: str
    read_only: bool = True


@dataclass(frozen=True)
class RunSpec:
    """One container: what `run` gets, as data (the engine writes the flags)."""
    image: str
    command: tuple[str, ...] = ()
    platform: str | None = None
    entrypoint: str | None = None
    network: str | None = None             # none, host, or a network's name
    devices: tuple[str, ...] = ()
    mounts: tuple[Mount, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    runtime: str | None = None             # e.g. ascend (the Ascend Docker Runtime)
    shm_size: str | None = None
    ipc: str | None = None
    ulimits: tuple[tuple[str, str], ...] = ()
    cpuset: str | None = None
    user: str | None = None
    workdir: str | None = None
    interactive: bool = False
    remove: bool = True
    detach: bool = False
    name: str | None = None


# BuildKit's stream to a running step broke (seen once, 2026-11-28, on docker 20.10's built-in
# BuildKit in a cold CI run, at the first RUN of a builder): the engine's
# failure, not the Dockerfile's. Only this line counts; a step's own error never matches it.
ENGINE_DROPPED = re.compile(r"^#\d+ ERROR: rpc error: code = Internal desc = unexpected EOF$", re.M)


def dropped_by_engine(log: Path) -> bool:
    try:
        with open(log, "rb") as fh:
            fh.seek(max(0, log.stat().st_size - 65536))
            tail = fh.read().decode(errors="replace")
    except OSError:
        return False
    return ENGINE_DROPPED.search(tail) is not None


class Engine:
    """One engine: its kind (docker or podman), its client (the executable), how it builds,
    its version and the clients on PATH passed over on the way. A task's engine may be
    found lazily (`Engine.found_later`): the kind is known from the start, the client is
    looked for at its first use, so a task refuses bad input before any engine command."""

    def __init__(self, kind: EngineKind, client: str = "", mode: BuildMode = "buildx", version: str = "?",
                 skipped: tuple[str, ...] = ()):
        self.kind = kind
        self._found: tuple[str, BuildMode, str, tuple[str, ...]] | None = (client, mode, version, skipped)
        self._find: Callable[[], Engine] | None = None

    @classmethod
    def found_later(cls, kind: EngineKind, find: Callable[[], Engine]) -> Engine:
        engine = cls(kind)
        engine._found, engine._find = None, find
        return engine

    def _identity(self) -> tuple[str, BuildMode, str, tuple[str, ...]]:
        if self._found is None:
            assert self._find is not None
            found = self._find()
            self._found = (found.client, found.mode, found.version, found.skipped)
        return self._found

    @property
    def client(self) -> str:
        return self._identity()[0]

    @property
    def mode(self) -> BuildMode:
        return self._identity()[1]

    @property
    def version(self) -> str:
        return self._identity()[2]

    @property
    def skipped(self) -> tuple[str, ...]:
        return self._identity()[3]

    def __repr__(self) -> str:
        found = f"{self.client!r}, {self.mode!r}, {self.version!r}" if self._found else "not looked for yet"
        return f"{type(self).__name__}({self.kind!r}, {found})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Engine) and type(other) is type(self) and \
            (self.kind, self._identity()) == (other.kind, other._identity())

    def __hash__(self) -> int:
        return hash((self.kind, self._identity()))

    # ---------------------------------------------------------------- what it is
    @property
    def testinfra_backend(self) -> str:
        return "podman" if self.kind == "podman" else "docker"

    def describe(self) -> str:
        """One line for the start of a build: which client, which version, which builder."""
        how = {"buildx": "docker buildx", "classic-buildkit": "its built-in BuildKit (DOCKER_BUILDKIT=1)",
               "podman": "podman build"}[self.mode]
        passed = "".join(f"; passed over {s}" for s in self.skipped)
        return f"engine: {self.client} {self.version}, building with {how}{passed}"

    def reproducible(self) -> str | None:
        """None when this engine makes a --reproducible build's layers identical run to run
        by itself; else why it cannot (the project then rewrites the layers' times)."""
        if self.mode in ("podman", "buildx"):
            return None      # --timestamp; rewrite-timestamp (BuildKit >= 0.13)
        return (f"docker {self.version}'s built-in BuildKit cannot rewrite file times (rewrite-timestamp needs "
                "buildx with BuildKit 0.13 or newer): the project writes every layer a RUN or COPY made again "
                "after the build, with the epoch's times (a pass over every byte; `--engine podman` does it "
                "while building)")

    @property
    def retimes_layers(self) -> bool:
        """Does a --reproducible build need its layers' times written again afterwards?"""
        return self.mode == "classic-buildkit"

    def command(self, *args: str) -> list[str]:
        """A raw command line for this client. The package's own modules use the operations
        below; tests use this to look at an engine's store in their own words."""
        if self.kind == "podman" and args and args[0] in ("run", "create"):
            return [self.client, args[0], *_podman_limits(), *args[1:]]
        return [self.client, *args]

    def _run(self, *args: str, timeout: float | None = 300, text: bool = True,
             stdin: IO[bytes] | None = None) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(self.command(*args), capture_output=True, text=text, timeout=timeout, stdin=stdin)
        except subprocess.TimeoutExpired as exc:
            return subprocess.CompletedProcess(exc.cmd, 124, "", f"{self.client} {args[0]}: no answer in {timeout} s")
        except OSError as exc:
            return subprocess.CompletedProcess(self.command(*args), 127, "", str(exc))

    # ---------------------------------------------------------------- building
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
            cmd += ["-t", check_ref(tag, "tag")]
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

    def cache_ref(self, registry: str | None, name: str) -> str | None:
        """Where layer cache lives: with buildx a separate cache tag; with a classic client
        the pushed image itself (inline cache), so the same tag `invoke push` writes."""
        if not registry:
            return None
        return f"{registry}:{name}" if self.mode == "classic-buildkit" else f"{registry}:buildcache-{name}"

    def build(self, req: BuildRequest, log: Path | None = None,
              show_line: Callable[[str], str | None] | None = None) -> int:
        """Run the build, its output streamed (and into `log`); its exit code. Ctrl-C:
        `Interrupted` (engine/interrupts.py), whichever process saw it first. A build the
        engine itself dropped (ENGINE_DROPPED in its log) runs once more, from the cache."""
        cmd, env = self.build_command(req)
        code = run(cmd, env, log, show_line=show_line)
        if code != 0 and log is not None and dropped_by_engine(log):
            kept = log.with_name(log.name + ".dropped")
            log.replace(kept)
            console.say(f"the engine dropped the build, not a step of it (BuildKit: \"rpc error: code = Internal desc "
                        f"= unexpected EOF\"; its log: {kept}): building once more, from the cache")
            code = run(cmd, env, log, show_line=show_line)
        return code

    # ---------------------------------------------------------------- the image store
    def image(self, ref: str) -> dict | None:
        """`image inspect` of one image (None: not in the store)."""
        out = self._run("image", "inspect", check_ref(ref), timeout=60)
        if out.returncode != 0:
            return None
        try:
            found = json.loads(out.stdout or "[]")
        except json.JSONDecodeError:
            found = None
        if not isinstance(found, list) or (found and not isinstance(found[0], dict)):
            raise EngineError(f"{self.client} image inspect {ref}: an answer that is not an image's: "
                              f"{out.stdout.strip()[:200]!r}")
        return found[0] if found else None

    def image_id(self, ref: str) -> str | None:
        """The id as the engine says it (docker: sha256:..., podman: the bare digest)."""
        found = self.image(ref)
        return None if found is None else str(found.get("Id", "")) or None

    def exists(self, ref: str) -> bool:
        return self.image(ref) is not None

    def answers(self) -> bool:
        """Whether the engine itself answers (a dry run's client may have none running): only
        then does an image it lacks mean the image is not here."""
        field = "{{.Version.Version}}" if self.kind == "podman" else "{{.ServerVersion}}"
        out = self._run("info", "--format", field, timeout=60)
        return out.returncode == 0 and bool(out.stdout.strip())

    def labels(self, ref: str) -> dict[str, str] | None:
        found = self.image(ref)
        return None if found is None else dict((found.get("Config") or {}).get("Labels") or {})

    def layers(self, ref: str) -> list[str]:
        """The image's layers (diff_ids), oldest first."""
        found = self.image(ref)
        if found is None:
            raise EngineError(f"cannot read the layers of {ref}: no such image in {self.client}'s store")
        return list((found.get("RootFS") or {}).get("Layers") or [])

    def tag_count(self, ref: str) -> int | None:
        found = self.image(ref)
        return None if found is None else len(found.get("RepoTags") or [])

    def tag(self, image: str, tag: str) -> bool:
        """Set one tag (a process group of its own: Ctrl-C does not cut it in half; the
        caller decides when to stop)."""
        cmd = self.command("tag", check_ref(image), check_ref(tag, "tag"))
        return subprocess.run(cmd, capture_output=True, start_new_session=True).returncode == 0

    def tag_argv(self, image: str, tag: str) -> list[str]:
        """What `tag` runs, for a dry run to show (the image may be a placeholder)."""
        return self.command("tag", image, check_ref(tag, "tag"))

    def remove(self, *refs: str, force: bool = False) -> bool:
        """`rmi`: True when every ref went. False when the engine refused one, e.g. an image
        a container uses, running or stopped ("conflict: unable to delete ..."): the
        caller asks `containers_of` who uses it."""
        if not refs:
            return True
        args = ["rmi", *(["--force"] if force else []), *(check_ref(r) for r in refs)]
        return subprocess.run(self.command(*args), capture_output=True, start_new_session=True).returncode == 0

    def containers_of(self, image: str) -> list[str]:
        """The ids of the containers, running or stopped, made from this image (or one built
        on it): what keeps `remove` from removing it."""
        # An id bare: podman compares it with its own ids, which have no "sha256:"; docker takes either.
        ref = image.removeprefix("sha256:") if _ID.fullmatch(check_ref(image)) else image
        out = self._run("ps", "--all", "--no-trunc", "--quiet", "--filter", f"ancestor={ref}", timeout=60)
        return [cid for cid in out.stdout.split() if _ID.fullmatch(cid)] if out.returncode == 0 else []

    def remove_containers(self, *ids: str) -> bool:
        """`rm --force` (a running one too): True when every one went."""
        if not ids:
            return True
        bad = [cid for cid in ids if not _ID.fullmatch(cid)]
        if bad:
            raise UserError(f"{bad[0]!r} is not a container id")
        return self._run("rm", "--force", *ids, timeout=120).returncode == 0

    def images(self, repository: str | None = None) -> list[str]:
        """repository:tag of every tagged image (of one repository)."""
        out = self._run("images", "--format", "{{.Repository}}:{{.Tag}}", *([check_ref(repository)] if repository else []))
        return [ref.removeprefix("localhost/") for ref in out.stdout.split() if not ref.endswith(":<none>")]

    def pull(self, ref: str, platform: str) -> str | None:
        """None when pulled, else the engine's last word on why not."""
        out = self._run("pull", "--platform", platform, check_ref(ref), timeout=3600)
        if out.returncode == 0:
            return None
        return ((out.stderr or out.stdout).strip().splitlines()[-1:] or ["no answer"])[0]

    @contextmanager
    def save(self, ref: str) -> Iterator[IO[bytes]]:
        """The image as the engine's archive (docker's `save` format), streamed."""
        proc = subprocess.Popen(self.command("save", check_ref(ref)), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None
        try:
            yield proc.stdout
        finally:
            proc.stdout.close()
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            if proc.wait() != 0:
                raise UserError(f"`{self.client} save {ref}` failed: {err.strip()[:300]}")

    def load(self, archive: IO[bytes]) -> None:
        out = self._run("load", timeout=3600, stdin=archive)
        if out.returncode != 0:
            raise EngineError(f"`{self.client} load` failed: {out.stderr.strip()[:400]}")

    # ---------------------------------------------------------------- containers
    def run_argv(self, spec: RunSpec, composed: bool = False) -> list[str]:
        """The `run` command line for `spec`. `composed`: a line for a user to run on their
        host (`invoke run`), which takes the limits the user's engine gives, not the ones
        this project sets for the containers it runs itself (podman's, _podman_limits)."""
        args = ["run"] + (["--rm"] if spec.remove else []) + (["-it"] if spec.interactive else []) \
            + (["-d"] if spec.detach else [])
        args += [f"--name={spec.name}"] if spec.name else []
        args += ["--platform", spec.platform] if spec.platform else []
        if spec.runtime:
            args += ["--runtime", spec.runtime]
        for device in spec.devices:
            args += ["--device", device]
        for mount in spec.mounts:
            args += ["-v", f"{mount.source}:{mount.target}" + (":ro" if mount.read_only else "")]
        args += [f"--shm-size={spec.shm_size}"] if spec.shm_size else []
        args += [f"--ipc={spec.ipc}"] if spec.ipc else []
        args += [f"--network={spec.network}"] if spec.network else []
        for name, limit in spec.ulimits:
            args += ["--ulimit", f"{name}={limit}"]
        args += [f"--cpuset-cpus={spec.cpuset}"] if spec.cpuset else []
        for key, value in spec.env + (() if composed else _emulated_env(spec)):
            args += ["-e", f"{key}={value}"]
        args += [f"--user={spec.user}"] if spec.user else []
        args += [f"--workdir={spec.workdir}"] if spec.workdir else []
        args += [f"--entrypoint={spec.entrypoint}"] if spec.entrypoint is not None else []
        head = [self.client, "run"] if composed else self.command("run")
        return head + args[1:] + [check_ref(spec.image), *spec.command]

    def run_container(self, spec: RunSpec, timeout: float | None = 600,
                      input: str | None = None) -> subprocess.CompletedProcess:
        """Run a container to its end and capture its output. One that outlives `timeout`
        is removed (it runs under a name of its own for that) and answers 124."""
        import uuid
        named = spec if spec.name or spec.detach else _with_name(spec, f"ascend-build-{uuid.uuid4().hex[:12]}")
        cmd = self.run_argv(named)
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input)
        except subprocess.TimeoutExpired:
            self._run("rm", "--force", named.name or "", timeout=120)
            return subprocess.CompletedProcess(cmd, 124, "", f"the container did not end within {timeout:.0f} s "
                                                             f"and was removed")
        except BaseException:
            # Ctrl-C, or an image suite's time limit (tests/limits.py): the client goes, and a
            # container whose process ignores the signal would stay running.
            if not spec.detach:
                self._run("rm", "--force", named.name or "", timeout=120)
            raise

    def runtimes(self) -> frozenset[str]:
        """The container runtimes the engine offers (e.g. `ascend`, the Ascend Docker Runtime).
        The Ascend Docker Runtime is docker's: podman gets the NPUs by device flags."""
        if self.kind == "podman":
            return frozenset()
        out = self._run("info", "--format", "{{range $k, $v := .Runtimes}}{{$k}} {{end}}", timeout=60)
        return frozenset(out.stdout.split()) if out.returncode == 0 else frozenset()

    # ---------------------------------------------------------------- registries
    def _tls(self, registry: str) -> list[str]:
        """Loopback registries speak plain http (docker allows it for 127.0.0.0/8 when told)."""
        if not registry.split("/")[0].startswith(("127.", "localhost")):
            return []
        return ["--tls-verify=false"] if self.kind == "podman" else ["--insecure"]

    def push_argv(self, ref: str, registry: str) -> list[str]:
        return self.command("push", *(self._tls(registry) if self.kind == "podman" else []), check_ref(ref, "tag"))

    def push(self, ref: str, registry: str) -> int:
        """Push one tag, its progress streamed; the exit code."""
        return run(self.push_argv(check_ref(ref), registry))

    def registry_manifest(self, ref: str, registry: str) -> dict | None:
        """The manifest (or manifest list) the registry holds for `ref`, None when it has none.
        podman's `manifest inspect` 4.x reads local lists only: skopeo reads the registry."""
        if self.kind == "podman":
            tls = ["--tls-verify=false"] if self._tls(registry) else []
            try:
                out = subprocess.run(["skopeo", "inspect", "--raw", *tls, f"docker://{check_ref(ref)}"],
                                     capture_output=True, text=True, timeout=300)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise EngineError(f"skopeo could not read {ref}: {exc}") from None
        else:
            out = self._run("manifest", "inspect", *self._tls(registry), check_ref(ref))
        if out.returncode != 0:
            return None
        return json.loads(out.stdout or "{}")

    def join_argvs(self, target: str, parts: list[str], registry: str) -> list[list[str]]:
        """The commands that write one manifest list of `parts` as `target`."""
        for ref in (target, *parts):
            check_ref(ref, "tag")
        tls = self._tls(registry)
        if self.kind == "podman":
            # A local list, filled from the registry, pushed, then dropped.
            cmds = [self.command("manifest", "create", target)]
            cmds += [self.command("manifest", "add", *tls, target, f"docker://{part}") for part in parts]
            cmds.append(self.command("manifest", "push", "--all", "--rm", *tls, target, f"docker://{target}"))
            return cmds
        return [self.command("manifest", "create", *tls, "--amend", target, *parts),
                self.command("manifest", "push", *tls, "--purge", target)]

    def join(self, target: str, parts: list[str], registry: str) -> None:
        for ref in (target, *parts):
            check_ref(ref)
        if self.kind == "podman":
            self._run("manifest", "rm", target)      # a list left by an earlier run; none is fine
        for cmd in self.join_argvs(target, parts, registry):
            if run(cmd) != 0:
                raise EngineError(f"could not write the manifest list {target} from {', '.join(parts)}")


def _with_name(spec: RunSpec, name: str) -> RunSpec:
    return replace(spec, name=name)


def _emulated_env(spec: RunSpec) -> tuple[tuple[str, str], ...]:
    """A container of a foreign arch runs under qemu-user, which reads its CPU model from each
    process's environment: the builds' faster one (emulation.py), as container env, not image
    config. Debian 13's arm64 binaries ran 3x slower without it (benchmarks/emulation.py)."""
    if not spec.platform or any(key == "QEMU_CPU" for key, _ in spec.env):
        return ()
    return tuple(emulation.build_args(platform_of(spec.platform)).items())


def _build_platform() -> str:
    here = host()
    return here.docker if here else f"linux/{py_platform.machine()}"


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


__all__ = ["BuildMode", "BuildRequest", "Engine", "EngineKind", "Mount", "RunSpec", "check_ref", "show"]
