"""Every task option's help, written once: what `invoke --help TASK` shows, and what the
generated tasks page (docs/tasks.md, from the tasks themselves) lists. Options several
tasks share are written once here and composed into each task's table."""
from __future__ import annotations

from ..chips import known


def _either(words: list[str]) -> str:
    return " or ".join(filter(None, [", ".join(words[:-1]), words[-1]])) if words else "none"


# The chips `invoke ranktable` and `invoke job` take, from their records (the registry's first
# is the job's default, tasks.py's chip="910b").
_TABLES = [c for c in known() if c.rank_table]
_JOBS = [c.name + (" (default)" if i == 0 else "") for i, c in enumerate(c for c in known() if c.job)]

MATRIX = {"matrix": "the matrix file (default: matrix.yaml)"}
LINT = {**MATRIX, "all": "lint every Dockerfile, also those images/hadolint-clean.txt records as clean"}
DRY = {"dry": "print the commands instead of running them"}
ENGINE = {"engine": "docker (default) or podman",
          "docker": "the container client to use (default: the first BuildKit-capable one on PATH)"}
OUTPUT = {"quiet": "say only warnings, errors and what was asked for (a build's own output goes to its log only)",
          "verbose": "also say each engine command as it runs"}
# How this site reaches things: mirrors, the proxy, its CA (credentials go in as secrets).
SITE = {
    "base_image": "FROM=TO: replace a base image, e.g. ubuntu:22.04=mirror/ubuntu:22.04-{arch} (repeatable)",
    "pip_index_url": "pip index (credentials allowed: passed as a BuildKit secret)",
    "torch_index_url": "the site's mirror of the stack's torch index (PyTorch's CPU index): torch comes only from "
                       "there, never from PyPI's CUDA build; no credentials (the image keeps its requirement files)",
    "ca_bundle": "CA bundle for a TLS proxy (passed as a BuildKit secret); default: the host's own setting "
                 "($PIP_CERT, $REQUESTS_CA_BUNDLE, $SSL_CERT_FILE, pip's cert); 'none' for none",
    "proxy": "proxy URL for downloads in the build (credentials allowed: a BuildKit secret); "
             "default: http(s)_proxy of this shell; 'none' for none",
    "no_proxy": "hosts the build reaches without the proxy (default: no_proxy of this shell)",
    "network": "'host': build steps use this machine's network (a proxy on 127.0.0.1)",
}
PACKAGES = {
    "packages": "folder holding CANN files, the .zip Huawei publishes or the .run in it (repeatable; default "
                "./packages)",
    "offline": "never download CANN packages",
    "require_pins": "refuse any file without a sha256 in the matrix",
}
WHEELS = {
    "wheelhouse": "folder of wheels pip may use (torch, torch_npu, ...)",
    "torch_npu_wheel": "install this torch_npu wheel instead of the release",
    "apex_wheel": "an Ascend apex wheel to fill the apex slot",
}
CELL = {
    "torch": "torch stack from matrix.yaml (default: defaults.torch)",
    "mindspore": "build the MindSpore image of this release (mindspore_stacks:) instead of a torch stack",
    "cann": "build the CANN-only image of this CANN release (cann_stacks:): no framework, the base for one",
    "os": "base OS name from matrix.yaml",
    "python": "python minor version within the stack's range",
    "chip": "kernels chip, e.g. 910b",
    "platform": "linux/arm64 (default) or linux/amd64",
}
IMAGE_STEPS = {
    "retest": "an image with the same content tag is here (tested when tagged): run its suite again",
    "keep_failed": "keep an image whose tests failed, to debug it (removed otherwise)",
    "no_cache": "rebuild every step (ignore the layer cache) and download every file again",
    "pip_on": "where pip installs the Python packages: auto (default: on the build machine when it cross-builds), "
              "native (on the build machine, for the image's arch: no qemu) or target (in the image)",
}

