"""Companions and user layers: their sizes, and the time to rebuild a user layer after a
torch_npu bump. Real builds on the local engine, printed and written to
docs/results.md; figures, not assertions.

    python benchmarks/user_layer.py      # after scripts/bootstrap.sh; about 10 min on 2 cores

linux/arm64 images (qemu on an x86_64 machine), Debian 12 + Python 3.11, the CANN TEST
DOUBLE (tests/doubles, unpadded), real wheels from PyPI, locked:
  - the companion: bytes torchvision and pillow (what it brings) occupy in the 2.1.0 image;
  - a user layer (einops and tabulate, two small real packages): its layer bytes, and the
    wall time of its build + test + tag on the tested runtime;
  - a torch_npu bump of stack 2.1.0 in a copy of the matrix (2.1.0.post8 -> 2.1.0.post10,
    which Huawei pairs with CANN 8.0.0): `invoke lock` for it, the runtime rebuilt, then
    the same user layer rebuilt on it: its wall time, and what the build said of its lock.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ascend_build import engine as eng  # noqa: E402
from ascend_build.inputs.baseimage import debian_base  # noqa: E402
from ascend_build.inputs.packages import pin  # noqa: E402
from ascend_build.matrix import load_matrix  # noqa: E402
from ascend_build.platforms import PLATFORMS, host  # noqa: E402
from benchmarks.results import report  # noqa: E402
from tests.doubles.cann_double import make_run  # noqa: E402

BASE = "ascend-build-bench/debian:bookworm-{arch}"
REPO = "ascend-build-bench/user-layer"
CA = Path("/etc/ssl/certs/ca-certificates.crt")
CELL = dict(os="debian12", python="3.11", chip=None, platform="linux/arm64")


def sh(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True)


def image_bytes(engine, ref: str) -> int:
    return int(sh(*engine.command("image", "inspect", "--format", "{{.Size}}", ref)).stdout.strip())


def installed_bytes(engine, ref: str, *packages: str) -> int:
    """Bytes the packages' files (their RECORD) occupy in the image's venv."""
    code = ("import importlib.metadata as m, os, sys; print(sum(os.path.getsize(p.locate()) for n in sys.argv[1:] "
            "for p in (m.distribution(n).files or []) if os.path.isfile(p.locate())))")
    out = sh(*engine.command("run", "--rm", "--platform", "linux/arm64", "--entrypoint", "/opt/venv/bin/python", ref,
                             "-c", code, *packages))
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    return int(out.stdout.strip())


def timed_build(repo: Path, args: list[str], said: list[str]) -> tuple[float, float, str]:
    """`invoke build ... --requirements` in the repository copy, as a user runs it:
    (seconds to the layer's build, seconds of the layer: build, both suites, tag; output).
    The layer's lock messages go to `said`."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "invoke", "build", *args], cwd=repo, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines, layer_at = [], None
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if layer_at is None and line.startswith("building user layer"):
            layer_at = time.monotonic()
        if line.startswith(("user layer", "  ~", "  the ", "  +", "  -")):
            said.append(line.rstrip().replace(str(repo.parent), "<work>"))     # no path of this machine
    if proc.wait() != 0 or layer_at is None:
        raise SystemExit("".join(lines[-80:]))
    return layer_at - start, time.monotonic() - layer_at, "".join(lines)


def main() -> None:
    if host() is None or not PLATFORMS["linux/arm64"].emulated():
        raise SystemExit("run this on an x86_64 machine: it measures arm64 builds under qemu")
    engine = eng.detect("docker")
    work = Path(tempfile.mkdtemp(prefix="ascend-bench-layer-"))
    server = sh(*engine.command("version", "--format", "{{.Server.Version}}")).stdout.strip()
    print(f"engine {engine.client} ({engine.mode}), server {server}, {os.cpu_count()} cores; work {work}", flush=True)
    # A copy of the repository: the bump edits its matrix.yaml, renders its images/ and
    # relocks its locks/, as a user would in a checkout.
    repo = work / "repo"
    for name in subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.splitlines():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, repo / name)
    pk = work / "packages"
    for version in ("8.0.RC3", "8.0.0"):
        make_run(pk, "toolkit", version, "aarch64")
        make_run(pk, "kernels", version, "aarch64", chip="910b")
    mpath = repo / "matrix.yaml"
    pin(load_matrix(mpath), sorted(pk.glob("*.run")))
    for platform in {"linux/arm64", host().docker}:
        ref = BASE.format(arch=PLATFORMS[platform].suffix)
        if sh(*engine.command("image", "inspect", ref)).returncode != 0:
            debian_base(engine, "bookworm", platform, ref)
    reqs = work / "team.txt"
    reqs.write_text("einops==0.8.1\ntabulate==0.9.0\n")
    args = ["--torch", "2.1.0", "--os", "debian12", "--python", "3.11", "--platform", "linux/arm64",
            "--packages", str(pk), "--offline", "--require-pins", "--base-image", f"debian:bookworm={BASE}",
            "--repository", REPO, "--requirements", str(reqs)]
    if CA.exists():
        args += ["--ca-bundle", str(CA)]
    said: list[str] = []

    runtime_s, layer_s, _ = timed_build(repo, args, said)
    name = load_matrix(mpath).cell("2.1.0", **CELL).name
    runtime_ref, layer_ref = f"{REPO}:{name}-arm64", f"{REPO}:{name}-team-arm64"
    companion = installed_bytes(engine, runtime_ref, "torchvision", "pillow")
    total = image_bytes(engine, runtime_ref)
    layer = image_bytes(engine, layer_ref) - total
    user_pkgs = installed_bytes(engine, layer_ref, "einops", "tabulate")

    # The torch_npu bump, as a user makes it: edit the stack, render, relock, build again.
    text = mpath.read_text()
    head, rest = text.split('\n  "2.1.0":\n', 1)
    rest = rest.replace("torch_npu: 2.1.0.post8", "torch_npu: 2.1.0.post10", 1).replace("cann: 8.0.RC3", "cann: 8.0.0", 1)
    mpath.write_text(head + '\n  "2.1.0":\n' + rest)
    started = time.monotonic()
    for task in (["render"], ["lock", "--torch", "2.1.0", "--python", "3.11"]):
        out = subprocess.run([sys.executable, "-m", "invoke", *task], cwd=repo, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(out.stdout + out.stderr)
        print(out.stdout)
    lock_s = time.monotonic() - started
    said.append("-- after the torch_npu bump --")
    bump_runtime_s, bump_layer_s, _ = timed_build(repo, args, said)

    rows = [
        ("companion torchvision 0.16.0 (+ pillow) in the 2.1.0 image: installed bytes",
         f"{companion / 1e6:.1f} MB of {total / 1e6:.0f} MB ({100 * companion / total:.1f} %)", "-"),
        ("user layer (einops, tabulate): layer bytes / installed bytes",
         f"{layer / 1e6:.2f} MB / {user_pkgs / 1e6:.2f} MB", "-"),
        ("user layer on the tested runtime: build + both suites + tag, wall",
         f"{layer_s:.0f} s (the runtime before it: {runtime_s:.0f} s)", "-"),
        ("torch_npu bump (2.1.0.post8 -> post10, CANN 8.0.0): `invoke render` + `invoke lock` of the stack, wall",
         f"{lock_s:.0f} s", "-"),
        ("  the runtime rebuilt and tested, wall", f"{bump_runtime_s:.0f} s", "-"),
        ("  the user layer rebuilt on it (lock checked, build, both suites, tag), wall", f"{bump_layer_s:.0f} s", "-"),
    ]
    report("user_layer.py", "Companions and user layers", f"engine {server} ({engine.mode}), linux/arm64 under qemu",
           rows, "What the builds said of the layer's lock:\n\n```\n" + "\n".join(said) + "\n```\n\n"
           "Produced by `python benchmarks/user_layer.py`; CANN is the test double. The first runtime takes "
           "whatever the engine's cache holds (a tested image with the same inputs is taken as it is).")


if __name__ == "__main__":
    main()
