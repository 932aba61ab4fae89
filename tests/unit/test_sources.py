"""Builder cells, builder rendering, source parsing, revisions and the wheel cache."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ascend_build.errors import MatrixError, UserError
from ascend_build.images.catalog import render_all
from ascend_build.images.sources import find_cached
from ascend_build.inputs.trees import checkout, parse_source, tree_hash
from ascend_build.matrix import load_matrix
from tests.conftest import copy_matrix

ROOT = Path(__file__).resolve().parents[2]
REAL = (ROOT / "matrix.yaml").read_text()


def test_builder_cells_follow_the_stack():
    m = load_matrix(ROOT / "matrix.yaml")
    b = m.builder_cell("2.1.0")
    assert b.flavor.name == "manylinux2014" and b.gcc == 10 and b.pythons == ("3.8", "3.9", "3.10", "3.11")
    assert b.flavor.python == "/opt/python/cp{XY}-cp{XY}/bin/python{X.Y}"     # the template fills it in per Python
    assert m.builder_cell("2.1.0", "debian11").pythons == ("3.9",)
    with pytest.raises(UserError, match=r"python 3.11 is not available in builder debian11 .* choose one of: 3.9"):
        m.builder_cell("2.1.0", "debian11", "3.11")


def test_builder_with_the_wrong_gcc_is_refused(tmp_path):
    path = copy_matrix(tmp_path, REAL.replace("    gcc: [10]             # bullseye's gcc-10", "    gcc: [12]             # bullseye", 1)
                    .replace("    gcc: 10                       # 10.2 on aarch64 (10.5 also works)\n    builder: manylinux2014",
                             "    gcc: 10                       # 10.2 on aarch64 (10.5 also works)\n    builder: debian11", 1))
    with pytest.raises(MatrixError, match=r"stacks\['2.1.0'\].builder: builder debian11 has gcc 12, but this stack "
                                          r"needs gcc 10; builders with gcc 10: manylinux2014"):
        load_matrix(path)


def test_a_toolset_flavor_serves_each_stack_its_own_gcc():
    """manylinux_2_28 offers gcc-toolset 11, 13 and 14: each stack's builder carries its
    own (13 for every line from 2.8, as the wheels were built), first on PATH after ccache;
    a gcc it does not offer is refused with the ones that do."""
    m = load_matrix(ROOT / "matrix.yaml")
    files = {str(r.path): r.text for r in render_all(m)}
    for stack, gcc in (("2.6.0", 11), ("2.8.0", 13), ("2.10.0", 13), ("2.12.0", 13)):
        text = files[f"images/builder/{stack}/manylinux_2_28/Dockerfile"]
        assert f"yum install -y ccache gcc-toolset-{gcc}-gcc gcc-toolset-{gcc}-gcc-c++" in text
        assert f"PATH=/usr/lib64/ccache:/opt/rh/gcc-toolset-{gcc}/root/usr/bin:${{PATH}}" in text
        assert f'.gcc="{gcc}"' in text and m.builder_cell(stack).name.startswith(f"torch{stack}-manylinux_2_28-gcc{gcc}-")
    assert "gcc-13 g++-13" in files["images/builder/2.8.0/debian13/Dockerfile"]
    assert m.builder_cell("2.10.0", "debian13").pythons == ("3.13",)
    with pytest.raises(UserError, match=r"builder debian13 has gcc 13 or 14 but torch stack 2.6.0 needs gcc 11 .*"
                                        r"builders with gcc 11: manylinux_2_28"):
        m.builder_cell("2.6.0", "debian13")


def test_builder_dockerfiles_carry_the_toolchain():
    files = {str(r.path): r.text for r in render_all(load_matrix(ROOT / "matrix.yaml"))}
    many = files["images/builder/2.1.0/manylinux2014/Dockerfile"]
    deb = files["images/builder/2.1.0/debian11/Dockerfile"]
    assert "ARG BASE_IMAGE=quay.io/pypa/manylinux2014_aarch64:2023-10-07-c1e05d1" in many
    assert 'ARG PYTHONS="3.8 3.9 3.10 3.11"' in many and "/opt/python/cp{XY}-cp{XY}/bin/python{X.Y}" in many
    assert "gcc-10 g++-10" in deb and "CC=gcc-10" in deb and 'ARG PYTHONS="3.9"' in deb
    assert "torch==2.1.0" in many and "torch==2.1.0" in deb
    assert "images/builder/2.1.0/debian11/Dockerfile" in files and "images/builder/1.11.0/debian11/Dockerfile" in files


def test_parse_source(tmp_path):
    assert parse_source(str(tmp_path)) == (str(tmp_path.resolve()), None)
    assert parse_source("https://github.com/Ascend/pytorch.git@v2.1.0-6.0.rc3") == \
        ("https://github.com/Ascend/pytorch.git", "v2.1.0-6.0.rc3")
    assert parse_source("git@gitee.com:ascend/pytorch.git#v2.1.0") == ("git@gitee.com:ascend/pytorch.git", "v2.1.0")
    assert parse_source("https://example.org/apex.git") == ("https://example.org/apex.git", None)


def test_tree_hash_tracks_sources_not_build_output(tmp_path):
    shutil.copytree(ROOT / "tests/doubles/torch_npu_src", tmp_path / "src")
    first = tree_hash(tmp_path / "src")
    (tmp_path / "src" / "dist").mkdir()
    (tmp_path / "src" / "dist" / "x.whl").write_text("output")
    assert tree_hash(tmp_path / "src") == first
    (tmp_path / "src" / "csrc" / "standin.c").write_text("/* changed */\n")
    assert tree_hash(tmp_path / "src") != first


def test_checkout_of_a_git_url_at_a_ref(tmp_path):
    repo = tmp_path / "upstream"
    shutil.copytree(ROOT / "tests/doubles/torch_npu_src", repo)
    def git(*a: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True,
                              env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                                   "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})
    git("init", "-q", "-b", "main")
    git("add", ".")
    git("commit", "-qm", "one")
    git("branch", "v2.1.0-6.0.rc3")
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    got = checkout(f"file://{repo}", "v2.1.0-6.0.rc3", tmp_path / "cache")
    assert got.revision == head and (got.path / "ci" / "build.sh").is_file()
    with pytest.raises(UserError, match="cannot fetch .*@no-such-branch"):
        checkout(f"file://{repo}", "no-such-branch", tmp_path / "cache")


def test_find_cached_matches_torch_python_arch(tmp_path):
    for key, python in (("a", "3.9"), ("b", "3.10")):
        folder = tmp_path / "wheels" / "apex" / key
        folder.mkdir(parents=True)
        (folder / f"apex-0.1+ascend-cp{python.replace('.', '')}.whl").write_text("w")
        (folder / "meta.json").write_text(json.dumps({"wheel": f"apex-0.1+ascend-cp{python.replace('.', '')}.whl",
                                                      "torch": "2.1.0", "python": python, "arch": "aarch64"}))
    assert find_cached(tmp_path, "apex", "2.1.0", "3.10", "aarch64").name == "apex-0.1+ascend-cp310.whl"
    assert find_cached(tmp_path, "apex", "2.1.0", "3.11", "aarch64") is None
    assert find_cached(tmp_path, "apex", "2.1.0", "3.9", "x86_64") is None


def test_wheel_build_gets_the_network_secrets_as_read_only_files(tmp_path):
    """A source build behind a proxy: the proxy, index and CA reach the builder container
    as read-only files under /run/secrets (as in image builds), never in its command
    line or environment, and are gone after."""
    from ascend_build.engine import Engine
    from ascend_build.engine.network import Network
    from ascend_build.images.sources import WheelRequest, build_wheel
    from ascend_build.inputs.options import Site
    record = tmp_path / "run-args"
    client = tmp_path / "docker"       # a client double: an image that exists, a run that makes a wheel
    client.write_text(f"""#!/bin/bash
