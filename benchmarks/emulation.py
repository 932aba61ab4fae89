"""What qemu's pointer-authentication setting costs under emulation: the same commands in
arm64 containers of Debian 12 (built without branch protection) and Debian 13 (built
with it), with qemu's default CPU and with QEMU_CPU=max,pauth-impdef=on (what
`ascend_build/engine/emulation.py` passes to emulated build steps). Figures, printed.

    python benchmarks/emulation.py [--repeat 3] [--image IMAGE ...]   # x86_64, after scripts/bootstrap.sh

--image adds `import torch` in each arm64 image given (a runtime image's /opt/venv, or a
builder's first venv): what an image suite or a builder container spends most on. Since
95b36fb the project's own emulated containers get the fast setting (Engine.run_argv).

Base images: the debootstrap ones the tests make (ascend-build-test/debian:<suite>-arm64),
made here when missing."""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ascend_build import engine as eng  # noqa: E402
from ascend_build.engine.emulation import QEMU_CPU  # noqa: E402
from ascend_build.inputs.baseimage import debian_base  # noqa: E402

BASES = {"Debian 12 (bookworm)": ("bookworm", "ascend-build-test/debian:bookworm-arm64"),
         "Debian 13 (trixie)": ("trixie", "ascend-build-test/debian:trixie-arm64")}
WORK = {"shell loop (2000 iterations)": "for i in $(seq 1 2000); do :; done",
        "cat 200 MB": "head -c 200M /dev/zero | cat > /dev/null",
        "sha256sum 100 MB": "head -c 100M /dev/zero | sha256sum > /dev/null"}
# torch >= 2.5 would load torch_npu on import (its backend autoload), which needs CANN's libraries
IMPORT_TORCH = ("py=$(ls /opt/venv/bin/python /opt/venvs/py*/bin/python 2>/dev/null | head -1); "
                "TORCH_DEVICE_BACKEND_AUTOLOAD=0 \"$py\" -c 'import torch'")


def timed(engine: eng.Engine, image: str, command: str, cpu: str | None) -> float:
    env = ["-e", f"QEMU_CPU={cpu}"] if cpu else []
    started = time.monotonic()
    out = subprocess.run(engine.command("run", "--rm", "--platform", "linux/arm64", *env, image, "bash", "-c", command),
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{image}: {command}: {out.stderr[-500:]}")
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--image", action="append", default=[], help="an arm64 image with torch in it")
    args = parser.parse_args()
    engine = eng.detect("docker")
    for suite, ref in BASES.values():
        if subprocess.run(engine.command("image", "inspect", ref), capture_output=True).returncode != 0:
            debian_base(engine, suite, "linux/arm64", ref)
    empty = {name: statistics.median(timed(engine, ref, "true", None) for _ in range(args.repeat))
             for name, (_, ref) in BASES.items()}
    print(f"median of {args.repeat} runs, seconds, container start ({', '.join(f'{n}: {s:.2f}' for n, s in empty.items())}) "
          "subtracted; linux/arm64 under qemu")
    print(f"{'work':32} {'base':22} {'default CPU':>12} {QEMU_CPU:>22} {'ratio':>7}")
    for what, command in WORK.items():
        for name, (_, ref) in BASES.items():
            plain = statistics.median(timed(engine, ref, command, None) for _ in range(args.repeat)) - empty[name]
            fast = statistics.median(timed(engine, ref, command, QEMU_CPU) for _ in range(args.repeat)) - empty[name]
            print(f"{what:32} {name:22} {plain:12.2f} {fast:22.2f} {plain / max(fast, 0.01):7.1f}")
    for image in args.image:
        plain = statistics.median(timed(engine, image, IMPORT_TORCH, None) for _ in range(args.repeat))
        fast = statistics.median(timed(engine, image, IMPORT_TORCH, QEMU_CPU) for _ in range(args.repeat))
        print(f"{'import torch (with start)':32} {image.split('/')[-1][:60]}\n{'':55} {plain:12.2f} {fast:22.2f} "
              f"{plain / max(fast, 0.01):7.1f}")


if __name__ == "__main__":
    main()
