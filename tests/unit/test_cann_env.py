"""CANN's environment (issue 68): what each release's set_env.sh scripts export, imported
from the official CANN images' Dockerfiles (upstream/cann_env.py, read here from synthetic
Dockerfiles in the shape their last stage takes), rendered into the runtime image's ENV
(matrix/cannenv.py), exported by the CANN test double's set_env.sh scripts, and the check
the image suite applies (images/checks.py: sourcing_changes) run on texts."""
from __future__ import annotations

import dataclasses
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from ascend_build.errors import UserError
from ascend_build.images.checks import sourcing_changes
from ascend_build.images.render import runtime_dockerfile
from ascend_build.matrix import load_matrix
from ascend_build.matrix.cannenv import EnvVar, env_instructions
from ascend_build.upstream import cann_env
from ascend_build.upstream.update import EnvEntry, Merged, fill_env
from tests.doubles import cann_double

ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------- the import

def _dockerfile(home: str, nnal_lines: str = "", abi: int = 1) -> str:
    """The shape of an official image's Dockerfile: a build stage, then the last stage with
    its Python's ENV, the toolkit's and NNAL's notes and their ENV lines, then a RUN."""
    return (f"FROM ubuntu:22.04 AS cann-installer\nENV ASCEND_TOOLKIT_HOME=/elsewhere\nRUN true\n\n"
            f"FROM ubuntu:22.04 AS official\n"
            f"# Python Environment variables\nENV PATH=/usr/local/python3.11.1/bin:${{PATH}}\n"
            f"ENV LD_LIBRARY_PATH=/usr/local/python3.11.1/lib:${{LD_LIBRARY_PATH}}\n\n"
            f"# Note: Toolkit Environment variables, obtained from /usr/local/Ascend/ascend-toolkit/set_env.sh\n"
            f"ENV ASCEND_TOOLKIT_HOME={home}\n"
            f"ENV LD_LIBRARY_PATH=/usr/local/Ascend/driver/lib64/common/:/usr/local/Ascend/driver/lib64/driver/:$LD_LIBRARY_PATH\n"
            f"ENV LD_LIBRARY_PATH=${{ASCEND_TOOLKIT_HOME}}/lib64:${{ASCEND_TOOLKIT_HOME}}/opp/built-in/op_impl/ai_core/tbe/op_tiling:$LD_LIBRARY_PATH\n"
            f"ENV PATH=${{ASCEND_TOOLKIT_HOME}}/bin:${{ASCEND_TOOLKIT_HOME}}//tools/profiler/bin:$PATH\n"
            f"ENV ASCEND_OPP_PATH=${{ASCEND_TOOLKIT_HOME}}/opp\n\n"
            f"# Note: NNAL Environment variables, obtained from /usr/local/Ascend/nnal/set_env.sh\n"
            f"ENV ATB_HOME_PATH=/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_{abi}\n"
            f"ENV LD_LIBRARY_PATH=${{ATB_HOME_PATH}}/lib:${{LD_LIBRARY_PATH}}\n"
            f"{nnal_lines}"
            f"ENV ATB_SHARE_MEMORY_NAME_SUFFIX=\"\"\n\n"
            f"RUN echo 'source /usr/local/Ascend/ascend-toolkit/set_env.sh' >> /etc/profile\n"
            f"ENV NOT_CANNS=1\n")


