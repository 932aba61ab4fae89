"""The image suite: run by `invoke build` on every candidate before it is tagged, and
by `invoke test --image REF`. Expectations come from matrix.yaml via the `cell` fixture."""
from __future__ import annotations

import base64
import json
import re
import shlex
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ascend_build.images.checks import (
    HOST_DRIVER_LIBS,
    RESOLVE_SCRIPT,
    env_gaps,
    gap_fix,
    missing_libraries,
    nnal_vars,
    paths_of,
    read_resolved,
    sourcing_changes,
)
from ascend_build.images.kinds import LABEL_PREFIX
from ascend_build.locking.lock import Lock, normalize, pinned_versions
from ascend_build.matrix import FRAMEWORKS
from tests.conftest import label
from tests.image.conftest import run_on_npu


@pytest.fixture(scope="module")
def set_env(cell) -> str:
    """The set_env.sh of the image's CANN era (ascend-toolkit/ up to 8.5, cann/ from 9.0)."""
    return cell.cann.era.set_env_path()


def resolved(host, *envs: dict[str, str]):
    """Every path the environments name, as the kernel sees it in the image (its real path and
    the links on the way): PATH entries reach a release's tree through ascend-toolkit/latest."""
    out = host.run(f"python3 -c {shlex.quote(RESOLVE_SCRIPT)} {shlex.quote(json.dumps(paths_of(*envs)))}")
    assert out.rc == 0, out.stderr
    return read_resolved(out.stdout)


def no_gaps(gaps: list[str], cell) -> None:
    """The gaps, each with its entry and link, and what to do about them."""
    assert gaps == [], "\n".join(gaps) + "\n" + gap_fix(cell.cann.version, cell.cann.env.source if cell.cann.env else "")


def pyjson(host, code: str):
    out = host.run(f"python -c {shlex.quote(code)}")
    assert out.rc == 0, out.stderr
    return json.loads(out.stdout)


def test_each_distribution_is_installed_once(host):
    """One .dist-info per project in every site-packages the image's Pythons read: a second
    (numpy 2.4.6 beside 1.26.4, a layer's removal that never reached the image) makes
    `import` load one project twice, which can die or hang. Found by listing, not by
    importing, so it is the first thing the suite knows. (Read with the shell: a Python
    that starts can already be the broken one.)"""
    out = host.run("for d in /opt/venv/lib/python3*/site-packages /usr/lib/python3/dist-packages "
                   "/usr/local/lib/python3*/site-packages; do [ -d \"$d\" ] && ls -1 \"$d\" | grep '\\.dist-info$' "
                   "| sed \"s#^#$d/#\"; done; true")
    assert out.rc == 0, out.stderr
    seen: dict[tuple[str, str], list[str]] = {}
    for path in out.stdout.split():
        folder, name = path.rsplit("/", 1)
        project = name[: -len(".dist-info")].rsplit("-", 1)[0]
        seen.setdefault((folder, normalize(project)), []).append(name)
    twice = {f"{folder}: {project}": names for (folder, project), names in seen.items() if len(names) > 1}
    assert twice == {}, f"installed more than once: {twice}"


def test_set_env_exists_and_sources_cleanly(host, set_env):
    assert host.file(set_env).is_file
    result = host.run(f"bash -c 'source {set_env} && echo sourced'")
    assert result.rc == 0 and result.stdout.strip() == "sourced", result.stderr
    assert result.stderr == ""


def test_image_env_carries_everything_set_env_exports(host, image_env, set_env, cell):
    """Source the era's set_env.sh in an empty environment and compare with the image's ENV,
    paths as the kernel sees them (a folder the image reaches through ascend-toolkit/latest is
    the one set_env.sh names by the release's tree)."""
    out = host.run(f"env -i PATH=/usr/bin:/bin bash -c 'source {set_env} >/dev/null && env -0'")
    assert out.rc == 0, out.stderr
    exported = dict(item.split("=", 1) for item in out.stdout.split("\0") if "=" in item)
    no_gaps(env_gaps(exported, image_env, seen=resolved(host, exported, image_env)), cell)


def test_sourcing_set_env_changes_nothing_a_plain_docker_run_has(docker_run, host, cell, set_env):
    """`docker run` sources no set_env.sh, so the image ENV must be what they export:
    sourcing the toolkit's, then NNAL's at the image's ABI (and SiP's) where NNAL is in, sets
    no variable to another value and adds no folder to a path list (issue 68)."""
    scripts = [set_env]
    if cell.nnal is not None:
        scripts.append(f"{NNAL_ROOT}/set_env.sh --cxx_abi={cell.abi}")
        if cell.cann.sip:
            scripts.append(f"{SIP_ROOT}/set_env.sh")
    sourced = "; ".join(f". {script} >/dev/null" for script in scripts)
    # Both environments from one shell, written out before and after, base64 between lines.
    out = docker_run("bash", "-c", f"env -0 > /tmp/before.env; {sourced}; env -0 > /tmp/after.env; "
                                   "base64 -w0 /tmp/before.env; echo; base64 -w0 /tmp/after.env; echo")
    assert out.returncode == 0, out.stderr
    before, after = (dict(item.split("=", 1) for item in base64.b64decode(text).decode().split("\0") if "=" in item)
                     for text in out.stdout.split())
    changes = sourcing_changes(before, after, resolved(host, before, after))
    assert changes == [], "\n".join(changes) + "\n" + gap_fix(cell.cann.version, cell.cann.env.source if cell.cann.env
                                                                 else "")


