"""TEST DOUBLE of Ascend CANN .run installers. Not CANN: nothing here is Huawei code.

Lays out each CANN era's tree as the reference describes it (kept apart from the build
system's own era table, so that a wrong table fails the image tests). Builds makeself-style archives (a bash header + a gzip tar payload) that take the real
installer's flags (--install --quiet --install-for-all --install-path= --full --devel
--check), refuse unknown flags, a wrong-arch host and a kernels install before the
toolkit, verify their payload on --check, and lay out the real tree: set_env.sh (exporting
what the release's real ones export: its imported environment, see below), msprof and asys
where the release's PATH holds their folders,
latest -> <version>, <arch>-linux/ascend_toolkit_install.info, opp_kernel/version.info (up to 8.3;
share/info/ops_*/version.info for the 8.5+ operator package),
/etc/Ascend records, and stub shared libraries with the real sonames (compiled for the
target arch) so that linker-path checks in the image tests mean something.

Used only by tests/; the build system never sees this module.
"""
from __future__ import annotations

import functools
import gzip
import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

# Libraries torch_npu's extensions link against (readelf -d on the 2.1.0.post8 and the
# 2.12.0.post3 wheels; the latter adds libnpu_profiler.so, and libatb.so from NNAL), and
# those MindSpore 2.9.0's Ascend backend adds (readelf -d on lib/plugin/libmindspore_ascend.so.2,
# lib/plugin/ascend/*.so and the lib/*.so they load, of its aarch64 wheel): all in the real
# toolkit's lib64.
TOOLKIT_SONAMES = ["libhccl.so", "libascendcl.so", "libacl_op_compiler.so", "libge_runner.so", "libgraph.so",
                   "libacl_tdt_channel.so", "libfmk_parser.so", "libascend_protobuf.so", "libnpu_profiler.so",
                   "libmsprofiler.so", "libacl_dvpp.so", "libacl_dvpp_op.so", "libacl_dvpp_mpi.so", "libnnopbase.so",
                   "libc_sec.so", "libplatform.so", "libruntime.so", "libascendalog.so", "libmmpa.so", "libprofapi.so",
                   "libregister.so", "libexe_graph.so", "libopapi.so"]
NNAL_SONAMES = ["libatb.so"]
# SiP's libraries (cann/sip docs: libasdsip.so, which loads libasdsip_core.so and libasdsip_host.so),
# in NNAL from 8.3 (nnal/asdsip/<v>/lib).
SIP_SONAMES = ["libasdsip.so", "libasdsip_core.so", "libasdsip_host.so"]
SIP_FROM = (8, 3)       # the double's own rule, kept apart from matrix.yaml's nnal_sip_from

# The set_env.sh scripts export what the real ones export for the release: the environment
# the official CANN images copy from them (imported.yaml's cann.<v>.env, SiP's from
# matrix.yaml's nnal_sip_env), with what each script works out itself put back: the toolkit's
# home (the double's own layout), the arch ($(uname -m)), NNAL's ABI (its --cxx_abi rule).
# NNAL's ABI rule: --cxx_abi=0|1, else ask torch (slow: it imports torch), which the double
# records in /tmp/nnal-set-env-imported-torch so a test can see it.
NNAL_SET_ENV_HEAD = r"""# set_env.sh written by the CANN TEST DOUBLE NNAL installer (mirrors the real exports)
# A bash script, as the real one is: ${BASH_SOURCE[0]} stops dash ("Bad substitution").
atb_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
abi=
for arg in "$@"; do case "$arg" in --cxx_abi=*) abi="${arg#--cxx_abi=}" ;; esac; done
if [ -z "$abi" ]; then
    : > /tmp/nnal-set-env-imported-torch
    abi=$(python3 -c 'import torch; print(int(torch.compiled_with_cxx11_abi()))' 2>/dev/null || echo 1)
fi
"""
SIP_SET_ENV_HEAD = r"""# set_env.sh written by the CANN TEST DOUBLE NNAL installer (SiP; mirrors the real exports)
path="${BASH_SOURCE[0]}"
asdsip_dir_path=$(cd "$(dirname "$path")"; pwd )
"""
SET_ENV_HEAD = "# set_env.sh written by the CANN TEST DOUBLE installer (mirrors the real exports)\n"
# The CANN tools the double lays out as stubs where the release's set_env.sh puts their
# folder on PATH (9.x: msprof, the profiler; asys, the system advisor).
PATH_TOOLS = {"tools/profiler/bin": "msprof", "tools/ascend_system_advisor/asys": "asys"}
CROSS_CC = {"aarch64": "aarch64-linux-gnu-gcc", "x86_64": "x86_64-linux-gnu-gcc"}


