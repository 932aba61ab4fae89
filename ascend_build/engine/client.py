"""Which engine a task runs with: the client on PATH (or the one named) that builds with
BuildKit (docker's buildx, or a classic client before 23.0 with DOCKER_BUILDKIT=1) or
podman. Never the legacy builder: it has no RUN --mount and no secrets, which the images
depend on. Detected once per task, in the command-line layer (cli/), and handed down as
an `Engine` (engine.py)."""
from __future__ import annotations

import os
import shutil

from .. import console
from ..errors import EngineError, UserError
from .engine import Engine, EngineKind
from .runner import output as _output


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
    raise UserError(f"--engine {kind!r}: choose docker or podman")


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
        engine = Engine(engine.kind, engine.client, engine.mode, engine.version, tuple(reasons))
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
    """The engine a task runs with, looked for at its first use (a task refuses bad input
    before it runs any engine command). A dry run only shows commands, so it does without a
    running engine (and without any usable client: it then shows the buildx form)."""
    kind = engine_kind(kind)
    if not dry:
        return Engine.found_later(kind, lambda: detect(kind, client))
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
