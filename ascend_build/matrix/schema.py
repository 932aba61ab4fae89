"""The shapes of the matrix's two files: matrix.yaml, written by people (what they decide:
OSes, stacks, builders, images, pins, hand-recorded facts with their sources), and
imported.yaml, written by `invoke update` (Huawei's and Ascend's published facts, each
with its source). Checked key by key, every problem named with its file and line; what
the shapes cannot see is in semantics.py."""
from __future__ import annotations

from typing import Any

from ..platforms import ARCHES, PLATFORMS
from . import checker as s
from .cannenv import ENV_VALUE
from .official import CANN_TAG as OFFICIAL_TAG
from .yamlsource import KeyPath

VERSION = r"[0-9][0-9A-Za-z.+-]*"
MINOR = r"(2\.7|3\.([0-9]|1[0-9]))"        # CPython minors that exist or soon may (not 3.99)
DRIVER = r"[0-9]{2}\.[0-9]+\.([Rr][Cc][0-9]+|[0-9]+)(\.[0-9]+)?"
RUNS_ON = r"[0-9]{2}\.[0-9]+(\.([Rr][Cc][0-9]+|[0-9]+)(\.[0-9]+)?)?"
SHA256 = r"[0-9a-f]{64}"
RUN_AS = r"root|[0-9]{1,9}:[0-9]{1,9}"
MINDSPORE_RELEASE = r"[0-9]+\.[0-9]+\.[0-9]+([.-]?(rc|post)[0-9]+)*"
PEP440 = r"[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?"     # a release as PyPI normalizes it
# The grammars of what reaches a Dockerfile, a shell line or a YAML file as a word: none
# holds a quote, a backslash, a "$", a backtick or a space, so no value ends the word it is
# written as (templates/ quotes what it writes all the same: images/render.py).
URL = r"[A-Za-z0-9._~:/?#@%+=,-]+"             # what follows the scheme: no quote, space, ; & $ ( )
PATH = r"[A-Za-z0-9._/+-]+"
GIT_URL = r"[A-Za-z0-9._~:/@%+=,-]+"           # https://..., ssh://..., git@host:path, a folder
VERSION_SPEC = r"[0-9A-Za-z.,<>=!~*+-]+"       # a version, or a specifier like >=2.9,<3
# Companions a stack may carry: PyTorch's own domain libraries, whose wheels pin the torch
# release they were built for. DeepSpeed is not one: PyPI has only its source, which
# compiles against torch at install time (a user layer can carry it).
COMPANIONS = ("torchvision", "torchaudio")
# The sections imported.yaml holds; every other one is matrix.yaml's.
IMPORTED_KEYS = frozenset({"read", "cann", "torchnpu_compatible", "torch_npu_releases", "mindspore_releases",
                           "torch_npu_tags", "vllm_ascend_releases"})


def _sha(hint: str = "64 lowercase hex digits") -> s.Check:
    return s.string(SHA256, hint)


def _run_entry() -> s.Check:
    """A file recorded by hand: its name and the .run's sha256 (null until pinned)."""
    return s.record({"file": s.string(r"[A-Za-z0-9._-]+\.run", "a .run file name"),
                     "sha256": s.optional(_sha("64 lowercase hex digits, or null"))})


def _imported_entry() -> s.Check:
    """A file as the import names it: the .run, and Huawei's sum of the .zip around it where published."""
    return s.record({"file": s.string(r"[A-Za-z0-9._-]+\.run", "a .run file name")}, {"zip_sha256": _sha()})


def _env_value(c: s.Checker, value: Any, path: KeyPath) -> None:
    """A variable's value (a string), or a path list's entries (a list of strings)."""
    hint = "Dockerfile ENV text: no quote, backslash or backtick"
    (s.list_of(s.string(ENV_VALUE, hint)) if isinstance(value, list) else s.string(ENV_VALUE, hint))(c, value, path)


def _env_part() -> s.Check:
    return s.map_of(s.string(r"[A-Za-z_][A-Za-z0-9_]*", "an environment variable"), _env_value)


def _per_arch(item: s.Check) -> s.Check:
    return s.record({arch: item for arch in ARCHES})


def _pythons() -> s.Check:
    return s.record({"min": s.string(MINOR, "like \"3.8\""), "max": s.string(MINOR, "like \"3.11\""),
                     "default": s.string(MINOR, "like \"3.9\"")})