# The CANN tools people run by name in a container (profiling, diagnosis), by the folder
# their release's set_env.sh puts on PATH (the 9.x toolkits: tools/profiler/bin, asys).
PATH_TOOLS = {"msprof": "tools/profiler/bin", "asys": "tools/ascend_system_advisor/asys"}


def test_cann_tools_resolve_to_the_toolkits_in_a_plain_docker_run(docker_run, cell, image_env):
    """msprof and asys, where the release's environment puts their folders on PATH (9.x),
    are found by name in a plain `docker run`, in the installed toolkit."""
    path = cell.cann.env.entries("PATH", ("toolkit",)) if cell.cann.env else []
    expected = {tool: folder for tool, folder in PATH_TOOLS.items() if any(e.endswith("/" + folder) for e in path)}
    if cell.cann.version.startswith("9."):
        assert set(expected) == set(PATH_TOOLS), f"CANN {cell.cann.version}'s environment puts no {PATH_TOOLS} on PATH"
    out = docker_run("bash", "-c", "for t in " + " ".join(PATH_TOOLS) + "; do "
                     "echo \"$t $(readlink -f \"$(command -v \"$t\")\" 2>/dev/null)\"; done; "
                     "readlink -f \"$ASCEND_TOOLKIT_HOME\"")
    assert out.returncode == 0, out.stderr
    *found, home = out.stdout.splitlines()
    where = dict((line.split(" ", 1) + [""])[:2] for line in found)
    for tool, folder in expected.items():
        assert where[tool] == f"{home}/{folder}/{tool}", f"{tool}: {where[tool] or 'not found'} (expected in {home})"


def test_toolkit_home_is_the_installed_release(host, cell, image_env):
    home = image_env["ASCEND_TOOLKIT_HOME"]
    assert home == cell.cann.era.home(cell.cann.version)
    # Every era keeps ascend-toolkit/latest (from 8.5 a link to the cann-<v> tree).
    latest = host.run("readlink -f /usr/local/Ascend/ascend-toolkit/latest").stdout.strip()
    assert latest and latest == host.run(f"readlink -f {home}").stdout.strip()
    info = host.file(f"{home}/{cell.arch}-linux/ascend_toolkit_install.info")
    assert info.is_file
    fields = dict(line.split("=", 1) for line in info.content_string.splitlines() if "=" in line)
    assert fields["version"] == cell.cann.version
    assert fields["arch"] == cell.arch


def test_operator_package_is_installed(host, cell, image_env):
    """The kernels (up to 8.3) or operator package (8.5+) for the image's CANN. Up to 8.3 its
    version file is documented (opp_kernel/version.info); for the 8.5+ operator package it
    is looked for where the open-source operator libraries put theirs, and when it is not
    there the test says it could not confirm the install rather than guess."""
    from ascend_build.matrix.eras import ops_version_names
    era, home = cell.cann.era, image_env["ASCEND_TOOLKIT_HOME"]
    found = host.run("for g in " + " ".join(f"{shlex.quote(home)}/{g}" for g in era.ops_version)
                     + '; do [ -f "$g" ] && echo "$g"; done').stdout.split()
    if not found:
        where = ", ".join(f"{home}/{g}" for g in era.ops_version)
        if era.ops_version_known:
            pytest.fail(f"no operator package version file at {where}: the kernels package is not installed")
        pytest.skip(f"could not confirm CANN {cell.cann.version}'s operator package: no version file at {where} "
                    f"(where this package records its version was not seen by this project)")
    named = set().union(*(ops_version_names(host.file(f).content_string) for f in found))
    assert cell.cann.version in named, f"{found} name {sorted(named)}, not CANN {cell.cann.version}"


# The folder each chip's kernels install into, below the operator tree (opp/). A3's and
# 950's as seen in installed CANN trees (opp/built-in/op_impl/ai_core/tbe/kernel/ascend910_93
# under cann-8.5.0, .../kernel/ascend950 under CANN 9.2.0, in public reports of real installs).
KERNEL_FOLDERS = {"910b": "ascend910b", "910": "ascend910", "310p": "ascend310p", "310b": "ascend310b",
                  "a3": "ascend910_93", "950": "ascend950"}


def test_the_chips_operator_tree_is_installed(host, cell, image_env):
    """The kernels of the image's chip, where the operators look for them (ASCEND_OPP_PATH):
    a 310b image carries ascend310b."""
    folder = KERNEL_FOLDERS.get(cell.chip.lower())
    assert folder is not None, f"the kernel folder of chip {cell.chip} is not known to this suite: add it to KERNEL_FOLDERS"
    tree = f"{image_env['ASCEND_OPP_PATH']}/built-in/op_impl/ai_core/tbe/kernel"
    assert host.file(f"{tree}/{folder}").is_directory, f"no {tree}/{folder}: the {cell.chip} kernels are not installed"


def test_atc_is_on_the_path_of_a_plain_docker_run(docker_run, image_env):
    """ATC, the model converter inference users run first (on 310B boards above all), comes
    with the toolkit in its bin/: a plain `docker run` finds it through the image's PATH. From
    8.5 the official images' PATH reaches it through ascend-toolkit/latest, the link to the
    release's tree: the same file."""
    result = docker_run("sh", "-c", "command -v atc && test -x \"$(command -v atc)\" && readlink -f \"$(command -v atc)\" "
                        "&& readlink -f \"$ASCEND_TOOLKIT_HOME/bin/atc\"")
    assert result.returncode == 0, f"atc is not on the image's PATH: {result.stdout}{result.stderr}"
    found, real, toolkits = result.stdout.split()
    assert real == toolkits, f"{found} is {real}, not the toolkit's {image_env['ASCEND_TOOLKIT_HOME']}/bin/atc ({toolkits})"


