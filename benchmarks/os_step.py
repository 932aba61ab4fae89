"""The OS step of an arm64 image without emulating apt: real builds on the local engine,
printed and written to docs/results.md. Figures, not assertions: the target is printed
next to what was measured.

    python benchmarks/os_step.py [--suite bookworm --suite trixie] [--repeat 1] [--load] [--builder] [--scripts]
                                 # after scripts/bootstrap.sh, on x86_64; about 10 min per suite

For each Debian suite, the runtime Dockerfile's first OS stage (`python-distro`: the OS
packages and the distro's Python, the same package set on both sides) built for linux/arm64
with --no-cache both ways:
  - emulated (OS_ON=target): apt in the image, every binary under qemu;
  - native (OS_ON=native): apt and dpkg on the build machine resolve, fetch and unpack into a
    copy of the base; the image's stage configures them (maintainer scripts, triggers) under qemu.
apt's download cache is warm for both (filled by an untimed build first): the figures are
the work, not the mirror. Then the two file systems are compared entry by entry (type, mode,
owner, link, content) and the package lists (name, arch, version) from dpkg's status.
--load runs each build again beside a second emulated apt step (what CI's other lane does);
--builder builds the Debian 13 builder to its compilers (`toolchain`, the OS step a builder adds
on the runtime's first stages) both ways instead, and compares the two the same way.
--scripts says where the configure step's time goes: the unpacked packages configured again in
a container with dpkg's maintainer-script debug lines (and the build step's native text
utilities on PATH), each script timed by the build machine's clock from its start to dpkg's
next line (the floor of the native path: what runs as the target).
Base images: the debootstrap ones the tests make (ascend-build-test/debian:<suite>-<arch>),
made here when missing."""
from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ascend_build import engine as eng  # noqa: E402
from ascend_build.engine.emulation import build_args as emulation_args  # noqa: E402
from ascend_build.inputs.baseimage import debian_base  # noqa: E402
from ascend_build.platforms import PLATFORMS, host  # noqa: E402
from benchmarks.results import report  # noqa: E402
from tests.integration.conftest import image_tree  # noqa: E402

BASE = "ascend-build-test/debian:{suite}-{arch}"
TAG = "ascend-build-bench/os-step:{suite}-{on}"
CA = Path("/etc/ssl/certs/ca-certificates.crt")
# A cell of each suite whose runtime Dockerfile is built: the OS step is the same for every
# stack of an OS (its package list is the family's, its Python the distro's).
CELLS = {"bookworm": ("2.1.0", "debian12"), "trixie": ("2.10.0-26.1.0", "debian13")}
# --builder: a builder's compilers step (its `toolchain` stage, on the runtime's OS stages).
BUILDERS = {"trixie": ("2.10.0-26.1.0", "debian13")}
_STEP = re.compile(r"^#(\d+) \[([^\]]+)\]", re.M)
_DONE = re.compile(r"^#(\d+) DONE ([0-9.]+)s", re.M)


def base(engine: eng.Engine, suite: str, arch: str) -> str:
    ref = BASE.format(suite=suite, arch=arch)
    if engine.image_id(ref) is None:
        debian_base(engine, suite, f"linux/{arch}", ref)
    return ref


def request(engine: eng.Engine, suite: str, on: str, target: str, tag: str, builder: bool = False,
            cache: bool = True) -> eng.BuildRequest:
    """A stage of the suite's runtime Dockerfile (or, `builder`, of its builder's) for linux/arm64,
    OS_ON=`on`, on the debootstrap bases."""
    stack, os_name = (BUILDERS if builder else CELLS)[suite]
    here = host()
    assert here is not None and PLATFORMS["linux/arm64"].emulated(), "an x86_64 build machine: arm64 is emulated here"
    return eng.BuildRequest(dockerfile=ROOT / "images" / ("builder" if builder else "runtime") / stack / os_name
                            / "Dockerfile", context=ROOT / "images", platform="linux/arm64", target=target,
                            tags=[tag], network="host", no_cache=not cache,
                            build_args={"BASE_IMAGE": base(engine, suite, "arm64"), "OS_ON": on,
                                        "BUILD_BASE_IMAGE": base(engine, suite, here.suffix), "PYTHON_FROM": "distro",
                                        **emulation_args(PLATFORMS["linux/arm64"])},
                            secrets={"ca-bundle": CA} if CA.exists() else {})