if [ "$1" = image ]; then echo '[{{"Id": "sha256:0123456789abcdef"}}]'; exit 0; fi
printf '%s\\n' "$@" > {record}
for arg in "$@"; do
  case "$arg" in
    *:/run/secrets/proxy-env:ro) cp "${{arg%%:*}}" {tmp_path}/proxy-env-seen ;;
    *:/out) touch "${{arg%%:*}}/torch_npu-2.1.0.post8-cp39-cp39-linux_aarch64.whl" ;;
  esac
done
""")
    client.chmod(0o755)
    src = tmp_path / "src"
    (src / "ci").mkdir(parents=True)
    (src / "ci" / "build.sh").write_text("echo build\n")
    (src / "third_party" / "op-plugin").mkdir(parents=True)        # the release's submodule, as a plain tree
    (src / "third_party" / "op-plugin" / "README.md").write_text("op-plugin\n")
    ca = tmp_path / "ca.pem"
    ca.write_text("pem\n")
    opts = Site(cache=tmp_path / "cache", work=tmp_path / "work",
                net=Network(ca_bundle=ca, pip_index_url="https://u:idx-pw@mirror/simple", mode="host",
                            proxy={"https_proxy": "http://u:px-pw@127.0.0.1:3128"}))
    m = load_matrix(ROOT / "matrix.yaml")
    wheel = build_wheel(m, WheelRequest("torch_npu", m.stacks["2.1.0"], "debian11", "3.9", None, str(src)),
                        opts, Engine("docker", str(client), "classic-buildkit", "20.10"))
    assert wheel.name.startswith("torch_npu-2.1.0.post8")
    args = record.read_text().splitlines()
    assert "--network=host" in args
    mounted = {a.rsplit(":", 2)[1] for a in args if a.endswith(":ro") and "/run/secrets/" in a}
    assert mounted == {"/run/secrets/ca-bundle", "/run/secrets/pip-conf", "/run/secrets/proxy-env"}
    assert "px-pw" in (tmp_path / "proxy-env-seen").read_text(), "the file was there during the run"
    assert not any("px-pw" in a or "idx-pw" in a for a in args), "no secret on the command line"
    assert ". /run/secrets/proxy-env" in record.read_text(), "the script takes them up"
    assert not any(Path(a.split(":")[0]).exists() for a in args if "/run/secrets/pip-conf" in a), "removed after"


def test_a_source_build_cross_compiles_by_default_and_says_why():
    """`invoke torch-npu --torch 2.1.0`: the stack's own builder, manylinux2014, has no cross
    compiler, so on a machine that is not aarch64 it would compile under qemu (hours for the
    real tree). By default the flavor that cross-compiles with the line's gcc and has the
    Python the build takes is chosen, and the plan says which and why; `--flavor manylinux2014`
    keeps upstream's builder under qemu and says what it costs; a Python the cross flavor
    lacks keeps the stack's own (issue: the lines)."""
    import platform

    from tests.forked import invoke

    def said(*args: str) -> list[str]:
        out = invoke(*args, "--dry")
        assert out.returncode == 0, out.stdout + out.stderr
        return [line for line in out.stdout.splitlines() if line.startswith(("compilers: ", "builder: ", "# torch_npu"))]
    if platform.machine() in ("aarch64", "arm64"):
        lines = said("torch-npu", "--torch", "2.1.0")       # the builder's own machine: no qemu, no switch
        assert not any("qemu" in line or line.startswith("builder: ") for line in lines), lines
        return
    lines = said("torch-npu", "--torch", "2.1.0")
    assert lines[0].startswith("builder: debian11, which cross-compiles with gcc 10 on this linux/amd64 machine; the "
                               "stack's own flavor, manylinux2014, has no cross compiler"), lines
    assert "--flavor manylinux2014 for it" in lines[0] and "builder debian11, python 3.9" in lines[1], lines
    assert lines[2].startswith("compilers: gcc-10 for aarch64 on the build machine (linux/amd64)"), lines
    for args in (("--flavor", "manylinux2014"), ("--python", "3.10")):
        kept = said("torch-npu", "--torch", "2.1.0", *args)
        assert not any(line.startswith("builder: ") for line in kept) and "builder manylinux2014" in kept[0], kept
        assert kept[1] == ("compilers: builder manylinux2014 has no cross compiler (builders.manylinux2014.cross): "
                           "compiling under qemu, about 6 times slower (hours for a real torch_npu tree on 2 cores); "
                           "--flavor debian11 cross-compiles with gcc 10 on the build machine"), kept
    assert said("builder", "--torch", "2.1.0")[0].startswith("builder: debian11, which cross-compiles"), "builder too"