def test_a_rank_is_started_bound_to_its_cores(docker_run):
    """`invoke run` and `invoke job` start each rank through a wrapper that execs it under
    taskset (or numactl): the image has one of them on the PATH of a plain `docker run`,
    and the wrapper, given a plan of core 0 for local rank 0, starts Python on core 0 only."""
    from ascend_build.cluster.launch import RANK_WRAPPER
    found = docker_run("sh", "-c", "command -v taskset || command -v numactl")
    assert found.returncode == 0 and found.stdout.strip(), "neither taskset nor numactl in the image"
    bound = docker_run("env", "LOCAL_RANK=0", "ASCEND_BUILD_RANK_CPUS=0", "sh", "-c", RANK_WRAPPER,
                       "-c", "import os; print(sorted(os.sched_getaffinity(0)))")
    assert bound.returncode == 0, bound.stderr
    assert bound.stdout.strip().splitlines()[-1] == "[0]", bound.stdout


def test_plain_docker_run_has_the_environment(docker_run, cell):
    # No login shell and no profile: only image ENV can make these work.
    code = ("import json, os, sys, tbe.common; "
            "print(json.dumps([sys.executable, os.environ['ASCEND_OPP_PATH'], os.path.isdir(os.environ['ASCEND_OPP_PATH'])]))")
    result = docker_run("python", "-c", code)
    assert result.returncode == 0, result.stderr
    executable, opp, opp_exists = json.loads(result.stdout.strip().splitlines()[-1])
    assert executable == "/opt/venv/bin/python"
    assert opp_exists, f"ASCEND_OPP_PATH {opp} is not a directory"


def test_python_version(distributions, cell):
    assert distributions.python == cell.python


def framework_packages(cell) -> set[str]:
    """The framework's own packages (normalized): the first requirement of each of its layers
    (torch and torch-npu, mindspore); none for a CANN-only image."""
    specs = cell.stack.framework.lock(cell.stack, cell.arch, [])
    return {normalize(re.split(r"[=<>!~ @;\[]", reqs[0], maxsplit=1)[0]) for reqs in specs.values()}


# Every framework's own packages: what a CANN-only image must hold none of.
ANY_FRAMEWORK = {"torch"} | {normalize(f.package) for f in FRAMEWORKS.values() if f.package}


def _installed(distributions) -> dict[str, str]:
    """name (lowercase, - for _) -> version, of every distribution the image's Python sees."""
    return distributions.versions(lambda name: name.lower().replace("_", "-"))


def test_torch_and_torch_npu_versions(distributions, torch_cell):
    cell = torch_cell
    installed = _installed(distributions)
    assert cell.stack.torch is not None
    assert Version(installed["torch"]).base_version == cell.stack.torch.version
    # A source build may add a local label (2.1.0.post8+git...): the release must match.
    assert Version(installed["torch-npu"]).public == cell.stack.package


# One Python process for torch_npu's import and the companions' check: `import torch` alone
# takes most of a minute under qemu for torch 2.10, torch_npu's import as much again.
IMPORT_NPU = """import json, traceback
try:
    import torch, torch_npu
except Exception:
    print(json.dumps({"error": traceback.format_exc()[-4000:]})); raise SystemExit(0)
print(json.dumps({"torch_npu": torch_npu.__file__}))
"""
COMPANIONS = """import json, torch, importlib
from importlib.metadata import requires
names = {names!r}; mods = {{n: importlib.import_module(n) for n in names}}
b = torch.tensor([[0., 0., 1., 1.], [0., 0., 1., 1.]])
kept = mods["torchvision"].ops.nms(b, torch.tensor([0.9, 0.8]), 0.5).tolist() if "torchvision" in mods else [0]
print(json.dumps({{"torch": torch.__version__, "kept": kept, "needs": {{n: requires(n) for n in names}}}}))
"""


def _json_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def npu_import(docker_run, torch_cell):
    """`import torch, torch_npu` in a plain `docker run` (image ENV only), then, in the same
    process when it loaded, the companions' check: (the process, its JSON lines)."""
    companions = list(torch_cell.stack.torch.companions) if torch_cell.stack.torch else []
    code = IMPORT_NPU + (COMPANIONS.format(names=companions) if companions else "")
    result = docker_run("python", "-c", code)
    return result, _json_lines(result.stdout)


@pytest.mark.needs_companions
def test_companions_are_the_ones_made_for_this_torch(docker_run, torch_cell, npu_import):
    """torchvision (and other companions) present, and built for this torch: its C++
    operators load (a torchvision made for another torch fails here with `operator
    torchvision::nms does not exist`)."""
    result, lines = npu_import
    if not lines or "error" in lines[0]:
        # torch >= 2.5 loads torch_npu on `import torch` (device backend autoload); where
        # torch_npu did not load (test_torch_npu_imports_off_an_npu says why), this test, about
        # torch and its companions, runs without the autoload.
        companions = list(torch_cell.stack.torch.companions) if torch_cell.stack.torch else []
        result = docker_run("env", "TORCH_DEVICE_BACKEND_AUTOLOAD=0", "python", "-c",
                            COMPANIONS.format(names=companions))
        lines = _json_lines(result.stdout)
    assert result.returncode == 0 and lines, result.stderr[-4000:]
    found = lines[-1]
    assert found["kept"] == [0]
    from packaging.requirements import Requirement
    for name, needs in found["needs"].items():
        # The companion's own metadata pins the torch it was built for: this one.
        torch_req = [Requirement(r) for r in needs if normalize(Requirement(r).name) == "torch"]
        assert torch_req and all(r.specifier.contains(Version(found["torch"]).public) for r in torch_req), \
            (name, needs)