@functools.lru_cache(maxsize=None)
def release_env(version: str):
    """The CANN release's environment record (ascend_build/matrix/cannenv.py), from the
    committed matrix."""
    from ascend_build.matrix import load_matrix
    rel = load_matrix(Path(__file__).resolve().parents[2] / "matrix.yaml").cann.get(version)
    if rel is None or rel.env is None:
        raise ValueError(f"CANN {version}: no environment in the committed imported.yaml (cann.{version}.env)")
    return rel.env


def exports(variables, own: dict[str, str] | None = None) -> str:
    """`export` lines for a part's variables, as its set_env.sh writes them: a path list's
    entries before what was set already; `own`: text put back where the ENV form stands
    for what the script works out (a value's prefix -> the script's word for it)."""
    lines = []
    for var in variables:
        value = (":".join(var.value) + f"${{{var.name}:+:${var.name}}}") if var.is_list else var.value
        value = value.replace("${ASCEND_ARCH}", "$(uname -m)").replace("${NNAL_CXX_ABI}", "${abi}")
        for prefix, word in (own or {}).items():
            value = value.replace(prefix, word)
        lines.append(f'export {var.name}="{value}"')
    return "\n".join(lines) + "\n"


def toolkit_set_env(version: str) -> str:
    """The toolkit's set_env.sh, its home left as @HOME@ for the installer to write."""
    env = release_env(version)
    home = env.value("ASCEND_TOOLKIT_HOME", ("toolkit",))
    rest = tuple(v for v in env.part("toolkit") if v.name != "ASCEND_TOOLKIT_HOME")
    return SET_ENV_HEAD + "export ASCEND_TOOLKIT_HOME=@HOME@\n" + exports(rest, {home: "${ASCEND_TOOLKIT_HOME}"} if home else None)


def nnal_set_env(version: str) -> str:
    return NNAL_SET_ENV_HEAD + exports(release_env(version).part("atb"), {"/usr/local/Ascend/nnal/atb/": "${atb_dir}/"})


def sip_set_env(version: str) -> str:
    part = release_env(version).part("sip")
    if not part:
        raise ValueError(f"CANN {version}: the double lays out SiP, the matrix gives it no environment (nnal_sip_env)")
    return SIP_SET_ENV_HEAD + exports(part, {"/usr/local/Ascend/nnal/asdsip/": "${asdsip_dir_path}/"})