def _pins() -> s.Check:
    return s.map_of(s.string(r"[A-Za-z0-9_.-]+", "a PyPI name"), s.specifier, non_empty=False)


def _doc() -> s.Check:
    return s.record({"url": s.string(r"https?://" + URL, "a URL"), "file": s.string(r"[A-Za-z0-9._-]+", "a file name")})


_OS = s.map_of(s.string(r"[a-z0-9][a-z0-9.]*", "lowercase name like ubuntu22.04"), s.record({
    "image": s.reference("an image reference like debian:bookworm (NAME[:TAG][@sha256:DIGEST])"),
    "family": s.one_of("apt", "dnf"),
    "python": s.string(MINOR, "a python minor version like \"3.10\""),
}, {"debootstrap": s.string(r"[a-z]+", "a Debian suite like bookworm"),
    "glibc": s.string(r"2\.[0-9]+", "a glibc version like \"2.35\"")}))

_PYTHONS = s.map_of(s.string(MINOR, "a python minor version like \"3.10\""), s.record({
    "version": s.string(r"3\.[0-9]+\.[0-9]+", "a full CPython version like 3.9.2"),
    "urls": s.list_of(s.string(r"(https?|file)://" + URL, "a URL")),
    "sha256": s.optional(_sha("64 lowercase hex digits, or null")),
}))

_STACKS = s.map_of(s.string(VERSION, "a torch version like \"2.1.0\""), s.record({
    "torch": s.string(VERSION),
    "torch_npu": s.string(VERSION),
    "cann": s.string(),
    "python": _pythons(),
    "gcc": s.integer(4, 20),
    "pins": _pins(),
}, {
    "torch_index": s.map_of(s.one_of(*ARCHES), s.string(r"https?://" + URL, "an index URL"), non_empty=False),
    "torch_npu_on_pypi": s.boolean,
    "builder": s.string(),
    "companions": s.list_of(s.one_of(*COMPANIONS), non_empty=False),
    "nnal": s.boolean,
    "torch_atb": s.boolean,
    "cxx11_abi": s.map_of(s.one_of(*ARCHES), s.boolean),
}))

_MINDSPORE_STACKS = s.map_of(s.string(MINDSPORE_RELEASE, "a MindSpore release like 2.9.0"), s.record({
    "cann": s.string(), "python": _pythons(), "pins": _pins(),
}, {"nnal": s.boolean, "cxx11_abi": s.map_of(s.one_of(*ARCHES), s.boolean)}))

# CANN only: keyed by the CANN release; no framework release to pair, so no `cann:` of its own.
_CANN_STACKS = s.map_of(s.string(VERSION, "a CANN release like 8.0.RC3"), s.record({"python": _pythons()},
                                                                              {"pins": _pins(), "nnal": s.boolean}))

_BUILDERS = s.map_of(s.string(r"[a-z0-9][a-z0-9._]*", "a lowercase name"), s.record({
    "image": s.reference("an image reference; {arch} becomes aarch64 or x86_64", "{arch}"),
    "family": s.one_of("manylinux", "apt"),
    "gcc": s.list_of(s.integer(4, 20)),
    "python": s.string(r"/[A-Za-z0-9._/+{}-]*\{(X\.Y|XY)\}[A-Za-z0-9._/+{}-]*", "an interpreter path with {X.Y} or {XY}"),
    "pythons": s.list_of(s.string(MINOR, "like \"3.9\"")),
}, {"toolset": s.string(r"/[A-Za-z0-9._/+-]*\{gcc\}[A-Za-z0-9._/+-]*", "a toolset root with {gcc}, like /opt/rh/gcc-toolset-{gcc}"),
    "cann_from": s.string(VERSION, "a CANN version like 9.0.1"),
    "cross": s.reference("a Debian image with g++-N-aarch64-linux-gnu for the flavor's gccs"),
    "wheel_plat": s.string(r"manylinux_2_[0-9]+", "the wheels' platform tag, like manylinux_2_31")}))