def test_pins_hold(distributions, cell):
    installed = _installed(distributions)
    for name, spec in cell.stack.pins.items():
        key = name.lower().replace("_", "-")
        assert key in installed, f"{name} pinned ({spec}) but not installed"
        assert Version(installed[key]) in SpecifierSet(spec), f"{name} {installed[key]} does not satisfy {spec}"
    if cell.cann.numpy:
        assert Version(installed["numpy"]) in SpecifierSet(cell.cann.numpy)


def test_torch_npu_libraries_resolve(host, torch_cell):
    """Every shared library torch_npu's extensions need resolves inside the image,
    except the host driver's (listed in ascend_build.images.checks.HOST_DRIVER_LIBS) and
    those of optional CANN packages not installed (OPTIONAL_PACKAGE_LIBS, named there)."""
    cell = torch_cell
    root, torch_lib = pyjson(host, "import json, os, importlib.util as u; "
                                   "loc = lambda m: u.find_spec(m).submodule_search_locations[0]; "
                                   "print(json.dumps([loc('torch_npu'), os.path.join(loc('torch'), 'lib')]))")
    files = host.run(f"find {shlex.quote(root)} -name '*.so*' -type f").stdout.split()
    assert files, f"no shared objects under {root}"
    # libtorch*/libc10 and libtorch_npu are loaded in-process by `import torch` and
    # `import torch_npu` before the extensions that need them; ldd alone cannot know
    # that, so it gets those packages' own lib dirs. CANN's libraries must resolve from
    # the image ENV alone.
    own = ":".join([torch_lib] + sorted({str(Path(f).parent) for f in files}))
    ldd = {f: host.run(f"LD_LIBRARY_PATH={shlex.quote(own)}:$LD_LIBRARY_PATH ldd {shlex.quote(f)}").stdout
           for f in files}
    # With NNAL in, libatb.so (the ATB plugin's) must resolve from the image ENV too.
    assert missing_libraries(ldd, frozenset({"Ascend-cann-nnal"}) if cell.nnal else frozenset()) == {}


# The host driver's libraries, as a loader names them when one is missing.
DRIVER_MISSING = tuple(f"{lib}: cannot open shared object file" for lib in sorted(HOST_DRIVER_LIBS))


def test_torch_npu_imports_off_an_npu(docker_run, torch_cell, npu_import):
    """`import torch_npu` in a plain `docker run` (the image ENV only), with no NPU: an image
    whose torch_npu cannot load (made for another torch or Python, a library or a symbol
    missing) is refused before its tag, not on the cluster. On the CANN test double the stub
    libraries define what torch_npu's binaries link (tests/doubles/cann_exports.txt). A real
    CANN's libraries may want the host's driver (libascend_hal.so): the toolkit's driver stubs
    (<arch>-linux/devlib) stand in for it where the image has them; where neither is there,
    the import is left to the NPU smoke test (docs/unverified.md)."""
    result, lines = npu_import
    said = lines[0] if lines else {"error": result.stderr[-4000:]}
    if "error" in said and any(m in said["error"] for m in DRIVER_MISSING):
        result = docker_run("bash", "-c", 'LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$ASCEND_TOOLKIT_HOME/$(uname -m)-linux/devlib" '
                                          'exec python -c "$0"', IMPORT_NPU)
        lines = _json_lines(result.stdout)
        said = lines[0] if lines else {"error": result.stderr[-4000:]}
        if "error" in said and any(m in said["error"] for m in DRIVER_MISSING):
            pytest.skip("torch_npu's CANN libraries want the host's NPU driver, and the image has no driver stubs: "
                        "the NPU smoke test imports it")
    assert "error" not in said, said["error"]
    assert said["torch_npu"].startswith("/opt/venv/"), said


def test_no_installer_left_in_the_image(host):
    found = host.run("find / -xdev -name 'Ascend-cann-*.run' -o -xdev -name 'Atlas-*.run'").stdout.split()
    assert found == []


def test_package_manifest_is_in_the_image(host, cell):
    manifest = host.file("/usr/local/share/ascend-build/manifest.txt")
    assert manifest.is_file
    text = manifest.content_string
    assert f"version={cell.cann.version}" in text and f"arch={cell.arch}" in text
    assert "# pip freeze" in text
    lines = text.splitlines()
    if not cell.stack.framework.layers:     # CANN only: no framework's package in the freeze
        frozen = {normalize(re.split(r"==| @", line, maxsplit=1)[0]) for line in lines if "==" in line or " @ " in line}
        assert frozen and not frozen & ANY_FRAMEWORK, sorted(frozen & ANY_FRAMEWORK)
        return
    if cell.stack.torch is None:          # MindSpore: its release, the wheel the lock names
        assert f"{cell.stack.framework.package}=={cell.stack.package}" in lines
        return
    assert any(line.lower().startswith(("torch_npu==", "torch-npu==", "torch_npu @", "torch-npu @")) for line in lines)
    assert any(line.startswith("torch==") for line in lines)


# What `python -m venv` puts in before any lock; Debian's and Ubuntu's python3-venv also
# seed a `pkg_resources` 0.0.0 distribution (Debian 11 does).
VENV_SEEDS = {"pip", "setuptools", "pkg-resources"}


