"""Every command a message suggests is one that works (issue 78): `--like
quay.io/ascend/cann:8.5.0-910b-ubuntu22.04-py3.11` failed suggesting `build --cann 8.5.0 --os
debian12 --debootstrap`, itself refused (a circle), and the 8.3.RC2 Debian refusal suggested
`--os openeuler24.03` where the default OS, Ubuntu 22.04, builds.

The main paths of `invoke build` run as a user types them, on an engine that has no image
and pulls none (a docker client double: every base missing, as on a site without a
registry); the commands their refusals and hints suggest are collected (a quoted `invoke
TASK ...`, or a change of one option: `pass --os X`, `choose one of: ...`, `build
--platform X`, `leave the option out`) and planned in turn, and theirs too: each must plan
(`--dry`; a lock `--check`), ending at most where a real run needs what is not here (a CANN
package, exit 3) or on the lock it names the exact command for."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.forked import invoke

# Placeholders a message writes for what the user fills in: such a command is a form, not one to run.
PLACEHOLDER = re.compile(r"\b(MIRROR|DIR|FILE|SUM|RELEASE|TAG|REF|ID|IMAGE|PATH|MODEL_DIR|X\.Y|VERSION)\b|[<{]")
QUOTED = re.compile(r"`(?:[^`\s]*/)?(?:invoke|ascend-build|python\S* -m ascend_build) ([a-z][a-z-]*)((?: [^`]*)?)`")

# The tasks whose suggested commands are planned: their --dry (a lock's --check) plans without building.
PLANNED = ("build", "builder", "apex", "torch-npu", "lock")

# (the command as typed, dry or not): the paths a new user walks first, each meeting a refusal or a hint.
MAIN_PATHS = [
    (["build", "--like", "quay.io/ascend/cann:8.5.0-910b-ubuntu22.04-py3.11"], True),      # the circle
    (["build", "--like", "quay.io/ascend/cann:8.3.rc2-a3-ubuntu22.04-py3.11"], True),
    (["build", "--like", "quay.io/ascend/cann:9.0.0-910b-ubuntu22.04-py3.11-devel"], True),
    (["build", "--cann", "8.3.RC2", "--os", "openeuler22.03"], True),                        # pass --os ...
    (["build", "--cann", "8.5.0", "--os", "debian12", "--python", "3.13"], True),           # choose one of
    (["build", "--cann", "8.5.0", "--os", "debian12", "--platform", "linux/amd64"], True),  # no lock: invoke lock
    (["build", "--cann", "8.0.RC3", "--no-nnal"], True),                                    # leave the option out
    (["build", "--torch", "2.1.0", "--os", "ubuntu22.04", "--debootstrap"], False),         # not a Debian base
    (["build", "--torch", "2.1.0"], True),                                                  # ubuntu: no registry
    (["build", "--torch", "2.10.0", "--os", "openeuler24.03"], True),
    (["build", "--mindspore", "2.9.0"], True),
    (["build", "--cann", "9.0.0", "--devel"], True),
    (["build", "--cann", "9.0.0", "--os", "debian12", "--python", "3.11", "--no-nnal", "--devel"], True),
]


def suggested(said: str, argv: list[str]) -> list[list[str]]:
    """The commands a command's output suggests: each quoted one, and each option change its
    refusal names, made on `argv`."""
    # a task named alone names the task, not a command; one that plans nothing (pin, update, ...) is not run here
    found = [[task, *words.split()] for task, words in QUOTED.findall(said)
             if task in PLANNED and words.split() and not PLACEHOLDER.search(words)]
    for flag, pattern in (("--os", r"pass --os (\S+)"), ("--platform", r"build --platform (\S+)")):
        for value in re.findall(pattern, said):
            found.append(_with(argv, flag, value.rstrip(".,;)`")))
    for listed in re.findall(r"python \S+ is outside .*?choose one of: ([0-9., ]+)", said):
        pythons = [p.strip() for p in listed.split(",") if p.strip()]
        found += [_with(argv, "--python", p) for p in (pythons[0], pythons[-1])]
    for chip, line in re.findall(r"no kernels for chip '(\S+)'.*?Stacks on a CANN with \S+ kernels: (--\S+ [^,\s]+)",
                                 said):
        rest = _without(argv, "--like", "--torch", "--cann", "--mindspore")
        found.append(_with([rest[0], *line.split(), *rest[1:]], "--chip", chip))
    if "leave the option out" in said and "--no-nnal" in argv:
        found.append([a for a in argv if a != "--no-nnal"])
    return found


def _without(argv: list[str], *flags: str) -> list[str]:
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word in flags:
            skip = True
        else:
            out.append(word)
    return out


def _with(argv: list[str], flag: str, value: str) -> list[str]:
    if flag in argv:
        i = argv.index(flag)
        return argv[:i + 1] + [value] + argv[i + 2:]
    return [*argv, flag, value]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A folder to run in with its own HOME and cache, an empty packages folder, and a docker
    client double: it answers its version and that its engine runs, has no image and pulls
    none."""
    folder = tmp_path_factory.mktemp("hints")
    (folder / "packages").mkdir()
    client = folder / "docker"
    client.write_text('#!/bin/sh\ncase "$1" in version|info) echo 20.10.24 ;; '
                      '*) echo "Error: No such image" >&2; exit 1 ;; esac\n')
    client.chmod(0o755)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("INVOKE_")}, "HOME": str(folder),
           "ASCEND_BUILD_CACHE": str(folder / "cache")}
    return folder, env, client