def test_the_last_stage_under_the_notes_is_read_per_part_in_the_images_order():
    env = cann_env.final_env(_dockerfile("/usr/local/Ascend/cann-9.0.1",
                                         "ENV LD_LIBRARY_PATH=${ASCEND_TOOLKIT_HOME}/lib64/plugin:$LD_LIBRARY_PATH\n"
                                         "ENV ATB_CXX_ABI=1\n"), "cann/x/Dockerfile", "9.0.1")
    assert list(env) == ["toolkit", "atb"]
    toolkit, atb = env["toolkit"], env["atb"]
    assert toolkit["ASCEND_TOOLKIT_HOME"] == "/usr/local/Ascend/cann-9.0.1"
    # each ENV line puts its entries first; the toolkit's folder listed under NNAL's note is the toolkit's;
    # op_tiling is the arch's folder, as set_env.sh lists it; the driver's lib64 itself is there
    assert toolkit["LD_LIBRARY_PATH"] == [
        "${ASCEND_TOOLKIT_HOME}/lib64/plugin", "${ASCEND_TOOLKIT_HOME}/lib64",
        "${ASCEND_TOOLKIT_HOME}/opp/built-in/op_impl/ai_core/tbe/op_tiling/lib/linux/${ASCEND_ARCH}",
        "/usr/local/Ascend/driver/lib64", "/usr/local/Ascend/driver/lib64/common", "/usr/local/Ascend/driver/lib64/driver"]
    assert toolkit["PATH"] == ["${ASCEND_TOOLKIT_HOME}/bin", "${ASCEND_TOOLKIT_HOME}/tools/profiler/bin"]
    assert atb["ATB_HOME_PATH"] == "/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_${NNAL_CXX_ABI}"
    assert atb["ATB_CXX_ABI"] == "${NNAL_CXX_ABI}" and atb["ATB_SHARE_MEMORY_NAME_SUFFIX"] == ""
    assert atb["LD_LIBRARY_PATH"] == ["${ATB_HOME_PATH}/lib"]
    flat = str(env)
    assert "python3.11" not in flat and "NOT_CANNS" not in flat and "/elsewhere" not in flat


def test_a_toolkit_home_the_era_table_does_not_give_stops_the_import():
    with pytest.raises(UserError, match="ASCEND_TOOLKIT_HOME=/usr/local/Ascend/ascend-toolkit/latest.*cann-9.0.1"):
        cann_env.final_env(_dockerfile("/usr/local/Ascend/ascend-toolkit/latest"), "cann/x/Dockerfile", "9.0.1")


def test_a_release_takes_what_most_of_its_images_set_and_says_what_the_others_set():
    text = _dockerfile("/usr/local/Ascend/ascend-toolkit/latest", "ENV LCCL_PARALLEL=0\n")
    fewer = _dockerfile("/usr/local/Ascend/ascend-toolkit/latest")
    found = {f"cann/{n}/Dockerfile": cann_env.final_env(t, n, "8.1.RC1")
             for n, t in (("a", text), ("b", fewer), ("c", text))}
    # the images' ABI differs (0 or 1): the same environment, at the image's ABI
    found["cann/d/Dockerfile"] = cann_env.final_env(
        _dockerfile("/usr/local/Ascend/ascend-toolkit/latest", "ENV LCCL_PARALLEL=0\n", abi=0), "d", "8.1.RC1")
    got = cann_env.release_env(found)
    assert got is not None and got.dockerfiles == ["cann/a/Dockerfile", "cann/c/Dockerfile", "cann/d/Dockerfile"]
    assert "LCCL_PARALLEL" in got.env["atb"] and got.differ == ["cann/b/Dockerfile: lacks LCCL_PARALLEL"]


def test_a_release_the_images_do_not_install_takes_the_nearest_ones_in_its_own_home():
    from ascend_build.upstream.deployer import CannData
    own = {"toolkit": {"ASCEND_TOOLKIT_HOME": "/usr/local/Ascend/cann-9.0.1",
                       "PATH": ["${ASCEND_TOOLKIT_HOME}/bin", "/usr/local/Ascend/cann-9.0.1/tools/x"]}}
    classic = {"toolkit": {"ASCEND_TOOLKIT_HOME": "/usr/local/Ascend/ascend-toolkit/latest"}}
    merged = Merged({v: CannData(v, None, "s") for v in ("8.0.RC3", "8.1.RC1", "9.0.1", "9.1.0")}, {})
    merged.envs = {"8.1.RC1": EnvEntry(classic, "images 8.1"), "9.0.1": EnvEntry(own, "images 9.0.1"),
                   "7.0.0": EnvEntry(classic, "a release no longer imported")}
    fill_env(merged)
    assert set(merged.envs) == {"8.0.RC3", "8.1.RC1", "9.0.1", "9.1.0"}
    later = merged.envs["9.1.0"]
    assert later.of == "9.0.1" and "CANN 9.0.1's" in later.source and "none installs 9.1.0" in later.source
    assert later.env["toolkit"]["ASCEND_TOOLKIT_HOME"] == "/usr/local/Ascend/cann-9.1.0"
    assert later.env["toolkit"]["PATH"] == ["${ASCEND_TOOLKIT_HOME}/bin", "/usr/local/Ascend/cann-9.1.0/tools/x"]
    assert merged.envs["8.0.RC3"].of == "8.1.RC1" and merged.envs["8.1.RC1"].of == ""


