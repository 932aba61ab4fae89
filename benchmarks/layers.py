"""Build-efficiency benchmarks: real builds on the local engine, printed as a table and
written to docs/results.md. Figures, not assertions: the targets are printed next
to what was measured.

    python benchmarks/layers.py            # after scripts/bootstrap.sh; about 30-40 min on 2 cores

linux/arm64 images (qemu on an x86_64 machine), Debian 12 + Python 3.11, with the CANN
TEST DOUBLE (tests/doubles) padded so its installed tree is about 1 GiB of incompressible
data, real torch and torch_npu wheels from PyPI. Measures:
  - layer waste of the CANN install: bytes of the layers it added / its installed tree,
    for this project's Dockerfile and for a naive one (COPY installers, install, delete);
  - a torch_npu bump: bytes of new layers / image bytes, and wall time incremental / cold;
  - three torch stacks on one CANN (2.1.0, 2.3.1, 2.4.0 on CANN 8.0.0): unique layer
    bytes / sum of image sizes;
  - dead bytes: files a layer holds that a later layer overwrites or deletes (what makes
    an image bigger than its files), with the paths that carry most of them;
  - a no-op rebuild of every image built here, and a full render of matrix.yaml.
Layer bytes come from `docker save` (uncompressed layer tars), image sizes from the engine.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from functools import partial
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ascend_build import engine as eng  # noqa: E402
from ascend_build.engine.network import Network  # noqa: E402
from ascend_build.images.build import build  # noqa: E402
from ascend_build.images.render import render_all  # noqa: E402
from ascend_build.inputs.baseimage import debian_base  # noqa: E402
from ascend_build.inputs.options import Inputs, Site  # noqa: E402
from ascend_build.inputs.packages import pin  # noqa: E402
from ascend_build.matrix import load_matrix  # noqa: E402
from ascend_build.platforms import host  # noqa: E402
from benchmarks.results import report  # noqa: E402
from tests.doubles.cann_double import make_run  # noqa: E402

BASE = "ascend-build-bench/debian:bookworm-{arch}"     # made anew on every run: the base code measured too
REPO = "ascend-build-bench/runtime"
CA = Path("/etc/ssl/certs/ca-certificates.crt")
GIB = 1 << 30
TOOLKIT_PAD, KERNELS_PAD = 896 << 20, 128 << 20        # ~1 GiB installed, incompressible


def sh(*cmd: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def layer_sizes(engine: eng.Engine, *images: str) -> dict[str, list[tuple[str, int]]]:
    """Per image, its layers in order as (sha256 of the layer tar, bytes), from `docker save`:
    identity by content, so shared layers are recognised whatever the export calls them."""
    proc = subprocess.Popen(engine.command("save", *images), stdout=subprocess.PIPE)
    found: dict[str, tuple[str, int]] = {}
    manifest = None
    with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
        for member in tar:
            if member.isfile() and (member.name.endswith("/layer.tar") or member.name.startswith("blobs/")):
                digest = hashlib.sha256()
                fh = tar.extractfile(member)
                for block in iter(partial(fh.read, 1 << 20), b""):
                    digest.update(block)
                found[member.name] = (digest.hexdigest(), member.size)
            elif member.name == "manifest.json":
                manifest = json.load(tar.extractfile(member))
    proc.wait()
    return {tag: [found[layer] for layer in entry["Layers"]]
            for entry in manifest or [] for tag in entry.get("RepoTags") or []}


def dead_bytes(engine: eng.Engine, ref: str, top: int = 4) -> tuple[int, list[tuple[str, int]]]:
    """Bytes of files that a later layer of `ref` overwrites or deletes (whiteouts), and
    the folders (three levels) that hold most of them."""
    proc = subprocess.Popen(engine.command("save", ref), stdout=subprocess.PIPE)
    contents: dict[str, list[tuple[str, int]]] = {}
    order: list[str] = []
    with tarfile.open(fileobj=proc.stdout, mode="r|") as outer:
        for member in outer:
            if member.isfile() and (member.name.endswith("/layer.tar") or member.name.startswith("blobs/")):
                with tarfile.open(fileobj=outer.extractfile(member), mode="r|") as inner:
                    contents[member.name] = [(e.name.lstrip("./"), e.size if e.isfile() else 0) for e in inner]
            elif member.name == "manifest.json":
                order = json.load(outer.extractfile(member))[0]["Layers"]
    proc.wait()
    live: dict[str, int] = {}
    dead: dict[str, int] = {}

    def kill(path: str) -> None:
        size = live.pop(path, 0)
        if size:
            folder = "/".join(path.split("/")[:3])
            dead[folder] = dead.get(folder, 0) + size

    for layer in order:
        for path, size in contents.get(layer, []):
            folder, _, name = path.rpartition("/")
            if name == ".wh..wh..opq":
                for old in [p for p in live if p.startswith(folder + "/")]:
                    kill(old)
            elif name.startswith(".wh."):
                gone = (folder + "/" if folder else "") + name[4:]
                for old in [p for p in live if p == gone or p.startswith(gone + "/")]:
                    kill(old)
            else:
                kill(path)
                live[path] = size
    ranked = sorted(dead.items(), key=lambda kv: -kv[1])
    return sum(dead.values()), ranked[:top]


def step_bytes(ref: str, *needles: str) -> int:
    """Bytes of the layers made by the build steps whose command holds one of `needles`."""
    api = docker.APIClient()
    return sum(h["Size"] for h in api.history(ref) if any(n in (h.get("CreatedBy") or "") for n in needles))


def relabel(wheel: Path, version: str, out: Path) -> Path:
    """The same wheel under another version (dist-info renamed, METADATA and RECORD
    rewritten by `wheel pack`)."""
    unpacked = out / "unpacked"
    subprocess.run([sys.executable, "-m", "wheel", "unpack", "-d", str(unpacked), str(wheel)], check=True,
                   capture_output=True)
    tree = next(unpacked.iterdir())
    info = next(tree.glob("*.dist-info"))
    metadata = info / "METADATA"
    metadata.write_text("".join(f"Version: {version}\n" if line.startswith("Version: ") else line
                                for line in metadata.read_text().splitlines(keepends=True)))
    info.rename(tree / f"torch_npu-{version}.dist-info")
    subprocess.run([sys.executable, "-m", "wheel", "pack", "-d", str(out), str(tree)], check=True, capture_output=True)
    return next(out.glob(f"torch_npu-{version}-*.whl"))


def image_size(engine: eng.Engine, ref: str) -> int:
    return int(sh(*engine.command("image", "inspect", "--format", "{{.Size}}", ref)).stdout.strip())


def du(engine: eng.Engine, ref: str, path: str) -> int:
    out = sh(*engine.command("run", "--rm", "--platform", "linux/arm64", "--entrypoint", "du", ref, "-sbx", path))
    return int(out.stdout.split()[0])


SITE_FIELDS = {f.name for f in dataclasses.fields(Site)}


def build_with(matrix, stack: str, os: str, python: str, platform: str, **kw):
    """One build from flat keyword options, split into the cell, the site and the inputs."""
    site = Site(**{k: tuple(v) if k == "packages" else v for k, v in kw.items() if k in SITE_FIELDS})
    inputs = Inputs(**{k: v for k, v in kw.items() if k not in SITE_FIELDS})
    return build(matrix, matrix.cell(stack, os, python, None, platform), site, inputs)


def timed_build(matrix, **kw) -> tuple[float, str]:
    start = time.monotonic()
    result = build_with(matrix, **kw)
    return time.monotonic() - start, result.tags.readable


def main() -> None:
    engine = eng.detect("docker")
    server = sh(*engine.command("version", "--format", "{{.Server.Version}}")).stdout.strip()
    work = Path(tempfile.mkdtemp(prefix="ascend-bench-"))
    rows: list[tuple[str, str, str]] = []
    print(f"engine {engine.client} ({engine.mode}), server {server}, {os.cpu_count()} cores; work {work}", flush=True)

    # Full render, in process, median of 5.
    matrix = load_matrix(ROOT / "matrix.yaml")
    times = []
    for _ in range(5):
        start = time.monotonic()
        files = render_all(load_matrix(ROOT / "matrix.yaml"))
        times.append(time.monotonic() - start)
    rows.append(("full render of matrix.yaml", f"{statistics.median(times) * 1000:.0f} ms for {len(files)} Dockerfiles "
                 "(median of 5, load + validate + render)", "-"))

    # ~1 GiB CANN doubles for 8.0.RC3 and 8.0.0, pinned in a copy of the matrix.
    pk = work / "packages"
    for version in ("8.0.RC3", "8.0.0"):
        make_run(pk, "toolkit", version, "aarch64", pad_bytes=TOOLKIT_PAD)
        make_run(pk, "kernels", version, "aarch64", chip="910b", pad_bytes=KERNELS_PAD)
    mpath = work / "matrix.yaml"
    shutil.copy(ROOT / "matrix.yaml", mpath)
    shutil.copy(ROOT / "imported.yaml", work / "imported.yaml")
    (work / "locks").symlink_to(ROOT / "locks", target_is_directory=True)     # the stacks' locks, as committed
    pin(load_matrix(mpath), sorted(pk.glob("*.run")))
    matrix = load_matrix(mpath)
    base = BASE.format(arch="arm64")
    here = host()       # the fast path installs the Python packages there, from the same release
    for platform, ref in [("linux/arm64", base)] + ([(here.docker, BASE.format(arch=here.suffix))]
                                                    if here and here.docker != "linux/arm64" else []):
        # Made once (debootstrap, minutes under qemu), then reused: the rows measure builds on it.
        if subprocess.run(engine.command("image", "inspect", ref), capture_output=True).returncode != 0:
            debian_base(engine, "bookworm", platform, ref)
    common = dict(os="debian12", python="3.11", platform="linux/arm64", packages=[pk], offline=True,
                  require_pins=True, base_images={"debian:bookworm": BASE}, net=Network(ca_bundle=CA if CA.exists() else None),
                  repository=REPO, cache=work / "cache", work=work / "build")

    # Cold build of the 2.1.0 stack (no layer cache at all).
    cold, tag_a = timed_build(matrix, stack="2.1.0", no_cache=True, **common)
    size_a = image_size(engine, tag_a)
    print(f"cold build {cold:.0f} s, {size_a / GIB:.2f} GiB", flush=True)

    # Layer waste of the CANN install: ours vs a naive Dockerfile, on the same base.
    payload = du(engine, tag_a, "/usr/local/Ascend")
    # History keeps a RUN's command but not its --mount flags: match the installer names.
    cann_bytes = step_bytes(tag_a, "Ascend-cann-toolkit_", "Ascend-cann-kernels-")
    naive_ctx = work / "naive"
    (naive_ctx / "cann").mkdir(parents=True)
    for f in pk.glob("*8.0.RC3*"):
        os.link(f, naive_ctx / "cann" / f.name)
    (naive_ctx / "Dockerfile").write_text(
        f"FROM {base}\nCOPY cann/ /tmp/cann/\n"
        "RUN cd /tmp && bash cann/Ascend-cann-toolkit_8.0.RC3_linux-aarch64.run --install --quiet --install-for-all "
        "--install-path=/usr/local/Ascend && . /usr/local/Ascend/ascend-toolkit/set_env.sh && "
        "bash cann/Ascend-cann-kernels-910b_8.0.RC3_linux-aarch64.run --install --quiet --install-for-all "
        "--install-path=/usr/local/Ascend\nRUN rm -rf /tmp/cann\n")
    cmd, env = engine.build_command(eng.BuildRequest(dockerfile=naive_ctx / "Dockerfile", context=naive_ctx,
                                                     platform="linux/arm64", tags=[f"{REPO}:naive"]))
    assert eng.run(cmd, env, work / "naive.log") == 0, f"naive build failed: {work / 'naive.log'}"
    naive_bytes = step_bytes(f"{REPO}:naive", "cann/", "/tmp/cann")
    naive_payload = du(engine, f"{REPO}:naive", "/usr/local/Ascend")
    rows.append(("layer waste, CANN install (this project)",
                 f"{cann_bytes / payload:.3f} ({cann_bytes / 2**20:.0f} MiB of layers / {payload / 2**20:.0f} MiB installed)",
                 "<= 1.02"))
    rows.append(("layer waste, CANN install (naive COPY + install + rm)",
                 f"{naive_bytes / naive_payload:.3f} ({naive_bytes / 2**20:.0f} MiB / {naive_payload / 2**20:.0f} MiB)", "-"))
    whole = (size_a - image_size(engine, base)) / (du(engine, tag_a, "/") - du(engine, base, "/"))
    rows.append(("layer waste, whole image: (image - base) / files added", f"{whole:.3f}", "<= 1.02"))
    dead, where = dead_bytes(engine, tag_a)
    rows.append(("dead bytes in the image's layers (files a later layer overwrites or deletes)",
                 f"{dead / 2**20:.1f} MiB; most in " + ", ".join(f"{p} ({b / 2**20:.1f} MiB)" for p, b in where), "-"))

    # A torch_npu bump as a patched source build makes it: the same release with a local
    # version label (2.1.0.post8+bench1), so the image suite still holds it to the matrix.
    wheels = work / "wheels"
    out = sh(sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--platform",
             "manylinux2014_aarch64", "--python-version", "3.11", "-d", str(wheels), "torch_npu==2.1.0.post8")
    assert out.returncode == 0, out.stderr
    bumped_wheel = relabel(next(wheels.glob("torch_npu-2.1.0.post8-*.whl")), "2.1.0.post8+bench1", work / "bumped")
    incr, tag_b = timed_build(matrix, stack="2.1.0", torch_npu_wheel=bumped_wheel,
                              **{**common, "repository": REPO + "-bump"})
    both = layer_sizes(engine, tag_a, tag_b)
    old = {layer for layer, _ in both[tag_a]}
    new_bytes = sum(size for layer, size in both[tag_b] if layer not in old)
    total_b = sum(size for _, size in both[tag_b])
    rows.append(("torch_npu bump (2.1.0.post8 -> +bench1, as a patched build): new layer bytes / image bytes",
                 f"{new_bytes / total_b:.4f} ({new_bytes / 2**20:.1f} MiB of {total_b / GIB:.2f} GiB)", "<= 0.05"))
    rows.append(("torch_npu bump: wall time incremental / cold",
                 f"{incr / cold:.3f} ({incr:.0f} s / {cold:.0f} s; both include the image tests)", "<= 0.15"))

    # Three stacks on CANN 8.0.0 (the matrix pairs 2.1.0 (torch_npu .post10), 2.3.1 and 2.4.0 with it).
    stack_tags, stack_times = [], []
    for stack in ("2.1.0-cann8.0.0", "2.3.1", "2.4.0"):
        seconds, tag = timed_build(matrix, stack=stack, **common)
        stack_tags.append(tag)
        stack_times.append(seconds)
    per = layer_sizes(engine, *stack_tags)
    unique = {layer: size for tag in stack_tags for layer, size in per[tag]}
    summed = sum(size for tag in stack_tags for _, size in per[tag])
    rows.append((f"{len(stack_tags)} torch stacks on CANN 8.0.0: unique layer bytes / sum of images",
                 f"{sum(unique.values()) / summed:.3f} ({sum(unique.values()) / GIB:.2f} GiB / {summed / GIB:.2f} GiB; "
                 f"builds {', '.join(f'{t:.0f} s' for t in stack_times)})", "<= 0.40"))
    shared = sum(size for layer, size in per[stack_tags[0]] if all(layer in {name for name, _ in per[t]} for t in stack_tags))
    rows.append(("  of which shared by all three / in each image's own layers",
                 f"{shared / GIB:.2f} GiB / " + ", ".join(f"{(sum(s for _, s in per[t]) - shared) / GIB:.2f}"
                                                          for t in stack_tags) + " GiB", "-"))

    # No-op rebuild of everything built here.
    start = time.monotonic()
    rebuilt = (("2.1.0", {}), ("2.1.0", {"torch_npu_wheel": bumped_wheel, "repository": REPO + "-bump"}),
               ("2.1.0-cann8.0.0", {}), ("2.3.1", {}), ("2.4.0", {}))
    for stack, extra in rebuilt:
        build_with(matrix, stack=stack, **{**common, **extra})
    rows.append((f"no-op rebuild of the {len(rebuilt)} images built here (build + image tests)",
                 f"{time.monotonic() - start:.0f} s", "-"))

    report("layers.py", "Layers, bumps, stacks, no-op rebuilds",
           f"engine {server} ({engine.mode}), linux/arm64 under qemu where the host is not arm64", rows,
           f"Produced by `python benchmarks/layers.py`; CANN is the test double padded to "
           f"{(TOOLKIT_PAD + KERNELS_PAD) / GIB:.0f} GiB of incompressible data.")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