def run(site, argv: list[str], dry: bool):
    folder, env, client = site
    task = argv[0]
    more: list[str] = []
    if task in ("build", "builder", "apex", "torch-npu"):
        more = ["--docker", str(client)] + (["--dry"] if dry else [])
        if task == "build":
            more += ["--packages", str(folder / "packages"), "--offline"]
    elif task == "lock":
        more = ["--check"]
    return invoke(*argv, *more, cwd=folder, env=env)


def works(out, argv: list[str]) -> str | None:
    """None when the command planned (or stopped only where a real run needs what is not here:
    a CANN package, exit 3; or the lock it names the exact `invoke lock` for); else why not."""
    said = out.stdout + out.stderr
    if "Traceback" in said:
        return "a traceback"
    if argv[0] == "lock":
        return None if out.returncode in (0, 1) else f"exit {out.returncode}: {out.stderr[-600:]}"
    if out.returncode in (0, 3):
        return None
    # a source tree this machine cannot fetch (GitHub unreachable): an input the site hands in, as a package
    if argv[0] in ("apex", "torch-npu") and "cannot fetch" in out.stderr and "Pass the source instead" in out.stderr:
        return None
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    if out.returncode == 2 and len(errors) == 1 and "has no lock" in errors[0] and QUOTED.search(errors[0]):
        return None
    return f"exit {out.returncode}: {out.stderr[-800:]}"


def test_every_command_a_hint_of_the_main_paths_suggests_plans(site):
    seen: dict[tuple[str, ...], str] = {}
    todo = [(argv, dry, "typed") for argv, dry in MAIN_PATHS]
    broken = []
    for _round in range(3):       # what is typed, what it suggests, and what that suggests
        following = []
        for argv, dry, source in todo:
            key = tuple(argv)
            if key in seen:
                continue
            out = run(site, argv, dry)
            seen[key] = source
            said = out.stdout + out.stderr
            why = works(out, argv) if source != "typed" else ("a traceback" if "Traceback" in said else None)
            if why:
                broken.append(f"`{' '.join(argv)}` (suggested by `{source}`): {why}")
            following += [(s, True, " ".join(argv)) for s in suggested(said, argv)]
        todo = following
    hinted = [k for k, v in seen.items() if v != "typed"]
    assert not broken, "\n".join(broken)
    # the circle and the OS hint are among what was checked
    assert ("build", "--cann", "8.5.0", "--os", "debian12", "--debootstrap") in hinted, sorted(hinted)
    assert ("build", "--cann", "8.3.RC2", "--os", "ubuntu22.04") in hinted, sorted(hinted)
    assert len(hinted) >= 10, sorted(hinted)


def test_the_collector_finds_what_a_refusal_suggests():
    said = ("error: stack cann8.3.RC2 ...; not on openeuler22.03: pass --os ubuntu22.04, or write a `cann_stacks:` "
            "entry\n# Without a registry, the Debian cell of this line builds: `.venv/bin/ascend-build build "
            "--cann 8.5.0 --os debian12 --debootstrap` (Python 3.11). Or `invoke base-image --suite bookworm --tag "
            "MIRROR/debian:bookworm-{arch}`; python 3.13 is outside cann stack 8.5.0's range 3.10-3.11 (...); "
            "choose one of: 3.10, 3.11\n")
    argv = ["build", "--cann", "8.3.RC2", "--os", "openeuler22.03", "--python", "3.13"]
    assert suggested(said, argv) == [
        ["build", "--cann", "8.5.0", "--os", "debian12", "--debootstrap"],
        ["build", "--cann", "8.3.RC2", "--os", "ubuntu22.04", "--python", "3.13"],
        ["build", "--cann", "8.3.RC2", "--os", "openeuler22.03", "--python", "3.10"],
        ["build", "--cann", "8.3.RC2", "--os", "openeuler22.03", "--python", "3.11"]]
    assert Path(ROOT / "tests" / "unit" / "test_hints.py").is_file()