def test_the_builder_takes_the_sites_mirror_of_the_stacks_torch_index():
    """The builder installs torch per Python from the index the stack names (PyTorch's CPU
    index for 2.12.0 on both arches); `--torch-index-url` points it at the site's mirror, as for
    runtime images, and one carrying credentials is refused (they would be in the image)."""
    from tests.forked import invoke
    plain = invoke("builder", "--torch", "2.12.0", "--dry")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "TORCH_INDEX_URL_" not in plain.stdout          # the Dockerfile's own: the stack's index
    mirror = "https://mirror.site/pytorch/whl/cpu"
    out = invoke("builder", "--torch", "2.12.0", "--torch-index-url", mirror, "--dry")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"TORCH_INDEX_URL_AARCH64={mirror}" in out.stdout and f"TORCH_INDEX_URL_X86_64={mirror}" in out.stdout
    # 2.1.0 names an index for x86_64 only: aarch64's torch comes from PyPI (--pip-index-url's mirror)
    old = invoke("builder", "--torch", "2.1.0", "--torch-index-url", mirror, "--dry")
    assert f"TORCH_INDEX_URL_X86_64={mirror}" in old.stdout and "TORCH_INDEX_URL_AARCH64" not in old.stdout
    bad = invoke("builder", "--torch", "2.12.0", "--torch-index-url", "https://u:pw@mirror.site/cpu", "--dry")
    assert bad.returncode == 2 and "--torch-index-url carries credentials" in bad.stderr, bad.stdout + bad.stderr