BUILD = {
    **MATRIX, **CELL, **PACKAGES, **SITE, **WHEELS, **IMAGE_STEPS, **ENGINE, **DRY, **OUTPUT,
    "torch_atb": "install torch_atb too, NNAL's Python plugin (Python 3.10/3.11; glibc 2.38 from CANN 9.1)",
    "like": "an official image's tag to build the same cell of (quay.io/ascend/torch-npu:2.12.0-cann9.1.0-"
            "a3-openeuler24.03-py3.12): it names the stack, OS, Python and chip",
    "no_nnal": "build without NNAL (ATB, SiP) where the line installs it: no third CANN file; the image says so "
               "in its labels, and its suite leaves NNAL's checks out",
    "repository": "image repository to tag into (default ascend-runtime)",
    "unlocked": "build a cell that has no lock (locks/ beside the matrix, or the project's made from the same "
                "inputs): pip resolves its Python packages at build time, so two builds may differ; without it "
                "such a cell is refused (`invoke lock` makes its lock). A locked cell is built from its lock all "
                "the same; not with --require-pins",
    "torch_npu_src": "build torch_npu from source: PATH, URL@REF, or 'upstream' (the stack's release tag)",
    "apex_src": "build Ascend apex from source: PATH, URL@REF, or 'upstream' (the matrix's pinned ref)",
    "builder_flavor": "builder flavor for source builds (default: the stack's builder)",
    "builder_repository": "the repository of the builder images for source builds (default ascend-builder)",
    "reproducible": "every time in the image is SOURCE_DATE_EPOCH (default: the checkout's last commit), so the "
                    "same inputs give the same layers and image ID (podman and buildx while building; docker's built-in "
                    "BuildKit by writing the layers again after the build); "
                    "`invoke verify` checks such an image",
    "all": "build every image of the matrix's `images:`; one failing does not stop the others",
    "for_host": "pick the newest line (of --torch, if given) whose CANN this host's driver runs, for its chip; "
                "the value is the host's root folder (/ for this machine)",
    "cache_registry": "registry repository for layer cache (buildx: cache tags; classic: inline cache of pushed images)",
    "requirements": "a requirements file: build a user layer on top of the runtime image, locked (FILE.lock/) with "
                    "every runtime package held, tested, tagged <runtime name>-<layer>-<arch>",
    "layer_name": "the user layer's name in its tag (default: the requirements file's name)",
    "layer_wheelhouse": "folder of the team's own wheels the requirements may name (for the user layer only)",
    "debootstrap": "make a missing Debian base image here with debootstrap (this arch's and, for a cross build, "
                   "the build machine's): a Debian cell needs no registry",
    "run_as": "who containers run as: root, or UID:GID of the hosts' HwHiAiUser, e.g. 1000:1000 (default: "
              "defaults.run_as in the matrix); the image's name ends with -uidUID",
}

VERIFY = {
    "image": "the image to check (tag or id): a runtime image built with --reproducible",
    "against": "compare with this image instead of rebuilding (e.g. a rebuild kept with --keep, or another "
               "registry's copy)",
    "keep": "keep the rebuild: tagged REPOSITORY:verify-CONTENT-ARCH when it is the image's bytes (tested), "
            "else untagged (by its id)",
    **PACKAGES, **SITE, **WHEELS, **ENGINE, **MATRIX, **OUTPUT,
}
VERIFY.pop("require_pins")

TEST = {**MATRIX, "image": "test this image (id or tag) with the image suite only", **ENGINE}

BASE_IMAGE = {
    "suite": "Debian suite (bookworm, bullseye, trixie)",
    "platform": "linux/arm64 or linux/amd64 (repeatable; default: linux/arm64 and this machine's, which a cross "
                "build needs for the fast path)",
    "tag": "image tag to create; {arch} becomes arm64/amd64 (needed for more than one platform)",
    "mirror": "Debian mirror URL", **ENGINE, **DRY,
}

# The builder and the wheels compiled in it.
SOURCE = {
    **MATRIX, "torch": CELL["torch"],
    "flavor": "builder flavor from matrix.yaml builders (default: the stack's builder; on a machine that would run "
              "it under qemu, a flavor that cross-compiles with its gcc, where one has the Python)",
    "python": "python minor version (default: all the builder and the stack share; one for wheels)",
    "platform": CELL["platform"],
    **{k: SITE[k] for k in ("base_image", "ca_bundle", "pip_index_url", "torch_index_url", "proxy", "no_proxy",
                            "network")},
    **ENGINE, **DRY, **OUTPUT,
    "repository": "the repository builder images are tagged into (default ascend-builder)",
    "emulated": "compile under qemu with the image's gcc, not with the flavor's cross compiler (an aarch64 "
                "builder on another machine cross-compiles by default: about 6 times faster)",
}
BUILDER = {**SOURCE, "debootstrap": "make a missing Debian base image here with debootstrap (the offline flavors)",
           **IMAGE_STEPS}
