"""Hostile and careless input, third pass (issue #74), each test naming the finding it
covers. Each fails on the code before the fix; the renderer's own defence is
test_render_hostile.py. Everything runs against the engine double or --dry."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ascend_build.errors import MatrixError, UserError
from ascend_build.matrix import load_matrix
from ascend_build.upstream import cann_env, cann_images
from tests import forked
from tests.conftest import committed_imported_text, committed_matrix_text, copy_matrix

ROOT = Path(__file__).resolve().parents[2]
PAYLOAD = '"/x\\"\\nRUN touch /pwned\\nENV ZZ=\\"b"'          # as YAML writes it: a quote and two line breaks


def invoke(*args: str, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    return forked.invoke(*args, cwd=cwd, env={**os.environ, **(env or {})})


def refused(tmp_path: Path, matrix: str | None = None, imported: str | None = None) -> str:
    with pytest.raises(MatrixError) as caught:
        load_matrix(copy_matrix(tmp_path, matrix, imported))
    return str(caught.value)


def line_of(text: str, needle: str) -> int:
    return text[:text.index(needle)].count("\n") + 1


# ---------------------------------------------------------------- data never becomes an instruction

def test_the_issues_env_value_in_matrix_yaml_is_refused_at_its_line(tmp_path):
    """Finding: nnal_sip_env.env.ASDSIP_HOME_PATH with a quote and line breaks passed `invoke
    matrix` and wrote `RUN touch /pwned` into 170 Dockerfiles."""
    old = "    ASDSIP_HOME_PATH: /usr/local/Ascend/nnal/asdsip/latest/\n"
    text = committed_matrix_text().replace(old, f"    ASDSIP_HOME_PATH: {PAYLOAD}\n")
    matrix = copy_matrix(tmp_path, text)
    out = invoke("matrix", "--matrix", str(matrix))
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr
    assert f"matrix.yaml:{line_of(text, 'ASDSIP_HOME_PATH: ' + PAYLOAD)}: nnal_sip_env.env.ASDSIP_HOME_PATH" in out.stderr
    assert "one line of text" in out.stderr and "Traceback" not in out.stderr
    plan = invoke("build", "--torch", "2.11.0", "--os", "debian12", "--dry", "--offline", "--matrix", str(matrix))
    assert plan.returncode == 2 and "pwned" not in plan.stdout, plan.stdout[-2000:]


def test_the_issues_env_value_in_imported_yaml_is_refused_at_its_line(tmp_path):
    """Finding: the same under cann.<v>.env.ASCEND_AICPU_PATH reached 234 Dockerfiles."""
    imported = committed_imported_text()
    old = "        ASCEND_AICPU_PATH: ${ASCEND_TOOLKIT_HOME}\n"
    text = imported.replace(old, f"        ASCEND_AICPU_PATH: {PAYLOAD}\n", 1)
    said = refused(tmp_path, imported=text)
    assert f"imported.yaml:{line_of(text, PAYLOAD)}: cann['8.0.RC1'].env.toolkit.ASCEND_AICPU_PATH" in said


@pytest.mark.parametrize("value, ok", [
    ('"/opt/a\\"b"', False), ("'/opt/a''b'", False), ('"/opt/a\\\\b"', False), ("/opt/a`id`", False),
    ('"/opt/a\\tb"', False), ('"/opt/\\u2028b"', False), ("${ASCEND_TOOLKIT_HOME}/opt", True), ("/opt/a b", True)])
def test_an_env_value_is_env_text_without_a_quote_backslash_backtick_or_control(tmp_path, value, ok):
    """The boundary: ${NAME} and a space are ENV text (quoted when written); a quote, a
    backslash, a backtick, a tab or a line separator are not."""
    old = "    ASDSIP_HOME_PATH: /usr/local/Ascend/nnal/asdsip/latest/\n"
    text = committed_matrix_text().replace(old, f"    ASDSIP_HOME_PATH: {value}\n")
    if ok:
        load_matrix(copy_matrix(tmp_path, text))
    else:
        assert "nnal_sip_env.env.ASDSIP_HOME_PATH" in refused(tmp_path, text)


@pytest.mark.parametrize("old, new, key", [
    ("    image: debian:bookworm\n", '    image: "debian:bookworm\\nRUN touch /pwned"\n', "os.debian12.image"),
    ("    image: debian:bookworm\n", "    image: 'debian:book worm'\n", "os.debian12.image"),
    ("    image: debian:bookworm\n", "    image: Debian/X:1\n", "os.debian12.image"),
    ("    image: debian:bookworm\n", "    image: 'debian:bookworm$(id)'\n", "os.debian12.image"),
    ("    cross: debian:bullseye\n", "    cross: 'debian:bullseye;id'\n", "builders.debian11.cross"),
    ("    python: /usr/bin/python{X.Y}\n", "    python: \"/usr/bin/python{X.Y}'\"\n", "builders.debian11.python"),
    ("torch_npu: {repo: https://github.com/Ascend/pytorch.git}", "torch_npu: {repo: 'https://x/$(id)'}",
     "sources.torch_npu.repo"),
    ("urls: [https://www.python.org/ftp/python/3.7.17/Python-3.7.17.tar.xz]",
     "urls: ['https://x.example/a;id']", "pythons['3.7'].urls[0]"),
])
def test_paths_references_and_urls_keep_their_grammar(tmp_path, old, new, key):
    """Finding: `\\S+` let a quote, a $( or a ; through in image references, paths and URLs
    (and an image reference by the engine's own grammar, the one the options are held to)."""
    text = committed_matrix_text()
    assert old in text
    assert key in refused(tmp_path, text.replace(old, new, 1))


def test_a_line_break_in_any_text_of_either_file_is_refused(tmp_path):
    """Even prose (a source) is one line: it reaches comments of the Dockerfiles."""
    text = committed_matrix_text()
    old = "  source: \"cann/sip scripts/set_env.sh"
    assert old in text
    assert "nnal_sip_env.source" in refused(tmp_path, text.replace(old, "  source: \"x\\nRUN touch /pwned cann/sip"))
    assert "one line of text" in refused(tmp_path, text.replace(old, "  source: \"x\\x1b[2J cann/sip"))


def test_the_builders_arch_placeholder_is_still_a_reference():
    """The boundary of the reference check: {arch} is filled in before it is applied."""
    assert load_matrix(ROOT / "matrix.yaml").builders["manylinux_2_28"].image.startswith("quay.io/pypa/manylinux_2_28_{arch}")


def _official_dockerfile(line: str) -> str:
    return ("FROM ubuntu:22.04 AS official\n"
            "# Note: Toolkit Environment variables, obtained from /usr/local/Ascend/ascend-toolkit/set_env.sh\n"
            "ENV ASCEND_TOOLKIT_HOME=/usr/local/Ascend/cann-9.0.1\n"
            f"{line}\n")


@pytest.mark.parametrize("line", ['ENV ASCEND_AICPU_PATH="/x\\"y"', "ENV ASCEND_AICPU_PATH=/x`id`",
                                  "ENV ASCEND_AICPU_PATH=/x\\\\y", "ENV ASCEND_AICPU_PATH='/x\"y'"])
def test_the_import_refuses_an_official_images_env_naming_its_file_and_line(line):
    """Finding: the import read those values from a third party's Dockerfiles: a change
    upstream became a RUN here. `invoke update --cann-images` stops, naming the file and
    the line it read."""
    with pytest.raises(UserError, match=r"cann/9\.0\.1-a3/Dockerfile line 4: ENV ASCEND_AICPU_PATH="):
        cann_env.final_env(_official_dockerfile(line), "cann/9.0.1-a3/Dockerfile", "9.0.1")


def test_the_import_refuses_a_download_url_naming_its_file_and_line():
    text = ("FROM ubuntu:22.04\nARG BASE=https://ascend-repo.obs.cn-east-2.myhuaweicloud.com\n\n"
            "RUN CANN_TOOLKIT_URL=\"${BASE}/a;touch /pwned/Ascend-cann-toolkit_9.0.1_linux-${ARCH}.run\" && \\\n"
            "    true\n")
    with pytest.raises(UserError, match=r"cann/9\.0\.1-a3/Dockerfile line 4: CANN_TOOLKIT_URL="):
        cann_images.downloads(text, "cann/9.0.1-a3/Dockerfile")
