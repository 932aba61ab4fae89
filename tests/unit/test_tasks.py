"""The invoke tasks as a user runs them: errors are messages with exit codes, never
tracebacks, and nothing reaches docker when the input is wrong."""
from __future__ import annotations

import inspect
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests import forked

ROOT = Path(__file__).resolve().parents[2]


def invoke(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return forked.invoke(*args, env={**os.environ, **(env or {})})


def test_matrix_table():
    out = invoke("matrix", "--wide")       # the full table: one line a row, every column
    assert out.returncode == 0, out.stderr
    assert "cann8.0.rc3-910b-ubuntu22.04-py3.10-torch2.1.0 [alias torch2.1.0 (ubuntu22.04)]" in out.stdout
    assert "3.10 (distro)" in out.stdout
    # apex: where the pinned Ascend apex's script takes the Python (3.7-3.10), and why not elsewhere
    rows = [line for line in out.stdout.splitlines() if "-torch2.1.0" in line and "linux/arm64" in line]
    apex = [line for line in rows if "-py3.9-" in line or "-py3.10-" in line]
    assert {"ubuntu22.04-py3.10", "openeuler22.03-py3.9"} <= {re.search(r"\db-(\S+?-py[\d.]+)-", line)[1] for line in apex}
    assert all(line.endswith("compiled by `invoke apex` (the pipeline does, before the image)") for line in apex)
    others = [line for line in rows if line not in apex]
    assert others and all(line.endswith("none: Ascend apex 49a7994 builds for Python 3.7, 3.8, 3.9, 3.10")
                          for line in others)


def test_apex_refuses_a_python_the_pinned_apex_does_not_take_before_anything_runs(tmp_path):
    """Ascend apex's scripts/build.sh at the pinned commit takes Python 3.7-3.10 and exits 1 on
    another, after the builder's build: the task says so first, also in a dry run; so does a
    build that asks for the pinned apex."""
    env = {"ASCEND_BUILD_CACHE": str(tmp_path / "cache")}
    for args in (("apex", "--torch", "2.1.0", "--python", "3.11", "--dry"),
                 ("build", "--torch", "2.1.0", "--os", "debian12", "--python", "3.11", "--apex-src", "upstream",
                  "--dry", "--packages", str(tmp_path))):
        out = invoke(*args, env=env)
        assert out.returncode == 2, out.stdout + out.stderr
        assert "error: apex: Ascend apex 49a7994 (matrix.yaml sources.apex) builds for Python 3.7, 3.8, 3.9, " \
               "3.10, not 3.11" in out.stderr and "Traceback" not in out.stderr
        assert " build " not in out.stdout, "nothing planned"
    out = invoke("apex", "--torch", "2.1.0", "--python", "3.9", "--dry", env=env)
    assert out.returncode == 0 and "bash scripts/build.sh --python=3.9" in out.stdout, out.stdout + out.stderr


def test_an_ubuntu_py310_cell_plans_apex_from_the_pin_and_a_py311_one_says_why_not(tmp_path):
    """Issue #65: Ascend apex 5.0.0 (49a7994e) takes Python 3.10, so the Ubuntu 22.04 images
    (py3.10, the official OS) carry apex: the dry run compiles it from that pin in a builder
    with 3.10 and stages the wheel. A py3.11 cell still gets none, and says why."""
    env = {"ASCEND_BUILD_CACHE": str(tmp_path / "cache")}
    cell = ("build", "--torch", "2.1.0", "--os", "ubuntu22.04", "--platform", "linux/arm64", "--dry",
            "--packages", str(tmp_path))
    out = invoke(*cell, "--python", "3.10", "--apex-src", "upstream", env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "# apex: source https://github.com/Ascend/apex.git@49a7994e13cc70d155adbd7b25b7a6b86e38e58e, " \
           "builder manylinux2014, python 3.10" in out.stdout
    assert "bash scripts/build.sh --python=3.10; collect apex/dist/*.whl" in out.stdout
    image = next(line for line in out.stdout.splitlines() if "images/runtime/2.1.0/ubuntu22.04/Dockerfile" in line)
    assert "--build-arg 'APEX_WHEEL=apex-*.whl'" in image and "--label 'io.ascend-build.apex=apex-*.whl'" in image
    # without --apex-src: no wheel built yet, and the way to build one (the pipeline's step)
    out = invoke(*cell, "--python", "3.10", env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Build one with `invoke apex --torch 2.1.0 --python 3.10`" in out.stdout
    out = invoke(*cell, "--python", "3.11", env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "the image will have NO apex. Ascend apex 49a7994 builds for Python 3.7, 3.8, 3.9, 3.10 only" in out.stdout
    assert "--label io.ascend-build.apex=absent" in out.stdout


def test_bad_matrix_exits_nonzero_without_traceback(tmp_path):
    bad = tmp_path / "m.yaml"
    bad.write_text((ROOT / "matrix.yaml").read_text().replace("  chip: 910b ", "  chips: 910b ", 1))
    for task in ("matrix", "build", "render"):
        out = invoke(task, "--matrix", str(bad))
        assert out.returncode == 2
        assert "Traceback" not in out.stderr
        assert "defaults.chips: unknown key 'chips'; did you mean 'chip'?" in out.stderr


def test_build_stops_before_docker_when_packages_are_missing(tmp_path):
    # A client double that records any call: none must happen.
    calls = tmp_path / "calls"
    fake = tmp_path / "bin" / "docker"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\nexit 1\n")
    fake.chmod(0o755)
    out = invoke("build", "--torch", "2.1.0", "--packages", str(tmp_path / "none"), "--offline",
                 env={"PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}",
                      "ASCEND_BUILD_CACHE": str(tmp_path / "cache")})
    assert out.returncode == 3 and "Traceback" not in out.stderr      # PackageError
    assert "CANN toolkit package not found: Ascend-cann-toolkit_8.0.RC3_linux-aarch64.run" in out.stderr
    assert "CANN kernels package not found: Ascend-cann-kernels-910b_8.0.RC3_linux-aarch64.run" in out.stderr
    assert not calls.exists()


def test_dry_build_prints_buildkit_commands_with_secrets(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    out = invoke("build", "--dry", "--packages", str(tmp_path), "--ca-bundle", str(ca),
                 "--pip-index-url", "https://user:s3cret@pypi.mirror.example/simple",
                 env={"ASCEND_BUILD_CACHE": str(tmp_path / "cache")})
    assert out.returncode == 0, out.stderr
    assert "--platform linux/arm64" in out.stdout and "id=ca-bundle,src=" in out.stdout
    assert "s3cret" not in out.stdout, "credentials go in a secret file, not on the command line"
    assert "--build-arg PYTHON_FROM=distro" in out.stdout and "python: 3.10 from ubuntu22.04's python3" in out.stdout


def test_dry_build_with_a_proxy_from_the_shell(tmp_path):
    """http(s)_proxy of the calling shell reach the build as a secret file, never on the
    command line; one on 127.0.0.1 is refused until the build uses the host network."""
    env = {"ASCEND_BUILD_CACHE": str(tmp_path / "cache"), "HTTPS_PROXY": "http://me:pr0xy-pw@127.0.0.1:3128"}
    out = invoke("build", "--dry", "--packages", str(tmp_path), env=env)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "https_proxy http://me:***@127.0.0.1:3128 is on this machine's loopback" in out.stderr
    assert "pr0xy-pw" not in out.stderr
    out = invoke("build", "--dry", "--packages", str(tmp_path), "--network", "host", env=env)
    assert out.returncode == 0, out.stderr
    assert "--network host" in out.stdout and "id=proxy-env,src=" in out.stdout
    assert "https_proxy: http://me:***@127.0.0.1:3128 (secret)" in out.stdout
    assert "pr0xy-pw" not in out.stdout + out.stderr
    out = invoke("build", "--dry", "--packages", str(tmp_path), "--proxy", "none", env=env)
    assert out.returncode == 0 and "proxy-env" not in out.stdout


def test_dry_build_touches_no_network_and_says_what_it_would_download(tmp_path):
    """With the packages absent and downloads allowed, a dry run must not try the Ascend
    site (unreachable here: a try would report a failed download)."""
    out = invoke("build", "--dry", "--packages", str(tmp_path / "none"),
                 env={"ASCEND_BUILD_CACHE": str(tmp_path / "cache")})
    assert out.returncode == 0, out.stderr
    assert ("# would download https://ascend-repo.obs.cn-east-2.myhuaweicloud.com/CANN/CANN%208.0.RC3/"
            "Ascend-cann-toolkit_8.0.RC3_linux-aarch64.zip") in out.stdout
    assert "failed" not in out.stdout + out.stderr
    assert not (tmp_path / "cache" / "cann").exists() or not any((tmp_path / "cache" / "cann").iterdir())
    assert re.search(r"^engine: \S+ \S+, building with ", out.stdout, re.M), "the client, its version, the builder"


def test_dry_build_says_where_pip_runs(tmp_path):
    """A cross build runs pip on the build machine, for the image's arch, from the build
    machine's base image; `--pip-on target` runs it in the image; `--no-cache` also
    refreshes every download. None of it is part of the content tag, nor (--no-cache) of
    the layer cache's keys."""
    from ascend_build.platforms import host
    from tests.doubles.cann_double import make_run
    env = {"ASCEND_BUILD_CACHE": str(tmp_path / "cache")}
    for kind in ("toolkit", "kernels"):     # the packages here, so the plan computes its content tag
        make_run(tmp_path / "packages", kind, "8.0.RC3", "aarch64")
    args = ("build", "--dry", "--packages", str(tmp_path / "packages"), "--os", "debian12",
            "--base-image", "debian:bookworm=mirror.local/debian:bookworm-{arch}")
    fast = invoke(*args, env=env)
    assert fast.returncode == 0, fast.stderr
    here = host()
    assert f"--build-arg BUILDPLATFORM={here.docker}" in fast.stdout
    if here.arch == "aarch64":
        assert "--build-arg PIP_ON=target" in fast.stdout
        return
    assert "--build-arg PIP_ON=native" in fast.stdout and "--build-arg TARGET_MACHINE=aarch64" in fast.stdout
    assert f"--build-arg BUILD_BASE_IMAGE=mirror.local/debian:bookworm-{here.suffix}" in fast.stdout
    assert "--build-arg BASE_IMAGE=mirror.local/debian:bookworm-arm64" in fast.stdout
    assert f"pip runs on the build machine ({here.docker}) for aarch64, no qemu" in fast.stdout
    # and apt too: it fetches and unpacks on the build machine, the image's stage configures
    assert "--build-arg OS_ON=native" in fast.stdout
    assert f"OS packages: apt fetches and unpacks them on the build machine ({here.docker})" in fast.stdout
    assert "PIP_FRESH" not in fast.stdout
    # Each path of its own: pip in the image, apt still on the build machine (its base still needed) ...
    pip_only = invoke(*args, "--pip-on", "target", env=env)
    assert "--build-arg PIP_ON=target" in pip_only.stdout and "--build-arg OS_ON=native" in pip_only.stdout
    assert f"--build-arg BUILD_BASE_IMAGE=mirror.local/debian:bookworm-{here.suffix}" in pip_only.stdout
    # ... and both in the image: no build machine's base at all.
    plain = invoke(*args, "--pip-on", "target", "--os-on", "target", "--no-cache", env=env)
    assert plain.returncode == 0, plain.stderr
    assert "--build-arg PIP_ON=target" in plain.stdout and "BUILD_BASE_IMAGE" not in plain.stdout
    assert "--build-arg OS_ON=target" in plain.stdout and "OS packages: apt runs in the image (linux/arm64)" in plain.stdout
    assert "pip runs in the image (linux/arm64)" in plain.stdout
    # --no-cache asks for fresh downloads in a secret (no build arg keys the layer cache
    # by it): its command is the cached build's plus --no-cache and that secret.
    assert "PIP_FRESH" not in plain.stdout and "--secret id=proxy-env,src=" in plain.stdout
    cached = invoke(*args, "--pip-on", "target", "--os-on", "target", env=env)
    assert cached.returncode == 0, cached.stderr

    def command(out: subprocess.CompletedProcess) -> list[str]:
        line = next(x for x in out.stdout.splitlines() if " build --progress=plain " in x)
        return [w for w in re.sub(r"--secret id=[\w-]+,src=\S+", "", line).split() if w != "--no-cache"]
    assert "--no-cache" not in cached.stdout and command(cached) == command(plain)
    tag = re.compile(r"sha-[0-9a-f]{16}-arm64")
    assert tag.findall(fast.stdout) and tag.findall(fast.stdout) == tag.findall(plain.stdout), "same content tag"
    bad = invoke(*args, "--pip-on", "elsewhere", env=env)
    assert bad.returncode == 2 and "--pip-on 'elsewhere': choose one of auto, native, target" in bad.stderr
    bad = invoke(*args, "--os-on", "elsewhere", env=env)
    assert bad.returncode == 2 and "--os-on 'elsewhere': choose one of auto, native, target" in bad.stderr


def test_a_base_image_of_one_arch_keeps_pip_in_the_image(tmp_path):
    """--base-image naming one image (no {arch}) gives the build machine no base of its own
    arch: `auto` then runs pip in the image, and says how to get the fast path."""
    from ascend_build.platforms import host
    if host() is None or host().arch == "aarch64":
        pytest.skip("the fast path is for cross-arch builds: this machine builds arm64 natively")
    out = invoke("build", "--dry", "--packages", str(tmp_path), "--os", "debian12",
                 "--base-image", "debian:bookworm=mirror.local/debian:bookworm-arm64",
                 env={"ASCEND_BUILD_CACHE": str(tmp_path / "cache")})
    assert out.returncode == 0, out.stderr
    assert "--build-arg PIP_ON=target" in out.stdout and "BUILD_BASE_IMAGE" not in out.stdout
    assert "--build-arg OS_ON=target" in out.stdout
    assert "names one arch's image, so pip and apt run in the image; put {arch} in it" in out.stdout


def test_podman_builds_a_foreign_arch_with_the_fast_path_too(tmp_path):
    """podman's real build here is of the build machine's arch (tests/integration/test_podman.py):
    its cross-arch command is held here. pip runs on the build machine from its own arch's
    base, and the image's stages get the image's platform."""
    from ascend_build.platforms import host
    from tests.conftest import usable_engine
    if host() is None or host().arch == "aarch64":
        pytest.skip("the fast path is for cross-arch builds: this machine builds arm64 natively")
    podman = usable_engine("podman")
    out = invoke("build", "--dry", "--engine", "podman", "--packages", str(tmp_path), "--os", "debian12",
                 "--base-image", "debian:bookworm=mirror.local/debian:bookworm-{arch}",
                 env={"ASCEND_BUILD_CACHE": str(tmp_path / "cache")})
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if " build --format docker " in x)
    assert line.startswith(podman.client) and "--platform linux/arm64" in line
    here = host()
    for arg in ("PIP_ON=native", "TARGET_MACHINE=aarch64", f"BUILDPLATFORM={here.docker}",
                f"BUILD_BASE_IMAGE=mirror.local/debian:bookworm-{here.suffix}",
                "BASE_IMAGE=mirror.local/debian:bookworm-arm64"):
        assert f"--build-arg {arg} " in line, arg
    assert f"pip runs on the build machine ({here.docker}) for aarch64, no qemu" in out.stdout


def test_a_user_layer_that_moves_a_held_package_stops_before_docker(tmp_path):
    calls = tmp_path / "calls"
    fake = tmp_path / "bin" / "docker"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\nexit 1\n")
    fake.chmod(0o755)
    reqs = tmp_path / "team.txt"
    reqs.write_text("einops\nnumpy>=2\n")
    out = invoke("build", "--torch", "2.1.0", "--os", "debian12", "--python", "3.11", "--offline",
                 "--packages", str(tmp_path / "none"), "--requirements", str(reqs),
                 env={"PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}",
                      "ASCEND_BUILD_CACHE": str(tmp_path / "cache")})
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert f"{reqs} line 2: `numpy>=2` would move numpy away from 1.26.4" in out.stderr
    assert not calls.exists() and not (tmp_path / "team.lock").exists()


def test_dry_build_with_a_user_layer_shows_both_builds(tmp_path):
    reqs = tmp_path / "team.txt"
    reqs.write_text("einops==0.8.1\n")
    out = invoke("build", "--dry", "--packages", str(tmp_path), "--torch", "2.1.0", "--os", "debian12",
                 "--python", "3.11", "--requirements", str(reqs), "--layer-name", "nlp",
                 env={"ASCEND_BUILD_CACHE": str(tmp_path / "cache")})
    assert out.returncode == 0, out.stderr
    runtime = re.search(r"docker tag '<built id>' (ascend-runtime:sha-(?:[0-9a-f]{16}|unknown)-arm64)", out.stdout)[1]
    assert f"-f {ROOT}/images/layer/Dockerfile" in out.stdout
    assert f"--build-arg RUNTIME_IMAGE={runtime}" in out.stdout and "torch2.1.0-nlp-arm64" in out.stdout
    assert "ascend-runtime:cann8.0.rc3-910b-debian12-py3.11-torch2.1.0-nlp-arm64" in out.stdout
    assert "pytest tests/layer_image tests/image" in out.stdout
    out = invoke("build", "--dry", "--packages", str(tmp_path), "--layer-name", "nlp")
    assert out.returncode == 2 and "give its --requirements FILE" in out.stderr


def test_images_entries_carry_user_layers(tmp_path):
    """An `images:` entry's `layers:` are built by `invoke build --all` after its runtime
    image; a bad one is refused by the schema, naming the key."""
    matrix = tmp_path / "matrix.yaml"
    text = (ROOT / "matrix.yaml").read_text().replace(
        '  - stack: "2.1.0-cann8.0.0"\n', '  - stack: "2.1.0-cann8.0.0"\n    layers: [{requirements: team.txt, name: nlp}]\n', 1)
    matrix.write_text(text)
    shutil.copy(ROOT / "imported.yaml", tmp_path / "imported.yaml")
    (tmp_path / "locks").symlink_to(ROOT / "locks", target_is_directory=True)
    (tmp_path / "team.txt").write_text("einops==0.8.1\n")
    # --unlocked: `images:` has x86_64 cells, which have no lock (a build refuses them without it)
    out = invoke("build", "--all", "--dry", "--unlocked", "--packages", str(tmp_path), "--matrix", str(matrix),
                 env={"ASCEND_BUILD_CACHE": str(tmp_path / "cache")})
    assert out.returncode == 0, out.stderr[-3000:]
    assert "ascend-runtime:cann8.0.0-910b-ubuntu22.04-py3.10-torch2.1.0-npu2.1.0.post10-nlp-arm64" in out.stdout
    assert re.search(r"cann8.0.0-910b-ubuntu22.04-py3.10-torch2.1.0-npu2.1.0.post10-nlp\s+linux/arm64\s+tagged", out.stdout)
    matrix.write_text(text.replace("name: nlp}", "name: NLP}"))
    out = invoke("matrix", "--matrix", str(matrix))
    assert out.returncode == 2 and "images[1].layers[0].name" in out.stderr


def test_invoke_list_shows_each_tasks_first_sentence_whole():
    """`invoke --list` shows a docstring's first line: each task's opens with a whole sentence."""
    import json
    out = invoke("--list", "--list-format=json")
    assert out.returncode == 0, out.stderr
    listed = {t["name"]: t["help"] or "" for t in json.loads(out.stdout)["tasks"]}
    assert len(listed) > 20 and "verify" in listed
    cut = [f"{name}: {text}" for name, text in listed.items() if not text.rstrip().endswith(".")]
    assert cut == [], cut


def test_every_exit_code_is_in_the_readme_and_the_tasks_page():
    """One table of exit codes (errors.EXIT_CODES): every error class's code is in it,
    the tasks page is generated from it, README's sentence names exactly its codes."""
    from ascend_build import errors
    from ascend_build.cli import pages
    from ascend_build.engine.interrupts import Interrupted
    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.UserError)]
    table = {e.code for e in errors.EXIT_CODES}
    assert {c.exit_code for c in classes + [Interrupted]} | {0, 1, 141} == table     # 141: SIGPIPE (cli/wrap.py)
    page = pages.tasks_page(_tasks_module())
    for e in errors.EXIT_CODES:
        assert f"| {e.code} | {e.meaning.replace('|', chr(92) + '|')} |" in page
    text = (ROOT / "README.md").read_text().split("Exit codes: ", 1)[1].split("interrupted", 1)[0] + "interrupted"
    said = {int(n) for n in re.findall(r"(?:^|[;,] )(\d+) ", text.replace("\n", " "))}
    assert said == table


def test_readme_and_the_tasks_page_name_the_tasks_that_take_no_matrix():
    """README said every task takes --matrix FILE; seven do not. Its sentence names them,
    read from the tasks' records as the tasks page's is."""
    from ascend_build.cli import pages
    from ascend_build.cli.options import flags
    module = _tasks_module()
    lacking = pages.without_matrix(module)
    assert {"run", "shell", "job", "ranktable", "base-image", "sbom", "site"} <= set(lacking)
    assert "build" not in lacking and "matrix" not in lacking
    for name in lacking:
        t = getattr(module, name.replace("-", "_"))
        assert "matrix" not in {x.name for x in flags(t.record)} - set(t.without), name
    text = " ".join((ROOT / "README.md").read_text().split())
    said = text.split("Every task takes `--help`, and every one but ", 1)[1].split(" takes `--matrix FILE`.", 1)[0]
    assert sorted(re.findall(r"`([a-z-]+)`", said)) == sorted(lacking)


def _tasks_module():
    import tasks  # the checkout's tasks.py (the repository root is on sys.path, as for tests.*)
    return tasks


def test_the_tasks_page_and_readmes_table_are_the_tasks_own_words():
    """docs/tasks.md and README's task table are generated from the tasks (their docstrings
    and the help declared once with each option in its record): every task and every option is on the
    page with its help, and `invoke render --check` holds both current."""
    from ascend_build.cli import building, pages
    from ascend_build.cli.options import flags
    module = _tasks_module()
    page = (ROOT / "docs" / "tasks.md").read_text()
    assert page == pages.tasks_page(module)
    assert pages.readme_table(module) in (ROOT / "README.md").read_text()
    for name in ("build", "ci-matrix", "torch-npu", "verify", "job"):
        assert f"## invoke {name}\n" in page and f"[`invoke {name}`](docs/tasks.md#invoke-{name})" in \
            (ROOT / "README.md").read_text()
    build = page.split("## invoke build\n", 1)[1].split("\n## ", 1)[0]
    options = flags(building.BuildOptions)
    assert len(options) > 40
    for option, text in ((x.name, x.help) for x in options):
        assert f"`--{option.replace('_', '-')}" in build and " ".join(text.split()).replace("|", "\\|") in build, option


def test_every_field_a_task_hands_on_is_one_of_its_options_or_declared_unused():
    """Each task hands its options to its action as a record: a field the task has no option
    for would silently keep its default (torch-npu had no --no-cache, and builder no
    --torch-index-url). Every task is declared by its record (cli/wrap.py's task): it has
    exactly the record's options but those it names in `without=`, and the record is not
    made when one is missing."""
    from invoke import Collection

    from ascend_build.cli.options import flags, record_of
    found = Collection.from_module(_tasks_module()).tasks
    plain = [name for name, t in found.items() if getattr(t, "record", None) is None]
    assert plain == [], f"tasks not declared by a record: {plain}"
    for name, t in found.items():
        params = set(list(inspect.signature(t.body).parameters)[1:])
        names = {x.name for x in flags(t.record)}
        missing = names - params - set(t.without)
        assert not missing, f"task {name}: {t.record.__name__} fields with no option: {missing}"
        assert not set(t.without) & params, f"task {name} declares options it has as unused"
        assert params <= names, f"task {name}: options not in {t.record.__name__}: {params - names}"
    assert len(found) >= 22
    assert found["shell"].without and found["join"].without == ("repository", "join")
    from ascend_build.cli.images import PushOptions
    given = {x.name: x.default for x in flags(PushOptions) if x.name != "repository"}
    with pytest.raises(TypeError, match="PushOptions.repository: the task has no option --repository"):
        record_of(PushOptions, given)
