"""What the cross compiler saves: the same C++ files compiled for aarch64 in a builder's
cross image (gcc-N for aarch64 running on this machine) and in its emulated image (the
image's own gcc under qemu), one file at a time on one core. Figures, printed: seconds per
file each way and their ratio.

    python benchmarks/cross_compile.py --tree PATH --files 'GLOB' [--files ...] \\
        [--include DIR ...] [--count 24] [--cross IMAGE] [--emulated IMAGE]

The files are compiled with -std=c++17 -O2 -fPIC, the image's torch and Python headers and
the tree-relative --include folders, to an object that is thrown away. A file that does not
compile in either image is skipped and said (it needs generated headers, say). Without
--tree the stand-in tree in tests/doubles is used (tiny files: a smoke run, not a figure).
Build the two builders first: `invoke builder --torch 2.1.0 --flavor debian11 ...` with and
without --emulated."""
from __future__ import annotations

import argparse
import glob
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CROSS = "ascend-builder:torch2.1.0-debian11-gcc10-py3.9-cross-arm64"
EMULATED = "ascend-builder:torch2.1.0-debian11-gcc10-py3.9-arm64"
# the venv's torch and Python headers, found in the image (without importing torch: under
# qemu that alone takes seconds)
FLAGS = ('-std=c++17 -O2 -fPIC -D_GLIBCXX_USE_CXX11_ABI=0 -w -I"$site/torch/include" '
         '-I"$site/torch/include/torch/csrc/api/include" -I"$pyinc"')
WHERE = ('site="$(python -c "import sysconfig; print(sysconfig.get_paths()[\'purelib\'])")"; '
         'pyinc="$(python -c "import sysconfig; print(sysconfig.get_paths()[\'include\'])")"; ')


def compile_one(image: str, tree: Path, rel: str, includes: list[str]) -> float | None:
    inc = " ".join(f"-I/src/{i}" for i in includes)
    # the compiler's own wall time, measured in the container (not its start, nor Python's)
    script = (f"export PATH=/opt/venvs/py3.9/bin:$PATH; cd /src; {WHERE}"
              f"s=$(date +%s.%N); $CXX {FLAGS} {inc} -c {rel} -o /tmp/o.o || exit 1; e=$(date +%s.%N); "
              f"echo \"took $s $e\"")
    out = subprocess.run(["docker", "run", "--rm", "--platform", "linux/arm64", "-e", "CCACHE_DISABLE=1",
                          "-v", f"{tree}:/src:ro", image, "bash", "-c", script], capture_output=True, text=True)
    if out.returncode != 0:
        print(f"  skipped {rel} in {image.split(':')[-1]}: {(out.stderr.strip().splitlines() or ['?'])[-1][:160]}")
        return None
    _, start, end = out.stdout.strip().splitlines()[-1].split()
    return float(end) - float(start)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path, default=ROOT / "tests" / "doubles" / "torch_npu_src")
    ap.add_argument("--files", action="append", default=[], help="a glob under the tree (repeatable)")
    ap.add_argument("--include", action="append", default=[], help="a folder under the tree for -I (repeatable)")
    ap.add_argument("--count", type=int, default=24)
    ap.add_argument("--cross", default=CROSS)
    ap.add_argument("--emulated", default=EMULATED)
    args = ap.parse_args()
    tree = args.tree.resolve()
    files = sorted({str(Path(f).relative_to(tree)) for g in (args.files or ["csrc/*.cpp"])
                    for f in glob.glob(str(tree / g))})[: args.count]
    if not files:
        print("no files matched", file=sys.stderr)
        return 2
    print(f"{len(files)} files from {tree.name}; cross: {args.cross}; emulated: {args.emulated}")
    rows = []
    for rel in files:
        cross = compile_one(args.cross, tree, rel, args.include)
        emulated = compile_one(args.emulated, tree, rel, args.include) if cross is not None else None
        if cross is not None and emulated is not None:
            rows.append((rel, cross, emulated))
            print(f"  {rel}: cross {cross:6.1f} s, qemu {emulated:6.1f} s, x{emulated / cross:4.1f}")
    if not rows:
        print("no file compiled both ways", file=sys.stderr)
        return 1
    cross_total = sum(r[1] for r in rows)
    emu_total = sum(r[2] for r in rows)
    print(f"{len(rows)} files: cross {cross_total:.0f} s ({cross_total / len(rows):.1f} s/file), "
          f"qemu {emu_total:.0f} s ({emu_total / len(rows):.1f} s/file); qemu/cross: "
          f"{emu_total / cross_total:.2f} overall, median {statistics.median(r[2] / r[1] for r in rows):.2f}")
    print("(the compiler's wall time in the container, one file at a time, ccache off)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
