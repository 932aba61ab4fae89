"""No-op rebuilds and identical bits: real builds on the local engines, printed and written
to docs/results.md. Figures, not assertions.

    python benchmarks/rebuild.py              # after scripts/bootstrap.sh; about 35 min on 2 cores
    python benchmarks/rebuild.py --skip-cold  # without the cold build and the no-op rebuild

The 2.1.0 linux/arm64 image (Debian 12, Python 3.11, the CANN TEST DOUBLE, real torch and
torch_npu wheels from PyPI, locked), through `invoke build` as a user runs it:
  - docker: a truly cold first build (this engine's build cache emptied first, `docker
    builder prune -af`: every layer and cache mount, not only the tags; the base images
    stay, they are inputs), then the same command again, which finds the tested image with
    the same content tag (no build, no tests): both wall times;
  - on each engine (podman, then docker), two `--reproducible --no-cache` builds into the
    same repository (the SBOM names it; the first kept under a second name): each layer's
    digest side by side with the step that made it, and the image IDs. Where a layer
    differs, why comes from holding the two layers' files side by side (imagediff.py):
    which files, and whether in content, time, mode or presence;
  - the first build pushed to a local registry, then the second: the bytes the engine sent
    to the registry for the second push (a counting relay between the two)."""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ascend_build import engine as eng  # noqa: E402
from ascend_build.images.finish import epoch  # noqa: E402
from ascend_build.images.steps import layers_of  # noqa: E402
from ascend_build.inputs.baseimage import debian_base  # noqa: E402
from ascend_build.inputs.packages import pin  # noqa: E402
from ascend_build.matrix import load_matrix  # noqa: E402
from ascend_build.platforms import PLATFORMS, host  # noqa: E402
from ascend_build.provenance import imagediff  # noqa: E402
from benchmarks.results import write_section  # noqa: E402
from tests.doubles.cann_double import make_run  # noqa: E402
from tests.relay import Relay  # noqa: E402

BASE = "ascend-build-bench/debian:bookworm-{arch}"
REPO = "ascend-build-bench/rebuild"
KEPT = "ascend-build-bench/rebuild-first"     # the first --no-cache build, kept while the second is made
CA = Path("/etc/ssl/certs/ca-certificates.crt")


def invoke(work: Path, engine: str, *more: str) -> tuple[float, subprocess.CompletedProcess]:
    cmd = [sys.executable, "-m", "invoke", "build", "--engine", engine, "--torch", "2.1.0", "--os", "debian12",
           "--python", "3.11", "--platform", "linux/arm64", "--packages", str(work / "packages"), "--offline",
           "--require-pins", "--base-image", f"debian:bookworm={BASE}", "--matrix", str(work / "matrix.yaml"),
           "--repository", REPO, *(["--ca-bundle", str(CA)] if CA.exists() else []), *more]
    start = time.monotonic()
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "ASCEND_BUILD_CACHE": str(work / "cache")})
    if out.returncode != 0:
        raise SystemExit(f"build failed ({engine} {' '.join(more) or 'plain'}):\n{out.stdout[-3000:]}"
                         f"{out.stderr[-2000:]}")
    return time.monotonic() - start, out


def tagged(out: subprocess.CompletedProcess) -> str:
    return next(line.strip() for line in out.stdout.splitlines() if line.strip().startswith(f"{REPO}:sha-"))


def forget(engine: eng.Engine) -> None:
    """This benchmark's images out of the engine's store."""
    for repo in (REPO, KEPT):
        listed = subprocess.run(engine.command("images", "--format", "{{.Repository}}:{{.Tag}}", repo),
                                capture_output=True, text=True).stdout.split()
        if listed:
            subprocess.run(engine.command("rmi", "--force", *listed), capture_output=True)


