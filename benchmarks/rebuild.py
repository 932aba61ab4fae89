"""No-op rebuilds and identical bits: real builds on the local engine, printed and written
to docs/results.md. Figures, not assertions.

    python benchmarks/rebuild.py      # after scripts/bootstrap.sh; about 20 min on 2 cores

The 2.1.0 linux/arm64 image (Debian 12, Python 3.11, the CANN TEST DOUBLE, real torch and
torch_npu wheels from PyPI, locked), through `invoke build` as a user runs it:
  - a first build, then the same command again: the second finds the tested image with
    the same content tag and reuses it (no build, no tests): its wall time;
  - two builds of the same cell with the layer cache off (`--no-cache`), into two
    repositories: their layer digests side by side, with the step that made each layer,
    and whether the image IDs agree. Where they differ, the line says why (what the engine
    writes itself and cannot be told a time for)."""
from __future__ import annotations

import json
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
from ascend_build.images.baseimage import debian_base  # noqa: E402
from ascend_build.images.packages import pin  # noqa: E402
from ascend_build.matrix import load_matrix  # noqa: E402
from ascend_build.platforms import PLATFORMS, host  # noqa: E402
from benchmarks.results import write_section  # noqa: E402
from tests.doubles.cann_double import make_run  # noqa: E402

BASE = "ascend-build-bench/debian:bookworm-{arch}"
REPOS = ("ascend-build-bench/rebuild-a", "ascend-build-bench/rebuild-b")
CA = Path("/etc/ssl/certs/ca-certificates.crt")


def invoke(work: Path, repo: str, *more: str) -> tuple[float, subprocess.CompletedProcess]:
    cmd = [sys.executable, "-m", "invoke", "build", "--torch", "2.1.0", "--os", "debian12", "--python", "3.11",
           "--platform", "linux/arm64", "--packages", str(work / "packages"), "--offline", "--require-pins",
           "--base-image", f"debian:bookworm={BASE}", "--matrix", str(work / "matrix.yaml"), "--repository", repo,
           *(["--ca-bundle", str(CA)] if CA.exists() else []), *more]
    start = time.monotonic()
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "ASCEND_BUILD_CACHE": str(work / "cache")})
    if out.returncode != 0:
        raise SystemExit(f"build failed ({' '.join(more) or 'plain'}):\n{out.stdout[-3000:]}{out.stderr[-2000:]}")
    return time.monotonic() - start, out


def inspect(engine, ref: str) -> dict:
    out = subprocess.run(engine.command("image", "inspect", ref), capture_output=True, text=True)
    return json.loads(out.stdout)[0]


def steps(engine, ref: str) -> list[str]:
    """The step that made each layer, oldest first (history entries that add no layer are
    skipped)."""
    out = subprocess.run(engine.command("image", "history", "--no-trunc", "--format", "{{.Size}}\t{{.CreatedBy}}",
                                        ref), capture_output=True, text=True)
    rows = [line.split("\t", 1) for line in out.stdout.splitlines()][::-1]
    made = [(by or "").strip() for size, by in rows if size not in ("0B", "0")]
    return [" ".join(s.split())[:70] for s in made]


def why(step: str) -> str:
    if "ascend-build-files.tar" in step:
        return "the project's files (manifest, locks, SBOM): fixed times, sorted, one owner"
    if step.startswith("COPY") or "COPY" in step[:20]:
        return "a COPY of a stage's files: their times are the build's"
    if "RUN" in step or "/bin/sh" in step or "|" in step[:6]:
        return "a RUN step: the files it writes carry the time they were written (BuildKit 0.8 in this engine " \
               "cannot clamp them to SOURCE_DATE_EPOCH)"
    return "from the base image"


def main() -> None:
    engine = eng.detect("docker")
    work = Path(tempfile.mkdtemp(prefix="ascend-build-rebuild-"))
    pk = work / "packages"
    make_run(pk, "toolkit", "8.0.RC3", "aarch64")
    make_run(pk, "kernels", "8.0.RC3", "aarch64", chip="910b")
    shutil.copy(ROOT / "matrix.yaml", work / "matrix.yaml")
    (work / "locks").symlink_to(ROOT / "locks", target_is_directory=True)
    pin(load_matrix(work / "matrix.yaml"), sorted(pk.glob("*.run")))
    here = host()
    for platform in {"linux/arm64", here.docker if here else "linux/arm64"}:
        ref = BASE.format(arch=PLATFORMS[platform].suffix)
        if subprocess.run(engine.command("image", "inspect", ref), capture_output=True).returncode != 0:
            debian_base(engine, "bookworm", platform, ref)
    for repo in REPOS:        # this run's builds are built, not taken from an earlier run
        listed = subprocess.run(engine.command("images", "--format", "{{.Repository}}:{{.Tag}}", repo),
                                capture_output=True, text=True).stdout.split()
        if listed:
            subprocess.run(engine.command("rmi", *listed), capture_output=True)

    first, _ = invoke(work, REPOS[0])
    again, out = invoke(work, REPOS[0])
    reused = "reused" in out.stdout
    print(f"first build {first:.0f} s; the same command again {again:.1f} s ({'reused' if reused else 'REBUILT'})")

    runs = []
    for repo in REPOS:
        seconds, out = invoke(work, repo, "--no-cache")
        tag = next(line.strip() for line in out.stdout.splitlines() if line.strip().startswith(f"{repo}:sha-"))
        runs.append((seconds, tag))
    a, b = (inspect(engine, tag) for _, tag in runs)
    layers_a, layers_b = a["RootFS"]["Layers"], b["RootFS"]["Layers"]
    made = steps(engine, runs[0][1])
    made = [""] * (len(layers_a) - len(made)) + made
    rows, same = [], 0
    for i, (da, db) in enumerate(zip(layers_a, layers_b)):
        equal = da == db
        same += equal
        rows.append(f"| {i} | `{da[7:19]}` | `{db[7:19]}` | {'same' if equal else 'differs'} | "
                    f"{made[i] or 'base'} | {'' if equal else why(made[i])} |")
    print("\n".join(rows))
    ids = "the same" if a["Id"] == b["Id"] else "different"
    summary = (f"2.1.0 arm64 image, Debian 12, Python 3.11, CANN test double, locked; {os.cpu_count()} cores, "
               f"{engine.describe()}, measured {time.strftime('%Y-%m-%d')}.\n\n"
               f"- first build: {first:.0f} s; the same `invoke build` again: {again:.1f} s "
               f"({'the tested image reused, no build and no tests' if reused else 'REBUILT'})\n"
               f"- two `--no-cache` builds ({runs[0][0]:.0f} s, {runs[1][0]:.0f} s): {same} of {len(layers_a)} layers "
               f"identical, image IDs {ids}\n\n"
               "| layer | build A | build B | | made by | why it differs |\n|---|---|---|---|---|---|\n"
               + "\n".join(rows) + "\n")
    write_section("rebuild.py", "## No-op rebuilds and identical bits\n\n" + summary)
    print(summary)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
