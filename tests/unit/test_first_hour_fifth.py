"""The first hour, fifth pass (issue 78): a Debian cell of every CANN line, derived ones
included, and README's CANN-only command as printed for every release `invoke matrix`
lists; the tags and labels say what an image is; the smaller points a new user met. Each
command runs as a user types it (tests/forked.py)."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ascend_build.errors import UserError
from ascend_build.matrix import load_matrix
from ascend_build.matrix.frameworks import CANN
from tests.conftest import ROOT
from tests.forked import invoke

DEBIAN = ("debian11", "debian12", "debian13")


@pytest.fixture(scope="module")
def matrix():
    return load_matrix(ROOT / "matrix.yaml")


def cann_only(m, release: str):
    return m.stacks.get(CANN.stack_name(release)) or m.derived.get(CANN.stack_name(release))


# ------------------------------------------------------------------ a Debian cell of every CANN line
def test_every_cann_release_has_a_cann_only_line_with_a_debian_cell(matrix):
    """The derived lines included: a release with official images takes their Pythons, one
    without takes those of the releases published for it, or its nearest line's; each says
    where its Pythons come from, and builds on every Debian release debootstrap makes."""
    for release in matrix.cann:
        st = cann_only(matrix, release)
        assert st is not None, f"CANN {release}: no CANN-only line (`--cann {release}` would be refused)"
        for os_ in DEBIAN:
            assert matrix.allows(st, matrix.os[os_]), f"{st.name} on {os_}"
            cell = matrix.cell(st, os_)
            assert cell.python in st.pythons() and cell.cann.env is not None, cell.name
        if st.derived:
            assert st.derived_from and st.derived_from in st.python_path
            official = matrix.official_oses(st)
            # its release's official OSes (the default one where it has none), and Debian
            assert set(matrix.derived_oses(st)) == set(official or [matrix.defaults.os]) | set(DEBIAN), st.name
    assert cann_only(matrix, "8.5.0").derived_from.startswith("the Pythons of CANN 8.5.0's official images")
    assert "published for CANN 8.0.RC1" in cann_only(matrix, "8.0.RC1").derived_from
    assert "CANN 9.1.0's line" in cann_only(matrix, "9.1.1").derived_from


def test_a_derived_line_keeps_the_environment_of_its_releases_official_images(matrix):
    """Its Debian Dockerfile has the ENV its release's official images have, as its Ubuntu one."""
    from ascend_build.images.render import runtime_dockerfile
    st = cann_only(matrix, "8.5.0")
    debian = runtime_dockerfile(matrix, st, matrix.os["debian12"]).text
    ubuntu = runtime_dockerfile(matrix, st, matrix.os["ubuntu22.04"]).text
    env = [line for line in ubuntu.splitlines() if line.startswith(("ENV ASCEND_", "    ASCEND_", "    LD_LIBRARY"))]
    assert env and all(line in debian.splitlines() for line in env)
    assert (ROOT / "images/runtime/cann8.5.0/debian12/Dockerfile").read_text() == debian


def test_a_refused_os_names_one_that_is_built_the_default_first(matrix):
    """8.3.RC2's official images are on Ubuntu 22.04 and openEuler 24.03: a refusal names the
    matrix's default OS (Ubuntu 22.04), not the first of them by name."""
    with pytest.raises(UserError) as info:
        matrix.cell(cann_only(matrix, "8.3.RC2"), "openeuler22.03")
    said = str(info.value)
    assert f"pass --os {matrix.defaults.os}," in said and "debian12" in said
    assert matrix.cell(cann_only(matrix, "8.3.RC2")).os.name == matrix.defaults.os


def readme_cann_only_command() -> list[str]:
    """README's CANN-only command, as printed (its words after `invoke build`)."""
    text = (ROOT / "README.md").read_text()
    found = re.search(r"`invoke build (--cann \S+ [^`]*)`", text)
    assert found, "README prints no CANN-only command"
    return found[1].split()


@pytest.fixture(scope="module")
def where(tmp_path_factory):
    """A folder to run in, its own HOME, and an empty packages folder (no CANN file is here:
    a real run would download them; a dry one plans with stand-ins)."""
    folder = tmp_path_factory.mktemp("first-hour-fifth")
    (folder / "packages").mkdir()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("INVOKE_")}, "HOME": str(folder),
           "ASCEND_BUILD_CACHE": str(folder / "cache")}
    return folder, env