HEADER = r"""#!/bin/bash
# CANN TEST DOUBLE installer (tests/doubles/cann_double.py). Not CANN.
DOUBLE_KIND=@KIND@
DOUBLE_VERSION=@VERSION@
DOUBLE_ARCH=@ARCH@
DOUBLE_CHIP=@CHIP@
DOUBLE_TREE=@TREE@
DOUBLE_NEW_LAYOUT=@NEW@
DOUBLE_CANN_SET_ENV=@CANNSETENV@
# As a makeself header records its payload (Huawei's modified makeself: SHA and MD5 both).
skip="@LINES@"
filesizes="@SIZE@"
SHA="@SHA@"
MD5="@MD5@"
set -eu
install=0; check=0; quiet=0; path=/usr/local/Ascend
for arg in "$@"; do
    case "$arg" in
        --install) install=1 ;;
        --check) check=1 ;;
        --quiet) quiet=1 ;;
        --install-for-all) ;;
        --install-path=*) path="${arg#--install-path=}" ;;
        --full) [ "$DOUBLE_KIND" = toolkit ] || { echo "[ERROR] --full is a toolkit option" >&2; exit 1; } ;;
        --devel) [ "$DOUBLE_KIND" = kernels ] || { echo "[ERROR] --devel is a kernels option" >&2; exit 1; } ;;
        --version) echo "$DOUBLE_VERSION"; exit 0 ;;
        *) echo "[ERROR] unsupported option: $arg" >&2; exit 1 ;;
    esac
done
say() { [ "$quiet" = 1 ] || echo "$@"; }
payload() { tail -n +$((skip + 1)) "$0"; }
verify() {
    actual=$(payload | sha256sum | cut -d' ' -f1)
    if [ "$actual" != "$SHA" ]; then
        echo "[ERROR] Verifying archive integrity... the package is corrupted (expected $SHA, got $actual)" >&2
        exit 1
    fi
}
if [ "$install" = 0 ] && [ "$check" = 0 ]; then
    echo "[ERROR] nothing to do: give --install or --check" >&2; exit 1
fi
verify
if [ "$check" = 1 ]; then echo "Verifying archive integrity...  100%   SHA256 checksums are OK. All good."; fi
[ "$install" = 1 ] || exit 0
if [ "$(uname -m)" != "$DOUBLE_ARCH" ]; then
    echo "[ERROR] this package is for $DOUBLE_ARCH, the host is $(uname -m)" >&2; exit 1
fi
tree="$path/$DOUBLE_TREE"
info="$tree/$DOUBLE_ARCH-linux/ascend_toolkit_install.info"
if [ "$DOUBLE_KIND" = nnal ]; then
    if [ -z "${ASCEND_TOOLKIT_HOME:-}" ] || [ ! -d "${ASCEND_TOOLKIT_HOME}" ]; then
        echo "[ERROR] source the toolkit's set_env.sh before installing NNAL" >&2; exit 1
    fi
    mkdir -p "$path"
    payload | tar -xzf - -C "$path" --no-same-owner
    ln -sfn "$DOUBLE_VERSION" "$path/nnal/atb/latest"
    # The installers log as the real ones do (ATB's and SiP's install.sh, the wrapper's seclog).
    mkdir -p /var/log/cann_atb_log /var/log/ascend_seclog
    echo "nnal $DOUBLE_VERSION installed (CANN TEST DOUBLE)" > /var/log/cann_atb_log/cann_atb_install.log
    echo "nnal $DOUBLE_VERSION installed (CANN TEST DOUBLE)" > /var/log/ascend_seclog/ascend_nnal_install.log
    if [ -d "$path/nnal/asdsip/$DOUBLE_VERSION" ]; then
        ln -sfn "$DOUBLE_VERSION" "$path/nnal/asdsip/latest"
        mkdir -p /var/log/cann_asdsip_log
        echo "asdsip $DOUBLE_VERSION installed (CANN TEST DOUBLE)" > /var/log/cann_asdsip_log/cann_asdsip_install.log
    fi
    say "[INFO] nnal $DOUBLE_VERSION installed in $path (CANN TEST DOUBLE)"
    exit 0
fi
if [ "$DOUBLE_KIND" = kernels ]; then
    if [ ! -f "$info" ] || ! grep -q "^version=$DOUBLE_VERSION\$" "$info"; then
        echo "[ERROR] the toolkit $DOUBLE_VERSION must be installed in $path before its kernels" >&2; exit 1
    fi
    if [ -z "${ASCEND_TOOLKIT_HOME:-}" ]; then
        echo "[ERROR] source $path/ascend-toolkit/set_env.sh before installing the kernels" >&2; exit 1
    fi
fi
mkdir -p "$path" /etc/Ascend
payload | tar -xzf - -C "$path" --no-same-owner
if [ "$DOUBLE_KIND" = toolkit ]; then
    # Up to 8.3: ascend-toolkit/<v> behind `latest`. From 8.5: the tree is cann-<v>,
    # ASCEND_TOOLKIT_HOME points there, `ascend-toolkit/latest` is kept as a link; 9.x
    # also writes cann/set_env.sh.
    mkdir -p "$path/ascend-toolkit"
    if [ "$DOUBLE_NEW_LAYOUT" = 1 ]; then
        ln -sfn "../cann-$DOUBLE_VERSION" "$path/ascend-toolkit/latest"; home="$tree"
    else
        ln -sfn "$DOUBLE_VERSION" "$path/ascend-toolkit/latest"; home="$path/ascend-toolkit/latest"
    fi
    mkdir -p "$(dirname "$info")"
    printf 'package_name=Ascend-cann-toolkit\nversion=%s\ninnerversion=V100R001C19SPC001B001\narch=%s\nos=linux\npath=%s\n' \
        "$DOUBLE_VERSION" "$DOUBLE_ARCH" "$tree/$DOUBLE_ARCH-linux" > "$info"
    sed "s#@HOME@#$home#" "$tree/.set_env.sh.in" > "$path/ascend-toolkit/set_env.sh"
    if [ "$DOUBLE_CANN_SET_ENV" = 1 ]; then
        mkdir -p "$path/cann"; cp "$path/ascend-toolkit/set_env.sh" "$path/cann/set_env.sh"
    fi
    rm "$tree/.set_env.sh.in"
    printf 'Install_Path=%s\n' "$path" > /etc/Ascend/ascend_cann_install.info
else
    if [ "$DOUBLE_NEW_LAYOUT" = 1 ]; then
        # 8.5+ operator package: the libraries it bundles each record their version under
        # share/info/<library>/ (as the open-source cann/ops-* packages install theirs).
        for lib in ops_nn ops_math ops_transformer; do
            mkdir -p "$tree/share/info/$lib"
            printf 'Version=%s\nchip=%s\n' "$DOUBLE_VERSION" "$DOUBLE_CHIP" > "$tree/share/info/$lib/version.info"
        done
    else
        mkdir -p "$tree/opp_kernel"
        printf 'Version=%s\nversion_dir=%s\nchip=%s\n' "$DOUBLE_VERSION" "$DOUBLE_VERSION" "$DOUBLE_CHIP" \
            > "$tree/opp_kernel/version.info"
    fi
fi
say "[INFO] $DOUBLE_KIND $DOUBLE_VERSION installed in $path (CANN TEST DOUBLE)"
exit 0
"""


