"""The devel suite: run by `invoke build --cann RELEASE --devel` on every candidate, before the
CANN-only image's suite (inherited) and before any tag. It holds what Huawei's `-devel` images
give an operator or extension developer: root in /opt, bash as /bin/sh, the compilers and the
tools, gtest found by pkg-config and a gtest program that builds and runs, nlohmann-json's
header, the Python build pins (the lock's, or the CANN-only image's where it holds one), and
CANN's environment still there in a plain `docker run`."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

from ascend_build.images.devel import PINS, TOOLS
from ascend_build.locking.layerlock import LayerLock
from ascend_build.locking.lock import normalize, pinned_versions
from tests.conftest import label

# What the tools' packages give on the PATH (the official images' lists, and the CANN-only
# image's compilers, which a devel image needs as much).
COMMANDS = ("gcc", "g++", "make", "cmake", "pkg-config", "patch", "gawk", "vim", "zip", "tree", "dos2unix", "sudo",
            "bzip2", "pigz", "git", "wget", "gdb", "ninja")

# A gtest program that reads a JSON document with nlohmann-json: both found as an operator's
# test build finds them (pkg-config, the system include path).
_GTEST = r"""
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
TEST(Devel, ReadsJson) { EXPECT_EQ(nlohmann::json::parse("{\"npu\": 8}")["npu"].get<int>(), 8); }
"""


def test_labels_say_devel_and_root(labels):
    assert label(labels, "kind") == "devel"
    assert label(labels, "user") == "root"
    assert label(labels, "runtime") == labels["org.opencontainers.image.base.name"]


def test_a_plain_run_is_root_in_opt_with_bash_as_sh(docker_run):
    out = docker_run("sh", "-c", 'id -u; pwd; echo "bash=${BASH_VERSION:-none}"')
    assert out.returncode == 0, out.stderr
    uid, cwd, shell = out.stdout.split()
    assert (uid, cwd) == ("0", "/opt")
    assert shell != "bash=none", "/bin/sh is not bash"


def test_the_compilers_and_tools_are_on_the_path(host):
    missing = [c for c in COMMANDS if host.run(f"command -v {shlex.quote(c)}").rc != 0]
    assert missing == []


def test_the_os_packages_are_the_official_devel_lists(host, cell):
    """Each package of the family's list is installed (apt: dpkg's status; dnf: rpm's)."""
    words = TOOLS[cell.os.family].split()
    ask = ("dpkg-query -W -f='${Package} ${Status}\\n' " if cell.os.family == "apt" else "rpm -q --qf '%{NAME} installed\\n' ")
    out = host.run(ask + " ".join(words))
    found = {line.split()[0] for line in out.stdout.splitlines() if line.endswith("installed")}
    assert sorted(set(words) - found) == [], out.stdout + out.stderr


def test_pkg_config_finds_gtest_and_a_gtest_program_builds_and_runs(host):
    flags = host.run("pkg-config --cflags --libs gtest_main")
    assert flags.rc == 0 and "-lgtest" in flags.stdout, flags.stdout + flags.stderr
    assert host.file("/usr/include/nlohmann/json.hpp").is_file
    script = (f"cd $(mktemp -d) && printf %s {shlex.quote(_GTEST)} > t.cc && "
              "g++ -std=c++17 t.cc $(pkg-config --cflags --libs gtest_main) -pthread -o t && ./t")
    out = host.run("bash -c " + shlex.quote(script))
    assert out.rc == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "[  PASSED  ] 1 test." in out.stdout


def test_set_env_sources_through_sh_and_changes_nothing_a_plain_run_has(docker_run, cell, image_env):
    """Scripts and makefiles run `sh -c '. set_env.sh'`: with bash as /bin/sh it sources (its
    bashisms fail under dash), and the CANN-only image's ENV, which a plain run has, is what
    it exports still (the runtime suite holds every variable; here the toolkit's home)."""
    set_env = cell.cann.era.set_env_path()
    out = docker_run("sh", "-c", f'before="$ASCEND_TOOLKIT_HOME"; . {shlex.quote(set_env)} >/dev/null && '
                                 'echo "$before"; echo "$ASCEND_TOOLKIT_HOME"')
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [image_env["ASCEND_TOOLKIT_HOME"]] * 2


def test_python_build_pins_are_the_locks_or_the_images_held_ones(host, devel_lock):
    """Each official pin is installed: at the lock's version, or (a package the CANN-only image
    holds) at the held one the lock records; the lock's own packages at their versions."""
    lock = LayerLock(Path("devel.txt"), devel_lock)      # read for its text only
    installed = {normalize(k): v for k, v in json.loads(host.run(
        "python -c " + shlex.quote("import json, site, importlib.metadata as m; print(json.dumps({d.metadata['Name']: "
                                   "d.version for d in m.distributions(path=site.getsitepackages())}))")).stdout).items()}
    locked = pinned_versions({"devel": devel_lock})
    assert locked and {n: installed.get(n) for n in locked} == locked
    for pin in PINS:
        name = normalize(pin.name)
        want = locked.get(name) or lock.held.get(name)
        assert want, f"{pin.text}: neither in the devel lock nor held by the CANN-only image"
        assert installed.get(name) == want, pin.text
        if name in locked and pin.version:
            assert want == pin.version, f"{pin.text}: the lock says {want}"
