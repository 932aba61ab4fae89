"""Cross-arch builds at native speed, and rebuilds that download nothing twice: real
builds on the local engine, printed and written to docs/results.md. Figures, not
assertions: the targets are printed next to what was measured.

    python benchmarks/fast_path.py [STACK ...]   # after scripts/bootstrap.sh; default 2.1.0 2.10.0,
                                                 # about 35 min on 2 cores (2.1.0 alone: about 20)

linux/arm64 images (qemu on an x86_64 machine), Debian 12 + Python 3.11, the CANN TEST
DOUBLE (tests/doubles, unpadded), real torch and torch_npu wheels from PyPI, locked.
  - cold builds of the 2.1.0 and 2.10.0 images, the fast path (`--pip-on native`: pip on
    the build machine) against the plain one (`--pip-on target`: pip in the image, under
    qemu): the whole build (up to the image tests) and the pip steps. Cold: --no-cache and
    the engine's download caches (apt's packages, the wheel cache) emptied before each, so
    both download everything, as a new user's first build does;
  - bytes pip downloaded, with the wheel cache warm, by the rebuild after a torch_npu bump
    (2.1.0.post8 -> 2.1.0.post10, the 2.1.0 line moved to CANN 8.0.0) and after a torch
    bump (2.1.0 -> 2.3.1 on CANN 8.0.0): the wheels that changed, and those that did not
    (target 0);
  - per-step times of each cold build (benchmarks/steps.py's groups).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ascend_build import engine as eng  # noqa: E402
from ascend_build.engine.network import Network  # noqa: E402
from ascend_build.images.build import build  # noqa: E402
from ascend_build.images.steps import run_image_tests  # noqa: E402
from ascend_build.inputs.baseimage import debian_base  # noqa: E402
from ascend_build.inputs.options import Inputs, Site  # noqa: E402
from ascend_build.inputs.packages import pin  # noqa: E402
from ascend_build.locking.lock import normalize, pinned_versions  # noqa: E402
from ascend_build.matrix import load_matrix  # noqa: E402
from ascend_build.platforms import PLATFORMS, host  # noqa: E402
from benchmarks.results import report  # noqa: E402
from benchmarks.steps import PIP_GROUPS, profile  # noqa: E402
from tests.doubles.cann_double import make_run  # noqa: E402

BASE = "ascend-build-bench/debian:bookworm-{arch}"
REPO = "ascend-build-bench/fast-path"
CA = Path("/etc/ssl/certs/ca-certificates.crt")
_DOWNLOADED = re.compile(r"Downloading (\S+\.whl) \(([0-9.]+) (kB|MB|GB|bytes)\)")
_UNITS = {"bytes": 1, "kB": 1000, "MB": 1000 ** 2, "GB": 1000 ** 3}


def sh(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True)


def downloads(log: Path) -> dict[str, int]:
    """Wheel file -> bytes pip downloaded from an index in one build (pip prints the
    size it fetches; a wheel taken from the cache or a local folder prints none)."""
    found = {}
    for name, size, unit in _DOWNLOADED.findall(log.read_text(errors="replace")):
        found[name] = int(float(size) * _UNITS[unit])
    return found


def wheel_pin(file: str) -> tuple[str, str]:
    name, version = file.split("-")[:2]
    return normalize(name), version


class Bench:
    def __init__(self, work: Path):
        self.engine = eng.detect("docker")
        self.work = work
        pk = work / "packages"
        for version in ("8.0.RC3", "8.0.0", "9.0.0"):
            make_run(pk, "toolkit", version, "aarch64")
            make_run(pk, "kernels", version, "aarch64", chip="910b")
        path = work / "matrix.yaml"
        shutil.copy(ROOT / "matrix.yaml", path)
        shutil.copy(ROOT / "imported.yaml", work / "imported.yaml")
        (work / "locks").symlink_to(ROOT / "locks", target_is_directory=True)
        pin(load_matrix(path), sorted(pk.glob("*.run")))
        self.matrix = load_matrix(path)
        here = host()
        for platform in {"linux/arm64", here.docker if here else "linux/arm64"}:
            ref = BASE.format(arch=PLATFORMS[platform].suffix)
            if sh(*self.engine.command("image", "inspect", ref)).returncode != 0:
                debian_base(self.engine, "bookworm", platform, ref)
        self.site = dict(packages=(pk,), offline=True, require_pins=True, base_images={"debian:bookworm": BASE},
                         net=Network(ca_bundle=CA if CA.exists() else None), cache=work / "cache",
                         work=work / "build")

    def empty_download_caches(self) -> None:
        # Every cache mount of the engine: apt's packages and the wheel cache.
        out = sh(*self.engine.command("builder", "prune", "-f", "--filter", "type=exec.cachemount"))
        if out.returncode != 0:
            raise SystemExit(f"could not empty the engine's cache mounts: {out.stderr.strip()}")

    def build(self, stack: str, label: str, **site) -> tuple[float, float, Path]:
        """(seconds to the end of the build, seconds of the image tests, its log kept)."""
        cell = self.matrix.cell(stack, "debian12", "3.11", None, "linux/arm64")
        marks = {}

        def tests(image, matrix_path, engine):
            marks["tests"] = time.monotonic()
            return run_image_tests(image, matrix_path, engine)

        start = time.monotonic()
        result = build(self.matrix, cell, Site(**{**self.site, **site}), Inputs(repository=REPO),
                       run_tests=tests)
        end = time.monotonic()
        kept = self.work / f"{label}.log"
        shutil.copy(result.log, kept)
        print(f"  {label}: build {marks['tests'] - start:.0f} s, then tests {end - marks['tests']:.0f} s", flush=True)
        return marks["tests"] - start, end - marks["tests"], kept

    def lock_pins(self, stack: str) -> dict[str, str]:
        from ascend_build.locking.lock import read
        return pinned_versions(read(self.matrix.path.parent, stack, "3.11", "aarch64").files)


def pip_seconds(log: Path) -> float:
    seconds = profile(log)[0]
    return sum(v for k, v in seconds.items() if k.removeprefix("build machine: ") in PIP_GROUPS)


def step_table(logs: dict[str, Path]) -> list[str]:
    found = {label: profile(log)[0] for label, log in logs.items()}
    groups = sorted({g for seconds in found.values() for g in seconds},
                    key=lambda g: -max(s.get(g, 0.0) for s in found.values()))
    lines = ["| step (sum of BuildKit step times, s) | " + " | ".join(found) + " |",
             "|---|" + "---|" * len(found)]
    for group in groups:
        lines.append(f"| {group} | " + " | ".join(f"{s[group]:.1f}" if group in s else "-"
                                                  for s in found.values()) + " |")
    return lines


def main(stacks: list[str]) -> None:
    here = host()
    if here is None or not PLATFORMS["linux/arm64"].emulated():
        raise SystemExit("this benchmark compares the fast path of a cross-arch build: run it on an x86_64 machine")
    work = Path(tempfile.mkdtemp(prefix="ascend-bench-fast-"))
    bench = Bench(work)
    engine = bench.engine
    server = sh(*engine.command("version", "--format", "{{.Server.Version}}")).stdout.strip()
    print(f"engine {engine.client} ({engine.mode}), server {server}, {os.cpu_count()} cores; work {work}", flush=True)
    rows: list[tuple[str, str, str]] = []
    logs: dict[str, Path] = {}

    for stack in stacks:
        timed = {}
        for path in ("target", "native"):
            bench.empty_download_caches()
            label = f"{stack} {'plain' if path == 'target' else 'fast'}"
            timed[path] = bench.build(stack, label, no_cache=True, pip_on=path)
            logs[label] = timed[path][2]
        (plain, plain_tests, plain_log), (fast, fast_tests, fast_log) = timed["target"], timed["native"]
        rows.append((f"cold arm64 build of the {stack} image: fast path / plain path (to the image tests)",
                     f"{fast / plain:.2f} ({fast:.0f} s / {plain:.0f} s; image tests after: {fast_tests:.0f} s, "
                     f"{plain_tests:.0f} s)", "<= 0.5"))
        rows.append(("  the pip steps (sum of their step times): fast / plain",
                     f"{pip_seconds(fast_log) / pip_seconds(plain_log):.2f} ({pip_seconds(fast_log):.0f} s / "
                     f"{pip_seconds(plain_log):.0f} s)", "<= 0.25"))
        if stack == "2.1.0":
            # Bumps right after the 2.1.0 cold build: its wheels are in the cache.
            before = bench.lock_pins("2.1.0")
            for after, what in (("2.1.0-cann8.0.0", "torch_npu bump (2.1.0.post8 -> 2.1.0.post10, CANN 8.0.0)"),
                                ("2.3.1", "torch bump (2.1.0 -> 2.3.1, CANN 8.0.0)")):
                _, _, log = bench.build(after, f"bump to {after}", pip_on="native")
                got = downloads(log)
                unchanged = {f: n for f, n in got.items() if before.get(wheel_pin(f)[0]) == wheel_pin(f)[1]}
                changed = {f: n for f, n in got.items() if f not in unchanged}
                rows.append((f"rebuild after a {what}, wheel cache warm: bytes downloaded, unchanged wheels",
                             f"{sum(unchanged.values()) / 1e6:.1f} MB ({len(unchanged)} wheels)", "0"))
                rows.append(("  changed wheels (what the bump needs)",
                             f"{sum(changed.values()) / 1e6:.1f} MB: " + ", ".join(sorted(changed)), "-"))
                before = bench.lock_pins(after)

    report("fast_path.py", "Cross-arch builds at native speed; rebuilds that download nothing twice",
           f"engine {server} ({engine.mode}), building linux/arm64 on {here.docker} (qemu)", rows,
           "\n".join(step_table(logs)) + "\n\nProduced by `python benchmarks/fast_path.py`; CANN is the test "
           "double, unpadded. The fast path's steps on the build machine run beside the emulated ones, so step "
           "sums are not wall times.")
    print("\n" + "\n".join(step_table(logs)))


if __name__ == "__main__":
    main(sys.argv[1:] or ["2.1.0", "2.10.0"])