@functools.lru_cache(maxsize=None)
def exported() -> dict[str, tuple[str, ...]]:
    """soname -> the symbols its stub defines: what torch_npu's binaries leave undefined for
    CANN (cann_exports.txt, read from the wheels by cann_exports.py), so that `import torch_npu`
    loads on the double; a torch_npu that still fails to import fails for a reason of its own."""
    out: dict[str, list[str]] = {}
    for line in Path(__file__).with_name("cann_exports.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, libs = line.split()
            for lib in libs.split(","):
                out.setdefault(lib, []).append(name)
    return {lib: tuple(names) for lib, names in out.items()}


def _stub_libs(arch: str, out: Path, sonames: list[str] = TOOLKIT_SONAMES) -> list[Path]:
    """Compile one tiny shared library per soname, for the target arch, defining the symbols
    torch_npu needs from it as functions that do nothing and return 0 (ACL_SUCCESS, HCCL_SUCCESS,
    a null handle): enough to load, never to run an operator."""
    cc = CROSS_CC[arch] if shutil.which(CROSS_CC[arch]) else ("gcc" if os.uname().machine == arch else None)
    if cc is None:
        from tests.conftest import missing_tool
        missing_tool(f"a C compiler for {arch} ({CROSS_CC[arch]}, Debian: gcc-{arch.replace('_', '-')}-linux-gnu)")
    libs = []
    for soname in sonames:
        src = out / f"{soname}.c"
        src.write_text("int cann_test_double_stub(void) { return 0; }\n"
                       + "".join(f"long {name}(void) {{ return 0; }}\n" for name in exported().get(soname, ())))
        lib = out / soname
        subprocess.run([cc, "-shared", "-fPIC", "-fno-builtin", f"-Wl,-soname,{soname}", "-o", str(lib), str(src)],
                       check=True)
        libs.append(lib)
    return libs


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    tar.addfile(info, io.BytesIO(data))


def _add_dir(tar: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
    tar.addfile(info)


def _layout(version: str) -> tuple[str, bool, bool]:
    """(installed tree, new layout, cann/set_env.sh) of a release: up to 8.3
    ascend-toolkit/<v>; from 8.5.0 cann-<v> with ascend-toolkit/latest linking to it;
    9.x also /usr/local/Ascend/cann/set_env.sh (stack ref, section 2)."""
    major, minor = (int(x) for x in version.split(".")[:2])
    if (major, minor) >= (8, 5):
        return f"cann-{version}", True, major >= 9
    return f"ascend-toolkit/{version}", False, False


# Where real CANN puts each chip's kernels (opp/built-in/op_impl/ai_core/tbe/kernel/<folder>):
# Atlas A3's SoC is Ascend910_93.
KERNEL_FOLDERS = {"a3": "ascend910_93"}


def _payload(kind: str, version: str, arch: str, chip: str, pad_bytes: int, workdir: Path) -> bytes:
    buf = io.BytesIO()
    root = _layout(version)[0] if kind != "nnal" else "nnal"
    # mtime=0 in the gzip header: the same inputs give the same bytes (and build cache hits).
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=1, mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w") as tar:
        if kind == "toolkit":
            # runtime/ and compiler/ as in the real tree: torch_npu's import checks both are there.
            for d in ("lib64/plugin/opskernel", "lib64/plugin/nnengine", "bin", "compiler/ccec_compiler/bin",
                      "runtime/lib64", "toolkit", "tools/aml/lib64/plugin", f"opp/built-in/op_impl/ai_core/tbe/op_tiling/lib/linux/{arch}",
                      f"{arch}-linux"):
                _add_dir(tar, f"{root}/{d}")
            for lib in _stub_libs(arch, workdir):
                _add(tar, f"{root}/lib64/{lib.name}", lib.read_bytes(), 0o755)
            for pkg in ("tbe", "tbe/common", "te"):
                _add(tar, f"{root}/python/site-packages/{pkg}/__init__.py",
                     b"# CANN TEST DOUBLE: stand-in for CANN's Python package\n")
            _add(tar, f"{root}/bin/ascend-double-info", f"#!/bin/sh\necho 'CANN TEST DOUBLE {version}'\n".encode(), 0o755)
            # ATC, the model converter, where the real toolkit keeps it (bin/, on set_env's PATH).
            _add(tar, f"{root}/bin/atc", f"#!/bin/sh\necho 'ATC TEST DOUBLE (CANN {version})'\n".encode(), 0o755)
            for entry in release_env(version).entries("PATH", ("toolkit",)):
                folder = entry.removeprefix("${ASCEND_TOOLKIT_HOME}/")
                if folder in PATH_TOOLS:
                    tool = PATH_TOOLS[folder]
                    _add(tar, f"{root}/{folder}/{tool}",
                         f"#!/bin/sh\necho '{tool} TEST DOUBLE (CANN {version})'\n".encode(), 0o755)
            _add(tar, f"{root}/.set_env.sh.in", toolkit_set_env(version).encode(), 0o755)
        elif kind == "nnal":
            # nnal/atb/<v>/atb/cxx_abi_{0,1}/{lib,bin} and nnal/atb/set_env.sh (latest -> <v> at install).
            for abi in (0, 1):
                tree = f"nnal/atb/{version}/atb/cxx_abi_{abi}"
                _add_dir(tar, f"{tree}/bin")
                for lib in _stub_libs(arch, workdir, NNAL_SONAMES):
                    _add(tar, f"{tree}/lib/{lib.name}", lib.read_bytes(), 0o755)
            _add(tar, "nnal/atb/set_env.sh", nnal_set_env(version).encode(), 0o755)
            if tuple(int(x) for x in version.split(".")[:2]) >= SIP_FROM:
                for lib in _stub_libs(arch, workdir, SIP_SONAMES):
                    _add(tar, f"nnal/asdsip/{version}/lib/{lib.name}", lib.read_bytes(), 0o755)
                _add(tar, "nnal/asdsip/set_env.sh", sip_set_env(version).encode(), 0o755)
        else:
            folder = KERNEL_FOLDERS.get(chip.lower(), f"ascend{chip.lower()}")
            _add_dir(tar, f"{root}/opp/built-in/op_impl/ai_core/tbe/kernel/{folder}")
            _add(tar, f"{root}/opp/built-in/op_impl/ai_core/tbe/kernel/{folder}/double.json",
                 f'{{"chip": "{chip}", "double": true}}\n'.encode())
        if pad_bytes:
            # Incompressible filler, so image sizes behave like a real multi-GB CANN.
            _add(tar, f"{root}/share/{kind}-double-filler.bin", os.urandom(pad_bytes))
    return buf.getvalue()


def make_packages(out_dir: Path, version: str = "8.0.RC3", arch: str = "aarch64", chip: str = "910b") -> Path:
    """A packages folder as the README's build reads it: the toolkit and the chip's kernels."""
    make_run(out_dir, "toolkit", version, arch)
    make_run(out_dir, "kernels", version, arch, chip=chip)
    return out_dir


def make_run(out_dir: Path, kind: str, version: str, arch: str, chip: str = "910b", pad_bytes: int = 0,
             name: str | None = None) -> Path:
    """Write one double installer into out_dir, named as the real file would be
    (or `name`), and return its path."""
    if kind not in ("toolkit", "kernels", "nnal"):
        raise ValueError(kind)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        payload = _payload(kind, version, arch, chip, pad_bytes, Path(tmp))
    sha = hashlib.sha256(payload).hexdigest()
    header = HEADER
    tree, new_layout, cann_set_env = _layout(version)
    fields = (("@KIND@", kind), ("@VERSION@", version), ("@ARCH@", arch), ("@CHIP@", chip), ("@SHA@", sha),
              ("@MD5@", hashlib.md5(payload).hexdigest()), ("@SIZE@", str(len(payload))),
              ("@TREE@", tree), ("@NEW@", str(int(new_layout))), ("@CANNSETENV@", str(int(cann_set_env))))
    for key, value in fields:
        header = header.replace(key, value)
    header = header.replace("@LINES@", str(header.count("\n")))
    if name is None:
        from ascend_build.matrix import expected_kernels, expected_toolkit
        name = (expected_toolkit(version, arch) if kind == "toolkit" else
                f"Ascend-cann-nnal_{version}_linux-{arch}.run" if kind == "nnal" else
                expected_kernels(version, chip, arch))
    path = out_dir / name
    path.write_bytes(header.encode() + payload)
    path.chmod(0o755)
    return path