def test_an_import_without_the_images_keeps_each_releases_own_environment_and_borrows_again():
    from ascend_build.upstream.deployer import CannData
    from ascend_build.upstream.update import keep_env
    classic = {"toolkit": {"ASCEND_TOOLKIT_HOME": "/usr/local/Ascend/ascend-toolkit/latest"}}
    old = {"cann": {"8.0.RC3": {"env": classic, "env_from": "8.1.RC1", "env_source": "CANN 8.1.RC1's"},
                    "8.1.RC1": {"env": classic, "env_source": "images of 8.1.RC1"}}}
    merged = Merged({v: CannData(v, None, "s") for v in ("8.0.RC3", "8.0.0", "8.1.RC1")}, {})
    keep_env(merged, old)
    assert {v: e.source for v, e in merged.envs.items()} == {"8.1.RC1": "images of 8.1.RC1"}
    fill_env(merged)
    assert merged.envs["8.0.0"].of == merged.envs["8.0.RC3"].of == "8.1.RC1"


def test_the_committed_import_has_every_releases_environment_with_its_source():
    m = load_matrix(ROOT / "matrix.yaml")
    for version, rel in m.cann.items():
        assert rel.env is not None, version
        assert rel.env.source.count("Ascend/cann-container-image") == 1, version
        assert rel.env.value("ASCEND_TOOLKIT_HOME") == rel.era.home(version)
    # what the issue found per release, in the data
    assert "CMAKE_PREFIX_PATH" in m.cann["9.0.0"].env.names() and "ATB_CXX_ABI" in m.cann["9.0.1"].env.names()
    assert "ATB_WORKSPACE_MEM_ALLOC_GLOBAL" in m.cann["8.3.RC2"].env.names()
    assert "ASCEND_TOOLKIT_LATEST_HOME" in m.cann["8.5.0"].env.names()
    assert "ASCEND_TOOLKIT_LATEST_HOME" not in m.cann["8.3.RC2"].env.names()
    assert m.cann["8.0.RC3"].env.borrowed_from == "8.1.RC1" and m.cann["9.0.1"].env.borrowed_from == ""


# ---------------------------------------------------------------------------- ENV instructions

def test_a_value_that_refers_to_a_variable_of_the_instruction_starts_another():
    variables = (EnvVar("HOME_X", "/x"), EnvVar("OPP", "${HOME_X}/opp"), EnvVar("MORE", "1"),
                 EnvVar("PATH", ("${HOME_X}/bin",)), EnvVar("LD_LIBRARY_PATH", ("${OPP}/lib",)),
                 EnvVar("PATH", ("/y",)))
    # PATH was set before (its value kept after the new folders); LD_LIBRARY_PATH was not
    assert env_instructions(variables, {"PATH"}) == [
        [("HOME_X", "/x")],
        [("OPP", "${HOME_X}/opp"), ("MORE", "1"), ("PATH", "${HOME_X}/bin:${PATH}")],
        [("LD_LIBRARY_PATH", "${OPP}/lib"), ("PATH", "/y:${PATH}")]]


# ---------------------------------------------------------------------------- the rendered ENV

_REF = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def _expand(text: str, scope: dict[str, str]) -> str:
    return _REF.sub(lambda m: scope.get(m[1] or m[2], ""), text)