def plan(where, *argv: str):
    folder, env = where
    return invoke(*argv, "--dry", "--packages", str(folder / "packages"), cwd=folder, env=env)


def lock_refusal_only(out) -> bool:
    """The dry run planned the whole image and ends as the real one would, on the lock alone,
    naming the exact `invoke lock` that makes it."""
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    return (out.returncode == 2 and len(errors) == 1 and "has no lock" in errors[0]
            and re.search(r"`\S*(invoke|ascend-build) lock --cann \S+ --python 3\.\d+ --platform linux/\w+` makes one",
                          errors[0]) is not None and " tag '<built id>' " in out.stdout)


def test_readmes_cann_only_command_plans_for_every_release_the_matrix_lists(where, matrix):
    """The command as printed, with each release `invoke matrix` lists: the whole plan, and at
    most the lock refusal (the release's lock is committed for the Python it takes there)."""
    words = readme_cann_only_command()
    assert "--os" in words and words[words.index("--os") + 1] in DEBIAN
    listed = invoke("matrix", cwd=where[0], env={**where[1], "COLUMNS": "120"}).stdout
    releases = re.findall(r"^(\d+\.\d+\.(?:RC)?\d+) ", listed.split("CANN releases (imported.yaml):")[1], re.M)
    assert set(releases) == set(matrix.cann), releases
    assert "cann8.5.0*" in listed and "* a CANN-only line derived from the import" in listed   # found there
    for release in releases:
        argv = [release if i and words[i - 1] == "--cann" else w for i, w in enumerate(words)]
        out = plan(where, "build", *argv)
        said = out.stdout[-1500:] + out.stderr[-1500:]
        assert out.returncode == 0 or lock_refusal_only(out), f"{release}: {said}"
        assert "Traceback" not in said


def test_the_done_when_command_plans_with_its_lock(where):
    out = plan(where, "build", "--cann", "8.5.0", "--os", "debian12", "--python", "3.11", "--platform", "linux/arm64")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "python packages: locked by locks/cann8.5.0/py3.11-aarch64" in out.stdout
    assert "ascend-runtime:cann8.5.0-910b-debian12-py3.11-arm64" in out.stdout
    assert "/images/runtime/cann8.5.0/debian12/Dockerfile " in out.stdout


# ------------------------------------------------------------------ tags and labels say what the image is
def test_every_kind_labels_its_images_with_its_kind():
    """The kind label on every kind's image, the runtime's (a CANN-only image is one) and the
    builder's too: `run --serve` and `invoke test --image` read it."""
    from ascend_build.images import catalog
    from ascend_build.images.kinds import BUILDER, RUNTIME, BuilderFacts, RuntimeFacts, label
    m = load_matrix(ROOT / "matrix.yaml")
    cell = m.cell("cann9.0.0", "debian12", "3.11")
    facts = RuntimeFacts(cell, "sha-0", "debian:bookworm", "absent", "", "none", "[]")
    assert RUNTIME.labels(facts)[label("kind")] == "runtime"
    assert BUILDER.labels(BuilderFacts(m.builder_cell("2.1.0"), "sha-0", "x"))[label("kind")] == "builder"
    # the kinds on a runtime image set theirs (their modules' tests hold the values)
    assert set(catalog.KINDS) == {"runtime", "builder", "layer", "devel", "serving"}
    assert all(kind.name == name for name, kind in catalog.KINDS.items())


def test_a_devel_image_keeps_every_word_of_its_cann_only_images_tag(where):
    """`--no-nnal`: the CANN-only image is ...-py3.11-nonnal-arm64, and its devel image
    ...-py3.11-nonnal-devel-arm64 (was ...-py3.11-devel-arm64, the name of the devel image
    with NNAL); both labelled with their kind."""
    out = plan(where, "build", "--cann", "9.0.0", "--os", "debian12", "--python", "3.11", "--no-nnal", "--devel")
    said = out.stdout + out.stderr
    assert out.returncode == 0, said[-3000:]
    assert "ascend-runtime:cann9.0.0-910b-debian12-py3.11-nonnal-arm64" in out.stdout
    assert "ascend-runtime:cann9.0.0-910b-debian12-py3.11-nonnal-devel-arm64" in out.stdout
    assert "-py3.11-devel-arm64" not in out.stdout
    assert out.stdout.count("--label io.ascend-build.kind=runtime ") == 1
    assert out.stdout.count("--label io.ascend-build.kind=devel ") == 1


