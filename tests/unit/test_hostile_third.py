"""Hostile and careless input, third pass (issue #74), each test naming the finding it
covers. Each fails on the code before the fix; the renderer's own defence is
test_render_hostile.py. Everything runs against the engine double or --dry."""
from __future__ import annotations

import contextlib
import os
import re
import signal
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


@contextlib.contextmanager
def within(seconds: float):
    """A read that would hang (a FIFO with no writer) fails the test instead."""
    def expire(signum, frame):
        raise TimeoutError(f"still reading after {seconds} s: a FIFO or device was read")
    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


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


# ---------------------------------------------------------------- nothing after -- undoes the command's flags

IMAGE = "registry.example.com/ascend-serving:sha-0123456789abcdef-arm64"
JOB = ["job", "--image", IMAGE, "--kind", "serving", "--model", "Qwen2.5-7B-Instruct", "--model-claim", "models"]


def _model(where: Path) -> Path:
    (where / "Qwen2.5-7B-Instruct").mkdir(parents=True)
    (where / "Qwen2.5-7B-Instruct" / "config.json").write_text("{}")
    return where / "Qwen2.5-7B-Instruct"


def _run(tmp_path: Path, *more: str) -> subprocess.CompletedProcess:
    from tests.doubles.host_roots import make_host
    root = tmp_path / "host" if (tmp_path / "host").exists() else make_host(tmp_path / "host", cards=2)
    return invoke("run", "--image", IMAGE, "--host-root", str(root), "--runtime", "runc", "--dry", *more,
                  env={"PATH": f"{tmp_path / 'nobin'}:{os.environ['PATH']}"})


@pytest.mark.parametrize("extra, sets", [
    (["--host", "0.0.0.0"], "host"), (["--host=0.0.0.0"], "host"), (["--hos", "::"], "host"),
    (["--port", "9000"], "port"), (["--port=9"], "port"), (["--max-model-len", "8", "--port", "9"], "port"),
    (["--tensor-parallel-size", "4"], "tensor-parallel-size"), (["--tensor_parallel_size=4"], "tensor-parallel-size"),
    (["-tp", "4"], "tensor-parallel-size"), (["-tp=4"], "tensor-parallel-size"), (["--model", "/etc"], "model"),
])
def test_what_follows_the_dashes_cannot_set_what_the_command_sets(extra, sets):
    """Finding: `run --serve DIR --network-host -- --host 0.0.0.0` listened on every interface
    (the last --host wins); `-- --port 9000` published 8000 to a server on 9000; a job's
    probes and Service stayed on 8000. Refused in every spelling vllm serve's parser takes."""
    from ascend_build.host.serving import JOB_SETS, RUN_SETS, check_extra
    for own, option in ((RUN_SETS, "--serve"), (JOB_SETS, "--kind serving")):
        with pytest.raises(UserError, match=rf"vllm serve's --{sets} is set by this command \({re.escape(own[sets])}\)"):
            check_extra(tuple(extra), option, own)
    # the boundary: options of vllm serve's own that merely start like one of these are its to take
    kept = ("--max-model-len", "8192", "--model-impl", "vllm", "--served-model-name", "qwen", "--hf-token", "x")
    assert check_extra(kept, "--serve", RUN_SETS) == kept


def test_run_serve_and_job_serving_refuse_an_own_flag_after_the_dashes(tmp_path):
    model = _model(tmp_path / "models")
    for more in (["--network-host", "--", "--host", "0.0.0.0"], ["--", "--port=9000"]):
        out = _run(tmp_path, "--serve", str(model), *more)
        assert out.returncode == 2 and "is set by this command" in out.stderr, out.stdout + out.stderr
    job = invoke(*JOB, "--", "--port", "9")
    assert job.returncode == 2 and "--port is set by this command (give --port)" in job.stderr, job.stderr
    assert job.stdout == ""