# The wheels' tasks build the stack's builder first when it is not here: its options too,
# which apply to that build (a wheel compiled before comes from the wheel cache by its key).
FIRST_BUILDER = {**BUILDER, **{k: "the builder, when this task builds it first: " + v
                               for k, v in BUILDER.items() if k in ("debootstrap", *IMAGE_STEPS)}}
TORCH_NPU = {
    **FIRST_BUILDER, "src": "a checkout with its submodules, a git bundle or a source tarball, or URL@REF (default: "
                     "the stack's release tag, torch_npu_tags, with its submodules at their pinned commits)",
    "submodule_src": "a bundle, tarball or checkout of a submodule (op-plugin, nlohmann) at its pinned commit, for "
                     "a --src that lacks it (repeatable)",
}
APEX = {
    **FIRST_BUILDER, "src": "a checkout, bundle or tarball of Ascend apex, or URL@REF (default: the matrix's pinned commit)",
    "submodule_src": "a bundle or checkout of NVIDIA apex holding the commit apex's build script checks out: its "
                     "clone reads it instead of the network",
}

RUN = {
    "image": "the image to run", "devices": "all (default), a list like 0,1 or a range like 0-3",
    "runtime": "auto (Ascend Docker Runtime when installed), ascend, or runc (device flags)",
    "shm_size": "shared memory for data loaders (default 16g)", "network_host": "use the host network",
    "host_root": "read the host's devices and driver files below this folder (default /)",
    **ENGINE, "dry": "print the run command only",
    "force": "run even when the image needs a newer driver or another chip than the host has",
}
BIND = {
    "bind": "with a launcher, each rank's cores: numa (default: its card's NUMA node, split between the cards on "
            "it), even (equal slices), off, or ranges per card like 0:0-23,1:24-47",
    "bind_min_cores": "the fewest cores a rank may get (default 5: vllm-ascend's floor per NPU)",
}
HCCL = {"hccl_timeout": "HCCL_CONNECT_TIMEOUT in seconds (default 1800; torch_npu warns below 300)"}
LAUNCH = {
    "hostfile": "many servers: one host per line (the first is the master); prints each node's command",
    "torchrun": "start the command with the image's launcher on every chosen card of this host: torchrun "
                "(hccl backend), or msrun for a MindSpore image",
    "msrun": "as --torchrun, for a MindSpore image (the same as --torchrun --framework mindspore)",
    "framework": "auto (default: the image's labels, else its name), torch or mindspore: which launcher (a "
                 "CANN-only image, cann, has none)",
    "nproc_per_node": "processes per host (default: the number of --devices, 8 for all)",
    "master_port": "the launcher's port on the master: torchrun's rendezvous, msrun's scheduler (default 29500)",
    **HCCL,
    "rank_table": "an hccl.json (invoke ranktable) mounted and named by RANK_TABLE_FILE",
    "node_rank": "with --hostfile: run this node's command here",
    "ssh": "with --hostfile: run every node's command over ssh (BatchMode), and wait for all",
    **BIND,
}
DOCTOR = {
    **MATRIX, "root": "read the host below this folder (default /)",
    "image": "also check this image's needs (driver, chip, arch) against the host",
    "json": "print the checks and this host's NPU network facts as JSON (the file `invoke ranktable` and "
            "`doctor --cluster` read)",
    "explain": "an error text, or a file holding a log: say what it means",
    "cluster": "check many hosts from their `doctor --json` files (repeatable, or a folder of them)",
    "user": "the user who will run containers (default: you)", **ENGINE,
}
RANKTABLE = {
    "hosts": "a host's `invoke doctor --json` file (repeatable, in rank order; or a folder: name order)",
    "chip": _either([f"{c.name} ({'rank table version ' if i == 0 else ''}{c.rank_table})"
                     for i, c in enumerate(_TABLES)]) + "; default: what the first host's npu-smi said",
    "devices": "the cards used on every host: all (default), a list like 0,1 or a range like 0-3",
    "output": "write hccl.json here (default: print it)",
}
JOB = {
    "name": "the job's name (lowercase, digits, '-')", "image": "the image by content tag (REPO:sha-...) or digest",
    "nodes": "servers (pods), default 2", "devices": "NPUs per server (default 8)",
    "kind": "ascendjob (Ascend operator on Volcano, default) or indexed (a plain indexed Job)",
    "chip": _either(_JOBS) + ": the operator's ring label and the device plugin's resource",
    "queue": "Volcano queue (default: default)", **HCCL,
    "framework": "auto (default: the image's labels when the engine has it, else its name), torch or mindspore "
                 "(a CANN-only image, cann, has no launcher to run a job with)",
    "output": "write the manifests here (default: print them)",
    "cpus": "whole CPUs per worker pod, requests = limits (default 16 per card; 0 asks for none)",
    "memory": "memory per worker pod, requests = limits, e.g. 512Gi (default 64Gi per card)",
    "bind": "numa (default) or even: each rank bound to an equal slice of the pod's cores; off: unbound",
    "bind_min_cores": BIND["bind_min_cores"],
}
PUSH = {
    **MATRIX,
    "registry": "target repository, e.g. registry.example.com/ascend/runtime or 127.0.0.1:5000/ascend-runtime",
    "repository": "local repository the images were tagged into (default ascend-runtime)",
    "torch": "only this stack (with --os etc.: one image not in `images:`)",
    "mindspore": "only the MindSpore image of this release (as --torch)",
    "cann": "only the CANN-only image of this CANN release (as --torch)", "os": "base OS name",
    "python": "python minor version", "chip": "kernels chip", "platform": "linux/arm64 or linux/amd64 (repeatable)",
    "join": "join the arches into manifest lists after pushing (default on)",
    "docker": ENGINE["docker"], "engine": "docker (default) or podman (reads registries with skopeo)",
    **DRY, **OUTPUT,
}
JOIN = {k: v for k, v in PUSH.items() if k not in ("repository", "join")}
UPDATE = {
    **MATRIX,
    "from": "read this ascend-deployer wheel or unpacked folder instead of fetching upstream.deployer (repeatable)",
    "from_docs": "read the copies of the documents upstream.docs names from this folder (each by its file name) "
                 "instead of fetching them over HTTPS",
    "cann_images": "also read the CANN releases Huawei's official CANN images install from this copy of "
                   "Ascend/cann-container-image (a checkout, a bare clone, or its tree): their cann/<tag>/Dockerfile "
                   "files; without it, the releases an earlier import took from there stay as they were",
    "pytorch_git": "read torch_npu's release tags (commit, version, submodules, offline flags) from this copy of "
                   "Ascend/pytorch (a clone, a mirror, or a git URL) into imported.yaml's torch_npu_tags; nothing "
                   "else is read",
    "dry": "print what would change; write nothing",
    "check": "write nothing; exit 1 when upstream has news (changed imported facts, or a newer ascend-deployer)",
    "pip_index_url": "the pip index to fetch ascend-deployer from (default: pip's own settings)",
    "ca_bundle": "CA bundle for pip behind a TLS proxy", "proxy": "proxy URL for pip", **OUTPUT,
}
LOCK = {
    **MATRIX,
    "torch": "lock this stack (repeatable; default: every stack)",
    "mindspore": "lock this MindSpore release's stack (repeatable)",
    "cann": "lock this CANN release's CANN-only stack (repeatable; its one layer, cann.txt)",
    "python": "only this Python (repeatable; default: the stack's whole range)",
    "platform": "linux/arm64 (default) or linux/amd64 (repeatable; x86_64 needs PyTorch's CPU index)",
    "refresh": "re-resolve even locks that are current, taking the newest releases (a stale lock is otherwise "
               "remade keeping the versions it had where they still fit)",
    "check": "resolve nothing: exit 1 if a lock is stale or broken; list the images in `images:` without one",
    "dry": "resolve and print what would change; write nothing",
    "pip_index_url": "the index to resolve against (default: PyPI)",
    "torch_index_url": SITE["torch_index_url"],
    "ca_bundle": "CA bundle behind a TLS proxy (default: the host's, as for builds)", "proxy": "proxy URL",
    **OUTPUT,
}
SBOM = {
    "image": "an image this project built (tag or id)", "output": "write the SBOM to FILE (default: print it)",
    "fresh": "make it from the image's contents even if the image carries one", **ENGINE,
}
PIN = {
    **MATRIX, "file": "a CANN .run file, or a CPython tarball `pythons:` names (Python-3.12.13.tar.xz), to hash "
                      "(repeatable)",
    "packages": "hash every CANN file the matrix knows found in this folder (repeatable)",
    "cann": "pin every file of this CANN release, downloading what is not in --packages or the cache",
    "offline": "with --cann: never download",
}
RENDER = {**MATRIX, "check": "only check that images/ and the generated pages are current; fail if stale"}