def run_build(engine: eng.Engine, req: eng.BuildRequest, log: Path) -> float:
    started = time.monotonic()
    if engine.build(req, log) != 0:
        raise SystemExit(f"build failed: {log}")
    return time.monotonic() - started


def build(engine: eng.Engine, suite: str, on: str, log: Path, cache: bool = False, builder: bool = False) -> float:
    """The `python-distro` stage of the suite's runtime Dockerfile (or, `builder`, the
    `toolchain` stage of its builder's), OS_ON=`on`; wall seconds."""
    tag = TAG.format(suite=suite, on=on) + ("-builder" if builder else "")
    return run_build(engine, request(engine, suite, on, "toolchain" if builder else "python-distro", tag, builder,
                                     cache), log)


def step_seconds(log: Path) -> dict[str, float]:
    """Seconds per stage-and-step name of a BuildKit log."""
    text = log.read_text(errors="replace")
    names = dict(_STEP.findall(text))
    out: dict[str, float] = {}
    for number, seconds in _DONE.findall(text):
        out[names.get(number, "")] = out.get(names.get(number, ""), 0.0) + float(seconds)
    return out


def steps(log: Path) -> dict[str, float]:
    """Seconds per step group of a BuildKit log: what ran where."""
    groups: dict[str, float] = {}
    for name, seconds in step_seconds(log).items():
        group = ("build machine: resolve, fetch, unpack" if "native-unpack-" in name else
                 "build machine: the configure step's text utilities" if name.startswith("native-tools") else
                 "image: configure (qemu)" if "-native" in name else
                 "image: apt (qemu)" if "-target" in name else "other")
        groups[group] = groups.get(group, 0.0) + seconds
    return groups


def compare(engine: eng.Engine, fast: str, plain: str) -> tuple[bool, int, list[str], int]:
    """(the same packages at the same versions, how many, the file-system entries that differ,
    how many entries) of two images."""
    a, b = image_tree(engine, fast), image_tree(engine, plain)
    differ = sorted(set(a) ^ set(b)) + sorted(p for p in set(a) & set(b) if a[p] != b[p])
    listed = packages(engine, fast)
    return listed == packages(engine, plain), len(listed), differ, len(a)


def packages(engine: eng.Engine, image: str) -> list[str]:
    """name:arch=version of every package dpkg's status lists as installed (read natively)."""
    cid = subprocess.run(engine.command("create", "--platform", "linux/arm64", image, "true"), capture_output=True,
                         text=True, check=True).stdout.strip()
    try:
        status = subprocess.run(engine.command("cp", f"{cid}:/var/lib/dpkg/status", "-"), capture_output=True,
                                check=True).stdout
    finally:
        subprocess.run(engine.command("rm", cid), capture_output=True)
    import io
    import tarfile
    with tarfile.open(fileobj=io.BytesIO(status)) as tar:
        member = tar.extractfile("status")
        assert member is not None
        text = member.read().decode()
    found = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(" "))
        if fields.get("Status", "").endswith(" installed"):
            found.append(f"{fields['Package']}:{fields['Architecture']}={fields['Version']}")
    return sorted(found)


_EVENT = re.compile(r"(Setting up|Processing triggers for) ([^ :]+)"
                    r"|fork/exec /var/lib/dpkg/info/([^ :/]+?)(?::\w+)?\.(postinst|preinst|prerm|postrm) ")