def test_the_loopback_default_is_where_the_command_line_is_read(tmp_path):
    """Mutation: the default of --publish-address made 0.0.0.0 passed every test (each gave
    the address). Without it the port is published on 127.0.0.1 only; on the host network
    vLLM itself listens there."""
    model = _model(tmp_path / "models")
    out = _run(tmp_path, "--serve", str(model))
    assert out.returncode == 0, out.stderr
    assert " -p 127.0.0.1:8000:8000 " in out.stdout and "0.0.0.0:8000" not in out.stdout
    host = _run(tmp_path, "--serve", str(model), "--network-host")
    assert host.returncode == 0 and "--host 127.0.0.1 --port 8000" in host.stdout, host.stdout + host.stderr
    assert " -p " not in host.stdout


# ---------------------------------------------------------------- every job kind checks what every other does

@pytest.mark.parametrize("image", ["reg/x:sha-1\n  privileged: true", "reg/x:sha-1\n", " reg/x:sha-1", "REG/X Y:sha-1",
                                   "reg/x@sha256:", "reg/x:sha-\u00e91", "reg/x:latest"])
@pytest.mark.parametrize("kind", ["serving", "indexed", "ascendjob"])
def test_every_job_kind_holds_the_image_to_the_one_reference_grammar(image, kind):
    """Finding: `job --kind serving` took any text with :sha- or @sha256: in it (a line break
    and a YAML key after it, a space, capitals, an empty digest); the training kinds ran the
    real check. Now each kind runs it (and a tag that is not a content tag is refused)."""
    task = JOB[:2] + [image] + (JOB[3:] if kind == "serving" else ["--kind", kind, "--", "train.py"])
    out = invoke(*task)
    assert out.returncode == 2, (kind, image, out.stdout[-500:])
    assert ("not an image reference" in out.stderr or "content tag" in out.stderr) and out.stdout.count("kind:") == 0


@pytest.mark.parametrize("kind", ["serving", "indexed"])
def test_a_job_named_as_no_service_can_be_is_refused_by_every_kind_that_writes_one(kind):
    """Finding: `job --kind indexed --name 1abc` wrote a Service named 1abc (DNS-1035: a
    Service's name starts with a letter); --kind serving refused it. Names are held to
    the rules of the objects written: an AscendJob and its ConfigMap take 1abc."""
    tail = JOB[3:] if kind == "serving" else ["--kind", kind, "--", "train.py"]
    out = invoke(*JOB[:3], "--name", "1abc", *tail)
    assert out.returncode == 2 and "DNS-1035" in out.stderr, out.stdout[-500:] + out.stderr
    assert invoke(*JOB[:3], "--name", "a1bc", *tail).returncode == 0
    assert invoke(*JOB[:3], "--name", "1abc", "--kind", "ascendjob", "--", "train.py").returncode == 0


def _manifests(out: subprocess.CompletedProcess) -> list[dict]:
    import yaml
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def _resources(docs: list[dict]) -> dict:
    for doc in docs:
        spec = doc.get("spec", {})
        template = spec.get("template") or next(iter(spec.get("replicaSpecs", {}).values()), {}).get("template")
        if template:
            return template["spec"]["containers"][0]["resources"]
    raise AssertionError("no pod template")


@pytest.mark.parametrize("kind", ["serving", "indexed", "ascendjob"])
def test_no_cpus_keeps_the_memory_given(kind):
    """Finding: `--cpus 0 --memory 64Gi` dropped the memory, and with it the check that
    /dev/shm stays below it."""
    tail = JOB[3:] if kind == "serving" else ["--kind", kind, "--", "train.py"]
    res = _resources(_manifests(invoke(*JOB[:3], "--cpus", "0", "--memory", "64Gi", *tail)))
    assert res["limits"]["memory"] == res["requests"]["memory"] == "64Gi" and "cpu" not in res["limits"]
    assert "memory" not in _resources(_manifests(invoke(*JOB[:3], "--cpus", "0", *tail)))["limits"]
    if kind == "serving":
        over = invoke(*JOB, "--cpus", "0", "--memory", "64Gi", "--shm-size", "128Gi")
        assert over.returncode == 2 and "counts against the pod's memory (64Gi)" in over.stderr, over.stderr