_SOURCES = s.record({
    "torch_npu": s.record({"repo": s.string(GIT_URL, "a git URL")}),
    "apex": s.record({"repo": s.string(GIT_URL, "a git URL"), "ref": s.string(PATH, "a commit or tag")},
                     {"nvidia": s.record({"repo": s.string(GIT_URL, "a git URL"),
                                          "ref": s.string(r"[0-9a-f]{40}", "a 40-digit commit")}),
                      "pythons": s.list_of(s.string(MINOR, "like \"3.9\""))}),
})

_IMAGES = s.list_of(s.record({
    "stack": s.string(),
    "os": s.list_of(s.string()),
    "platforms": s.list_of(s.one_of(*PLATFORMS)),
}, {"python": s.string(MINOR), "chip": s.string(), "alias": s.string(r"[a-z0-9._-]+", "a lowercase tag"),
    "layers": s.list_of(s.record({"requirements": s.string(PATH, "a requirements file, relative to matrix.yaml")},
                                 {"name": s.string(r"[a-z0-9][a-z0-9_.-]{0,39}", "a lowercase tag part")}))}))

_UPSTREAM = s.record({
    "imported": s.string(r"[A-Za-z0-9._/-]+\.yaml", "the imported facts' file beside matrix.yaml, like imported.yaml"),
    "deployer": s.list_of(s.string(r"[0-9]+\.[0-9]+\.[0-9]+", "a release like \"26.0.0\"")),
}, {"choices": s.map_of(s.string(), s.record({"take": s.string(), "why": s.string()}), non_empty=False),
    "docs": s.record({}, {
        "compatibility": _doc(), "tags": _doc(),
        "torch_npu_notes": s.map_of(s.string(r"[0-9]+\.[0-9]+\.[0-9]+", "a TorchNPU release"), _doc()),
        "cann_notes": s.map_of(s.string(VERSION, "a CANN release"), _doc())}),
    # vLLM-Ascend's releases to import (for the serving images): from this release on, final
    # and post releases, and with `pre: true` its release candidates too.
    "serving": s.record({"from": s.string(PEP440, "a vllm-ascend release like \"0.21.0\"")}, {"pre": s.boolean})})

MATRIX = s.record({
    "schema": s.integer(1, 1),
    "defaults": s.record({"torch": s.string(), "os": s.string(), "chip": s.string(), "platform": s.one_of(*PLATFORMS)},
                         {"run_as": s.string(RUN_AS, "root, or UID:GID like 1000:1000")}),
    "os": _OS,
    "pythons": _PYTHONS,
    "upstream": _UPSTREAM,
    "cann_python_deps": s.list_of(s.string(r"[A-Za-z0-9_.-]+", "a PyPI name")),
    "stacks": _STACKS,
    "builders": _BUILDERS,
    "sources": _SOURCES,
    "images": _IMAGES,
}, {
    # CANN's numpy limits, per release (hand-written, with their source).
    "cann_numpy": s.map_of(s.string(VERSION, "a CANN version"), s.specifier),
    # The sha256 of imported files' .run installers a site pinned (`invoke pin`): its own fact.
    "cann_pins": s.map_of(s.string(r"[A-Za-z0-9._-]+\.run", "a .run file name"), _sha(), non_empty=False),
    # Kernels of chips no import lists (310B, 950), per CANN release, each with its source.
    "cann_chips": s.map_of(s.string(VERSION, "a CANN version"), s.record({
        "source": s.string(),
        "kernels": s.map_of(s.string(r"[0-9A-Za-z]+", "a chip like 310b"), s.map_of(s.one_of(*ARCHES), _run_entry())),
    })),
    # NNAL of the releases no import lists it for, each with its source.
    "cann_nnal": s.map_of(s.string(VERSION, "a CANN version"), s.record({
        "source": s.string(), "nnal": s.map_of(s.one_of(*ARCHES), _run_entry())})),
    "nnal_sip_from": s.string(VERSION, "a CANN version like 8.3.RC1"),
    # What SiP's set_env.sh exports (no official image copies it), with its source.
    "nnal_sip_env": s.record({"source": s.string(), "env": _env_part()}),
    "chip_support": s.map_of(s.string(r"[0-9A-Za-z]+", "a chip like 950"), s.record({
        "torchnpu_from": s.string(r"[0-9]+\.[0-9]+\.[0-9]+", "a TorchNPU release like 26.1.0"),
        "source": s.string()})),
    # How a torch_npu source build runs offline (hand-written, with its source).
    "torch_npu_build": s.record({
        "source": s.string(),
        "flags": s.list_of(s.string(r"--[a-z_]+", "a ci/build.sh flag like --disable_rpc"), non_empty=False),
        "env": s.map_of(s.string(r"[A-Z_]+", "an environment variable"),
                        s.string(ENV_VALUE, "a value: no quote, backslash or backtick"), non_empty=False),
        "submodules": s.list_of(s.string(r"third_party/" + PATH, "a submodule path like third_party/op-plugin")),
    }),
    "torch_npu_branches": s.map_of(s.string(VERSION, "a torch_npu version"),
                                   s.string(r"v" + PATH, "a release branch like v2.1.0-6.0.rc3")),
    # torch_atb (NNAL's Python plugin): its Pythons and its glibc floor per CANN series.
    "torch_atb": s.record({"source": s.string(), "pythons": s.list_of(s.string(MINOR, "like \"3.10\"")),
                           "glibc": s.map_of(s.string(r"[0-9]+\.[0-9]+", "a CANN series like \"9.1\""),
                                             s.string(r"2\.[0-9]+", "a glibc version like \"2.38\""))}),
    "mindspore_stacks": _MINDSPORE_STACKS,
    "cann_stacks": _CANN_STACKS,
})