def image_env(text: str, build_args: dict[str, str]) -> dict[str, str]:
    """The ENV a rendered Dockerfile's last stage ends with, for the given build args (the
    rest at their defaults): the stages it is built FROM followed back, each ENV expanded
    with the values from before it, as Docker does."""
    stages: dict[str, tuple[str, list[str]]] = {}
    args: dict[str, str] = {}
    name, current = "", ""
    order = []
    for raw in text.splitlines():
        if raw.lstrip().startswith("#"):
            continue
        if raw.rstrip().endswith("\\"):
            current += raw.rstrip()[:-1] + " "
            continue
        line, current = (current + raw).strip(), ""
        word, _, rest = line.partition(" ")
        if word == "FROM":
            parts = rest.split()
            parts = [p for p in parts if not p.startswith("--platform")]
            name = parts[2] if len(parts) > 2 else f"stage{len(order)}"
            stages[name] = (parts[0], [])
            order.append(name)
        elif word == "ARG" and not order:
            key, _, value = rest.partition("=")
            args[key] = value.strip('"')
        elif order:
            stages[name][1].append(line)
    args.update(build_args)
    chain = [order[-1]]
    while True:
        base = _expand(stages[chain[-1]][0], args)
        if base not in stages:
            break
        chain.append(base)
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    for stage in reversed(chain):
        local = dict(args)
        for line in stages[stage][1]:
            word, _, rest = line.partition(" ")
            if word == "ARG":
                key, _, value = rest.partition("=")
                local.setdefault(key, value.strip('"'))
            elif word == "ENV":
                scope = {**local, **env}
                env.update({k: _expand(v, scope) for k, v in (p.split("=", 1) for p in shlex.split(rest))})
    return env


def _folders(value: str) -> list[str]:
    return [re.sub(r"/{2,}", "/", e).rstrip("/") for e in value.split(":") if e]


CANN_STACK = "cann9.0.1"      # a CANN-only stack, put on each release in turn