def test_sizes_are_written_as_checked():
    """Finding: `run --shm-size ' 16g'` was checked stripped and passed raw (docker refuses
    " 16g"); a job's quantities likewise. `--shm-size 0` and a 20-digit --cpus were taken."""
    docs = _manifests(invoke(*JOB, "--memory", " 256Gi ", "--shm-size", " 16Gi"))
    assert _resources(docs)["limits"]["memory"] == "256Gi"
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}} in docs[1]["spec"]["template"][
        "spec"]["volumes"]
    for more, said in ((["--shm-size", "0"], "--shm-size '0': a Kubernetes quantity above zero"),
                       (["--memory", "0Gi"], "--memory '0Gi': a Kubernetes quantity above zero"),
                       (["--cpus", "99999999999999999999"], "--cpus 99999999999999999999: expected a whole number from 0 to 4096"),
                       (["--cpus", "4097"], "from 0 to 4096")):
        out = invoke(*JOB, *more)
        assert out.returncode == 2 and said in out.stderr, (more, out.stderr)
    assert invoke(*JOB, "--cpus", "4096", "--memory", "4Ti").returncode == 0


def test_run_writes_the_shm_size_as_checked(tmp_path):
    out = _run(tmp_path, "--shm-size", " 16G")
    assert out.returncode == 0 and " --shm-size=16g " in out.stdout, out.stdout + out.stderr


@pytest.mark.parametrize("model", ["q\x7fx", "q\x85x", "q\u2028x", "q\nx"])
def test_a_model_with_a_control_character_is_refused(model):
    """Finding: `job --model $'q\\x7fx'` was written into the manifest (only < 32 was checked)."""
    out = invoke(*JOB[:6], model, *JOB[7:])
    assert out.returncode == 2 and "--model" in out.stderr and out.stdout == "", out.stdout


def test_serving_the_hosts_root_is_refused(tmp_path):
    """Finding: `run --serve /` (or a link to /) mounted the host's root at /models/ and served it."""
    (tmp_path / "root").symlink_to("/")
    for given in ("/", str(tmp_path / "root"), str(tmp_path / "root") + "/"):
        out = _run(tmp_path, "--serve", given)
        assert out.returncode == 2 and "the host's root folder" in out.stderr, (given, out.stdout + out.stderr)
        assert "/models/" not in out.stdout


# ---------------------------------------------------------------- no tracebacks, nothing echoed whole

def test_a_huge_release_number_is_refused_without_a_traceback():
    """Finding: `build --vllm` with 4,301 digits: packaging's Version raised ValueError (exit
    1, a traceback); 10,000 characters were echoed back whole. (Every option of every task
    gets both in test_task_fuzz.py.)"""
    for value in ("9" * 4301, "0." + "9" * 4301, "\ufeff" + "x" * 10000):
        out = invoke("build", "--vllm", value, "--dry", "--offline")
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-1000:]
        assert "not a vllm-ascend release number" in out.stderr and len(out.stderr) < 500, out.stderr[:600]


def test_a_number_option_takes_ascii_digits_only():
    from ascend_build.cli.options import number
    assert number(" 42 ", "--x") == 42
    for bad in ("1_000", "\u0661\u0662", "9" * 4301, "4e3", ""):
        with pytest.raises(UserError, match="expected a whole number") as caught:
            number(bad, "--x")
        assert len(str(caught.value)) < 200


# ---------------------------------------------------------------- files are regular files

TOOLKIT = "Ascend-cann-toolkit_8.0.RC3_linux-aarch64.run"