def test_python_packages_are_exactly_the_lock(host, distributions, labels, cell):
    """A locked image holds its lock and nothing else in the venv: the same versions,
    whenever it is built (pip checked every wheel's sha256 on the way in)."""
    folder = "/usr/local/share/ascend-build/requirements"
    texts = {layer: host.file(f"{folder}/{layer}.txt").content_string for layer in cell.stack.layers}
    if labels[f"{LABEL_PREFIX}.lock"] == "none":
        assert all(text.startswith("# NOT LOCKED") for text in texts.values()), "label says unlocked, files do not"
        return
    assert all("--require-hashes" in text for text in texts.values())
    locked = pinned_versions(texts)
    installed = distributions.versions(normalize, site=True)
    wrong = {n: (v, installed.get(n)) for n, v in locked.items() if installed.get(n) != v}
    assert wrong == {}, "locked version -> installed"
    given = {"torch-npu"} if "torch-npu @ file://" in texts.get("torch_npu", "") else set()
    apex = set() if labels[f"{LABEL_PREFIX}.apex"] == "absent" else {"apex"}
    # An image of another kind built on this one (a user layer, a serving or a devel image)
    # adds its own lock beside the runtime's, which its own suite checks: any file there that
    # is not one of the runtime's layers. A serving image's two release files, installed from
    # their sdists or wheels, are in no lock.
    layers = {f: host.file(f"{folder}/{f}").content_string for f in host.run(f"ls {folder}").stdout.split()
              if f.endswith(".txt") and f.removesuffix(".txt") not in cell.stack.layers}
    releases = {"vllm", "vllm-ascend"} if labels.get(f"{LABEL_PREFIX}.kind") == "serving" else set()
    assert set(installed) - set(locked) - VENV_SEEDS - given - apex - set(pinned_versions(layers)) - releases == set()


# Run inside the image: every byte-compiled file of the venv checked against the image's
# own interpreter (magic number, and for timestamp-based .pyc the source's mtime and
# size, which is how Python decides to trust it), every console script's shebang, and
# pip's own consistency check. Files pip wrote on the build machine (the fast path)
# must pass exactly as those pip writes in the image.
_VENV_CHECK = r"""
import importlib.util, json, os, site, struct, subprocess, sys
sp = site.getsitepackages()[0]
bad, pyc = [], 0
for root, dirs, files in os.walk(sp):
    if not root.endswith("__pycache__"):
        continue
    for name in files:
        if not name.endswith(".pyc"):
            continue
        pyc += 1
        path = os.path.join(root, name)
        with open(path, "rb") as f:
            head = f.read(16)
        src = os.path.join(os.path.dirname(root), name.split(".")[0] + ".py")
        if head[:4] != importlib.util.MAGIC_NUMBER:
            bad.append(path + ": magic")
        elif struct.unpack("<I", head[4:8])[0] == 0 and os.path.exists(src):
            st = os.stat(src)
            mtime, size = struct.unpack("<II", head[8:16])
            if mtime != int(st.st_mtime) & 0xFFFFFFFF or size != st.st_size & 0xFFFFFFFF:
                bad.append(path + ": stale against its source")
shebangs = set()
for name in os.listdir("/opt/venv/bin"):
    path = os.path.join("/opt/venv/bin", name)
    if os.path.isfile(path) and not os.path.islink(path):
        with open(path, "rb") as f:
            first = f.readline()
        if first.startswith(b"#!"):
            shebangs.add(first.decode().strip())
check = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
# For each "X V is not supported on this platform": the tags its WHEEL file declares.
from importlib.metadata import distribution
tags = {}
for line in check.stdout.splitlines():
    if line.endswith(" is not supported on this platform"):
        name = line.split()[0]
        wheel = distribution(name).read_text("WHEEL") or ""
        tags[line] = [t.split(":", 1)[1].strip() for t in wheel.splitlines() if t.startswith("Tag:")]
print(json.dumps({"pyc": pyc, "bad": bad[:20], "shebangs": sorted(shebangs), "check": check.returncode,
                  "check_out": check.stdout[-2000:], "unsupported": tags, "machine": os.uname().machine}))
"""


def test_byte_code_scripts_and_dependencies_are_the_images_own(host):
    """Whichever machine ran pip (the fast path runs it on the build machine), the venv is
    what pip in the image makes: byte code valid for the image's Python, console scripts
    that start the venv's python, and `pip check` clean."""
    found = pyjson(host, _VENV_CHECK)
    # torch alone has thousands of modules; CANN's own needs (sympy, scipy) over a thousand
    assert found["pyc"] > 1000, "the venv was not byte-compiled"
    assert found["bad"] == []
    assert found["shebangs"] and all(s in ("#!/opt/venv/bin/python3", "#!/opt/venv/bin/python")
                                     or s.startswith("#!/bin/sh") for s in found["shebangs"]), found["shebangs"]
    # NVIDIA's aarch64 wheels (the CUDA torch's dependencies) declare the platform
    # "manylinux2014_sbsa" inside while named ..._aarch64: the same machine (ARM server),
    # a name pip does not know. Only that is let through, and only on aarch64.
    sbsa = [line for line, tags in found["unsupported"].items()
            if found["machine"] == "aarch64" and tags and all(t.endswith("_sbsa") for t in tags)]
    rest = [line for line in found["check_out"].splitlines() if line not in sbsa]
    assert found["check"] == 0 or rest == [], found["check_out"]


def test_every_installed_binary_is_for_the_images_machine(host):
    """Every ELF file any installed Python package records is built for the image's
    machine, whatever its wheel's tag said (the build checked the wheels before pip
    installed them; this reads what is in the image)."""
    from ascend_build.images import wheel_arch
    source = base64.b64encode(Path(wheel_arch.__file__).read_bytes()).decode()
    code = (f"import base64, json, os, site, types; m = types.ModuleType('wheel_arch'); "
            f"exec(base64.b64decode('{source}'), m.__dict__); "
            f"print(json.dumps(m.installed(os.uname().machine, site.getsitepackages())))")
    assert pyjson(host, code) == {}