@pytest.mark.parametrize("version", list(load_matrix(ROOT / "matrix.yaml").cann))
def test_the_rendered_env_sets_what_the_official_image_of_the_release_sets(version):
    """Every variable the release's environment sets (the toolkit's; ATB's and SiP's where
    the image has NNAL) has its value in the ENV of a rendered image, every PATH and library
    folder is there: msprof's and asys's folders where the release has them."""
    m = load_matrix(ROOT / "matrix.yaml")
    cann = m.cann[version]
    stack = dataclasses.replace(m.stacks[CANN_STACK], cann=version, key=version, release=version,
                                package=version, name=f"cann{version}")
    text = runtime_dockerfile(m, stack, m.os["ubuntu22.04"]).text
    with_nnal = m.nnal(stack, cann, "aarch64") is not None
    for arch, target in (("aarch64", "arm64"), ("x86_64", "amd64")):
        got = image_env(text, {"TARGETARCH": target, "PIP_ON": "target"})
        scope = {**got, "ASCEND_ARCH": arch, "NNAL_CXX_ABI": "1"}
        parts = ("toolkit", "atb", "sip") if with_nnal else ("toolkit",)
        assert cann.env is not None
        for part in parts:
            for var in cann.env.part(part):
                if isinstance(var.value, tuple):
                    missing = [e for e in var.value if _folders(_expand(e, scope))[0] not in _folders(got.get(var.name, ""))]
                    assert missing == [], f"{version} {arch}: {var.name} lacks {missing}"
                else:
                    assert got.get(var.name) == _expand(var.value, scope), f"{version} {arch}: {var.name}"
        path = got["PATH"]
        for folder in ("tools/profiler/bin", "tools/ascend_system_advisor/asys"):
            assert (f"{got['ASCEND_TOOLKIT_HOME']}/{folder}" in path) == \
                any(e.endswith(folder) for e in cann.env.entries("PATH")), (version, folder)
        assert got["PATH"].split(":")[-6:] == _folders("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        assert "/opt/venv/bin" in got["PATH"].split(":") and got["ASCEND_ARCH"] == arch
    if with_nnal:
        no_nnal = image_env(text, {"TARGETARCH": "arm64", "PIP_ON": "target", "WITH_NNAL": "0"})
        assert "ATB_HOME_PATH" not in no_nnal and "ATB" not in no_nnal["LD_LIBRARY_PATH"]


def test_9x_images_put_msprof_and_asys_on_the_path():
    m = load_matrix(ROOT / "matrix.yaml")
    for version in ("9.0.0", "9.0.1", "9.1.0"):
        assert {"${ASCEND_TOOLKIT_HOME}/tools/profiler/bin", "${ASCEND_TOOLKIT_HOME}/tools/ascend_system_advisor/asys"} \
            <= set(m.cann[version].env.entries("PATH")), version
    assert not any("profiler" in e for e in m.cann["8.0.RC3"].env.entries("PATH"))


# ---------------------------------------------------------------------------- the check, on texts

def test_sourcing_changes_names_a_changed_variable_and_a_new_folder_only():
    before = {"PATH": "/a/bin:/usr/bin", "LD_LIBRARY_PATH": "/a/lib", "X": "1", "SHLVL": "1", "DIR": "/d/"}
    same = {**before, "PATH": "/a/bin:/a/bin:/usr/bin:", "LD_LIBRARY_PATH": "/a//lib/:/a/lib", "SHLVL": "2", "DIR": "/d"}
    assert sourcing_changes(before, same) == []
    other = {**before, "PATH": "/b/bin:/a/bin:/usr/bin", "X": "2", "NEW": "3", "CMAKE_PREFIX_PATH": "/c"}
    del other["LD_LIBRARY_PATH"]
    assert sourcing_changes(before, other) == [
        "CMAKE_PREFIX_PATH gains /c (the image ENV: unset)", "LD_LIBRARY_PATH unset (the image ENV: /a/lib)",
        "NEW=3 set (the image ENV has none)", "PATH gains /b/bin (the image ENV: /a/bin:/usr/bin)",
        "X=2 (the image ENV: 1)"]


def _bash_env(script: str, env: dict[str, str]) -> dict[str, str]:
    out = subprocess.run(["bash", "-c", script + "; env -0"], env=env, capture_output=True, text=True, check=True)
    return dict(item.split("=", 1) for item in out.stdout.split("\0") if "=" in item)


@pytest.mark.parametrize("version", ["8.0.RC3", "8.3.RC2", "9.0.1", "9.1.0"])
def test_sourcing_the_doubles_set_env_scripts_changes_nothing_in_the_rendered_env(version, tmp_path):
    """The test double's set_env.sh scripts (the toolkit's; NNAL's at the image's ABI and
    SiP's where the image has them), sourced in the ENV a rendered image has, change
    nothing: the image suite's check, here without an image; and a real set_env.sh that
    exported one more variable would fail it."""
    m = load_matrix(ROOT / "matrix.yaml")
    cann = m.cann[version]
    stack = dataclasses.replace(m.stacks[CANN_STACK], cann=version, key=version, release=version,
                                package=version, name=f"cann{version}")
    # the image of this machine's arch: the double's scripts ask uname
    target = {"x86_64": "amd64", "aarch64": "arm64"}[os.uname().machine]
    got = image_env(runtime_dockerfile(m, stack, m.os["ubuntu22.04"]).text, {"TARGETARCH": target})
    got.pop("ASCEND_ARCH")                      # the image's own word (the scripts ask uname)
    home = cann.era.home(version)
    toolkit = tmp_path / "set_env.sh"
    toolkit.write_text(cann_double.toolkit_set_env(version).replace("@HOME@", home))
    scripts = [f". {toolkit}"]
    if m.nnal(stack, cann, "x86_64") is not None:
        atb = tmp_path / "nnal/atb/set_env.sh"
        atb.parent.mkdir(parents=True)
        atb.write_text(cann_double.nnal_set_env(version).replace("${atb_dir}/", "/usr/local/Ascend/nnal/atb/"))
        scripts.append(f". {atb} --cxx_abi=1")
        if cann.sip:
            sip = tmp_path / "nnal/asdsip/set_env.sh"
            sip.parent.mkdir(parents=True)
            sip.write_text(cann_double.sip_set_env(version).replace("${asdsip_dir_path}/", "/usr/local/Ascend/nnal/asdsip/"))
            scripts.append(f". {sip}")
    before = _bash_env("true", got)
    assert sourcing_changes(before, _bash_env("; ".join(scripts), got)) == []
    toolkit.write_text(toolkit.read_text() + "export ASCEND_EXTRA=1\n")
    assert sourcing_changes(before, _bash_env("; ".join(scripts), got)) == ["ASCEND_EXTRA=1 set (the image ENV has none)"]