def script_times(engine: eng.Engine, suite: str, work: Path) -> dict[str, float]:
    """Seconds of the configure step (under qemu) per package, from its maintainer scripts'
    start to dpkg's next line; "dpkg" is dpkg's own time between scripts."""
    unpacked, tools = TAG.format(suite=suite, on="unpacked"), TAG.format(suite=suite, on="native-tools")
    run_build(engine, request(engine, suite, "native", "native-unpack-python-distro", unpacked),
              work / f"{suite}-unpacked.log")
    # the build machine's text utilities, where the build's configure step mounts them
    run_build(engine, request(engine, suite, "native", "native-tools", tools), work / f"{suite}-native-tools.log")
    ctx = work / f"{suite}-configure"
    ctx.mkdir(exist_ok=True)
    # and the interpreter the unpack stage kept aside, with the byte-compile wrapper in its place
    # where the versions are the same: the set-up of the Dockerfile's own configure step
    stack, os_name = CELLS[suite]
    text = (ROOT / "images" / "runtime" / stack / os_name / "Dockerfile").read_text().replace("\\\n", " ")
    setup = text.split("xargs -0 -r rm -rf -- < /tmp/removed", 1)[1].split(' && PATH="/mnt/bin:$PATH"', 1)[0]
    (ctx / "Dockerfile").write_text(
        f"FROM {base(engine, suite, 'arm64')}\nCOPY --from={unpacked} /layer/ /\n"
        f"COPY --from={tools} /mnt /mnt\n"
        f"RUN --mount=type=bind,from={unpacked},source=/removed,target=/tmp/removed "
        f"--mount=type=bind,from={unpacked},source=/interp,target=/srv "
        f"cd / && xargs -0 -r rm -rf -- < /tmp/removed{setup}\n")
    ready = TAG.format(suite=suite, on="unconfigured")
    run_build(engine, eng.BuildRequest(dockerfile=ctx / "Dockerfile", context=ctx, platform="linux/arm64",
                                       tags=[ready]), work / f"{suite}-unconfigured.log")
    cpu = emulation_args(PLATFORMS["linux/arm64"]).get("QEMU_CPU", "")
    argv = engine.command("run", "--rm", "--platform", "linux/arm64", "-e", "DEBIAN_FRONTEND=noninteractive",
                          *(["-e", f"QEMU_CPU={cpu}"] if cpu else []), ready,
                          "sh", "-c", "PATH=/mnt/bin:$PATH dpkg --configure -a -D2 2>&1")
    times: dict[str, float] = {}
    current, since = "dpkg", time.monotonic()
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            now = time.monotonic()
            match = _EVENT.search(line)
            if not match:
                continue
            times[current] = times.get(current, 0.0) + now - since
            current, since = (match.group(3) if match.group(3) else "dpkg"), now
    times[current] = times.get(current, 0.0) + time.monotonic() - since
    if proc.returncode != 0:
        raise SystemExit(f"dpkg --configure -a failed in {ready}")
    return times