def _pin(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INVOKE_", "ASCEND_BUILD_", "XDG_"))}
    env.update(HOME=str(tmp_path), ASCEND_BUILD_CACHE=str(tmp_path / "cache"))
    return forked.invoke("pin", *args, cwd=tmp_path, env=env, timeout=60)


def _sums_case(tmp_path: Path, make) -> subprocess.CompletedProcess:
    (tmp_path / "packages").mkdir(exist_ok=True)
    matrix = copy_matrix(tmp_path / "m")
    sums = make(tmp_path / "SHA256SUMS")
    return _pin(tmp_path, "--packages", "packages", "--sums", str(sums), "--matrix", str(matrix))


def test_a_sums_file_that_is_a_fifo_or_a_device_is_refused_not_read(tmp_path):
    """Finding: `pin --packages D --sums FIFO` hung; `--sums /dev/zero` grew to a MemoryError."""
    def fifo(path: Path) -> Path:
        os.mkfifo(path)
        return path
    out = _sums_case(tmp_path, fifo)
    assert out.returncode == 2 and "SHA256SUMS: a FIFO (a named pipe), not a regular file" in out.stderr, out.stderr
    zero = _sums_case(tmp_path, lambda p: Path("/dev/zero"))
    assert zero.returncode == 2 and "--sums /dev/zero: a character device, not a regular file" in zero.stderr


def test_a_huge_junk_sums_file_is_refused_at_its_first_line(tmp_path):
    """Finding: 500 MB of junk was read and split whole (1.4 GB RSS) before line 1 was refused.
    Read a line at a time, at most 4,096 bytes each: 500 MB without a line break is refused
    after 4 KB (a sparse file: nothing of it is on the disk)."""
    def junk(path: Path) -> Path:
        with open(path, "wb") as fh:
            fh.truncate(500 << 20)
        return path
    out = _sums_case(tmp_path, junk)
    assert out.returncode == 2 and "SHA256SUMS line 1: longer than 4096 bytes" in out.stderr, out.stderr
    many = _sums_case(tmp_path, lambda p: (p.write_text("\n" * 100_001), p)[1])
    assert many.returncode == 2 and "more than 100,000 lines" in many.stderr, many.stderr


def test_a_sums_file_with_a_byte_order_mark_is_read(tmp_path):
    """Finding: a sums file saved by an editor that writes a UTF-8 BOM was refused at line 1."""
    from ascend_build.hashing import sha256_of
    from tests.unit.test_pin_published import uncheckable
    path = uncheckable(tmp_path / "packages", TOOLKIT)
    out = _sums_case(tmp_path, lambda p: (p.write_bytes(b"\xef\xbb\xbf" + f"{sha256_of(path)}  {TOOLKIT}\r\n".encode()),
                                          p)[1])
    assert out.returncode == 0 and f"pinned {TOOLKIT} {sha256_of(path)}" in out.stdout, out.stdout + out.stderr


def test_pin_file_says_what_a_fifo_is(tmp_path):
    """Finding: `pin --file FIFO` said "no such file (a folder?)"."""
    (tmp_path / "packages").mkdir()
    os.mkfifo(tmp_path / "packages" / TOOLKIT)
    out = _pin(tmp_path, "--file", f"packages/{TOOLKIT}", "--matrix", str(copy_matrix(tmp_path / "m")))
    assert out.returncode == 3 and f"packages/{TOOLKIT}: a FIFO (a named pipe), not a file" in out.stderr, out.stderr
    with_sum = _pin(tmp_path, "--file", f"packages/{TOOLKIT}", "--sha256", "0" * 64, "--matrix",
                    str(copy_matrix(tmp_path / "m2")))
    assert with_sum.returncode == 3 and "a FIFO" in with_sum.stderr, with_sum.stderr


def test_a_package_that_is_a_fifo_is_refused_by_a_dry_build(tmp_path):
    (tmp_path / "packages").mkdir()
    os.mkfifo(tmp_path / "packages" / TOOLKIT)
    out = forked.invoke("build", "--torch", "2.1.0", "--os", "debian12", "--dry", "--offline", "--packages",
                        str(tmp_path / "packages"), "--matrix", str(copy_matrix(tmp_path / "m")), cwd=tmp_path,
                        env={**os.environ, "ASCEND_BUILD_CACHE": str(tmp_path / "cache")}, timeout=60)
    assert f"{TOOLKIT}: a FIFO (a named pipe), not a file" in out.stdout + out.stderr, out.stdout[-2000:] + out.stderr


def _wheelhouse(tmp_path: Path, plant: str) -> Path:
    house = tmp_path / "wheels"
    house.mkdir()
    (house / "good-1.0-py3-none-any.whl").write_bytes(b"PK")
    wheel = house / "evil-1.0-py3-none-any.whl"
    if plant == "link":
        wheel.symlink_to("/etc/passwd")
    elif plant == "fifo":
        os.mkfifo(wheel)
    elif plant == "device":
        wheel.symlink_to("/dev/zero")
    return house


@pytest.mark.parametrize("plant, said", [("link", "a link out of"), ("fifo", "a FIFO"), ("device", "a character device")])
def test_a_wheelhouse_holds_regular_files_of_its_own(tmp_path, plant, said):
    """Finding: a link named like a wheel to /etc/passwd was followed and hashed as a wheel; a
    FIFO *.whl hung; /dev/zero gave a MemoryError. The lock's hashing and the staging read
    the folder through one check (hashing.files_in); a link inside the folder is a file of it."""
    from ascend_build.hashing import files_in
    from ascend_build.locking.layer_resolve import _local_wheels
    house = _wheelhouse(tmp_path, plant)
    for read in (lambda: files_in(house, "*.whl"), lambda: _local_wheels(house)):
        with within(10), pytest.raises(OSError, match=said) as caught:
            read()
        assert caught.value.filename == str(house / "evil-1.0-py3-none-any.whl")
    (house / "evil-1.0-py3-none-any.whl").unlink()
    (house / "alias-1.0-py3-none-any.whl").symlink_to("good-1.0-py3-none-any.whl")
    assert [p.name for p in files_in(house, "*.whl")] == ["alias-1.0-py3-none-any.whl", "good-1.0-py3-none-any.whl"]


@pytest.mark.parametrize("option", ["--serving-wheelhouse", "--layer-wheelhouse"])
def test_the_wheelhouse_options_refuse_a_stray_before_anything_runs(tmp_path, option):
    house = _wheelhouse(tmp_path, "fifo")
    (tmp_path / "req.txt").write_text("einops\n")
    more = ["--vllm", "0.23.0"] if option == "--serving-wheelhouse" else ["--requirements", str(tmp_path / "req.txt")]
    out = forked.invoke("build", *more, option, str(house), "--dry", cwd=ROOT,
                        env={**os.environ, "ASCEND_BUILD_CACHE": str(tmp_path / "cache")}, timeout=60)
    assert out.returncode == 2 and "evil-1.0-py3-none-any.whl: a FIFO" in out.stderr, out.stdout[-1000:] + out.stderr
    assert "docker build" not in out.stdout


def test_hashing_a_fifo_or_a_device_is_refused_at_once(tmp_path):
    from ascend_build.hashing import sha256_of
    os.mkfifo(tmp_path / "pipe")
    for path, said in ((tmp_path / "pipe", "a FIFO"), (Path("/dev/zero"), "a character device"), (tmp_path, "a folder")):
        with within(10), pytest.raises(OSError, match=said):
            sha256_of(path)


# ---------------------------------------------------------------- a dry plan says what it does not know

def test_a_dry_serving_plan_computes_no_content_tag_from_placeholders():
    """Finding: `build --vllm 0.23.0 --chip a3 --dry` showed a content tag computed from
    placeholders (VLLM_ASCEND_FILE=wheel, the serving lock's sha256 of nothing) that no real
    build makes. What it does not know is shown as <unknown>, and the tag as unknown."""
    out = invoke("build", "--vllm", "0.23.0", "--chip", "a3", "--dry")
    assert "Traceback" not in out.stderr, out.stderr
    assert "VLLM_ASCEND_FILE=<unknown>" in out.stdout and "VLLM_ASCEND_FILE=wheel" not in out.stdout
    assert "e3b0c44298fc1c14" not in out.stdout, "no sum of an empty lock"
    assert "-vllm0.23.0-arm64" in out.stdout and "ascend-runtime:sha-unknown-arm64" in out.stdout
    assert not re.search(r"ascend-runtime:sha-[0-9a-f]{16}-arm64", out.stdout)
    assert "# content tag: unknown (sha-unknown stands for it)" in out.stdout


def test_a_content_tag_is_made_from_known_inputs_only():
    from ascend_build.images.kinds import NO_CONTENT_TAG, UNKNOWN, content_tag
    known = content_tag("FROM x\n", {"A": "1"}, {"f": "0" * 64})
    assert re.fullmatch(r"sha-[0-9a-f]{16}", known)
    assert content_tag("FROM x\n", {"A": UNKNOWN}, {"f": "0" * 64}) == NO_CONTENT_TAG
    assert content_tag("FROM x\n", {"A": "1"}, {"f": "<built at run time>"}) == NO_CONTENT_TAG
    assert content_tag("FROM x\n", {"RUNTIME_IMAGE": f"r:{NO_CONTENT_TAG}-arm64"}, {}) == NO_CONTENT_TAG


# ---------------------------------------------------------------- --like: the official images only

@pytest.mark.parametrize("ref, said", [
    ("evil.example/x/cann:8.0.rc3-910b-debian12-py3.11", "x/cann is neither"),
    ("evil.example/ascend/cann:8.0.rc3-910b-debian12-py3.11", "evil.example is not the official registry"),
    ("localhost:5000/ascend/torch-npu:2.1.0.post8-cann8.0.rc3-910b-ubuntu22.04-py3.10", "localhost:5000 is not the official"),
    ("quay.io/ascend/cann@sha256:" + "a" * 64, "a digest names bytes, not the release they are of: give the tag"),
    ("quay.io/ascend/cann:8.0.rc3-910b-debian12-py3.11@sha256:abc", "is not a digest"),
])
def test_like_takes_the_official_images_only(ref, said):
    """Finding: `--like` took any registry (evil.example/x/cann:...) and refused a reference
    with its digest as "neither"."""
    from ascend_build.matrix.like import resolve
    with pytest.raises(UserError, match=re.escape(said)):
        resolve(load_matrix(ROOT / "matrix.yaml"), ref)


def test_like_takes_a_reference_with_its_digest_and_without_its_registry():
    from ascend_build.matrix.like import resolve
    m = load_matrix(ROOT / "matrix.yaml")
    want = resolve(m, "quay.io/ascend/cann:8.0.rc3-910b-debian12-py3.11")
    for ref in ("ascend/cann:8.0.rc3-910b-debian12-py3.11", f"quay.io/ascend/cann:8.0.rc3-910b-debian12-py3.11@sha256:{'a' * 64}"):
        assert resolve(m, ref) == want


# ---------------------------------------------------------------- tests that could not fail (the issue's five)

@pytest.mark.parametrize("suffix", ["-devel", "junk", "-", ".x", "-devel-devel", "-devel2", "\n"])
def test_an_official_tag_with_anything_after_a_valid_one_is_no_tag(suffix):
    """Mutation: the parser's fullmatch made match took these (a valid tag, then more).
    The boundary: the valid tag itself reads (and -devel once, for a CANN tag)."""
    from ascend_build.matrix.official import cann_tag, torch_npu_tag
    cann, npu = "9.0.1-a3-ubuntu22.04-py3.11", "2.10.0.post4-cann9.1.0-a3-ubuntu22.04-py3.11"
    assert cann_tag(cann) is not None and torch_npu_tag(npu) is not None
    assert torch_npu_tag(npu + suffix) is None
    assert (cann_tag(cann + suffix) is not None) == (suffix == "-devel")


def test_like_refuses_a_tag_with_a_suffix_after_a_valid_one():
    out = invoke("build", "--like", "quay.io/ascend/cann:8.0.rc3-910b-debian12-py3.11-devel-devel", "--dry")
    assert out.returncode == 2 and "a CANN tag reads" in out.stderr, out.stderr


def test_a_published_sum_wrong_in_its_last_digit_pins_nothing(tmp_path):
    """Mutation: `pin --sha256` comparing the first 16 hex digits pinned a wrong sum sharing
    them. The boundary: one wrong in its last digit only (with --sha256 and in a sums file)."""
    from ascend_build.hashing import sha256_of
    from tests.unit.test_pin_published import uncheckable
    path = uncheckable(tmp_path / "packages", TOOLKIT)
    right = sha256_of(path)
    wrong = right[:-1] + ("0" if right[-1] != "0" else "1")
    matrix = copy_matrix(tmp_path / "m")
    before = matrix.read_bytes()
    out = _pin(tmp_path, "--file", f"packages/{TOOLKIT}", "--sha256", wrong, "--matrix", str(matrix))
    assert out.returncode == 3 and f"published {wrong}" in out.stderr, out.stdout + out.stderr
    (tmp_path / "SUMS").write_text(f"{wrong}  {TOOLKIT}\n")
    out = _pin(tmp_path, "--packages", "packages", "--sums", "SUMS", "--matrix", str(matrix))
    assert out.returncode == 3 and f"published {wrong}" in out.stderr, out.stdout + out.stderr
    assert matrix.read_bytes() == before
    assert _pin(tmp_path, "--file", f"packages/{TOOLKIT}", "--sha256", right, "--matrix", str(matrix)).returncode == 0


@pytest.mark.parametrize("dists, said", [
    ({"torch": "2.10.0", "torch-npu": "2.10.0.post3"}, "moved torch-npu to 2.10.0.post3, not the stack's 2.10.0.post4"),
    ({"torch": "2.10.0"}, "moved torch-npu to absent"),
    ({"torch": "2.10.0", "torch-npu": "2.10.0.post4+local"}, None),
])
def test_the_serving_check_compares_torch_npu(tmp_path, monkeypatch, dists, said):
    """Mutation: the serving image's own check no longer comparing torch_npu passed the tests
    (they moved torch only). A moved or missing torch_npu is refused; a local label is the
    same release."""
    from ascend_build.images import serving_check
    from tests.unit.test_serving_kind import _site_packages
    _site_packages(tmp_path, monkeypatch, {**dists, "vllm-ascend": "0.23.0"})
    found = serving_check.refusals("2.10.0", "2.10.0.post4")
    assert (found == []) if said is None else any(said in line for line in found), found


def test_the_serving_dockerfiles_refuse_cuda_packages_after_the_last_install():
    """Mutation: the CUDA-package check deleted from the serving template passed the tests
    (only the runtime's pip steps were read). In every serving Dockerfile, the step that
    installs vLLM-Ascend checks the venv for CUDA packages after it, and so does every pip
    step of the serving lock."""
    files = sorted((ROOT / "images" / "serving").glob("*/Dockerfile"))
    assert files
    for path in files:
        text = path.read_text()
        steps = text.split("\nRUN ")[1:]
        last = [s for s in steps if "python3 /tmp/serving_check.py" in s]
        assert len(last) == 1 and "refused: CUDA packages in an NPU image" in last[0], path
        # That step is the image's own last stage, on whichever of the two installs ran.
        stages = text.split("\nFROM ")
        assert stages[-1].startswith("built-${PIP_ON}\n") and last[0] in stages[-1], path
        installs = {stage.split("\n", 1)[0]: stage for stage in stages if " vllm vllm-ascend" in stage}
        assert sorted(installs) == ["native-venv AS native-built", "serving-env AS built-target"], path
        assert all("--find-links /tmp/built vllm vllm-ascend" in stage for stage in installs.values()), path
        assert "COPY --from=native-built /layer/ /" in text.split("\nFROM serving-env AS built-native\n")[1], path
        locked = [s for s in steps if "-r /tmp/lock/serving.txt" in s and " install " in s]
        assert len(locked) == 2 and all("refused: CUDA packages in an NPU image" in s for s in locked), path


def test_a_real_run_never_reuses_or_tags_by_an_unknown_content_tag():
    """Only a dry run has stand-ins: were one to reach a real run, nothing is reused or
    tagged as sha-unknown (an image of other inputs would be taken for it)."""
    from ascend_build.images import steps
    from ascend_build.images.kinds import NO_CONTENT_TAG, Tags
    from tests.doubles.engine_double import EngineDouble
    tags = Tags("r:name-arm64", f"r:{NO_CONTENT_TAG}-arm64", None)
    with pytest.raises(UserError, match="its content tag is unknown"):
        steps.reuse(EngineDouble(), tags, NO_CONTENT_TAG, "an image", False, lambda image: 0)


def test_an_error_says_a_huge_value_in_part():
    """Every refusal's line is bounded where it is printed (cli/wrap.py), and an option's
    value is quoted in part where it is said (cli/options.py's shown)."""
    from ascend_build.cli.options import shown
    from ascend_build.cli.wrap import LINE, _bounded
    said = _bounded("error: --x " + "\u00e9" * 10000 + "\nsecond line")
    assert said.endswith("... (10011 characters)\nsecond line") and len(said.split("\n")[0]) < LINE + 40
    assert shown("abc") == "'abc'" and shown("x" * 10000).endswith("... (10000 characters)")
    assert len(shown("x" * 10000)) < 120