def test_no_download_cache_or_staging_left_in_the_image(host):
    """The downloaded wheels and OS packages live in the engine's cache mounts, never in a
    layer; neither does pip's own cache, a --no-cache build's wheels or the fast path's
    staging folder. (A cache mount leaves its mount point behind: an empty folder.)"""
    for folder in ("/var/cache/ascend-build", "/root/.cache/pip", "/tmp/fresh-wheels", "/layer"):
        out = host.run(f"find {folder} ! -type d -print -quit 2>/dev/null")
        assert out.stdout.strip() == "", f"{folder} holds {out.stdout.strip()}"
    debs = host.run("find /var/cache/apt/archives /var/cache/dnf -name '*.deb' -o -name '*.rpm' 2>/dev/null")
    assert debs.stdout.strip() == ""


def test_sbom_is_in_the_image_schema_valid_and_carries_the_verified_sums(host, labels, cell):
    """CycloneDX 1.6, valid against its schema; the CANN installers with the sha256 the
    build verified; every Python package of the venv, with its wheel's sha256 when locked;
    the OS packages."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    from ascend_build.provenance.sbom import SBOM_PATH
    text = host.file(SBOM_PATH).content_string
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    doc = json.loads(text)
    by_group = lambda g: {c["name"]: c for c in doc["components"] if c.get("group") == g}   # noqa: E731
    verified = {e["file"]: e["sha256"] for e in json.loads(labels[f"{LABEL_PREFIX}.cann-sha256"])}
    assert set(verified) == {f.file for f in cell.cann_files}
    assert {n: c["hashes"][0]["content"] for n, c in by_group("Huawei CANN").items()} == verified
    libraries = {c["bom-ref"]: c for c in doc["components"] if c["type"] == "library"}
    locked = {} if labels[f"{LABEL_PREFIX}.lock"] == "none" else {
        p.name: p for p in Lock(Path("/"), "", {layer: host.file(f"/usr/local/share/ascend-build/requirements/"
                                                                   f"{layer}.txt").content_string
                                                for layer in cell.stack.layers}).packages}
    for name, pin in locked.items():
        entry = libraries.get(f"pypi:{name}")
        assert entry and entry["version"] == pin.version, name
        assert [h["content"] for h in entry.get("hashes", [])][:1] and entry["hashes"][0]["content"] in pin.hashes, name
    mine = framework_packages(cell)         # none for CANN only
    assert {f"pypi:{p}" for p in mine} <= set(libraries)
    others = {f"pypi:{p}" for p in ANY_FRAMEWORK - mine} & set(libraries)
    assert not others, f"another framework's packages in a {cell.stack.title} image: {sorted(others)}"
    os_packages = [r for r in libraries if r.startswith(("deb:", "rpm:"))]
    assert len(os_packages) > 50 and ("deb:bash" in os_packages or "rpm:bash" in os_packages)


def test_labels_describe_the_contents(labels, cell):
    assert labels[f"{LABEL_PREFIX}.cann"] == cell.cann.version
    assert labels[f"{LABEL_PREFIX}.{cell.stack.framework.release_label}"] == cell.stack.release
    # no other framework's label (every image carries .cann, CANN only's, with its CANN)
    others = [f"{LABEL_PREFIX}.{f.release_label}" for f in FRAMEWORKS.values() if f.layers and f is not cell.stack.framework]
    assert others and not [k for k in others if k in labels]
    if cell.stack.torch is None:
        assert f"{LABEL_PREFIX}.torch" not in labels
    else:
        assert labels[f"{LABEL_PREFIX}.torch"] == cell.stack.torch.version
        assert labels[f"{LABEL_PREFIX}.torch-npu"] == cell.stack.package
    assert labels["org.opencontainers.image.version"] == cell.name


def test_the_image_says_its_kind(labels, cell):
    """Every kind's image carries its kind (a CANN-only image's is runtime's); an image built
    on a runtime image (this suite runs on it after its own) says its own kind."""
    from ascend_build.images.catalog import ON_RUNTIME
    kind = label(labels, "kind")
    assert kind in {"runtime"} | {k.KIND.name for k in ON_RUNTIME}, kind
    if kind == "runtime":
        assert label(labels, "stack") == cell.stack.name


def test_apex_slot_matches_its_label(distributions, labels):
    apex = labels[f"{LABEL_PREFIX}.apex"]
    # what `pip show apex` finds: a distribution of that name on the Python's path
    installed = "apex" in distributions.versions(normalize)
    if apex == "absent":
        assert not installed, "apex is installed but the label says absent"
    else:
        assert installed, f"label names {apex} but apex is not installed"


@pytest.mark.needs_apex
def test_apex_extensions_load(host, torch_cell):
    """Ascend apex's setup.py (--cpp_ext; 5.0.0, 49a7994e patch/npu.patch) builds two top-level
    extensions against torch alone, apex_C and change_data_ptr: both installed, both load
    once torch is. (0027c91's npu_float_status, linked to torch_npu, is gone from 6cdd5ea3.)"""
    code = ("import importlib, importlib.metadata as md, json, torch; "
            "mods = sorted({str(f).split('.')[0] for f in md.files('apex') if str(f).endswith('.so') and '/' not in str(f)}); "
            "[importlib.import_module(m) for m in ('apex_C', 'change_data_ptr')]; print(json.dumps(mods))")
    mods = pyjson(host, code)
    assert {"apex_C", "change_data_ptr"} <= set(mods), mods


def test_npu_smoke(suite_engine, image, torch_cell):
    """The users' smoke test, on a host with NPUs; skipped (with the reason) elsewhere.
    Started the way `invoke run` starts containers on a 910B host."""
    code = "import torch, torch_npu; a = torch.randn(3, 4).npu(); print((a + a).cpu().sum().item())"
    result = run_on_npu(suite_engine, image, code, "the NPU tensor test")
    assert result.returncode == 0, result.stderr


# ------------------------------------------------------------------------------ NNAL
NNAL_ROOT = "/usr/local/Ascend/nnal/atb"


def test_nnal_is_the_releases_for_the_abi_of_torch(host, cell, image_env, labels):
    """NNAL where the matrix puts it (CANN 8.1.RC1 on, a framework that loads it: torch_npu's
    ATB plugin from 2.5.1, MindSpore's ATB kernels): the release's tree behind latest,
    ATB_HOME_PATH at the ABI the framework is built with. An image without NNAL has none of
    it, and its label says so."""
    if cell.nnal is None:
        assert labels[f"{LABEL_PREFIX}.nnal"] == "none"
        assert not host.file("/usr/local/Ascend/nnal").exists and "ATB_HOME_PATH" not in image_env
        return
    assert labels[f"{LABEL_PREFIX}.nnal"] == f"{cell.cann.version} cxx_abi_{cell.abi}"
    assert image_env["ATB_HOME_PATH"] == f"{NNAL_ROOT}/latest/atb/cxx_abi_{cell.abi}"
    assert host.run(f"readlink {NNAL_ROOT}/latest").stdout.strip() == cell.cann.version
    assert host.file(f"{image_env['ATB_HOME_PATH']}/lib/libatb.so").exists


@pytest.mark.needs_nnal
def test_image_env_carries_what_nnals_set_env_exports(host, cell, image_env):
    out = host.run(f"env -i PATH=/usr/bin:/bin bash -c '. {NNAL_ROOT}/set_env.sh --cxx_abi={cell.abi} >/dev/null "
                   f"&& env -0'")
    assert out.rc == 0, out.stderr
    exported = dict(item.split("=", 1) for item in out.stdout.split("\0") if "=" in item)
    no_gaps(env_gaps(exported, image_env, nnal_vars(exported), resolved(host, exported, image_env)), cell)


@pytest.mark.needs_nnal
def test_a_login_shell_sources_nnal_without_importing_torch(docker_run, cell):
    """/etc/profile.d passes NNAL's set_env.sh the image's ABI: without it the script
    imports torch to find out, seconds per shell (cann-container-image #102)."""
    out = docker_run("bash", "-lc", "cat /etc/profile.d/ascend-nnal.sh; echo \"ATB=$ATB_HOME_PATH\"; "
                     "ls /tmp/nnal-set-env-imported-torch 2>/dev/null || echo no-torch-import")
    assert out.returncode == 0, out.stderr
    assert f"set_env.sh --cxx_abi={cell.abi}" in out.stdout
    assert f"ATB={NNAL_ROOT}/latest/atb/cxx_abi_{cell.abi}" in out.stdout and "no-torch-import" in out.stdout


def test_torch_atb_is_there_only_where_asked_for(host, cell):
    """torch_atb (NNAL's Python plugin) imports where the build asked for it (--torch-atb or
    the stack's torch_atb: true), and is absent otherwise."""
    found = host.run("python -c 'import importlib.util as u; print(u.find_spec(\"torch_atb\") is not None)'")
    assert found.rc == 0, found.stderr
    assert found.stdout.strip() == str(cell.stack.torch_atb)


SIP_ROOT = "/usr/local/Ascend/nnal/asdsip"


def test_sip_is_beside_atb_where_nnal_holds_it(host, cell, image_env):
    """SiP (nnal/asdsip, in NNAL from 8.3): its release behind latest, ASDSIP_HOME_PATH and its
    library path in the image ENV as its set_env.sh exports them; none of it where NNAL has no SiP."""
    if cell.nnal is None or not cell.cann.sip:
        assert "ASDSIP_HOME_PATH" not in image_env
        assert not host.file(SIP_ROOT).exists
        return
    assert image_env["ASDSIP_HOME_PATH"].rstrip("/") == f"{SIP_ROOT}/latest"
    assert host.run(f"readlink {SIP_ROOT}/latest").stdout.strip() == cell.cann.version
    out = host.run(f"env -i PATH=/usr/bin:/bin bash -c '. {SIP_ROOT}/set_env.sh >/dev/null && env -0'")
    assert out.rc == 0, out.stderr
    exported = dict(item.split("=", 1) for item in out.stdout.split("\0") if "=" in item)
    no_gaps(env_gaps(exported, image_env, ("ASDSIP_HOME_PATH", "LD_LIBRARY_PATH"), resolved(host, exported, image_env)),
            cell)


@pytest.mark.needs_nnal
def test_nnals_libraries_resolve_from_the_image_env(docker_run, cell):
    """Every shared library of ATB (the image's ABI) and SiP finds what it links against in a
    plain `docker run`, with no set_env.sh sourced."""
    dirs = '"$ATB_HOME_PATH/lib"' + (' "$ASDSIP_HOME_PATH/lib"' if cell.cann.sip else "")
    out = docker_run("bash", "-c", f"n=0; for d in {dirs}; do for f in \"$d\"/*.so; do n=$((n+1)); "
                                   "ldd \"$f\" | sed \"s#^#$f: #\"; done; done; echo \"libraries: $n\"")
    assert out.returncode == 0, out.stderr
    assert "not found" not in out.stdout, out.stdout
    assert int(out.stdout.rsplit("libraries:", 1)[1]) >= (2 if cell.cann.sip else 1), out.stdout


def test_login_shells_start_bash_and_sh_alike(docker_run, cell):
    """`bash -l` and `sh -l` (dash on Debian) both start, silently and without importing torch:
    the profile hook sources NNAL's bash scripts in bash only, with the ABI given. (Not timed:
    what made a login shell slow, NNAL's set_env.sh importing torch, is checked for itself.)"""
    script = "rm -f /tmp/nnal-set-env-imported-torch; {shell} -lc true; echo rc=$?; " \
             "ls /tmp/nnal-set-env-imported-torch 2>/dev/null || echo no-torch-import"
    for shell in ("bash", "sh"):
        out = docker_run("bash", "-c", script.format(shell=shell))
        assert out.returncode == 0, out.stderr
        assert "rc=0" in out.stdout and "no-torch-import" in out.stdout, (shell, out.stdout)
        assert out.stderr.strip() == "", (shell, out.stderr)


# What a login shell and a plain `docker run` must agree on: the Python first on PATH (the
# venv's), that it imports the venv's packages, and CANN's tools (atc, as the kernel finds it).
LOGIN_CHECK = ('printf "python3=%s\\npython=%s\\natc=%s\\n" "$(command -v python3)" "$(command -v python)" '
               '"$(readlink -f "$(command -v atc)")"; '
               'python3 -c "import sys, numpy; print(\'prefix=\' + sys.prefix); print(\'numpy=\' + numpy.__file__)"')


def _said(out) -> dict[str, str]:
    return dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)