_WHEEL_TAG = s.string(r"cp3[0-9]+-(aarch64|x86_64)", "a tag like cp310-aarch64")


def _releases(key: s.Check, wheel: s.Check, pythons_arch: s.Check, extra: dict[str, s.Check]) -> s.Check:
    return s.map_of(key, s.record({"cann": s.list_of(s.string(VERSION, "a CANN version"), non_empty=False)}, {
        "source": s.string(), "pypi": s.boolean,
        "pypi_pythons": s.map_of(pythons_arch, s.list_of(s.string(MINOR, "like \"3.10\""))),
        "wheels_source": s.string(),
        "wheels": s.map_of(_WHEEL_TAG, s.map_of(wheel, _sha("64 hex digits"))), **extra}))


IMPORTED = s.record({
    "cann": s.map_of(s.string(VERSION, "a CANN version like 8.0.RC3"), s.record({
        "source": s.string(),
        "url": s.string(r"https?://" + URL + "/", "a base URL ending in /"),
        "driver": s.optional(s.string(DRIVER, "an NPU driver version like 24.1.RC3, or null")),
        "toolkit": _per_arch(_imported_entry()),
        "kernels": s.map_of(s.string(r"[0-9A-Za-z]+", "a chip like 910b"), _per_arch(_imported_entry())),
    }, {"nnal": _per_arch(_imported_entry()),
        "runs_on": s.list_of(s.string(RUNS_ON, "a driver like 26.0.RC1, or a series like 25.2")),
        "runs_on_source": s.string(),
        # The official CANN images' tags of this release (Ascend/cann-container-image's cann/<tag>/):
        # its CANN-only stack is derived from them (load.py).
        "images": s.list_of(s.string(OFFICIAL_TAG, "an official CANN image's tag like 9.0.1-a3-ubuntu22.04-py3.11")),
        # Their -devel twins (each FROM its image, no CANN download of its own).
        "devel_images": s.list_of(s.string(OFFICIAL_TAG, "a -devel tag like 9.0.1-a3-ubuntu22.04-py3.11-devel")),
        # A part another source than `source` gave ("kernels.A3", "nnal") -> that source.
        "parts_source": s.map_of(s.string(r"kernels\.[0-9A-Za-z]+|nnal", "a part like kernels.A3 or nnal"),
                                 s.string()),
        # What its set_env.sh scripts export, per part (cannenv.py), and where it was read.
        "env_source": s.string(), "env_from": s.string(VERSION, "a CANN version"),
        "env": s.record({}, {"toolkit": _env_part(), "atb": _env_part()})})),
    "torch_npu_releases": _releases(s.string(VERSION, "a torch_npu version"), s.one_of("torch", "torch_npu"),
                                    s.one_of(*ARCHES), {
        "branch": s.string(r"v" + PATH, "a release tag or branch like v6.0.rc3-pytorch2.1.0"),
        "torchnpu": s.string(r"[0-9]+\.[0-9]+\.[0-9]+", "a TorchNPU release like 26.1.0")}),
}, {
    "read": s.record({"deployer": s.list_of(s.record({"version": s.string(), "wheel_sha256": s.optional(_sha())}),
                                            non_empty=False),
                      "docs": s.list_of(s.string(), non_empty=False)}, {"cann_images": s.string()}),
    "torchnpu_compatible": s.record({"source": s.string(), "series": s.map_of(
        s.string(r"[0-9]+\.[0-9]+", "a TorchNPU series like \"26.1\""),
        s.list_of(s.string(r"[0-9]+\.[0-9]+", "a CANN series like \"9.1\"")))}),
    "mindspore_releases": _releases(s.string(MINDSPORE_RELEASE, "a MindSpore release like 2.9.0"),
                                    s.one_of("mindspore"), s.one_of(*ARCHES, "any"), {}),
    "vllm_ascend_releases": s.map_of(s.string(PEP440, "a vllm-ascend release like 0.23.0"), s.record({
        "source": s.string(),
        "requires_python": s.string(r"[0-9A-Za-z.,<>=!~*+]*", "a Requires-Python specifier like >=3.10, or \"\""),
        "pins": s.map_of(s.one_of("torch", "torch_npu", "torchvision", "torchaudio", "triton_ascend", "transformers"),
                         s.string(VERSION_SPEC, "a version, or a specifier like >=2.9"), non_empty=False),
        "sdist": s.record({"file": s.string(r"[A-Za-z0-9._-]+\.tar\.gz", "an sdist file name"), "sha256": _sha()}),
        "vllm": s.optional(s.record({
            "version": s.string(PEP440, "a vllm release like 0.23.0"),
            "sdist": s.string(r"[A-Za-z0-9._-]+\.tar\.gz", "an sdist file name"), "sha256": _sha(),
            "requires_python": s.string(r"[0-9A-Za-z.,<>=!~*+]*", "a Requires-Python specifier like >=3.10,<3.15"),
            "source": s.string()})),
    }, {"wheels": s.map_of(s.one_of(*ARCHES), s.list_of(s.string(MINOR, "like \"3.10\""))),
        "vllm_note": s.string(),
        # Where the pins were read (the sdist's requirements.txt, or its PKG-INFO without one).
        "pins_source": s.string(),
        # Its Dockerfiles (each keyed by its name): the official image each builds FROM and what
        # its tag says, the SOC_VERSION its kernels are compiled for, where each was read.
        "images": s.map_of(s.string(r"Dockerfile(\.[A-Za-z0-9]+)*", "a Dockerfile's name like Dockerfile.a3"),
                           s.record({"from": s.string(r"[^\s\x00-\x1f]+", "an image reference"),
                                     "read": s.string()},
                                    {"cann": s.string(VERSION, "a CANN release as tagged, like 9.1.0"),
                                     "build": s.string(r"[0-9]{8,14}", "a dated build like 20260930220649"),
                                     "chip": s.string(r"[0-9A-Za-z]+", "a chip like a3"),
                                     "os": s.string(r"[a-z]+[0-9][0-9.]*", "an OS like ubuntu22.04"),
                                     "python": s.string(MINOR, "like \"3.12\""),
                                     "soc_version": s.string(r"[a-z0-9_]+", "a SOC_VERSION like ascend910b1")})),
        "ray": s.string(r"[A-Za-z0-9\[\]._,<>=!~ -]+", "a requirement like ray>=2.47.1,<=2.48.0"),
        "vllm_tag": s.string(r"v?[0-9][0-9A-Za-z.+-]*", "a vLLM tag like v0.23.0")}), non_empty=False),
    "torch_npu_tags": s.record({"source": s.string(), "tags": s.map_of(
        s.string(VERSION, "a torch_npu version"), s.record({
            "tag": s.string(r"v" + PATH, "a release tag like v6.0.rc3-pytorch2.1.0"),
            "commit": s.string(r"[0-9a-f]{40}", "a 40-digit commit"),
            "submodules": s.map_of(s.string(r"third_party/" + PATH, "a submodule path"),
                                   s.string(r"[0-9a-f]{40}", "a 40-digit commit"), non_empty=False),
            "flags": s.list_of(s.string(r"--[a-z_]+", "a ci/build.sh flag"), non_empty=False),
        }), non_empty=False)}),
})