# ------------------------------------------------------------------ login shells keep the image's environment
IMAGE_PATH = "/opt/venv/bin:/usr/local/Ascend/ascend-toolkit/latest/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DEBIAN_PROFILE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"      # Debian's /etc/profile, root
HOSTILE = "a b $(touch {mark}) `touch {mark}` ';touch {mark};' \"x\" \\ * ~"


def login(shell: str, script: Path, before: dict[str, str], after: str = "") -> dict[str, str]:
    """What a login shell has once /etc/profile set PATH (as Debian's does) and sourced the
    profile script: the environment it was started with, `before`, and nothing else."""
    import subprocess
    code = f'PATH={DEBIAN_PROFILE_PATH}; export PATH; . "{script}"; {after}env -0'
    out = subprocess.run(["env", "-i", *(f"{k}={v}" for k, v in before.items()), shell, "-c", code],
                         capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return dict(item.split("=", 1) for item in out.stdout.decode().split("\0") if "=" in item)


@pytest.mark.parametrize("shell", ["bash", "dash"])
def test_the_profile_gives_a_login_shell_the_images_env_back(tmp_path, shell):
    """Debian's /etc/profile sets PATH anew (the venv and CANN's folders gone: `bash -lc python3`
    was /usr/bin/python3), and `su -` starts empty: the script sets every ENV variable again,
    PATH's folders in front in the image's order and none twice; a variable the container was
    started with keeps its value; who the shell is (HOME, USER) is the login's; a value is
    data, whatever it holds."""
    import shutil

    from ascend_build.images.finish import profile_text
    if not shutil.which(shell):
        pytest.fail(f"{shell} is not installed (scripts/bootstrap.sh)")
    mark = tmp_path / "ran"
    env = [f"PATH={IMAGE_PATH}", "ASCEND_TOOLKIT_HOME=/usr/local/Ascend/ascend-toolkit/latest",
           "LD_LIBRARY_PATH=/usr/local/Ascend/ascend-toolkit/latest/lib64", "HOME=/root", "USER=root",
           f"HOSTILE={HOSTILE.format(mark=mark)}", "not-a-name=1"]
    script = tmp_path / "ascend-build-env.sh"
    script.write_text(profile_text(env))
    # `su -`: nothing but what login set
    got = login(shell, script, {"HOME": "/home/user"})
    assert got["PATH"] == IMAGE_PATH
    assert got["ASCEND_TOOLKIT_HOME"] == "/usr/local/Ascend/ascend-toolkit/latest"
    assert got["HOSTILE"] == HOSTILE.format(mark=mark) and not mark.exists()
    assert got["HOME"] == "/home/user" and "USER" not in got and "not-a-name" not in got
    # `bash -lc` in `docker run -e LD_LIBRARY_PATH=...`: the run's value kept; sourced twice, PATH the same
    got = login(shell, script, {"LD_LIBRARY_PATH": "/mine"}, after=f'. "{script}"; ')
    assert got["LD_LIBRARY_PATH"] == "/mine" and got["PATH"] == IMAGE_PATH
    # a PATH of the user's own beyond the image's folders stays, behind them
    got = login(shell, script, {}, after=f'PATH=/mine:$PATH; . "{script}"; ')
    assert got["PATH"] == f"/mine:{IMAGE_PATH}"


# ------------------------------------------------------------------ the smaller points
def test_the_dry_runs_times_are_the_measured_ones_from_one_table(where):
    """A CANN-only arm64 image took 13 min cold here, the 2.10.0-26.1.0 runtime 16.6 (13.5 of
    them the OS packages under qemu); the plan said "about 3 min". Every time a plan says is
    made from durations.TOOK's figures: a new measurement is written there once."""
    from ascend_build.inputs.durations import TOOK, said
    for step, took in TOOK.items():
        assert str(int(max(took.minutes) / (60 if max(took.minutes) >= 90 else 1) + 0.5)) in said(step), step
    from ascend_build.platforms import get as get_platform
    assert said("cann-only image") == "about 13 min here" and said("image") == "about 3-17 min here"
    assert said("os packages under qemu") == "about 3-14 min here"
    # this project's build machines are x86_64: an arm64 image's steps run under qemu there
    emulated = next((p for p in ("linux/arm64", "linux/amd64") if get_platform(p).emulated()), None)
    amd64 = next(p for p in ("linux/amd64", "linux/arm64") if not get_platform(p).emulated())
    if emulated is not None:
        cann = [line for line in plan(where, "build", "--cann", "8.5.0", "--os", "debian12", "--platform",
                                      emulated).stdout.splitlines() if line.startswith("# takes minutes: the image ")]
        assert cann == ["# takes minutes: the image cann8.5.0-910b-debian12-py3.11, cold (about 13 min here; of "
                        f"that, the OS packages under qemu: {said('os packages under qemu')}; later builds take the "
                        "unchanged steps from the cache)"]
        torch = plan(where, "build", "--torch", "2.1.0", "--os", "debian12", "--platform", emulated).stdout
        assert "cold (about 3-17 min here; of that, the OS packages under qemu" in torch
    native = plan(where, "build", "--torch", "2.1.0", "--os", "debian12", "--platform", amd64, "--unlocked").stdout
    assert "cold (at most about 3-17 min here: measured with the image's steps under qemu" in native


def test_the_commands_help_lists_the_tasks(tmp_path):
    """`ascend-build --help` gave invoke's core options and no task (`--list` was needed):
    now the tasks follow them; outside a checkout it says where to run it."""
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("INVOKE_")}
    out = subprocess.run([sys.executable, "-m", "ascend_build", "--help"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Core options:" in out.stdout and "Available tasks:" in out.stdout
    tasks = re.findall(r"^  ([a-z][a-z-]+) ", out.stdout.split("Available tasks:")[1], re.M)
    assert {"build", "matrix", "render", "lock", "run", "site"} <= set(tasks), tasks
    assert "`ascend-build --help TASK` gives a task's options." in out.stdout
    elsewhere = subprocess.run([sys.executable, "-m", "ascend_build", "--help"], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=120)
    assert elsewhere.returncode == 0 and "run ascend-build in a checkout of this project" in elsewhere.stdout


def test_invoke_site_fits_the_terminal(where):
    """`invoke site` wrote lines of 317 columns: it fits the terminal as `invoke matrix` does;
    --wide keeps one line a row (what scripts read)."""
    folder, env = where
    for columns in (80, 100):
        out = invoke("site", cwd=folder, env={**env, "COLUMNS": str(columns)})
        assert out.returncode == 0, out.stderr
        longest = max(out.stdout.splitlines(), key=len)
        assert len(longest) <= columns, longest
        assert "ca_bundle" in out.stdout and "taken by" in out.stdout
    wide = invoke("site", "--wide", cwd=folder, env={**env, "COLUMNS": "80"})
    assert max(len(line) for line in wide.stdout.splitlines()) > 80
    assert all(len(line.split()) >= 2 for line in wide.stdout.splitlines()[2:])      # a row a line


def test_the_devel_image_has_git_wget_gdb_and_ninja(matrix):
    """Huawei's devel Dockerfile runs `git clone`, and its base images install git and wget;
    a developer debugs and builds with gdb and ninja: every OS family's devel image installs
    them, and the devel suite finds each command (tests/devel_image)."""
    from ascend_build.images import devel
    from tests.devel_image.test_devel import COMMANDS
    for os_ in matrix.os.values():
        words = devel.TOOLS[os_.family].split()
        assert {"git", "wget", "gdb", "ninja-build"} <= set(words), os_.family
        text = devel.dockerfile(os_).text
        assert all(w in text for w in ("git", "wget", "gdb", "ninja-build")), os_.name
        assert (ROOT / devel.dockerfile(os_).path).read_text() == text
    assert {"git", "wget", "gdb", "ninja"} <= set(COMMANDS)


def test_a_like_tag_with_a_wrong_suffix_is_answered_with_the_form_that_names_devel():
    """`--like ...-py3.11-dev` answered with a format line that said nothing of -devel."""
    from ascend_build.matrix.like import resolve
    with pytest.raises(UserError) as info:
        resolve(load_matrix(ROOT / "matrix.yaml"), "quay.io/ascend/cann:9.0.0-910b-ubuntu22.04-py3.11-dev")
    assert "[-devel]" in str(info.value) and "-devel" in str(info.value).split("reads", 1)[1]
