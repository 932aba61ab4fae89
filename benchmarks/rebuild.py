"""No-op rebuilds and identical bits: real builds on the local engine, printed and written
to docs/results.md. Figures, not assertions.

    python benchmarks/rebuild.py      # after scripts/bootstrap.sh; about 20 min on 2 cores

The 2.1.0 linux/arm64 image (Debian 12, Python 3.11, the CANN TEST DOUBLE, real torch and
torch_npu wheels from PyPI, locked), through `invoke build` as a user runs it:
  - a first build, then the same command again: the second finds the tested image with
    the same content tag and reuses it (no build, no tests): its wall time;
  - two builds of the same cell with the layer cache off (`--no-cache`), into the same
    repository (the first kept under a second name): their layer digests side by side, with
    the step that made each layer (from the image config's history), and whether the image
    IDs agree. Where they differ, the line says why (what the engine writes itself and
    cannot be told a time for)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ascend_build import engine as eng  # noqa: E402
from ascend_build.images.baseimage import debian_base  # noqa: E402
from ascend_build.images.finish import epoch  # noqa: E402
from ascend_build.images.packages import pin  # noqa: E402
from ascend_build.matrix import load_matrix  # noqa: E402
from ascend_build.platforms import PLATFORMS, host  # noqa: E402
from benchmarks.results import write_section  # noqa: E402
from tests.doubles.cann_double import make_run  # noqa: E402

BASE = "ascend-build-bench/debian:bookworm-{arch}"
REPO = "ascend-build-bench/rebuild"
KEPT = "ascend-build-bench/rebuild-first"     # the first --no-cache build, kept while the second is made
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
    """The step that made each layer, oldest first: the image config's history (from
    `save`), whose entries that add no layer say so (`empty_layer`)."""
    proc = subprocess.Popen(engine.command("save", ref), stdout=subprocess.PIPE)
    assert proc.stdout is not None
    manifest, configs = None, {}
    with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
        for member in tar:
            if member.isfile() and member.name.endswith(".json") and "/" not in member.name:
                data = json.load(tar.extractfile(member))       # type: ignore[arg-type]
                if member.name == "manifest.json":
                    manifest = data
                else:
                    configs[member.name] = data
    proc.wait()
    assert manifest is not None, f"no manifest.json in `save {ref}`"
    history = configs[manifest[0]["Config"]]["history"]
    made = [h.get("created_by", "") for h in history if not h.get("empty_layer")]
    return [" ".join(step.split())[:70] for step in made]


EMPTY = "sha256:5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef"   # the empty tar


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
    # One build time for every build of this run (the project's files carry it): the
    # checkout's last commit when the run starts, not whatever is committed while it runs.
    os.environ.setdefault("SOURCE_DATE_EPOCH", str(epoch()))
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
    for repo in (REPO, KEPT):        # this run's builds are built, not taken from an earlier run
        listed = subprocess.run(engine.command("images", "--format", "{{.Repository}}:{{.Tag}}", repo),
                                capture_output=True, text=True).stdout.split()
        if listed:
            subprocess.run(engine.command("rmi", *listed), capture_output=True)

    first, _ = invoke(work, REPO)
    again, out = invoke(work, REPO)
    reused = "reused" in out.stdout
    print(f"first build {first:.0f} s; the same command again {again:.1f} s ({'reused' if reused else 'REBUILT'})")

    # Both into the same repository (the SBOM names it); the first kept under KEPT so that
    # the second build's tags moving away do not remove it.
    runs = []
    for n in (1, 2):
        seconds, out = invoke(work, REPO, "--no-cache")
        tag = next(line.strip() for line in out.stdout.splitlines() if line.strip().startswith(f"{REPO}:sha-"))
        if n == 1:
            kept = f"{KEPT}:{tag.split(':', 1)[1]}"
            subprocess.run(engine.command("tag", tag, kept), check=True)
            tag = kept
        runs.append((seconds, tag))
    a, b = (inspect(engine, tag) for _, tag in runs)
    layers_a, layers_b = a["RootFS"]["Layers"], b["RootFS"]["Layers"]
    made = steps(engine, runs[0][1])
    made = [""] * (len(layers_a) - len(made)) + made
    rows, same = [], 0
    for i, (da, db) in enumerate(zip(layers_a, layers_b)):
        equal = da == db
        same += equal
        note = "the empty layer" if equal and da == EMPTY else "" if equal else why(made[i])
        rows.append(f"| {i} | `{da[7:19]}` | `{db[7:19]}` | {'same' if equal else 'differs'} | "
                    f"{(made[i] or 'base').replace('|', '/')} | {note} |")
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