def load_beside(engine: eng.Engine, suite: str) -> subprocess.Popen:
    """A second emulated apt step of the same packages in a container: CI's other lane."""
    words = "gcc g++ make cmake python3 python3-dev ca-certificates curl"
    script = f"apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends {words}"
    cpu = emulation_args(PLATFORMS["linux/arm64"]).get("QEMU_CPU", "")
    argv = engine.command("run", "--rm", "--platform", "linux/arm64", *(["-e", f"QEMU_CPU={cpu}"] if cpu else []),
                          base(engine, suite, "arm64"), "bash", "-c", script)
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", action="append", choices=sorted(CELLS), help="Debian suite (repeatable)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--load", action="store_true", help="also each build beside an emulated apt step")
    ap.add_argument("--scripts", action="store_true", help="also the configure step's time per maintainer script")
    ap.add_argument("--builder", action="store_true", help="a builder's compilers step both ways (trixie), "
                    "in place of the runtime's OS step")
    args = ap.parse_args()
    if args.builder and set(args.suite or []) - set(BUILDERS):
        ap.error(f"--builder: a builder's compilers step is measured for {', '.join(BUILDERS)} only")
    engine = eng.detect("docker")
    work = ROOT / ".build" / "bench-os-step"
    work.mkdir(parents=True, exist_ok=True)
    rows: list[tuple[str, str, str]] = []
    detail: list[str] = []
    for suite in [] if args.builder else args.suite or ["bookworm", "trixie"]:
        build(engine, suite, "native", work / f"{suite}-warm.log", cache=True)      # fills apt's download cache
        times: dict[str, list[float]] = {"native": [], "target": []}
        groups: dict[str, dict[str, float]] = {}
        for _ in range(args.repeat):
            for on in ("target", "native"):
                log = work / f"{suite}-{on}.log"
                times[on].append(build(engine, suite, on, log))
                groups[on] = steps(log)
        native, emulated = (statistics.median(times[on]) for on in ("native", "target"))
        stack, os_name = CELLS[suite]
        rows.append((f"{os_name} OS step (arm64 on {host()}): native / emulated",
                     f"{native / emulated:.2f} ({native:.0f} s / {emulated:.0f} s)", "<= 0.33"))
        for on in ("native", "target"):
            detail.append(f"{os_name}, OS_ON={on}: " + ", ".join(f"{g} {s:.0f} s" for g, s in sorted(groups[on].items())))
        same, count, differ, entries = compare(engine, *(TAG.format(suite=suite, on=on) for on in ("native", "target")))
        rows.append((f"{os_name}: packages (name, arch, version) the same", f"{same} ({count} packages)", "True"))
        rows.append((f"{os_name}: file system entries that differ", f"{len(differ)} of {entries}"
                     + (f" ({', '.join(differ[:4])})" if differ else ""), "0"))
        if args.load:
            loaded = {}
            for on in ("target", "native"):
                other = load_beside(engine, suite)
                time.sleep(2)
                loaded[on] = build(engine, suite, on, work / f"{suite}-{on}-load.log")
                other.wait()
            rows.append((f"{os_name} OS step beside an emulated apt step: native / emulated",
                         f"{loaded['native'] / loaded['target']:.2f} ({loaded['native']:.0f} s / "
                         f"{loaded['target']:.0f} s)", "-"))
        if args.scripts:
            per = script_times(engine, suite, work)
            total = sum(per.values())
            top = sorted(per.items(), key=lambda kv: -kv[1])
            shown = [(name, secs) for name, secs in top if name != "dpkg"][:6]
            rest = total - sum(secs for _, secs in shown)
            rows.append((f"{os_name}: the configure step (qemu) per package's scripts", f"{total:.0f} s: "
                         + ", ".join(f"{name} {secs:.1f} s" for name, secs in shown)
                         + f", the other {len(per) - 1 - len(shown)} and dpkg itself {rest:.1f} s", "-"))
    for suite in (args.suite or list(BUILDERS)) if args.builder else []:
        build(engine, suite, "native", work / f"{suite}-builder-warm.log", cache=True, builder=True)
        sums = {}
        for on in ("target", "native"):
            log = work / f"{suite}-builder-{on}.log"
            build(engine, suite, on, log, builder=True)
            sums[on] = sum(secs for name, secs in step_seconds(log).items() if "toolchain" in name)
        os_name = BUILDERS[suite][1]
        rows.append((f"{os_name} builder's compilers step (its toolchain stage, arm64): native / emulated, step sums",
                     f"{sums['native'] / sums['target']:.2f} ({sums['native']:.0f} s / {sums['target']:.0f} s)", "-"))
        same, _, differ, entries = compare(engine, *(TAG.format(suite=suite, on=on) + "-builder"
                                                     for on in ("native", "target")))
        rows.append((f"{os_name} builder to its compilers: packages the same; file system entries that differ",
                     f"{same}; {len(differ)} of {entries}" + (f" ({', '.join(differ[:4])})" if differ else ""),
                     "True; 0"))
    report("os_step.py", "The OS step of an arm64 image without emulating apt",
           f"engine {engine.version} ({engine.mode}), linux/arm64 under qemu on {host()}, apt's download cache warm",
           rows, "Produced by `python benchmarks/os_step.py`. Step sums (BuildKit's, seconds):\n\n"
           + "\n".join(f"- {line}" for line in detail))


if __name__ == "__main__":
    main()