@pytest.fixture(scope="module")
def plain_run_finds(docker_run) -> dict[str, str]:
    """What LOGIN_CHECK finds in a plain `docker run` (one run for the three login shells)."""
    plain = docker_run("bash", "-c", LOGIN_CHECK)
    assert plain.returncode == 0, plain.stderr
    return _said(plain)


@pytest.mark.parametrize("how", ["bash -lc", "sh -lc", "su -"])
def test_a_login_shell_keeps_the_images_environment(docker_run, suite_engine, image, platform, labels, image_env,
                                                    plain_run_finds, how):
    """Kubernetes commands and CI jobs often run `bash -lc`: Debian's /etc/profile set PATH
    anew, so `bash -lc python3` was /usr/bin/python3 (not the venv's), `import numpy` failed,
    atc was not found, and a serving image's `bash -lc python` was "command not found". A
    login shell (`bash -l`, `sh -l`, and `su -` to the image's user, which starts from an
    empty environment) finds what a plain run finds, and has every variable the image sets."""
    from ascend_build.engine import RunSpec
    from ascend_build.images.finish import LOGIN_OWN
    names = " ".join(sorted(n for n in image_env if n not in LOGIN_OWN and re.fullmatch(r"[A-Za-z_]\w*", n)))
    script = f'{LOGIN_CHECK}; for n in {names}; do eval "[ -n \\"\\${{$n+x}}\\" ]" || echo "unset=$n"; done'
    if how == "su -":
        user = "HwHiAiUser" if label(labels, "user") != "root" else "root"
        out = suite_engine.run_container(RunSpec(image, ("su", "-", user, "-c", script), platform=platform,
                                                 user="0:0"), timeout=300)
    else:
        out = docker_run(how.split()[0], "-lc", script)
    assert out.returncode == 0, f"{how}: {out.stdout[-2000:]}{out.stderr[-2000:]}"
    got, want = _said(out), plain_run_finds
    for key in ("python3", "python", "atc", "prefix", "numpy"):
        assert got.get(key) == want[key], (f"{how}: {key} is {got.get(key) or 'not found'}, a plain run's "
                                           f"{want[key]} (the login shell's PATH: /etc/profile.d/ascend-build-env.sh)")
    unset = [line.split("=", 1)[1] for line in out.stdout.splitlines() if line.startswith("unset=")]
    assert unset == [], f"{how}: the image ENV's {unset} not set in a login shell"