def registry(work: Path) -> tuple[subprocess.Popen, int]:
    exe = shutil.which("docker-registry")
    if exe is None:
        raise SystemExit("docker-registry is not installed (scripts/bootstrap.sh installs it)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = work / "registry.yml"
    config.write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {work / 'registry'}\n"
                      f"http:\n  addr: 127.0.0.1:{port}\n")
    proc = subprocess.Popen([exe, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2)
            return proc, port
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the local registry did not start")


def push(engine: eng.Engine, ref: str, relay: Relay, name: str) -> int:
    """Bytes the engine sent to the registry to push `ref` as `name`."""
    remote = f"127.0.0.1:{relay.port}/rebuild:{name}"
    subprocess.run(engine.command("tag", ref, remote), check=True)
    before = relay.sent
    flags = ["--tls-verify=false"] if engine.kind == "podman" else []
    out = subprocess.run(engine.command("push", *flags, remote), capture_output=True, text=True)
    subprocess.run(engine.command("rmi", remote), capture_output=True)
    if out.returncode != 0:
        raise SystemExit(f"push of {ref} failed: {out.stderr[-2000:]}")
    time.sleep(0.5)
    return relay.sent - before


def pair(work: Path, engine: eng.Engine, relay: Relay) -> tuple[str, list[str]]:
    """Two --reproducible --no-cache builds on `engine`: the summary line and the table."""
    forget(engine)
    runs = []
    for n in (1, 2):
        seconds, out = invoke(work, engine.kind, "--reproducible", "--no-cache")
        tag = tagged(out)
        if n == 1:
            kept = f"{KEPT}:{tag.split(':', 1)[1]}"
            subprocess.run(engine.command("tag", tag, kept), check=True)
            first_push = push(engine, kept, relay, f"{engine.kind}-first")
            tag = kept
        runs.append((seconds, tag))
    again = push(engine, runs[1][1], relay, f"{engine.kind}-second")
    common = frozenset(layers_of(engine, runs[0][1])) & frozenset(layers_of(engine, runs[1][1]))
    a, b = (imagediff.load(engine, tag, skip=common) for _, tag in runs)
    diffs = imagediff.compare(a, b)
    rows = [f"| {d.index} | `{(d.a or '-')[7:19]}` | `{(d.b or '-')[7:19]}` | {'same' if d.same else 'differs'} | "
            f"{(d.step or 'base')[:70].replace('|', '/')} | {d.why(3).replace('|', '/')} |" for d in diffs]
    same = sum(d.same for d in diffs)
    ids = f"the same, `{a.id[:19]}`" if a.id == b.id else f"`{a.id[:19]}` and `{b.id[:19]}`, different"
    config = imagediff.config_differences(a, b)
    line = (f"- {engine.describe()}: two `--reproducible --no-cache` builds ({runs[0][0]:.0f} s, {runs[1][0]:.0f} s): "
            f"{same} of {len(diffs)} layers identical, image IDs {ids}"
            + (f" (config fields that differ: {', '.join(config)})" if config else "")
            + f"; pushed to a local registry: the first {first_push:,} bytes, the second {again:,} bytes")
    print(line + "\n" + "\n".join(rows), flush=True)
    return line, rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-cold", action="store_true", help="no cold build and no-op rebuild")
    args = parser.parse_args()
    # One build time for every build of this run: the checkout's last commit when it starts.
    os.environ.setdefault("SOURCE_DATE_EPOCH", str(epoch()))
    docker, podman = eng.detect("docker"), eng.detect("podman")
    work = Path(tempfile.mkdtemp(prefix="ascend-build-rebuild-"))
    pk = work / "packages"
    make_run(pk, "toolkit", "8.0.RC3", "aarch64")
    make_run(pk, "kernels", "8.0.RC3", "aarch64", chip="910b")
    shutil.copy(ROOT / "matrix.yaml", work / "matrix.yaml")
    shutil.copy(ROOT / "imported.yaml", work / "imported.yaml")
    (work / "locks").symlink_to(ROOT / "locks", target_is_directory=True)
    pin(load_matrix(work / "matrix.yaml"), sorted(pk.glob("*.run")))
    here = host()
    for platform in {"linux/arm64", here.docker if here else "linux/arm64"}:
        ref = BASE.format(arch=PLATFORMS[platform].suffix)
        if subprocess.run(docker.command("image", "inspect", ref), capture_output=True).returncode != 0:
            debian_base(docker, "bookworm", platform, ref)
        if subprocess.run(podman.command("image", "inspect", ref), capture_output=True).returncode != 0:
            saved = subprocess.Popen(docker.command("save", ref), stdout=subprocess.PIPE)
            subprocess.run(podman.command("load"), stdin=saved.stdout, capture_output=True, check=True)
            saved.wait()
    proc, port = registry(work)
    relay = Relay(port)
    lines = [f"2.1.0 arm64 image, Debian 12, Python 3.11, CANN test double, locked; {os.cpu_count()} cores, "
             f"measured {time.strftime('%Y-%m-%d')}.", ""]
    try:
        if not args.skip_cold:
            forget(docker)
            subprocess.run(docker.command("builder", "prune", "-af"), capture_output=True, check=True)
            first, _ = invoke(work, "docker")
            again, out = invoke(work, "docker")
            reused = "reused" in out.stdout
            lines.append(f"- docker, cold (build cache emptied: `docker builder prune -af`): first build {first:.0f} s; "
                         f"the same `invoke build` again: {again:.1f} s "
                         f"({'the tested image reused, no build and no tests' if reused else 'REBUILT'})")
            print(lines[-1], flush=True)
        tables = []
        for engine in (podman, docker):
            line, rows = pair(work, engine, relay)
            lines.append(line)
            tables.append((engine, rows))
    finally:
        proc.terminate()
    body = "\n".join(lines) + "\n"
    for engine, rows in tables:
        body += (f"\n{engine.describe()}:\n\n| layer | build A | build B | | made by | what differs |\n"
                 "|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")
    write_section("rebuild.py", "## No-op rebuilds and identical bits\n\n" + body)
    print(body)
    for engine in (docker, podman):
        forget(engine)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