def test_no_installer_log_is_left_in_the_image(host):
    """CANN's installers log under /var/log (ascend_seclog, and NNAL's cann_atb_log and
    cann_asdsip_log): each step removes what it wrote, so no layer carries a build's logs."""
    from ascend_build.matrix.eras import INSTALLER_LOGS
    left = [d for d in INSTALLER_LOGS if host.file(d).exists]
    assert left == []


def test_the_labels_say_the_pairing_kind_and_the_drivers(labels, cell):
    assert labels[f"{LABEL_PREFIX}.pairing"] == cell.pairing
    assert labels[f"{LABEL_PREFIX}.runs-on"].split() == list(cell.cann.runs_on)
    assert labels[f"{LABEL_PREFIX}.driver"] == (cell.cann.driver or "unknown")


def test_containers_run_as_the_images_user(docker_run, labels):
    """root, or the uid:gid the image was built to run as (the hosts' HwHiAiUser): its
    home and /workspace are its own, and CANN's environment works for it."""
    user = labels[f"{LABEL_PREFIX}.user"]
    out = docker_run("bash", "-c", "id -u; id -g; touch /workspace/.w && echo workspace-writable; "
                                   "test -w \"$HOME\" && echo home-writable; python -c 'import tbe.common' && echo cann")
    assert out.returncode == 0, out.stderr
    uid, gid, *said = out.stdout.split()
    assert f"{uid}:{gid}" == ("0:0" if user == "root" else user)
    assert said == ["workspace-writable", "home-writable", "cann"]
