"""Hostile and careless site settings (cli/entry.py, cli/siteconfig.py, engine/network.py): a
malformed or hostile config file, a mistyped or injected INVOKE_ variable, a URL whose port is
no number, a secret in any shape. Each ends with a clear message and exit 2, never a
traceback, never the secret, and nothing of it reaches a file the build reads.

Most cases run through tests.forked (the project's Program, a process per call); the ones
where the order of imports matters run the console entry point itself, as a user does
(`python -m ascend_build`, the same main() as the `ascend-build` script)."""
from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ascend_build.engine.network import Network, check, ini_file, redact, secret_files, shell_exports
from ascend_build.errors import UserError
from tests.forked import invoke

ROOT = Path(__file__).resolve().parents[2]
DRY = ["build", "--torch", "2.1.0", "--os", "debian12", "--dry"]


def _env(home: Path, **more: str) -> dict[str, str]:
    # a HOME of the test's own and none of this shell's INVOKE_ variables
    return {**{k: v for k, v in os.environ.items() if not k.startswith("INVOKE_")}, "HOME": str(home), **more}


def _console(*argv: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    """The command line as a user types it: a new interpreter, tasks.py found and imported by
    the program itself while it runs."""
    return subprocess.run([sys.executable, "-m", "ascend_build", *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _bomb(levels: int = 9) -> str:
    """The billion laughs in YAML: 9**levels strings once its aliases are copied out."""
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + f"\nascend_build: {{repository: *a{levels}}}\n"


MALFORMED = {
    "a tab": b"ascend_build:\n\tproxy: http://p:3128\n",
    "not UTF-8": b"ascend_build:\n  repository: caf\xe9\n",
    "a Python tag": b"ascend_build: !!python/object/apply:os.system ['true']\n",
    "a list at the top": b"- ascend_build\n- proxy\n",
    "a list for the section": b"ascend_build: [proxy]\n",
    "a mapping for a text": b"ascend_build:\n  proxy: {url: http://u:map-secret@p:3128}\n",
    "an alias bomb": _bomb().encode(),
    "an unknown key": b"ascend_build:\n  prxy: http://p:3128\n",
    "a key no task takes": b"ascend_build:\n  unlocked: true\n",
    "a number as a key": b"ascend_build:\n  1: http://p:3128\n",
    "deep nesting": b"ascend_build: " + b"[" * 5000 + b"]" * 5000 + b"\n",
}
SAID = {
    "a tab": "not a YAML/JSON file invoke can read", "not UTF-8": "not UTF-8 text (byte 31",
    "a Python tag": "could not determine a constructor", "a list at the top": "expected a mapping at the top",
    "a list for the section": "expected a mapping of settings, got a list",
    "a mapping for a text": "ascend_build.proxy in invoke's config", "an alias bomb": "an alias bomb",
    "an unknown key": "not a site setting; did you mean proxy?", "a key no task takes": "not a site setting",
    "a number as a key": "the key ascend_build.1 is not text", "deep nesting": "not a YAML/JSON file invoke can read",
}


def _refused(out: subprocess.CompletedProcess, said: str) -> None:
    assert out.returncode == 2, out.stdout + out.stderr
    assert said in out.stderr and out.stderr.startswith("error: "), out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    assert "docker build" not in out.stdout and "secret" not in out.stdout + out.stderr


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_file_given_with_f_is_bad_input(case, tmp_path):
    bad = tmp_path / "site.yaml"
    bad.write_bytes(MALFORMED[case])
    _refused(invoke("-f", str(bad), *DRY, env=_env(tmp_path)), SAID[case])


@pytest.mark.parametrize("case", ["a list for the section", "a tab", "an alias bomb"])
def test_on_the_real_command_line_too(case, tmp_path):
    """The program's own start, not the test server's: tasks.py is imported while the program
    runs, so a catch installed from it would never run (as cli/wrap.py's once did)."""
    bad = tmp_path / "site.yaml"
    bad.write_bytes(MALFORMED[case])
    _refused(_console("-f", str(bad), *DRY, env=_env(tmp_path)), SAID[case])


def test_a_file_that_is_not_there_or_not_a_file_is_bad_input(tmp_path):
    """invoke itself skips a missing `-f FILE` without a word; a FIFO would wait for a writer."""
    _refused(invoke("-f", str(tmp_path / "missing.yaml"), *DRY, env=_env(tmp_path)), "missing.yaml: no such file")
    _refused(invoke("site", env=_env(tmp_path, INVOKE_RUNTIME_CONFIG=str(tmp_path / "gone.yaml"))),
             "gone.yaml: no such file")
    os.mkfifo(tmp_path / "fifo.yaml")
    _refused(invoke("-f", str(tmp_path / "fifo.yaml"), "site", env=_env(tmp_path), timeout=60), "not a regular file")
    (tmp_path / "dir.yaml").mkdir()
    _refused(invoke("-f", str(tmp_path / "dir.yaml"), "site", env=_env(tmp_path)), "not a regular file")


def test_the_users_own_file_is_read_as_strictly(tmp_path):
    """~/.invoke.yaml is read before any task is known (as /etc/invoke.yaml is)."""
    (tmp_path / ".invoke.yaml").write_bytes(MALFORMED["a Python tag"])
    _refused(_console("matrix", env=_env(tmp_path)), SAID["a Python tag"])
    (tmp_path / ".invoke.yaml").write_bytes(MALFORMED["not UTF-8"])
    _refused(_console("site", env=_env(tmp_path)), SAID["not UTF-8"])


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                    reason="needs root and unshare to put a file at /etc/invoke.yaml in a mount namespace")
@pytest.mark.parametrize("case", ["an alias bomb", "a list at the top", "a tab", "a mapping for a text"])
def test_a_malformed_etc_invoke_yaml_is_bad_input_and_a_bomb_stops_small(case, tmp_path):
    """/etc/invoke.yaml itself, seen only by this test's processes (an overlay on /etc in a mount
    namespace of their own). The bomb would grow to about 1 GB once copied: it is refused from
    its composed nodes, which share their aliases, so the process stays small."""
    upper = tmp_path / "etc"
    upper.mkdir()
    (upper / "invoke.yaml").write_bytes(MALFORMED[case])
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                          f'mount -t overlay overlay -o lowerdir={upper}:/etc /etc && exec "$@"', "sh",
                          sys.executable, "-m", "ascend_build", *DRY], cwd=ROOT, env=_env(tmp_path),
                         capture_output=True, text=True, timeout=300)
    _refused(out, SAID[case])
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    # ru_maxrss of the largest child so far: an interpreter with the package is ~60 MB; the
    # bomb copied out would be ~1,000
    assert peak_mb < 300 or before / 1024 >= 300, f"the refusal peaked at {peak_mb:.0f} MB"


@pytest.mark.parametrize("var, value, said", [
    ("INVOKE_ASCEND_BUILD_PROXI", "http://p:3128", "INVOKE_ASCEND_BUILD_PROXI: not a site setting; did you mean proxy?"),
    ("INVOKE_ASCEND_BUILD_UNLOCKED", "true", "INVOKE_ASCEND_BUILD_UNLOCKED: not a site setting"),
    ("INVOKE_ASCEND_BUILD_PROXY", "http://u:pw-secret@h:abc", "the port is not a number from 1 to 65535"),
    ("INVOKE_ASCEND_BUILD_PROXY", "http://u:pw-secret@h:99999", "the port is not a number from 1 to 65535"),
    ("INVOKE_ASCEND_BUILD_PROXY", "-http://u:s3cret@p:3128", "not one starting with '-'"),
    ("INVOKE_ASCEND_BUILD_PROXY", "user:s3cret@proxy:3128", "is not a URL like"),
    ("INVOKE_ASCEND_BUILD_PIP_INDEX_URL", "https://pypi.site/simple\nextra-index-url = https://evil.example/simple",
     "holds a control character ('\\n' at 24)"),
    ("INVOKE_ASCEND_BUILD_REPOSITORY", "site.example/rt\tx", "holds a control character"),
    ("INVOKE_ASCEND_BUILD_OFFLINE", "maybe", "'maybe' is not true or false"),
])
@pytest.mark.parametrize("task", ["site", "build"])
def test_a_variable_is_checked_as_its_option_before_any_task_runs(var, value, said, task, tmp_path):
    argv = ["site"] if task == "site" else DRY
    out = invoke(*argv, env=_env(tmp_path, **{var: value}))
    _refused(out, said)
    assert "s3cret" not in out.stderr and "pw-secret" not in out.stderr
    assert "evil.example" not in out.stdout


def test_a_secret_in_any_shape_is_hidden_wherever_it_is_shown(tmp_path, checkout):
    """A token as a URL's user name, a password with or without a scheme: hidden in `site`, in
    the dry plan and in the refusals alike."""
    env = _env(tmp_path, INVOKE_ASCEND_BUILD_PIP_INDEX_URL="https://TOKEN-abc123@pypi.site/simple",
               INVOKE_ASCEND_BUILD_PROXY="http://user:pw-xyz@proxy.site:3128")
    site = invoke("site", env=env)
    plan = invoke(*DRY, env=env, cwd=checkout)      # no ./packages a build left
    assert site.returncode == 0 and plan.returncode == 0, site.stderr + plan.stderr
    for out in (site, plan):
        shown = out.stdout + out.stderr
        assert "TOKEN-abc123" not in shown and "pw-xyz" not in shown
        assert "https://***@pypi.site/simple" in shown and "http://user:***@proxy.site:3128" in shown


@pytest.mark.parametrize("value, shown", [
    ("http://user:s3cret@proxy:3128/", "http://user:***@proxy:3128/"),
    ("user:s3cret@proxy:3128", "user:***@proxy:3128"),
    ("https://TOKEN@pypi.site/simple", "https://***@pypi.site/simple"),
    ("http://u:s3cret@h:abc", "http://u:***@h:abc"),
    ("-http://u:s3cret@p:3128", "-http://u:***@p:3128"),
    ("socks5h://u:p@ss:w0rd@h:1080", "socks5h://u:***@h:1080"),
    ("https://mirror.site/simple", "https://mirror.site/simple"),
])
def test_redact_takes_every_shape_and_never_parses_a_port(value, shown):
    assert redact(value) == shown


@pytest.mark.parametrize("url", ["https://pypi.site/simple\nextra-index-url = https://evil/simple",
                                 "https://pypi.site/simple\r", "https://pypi.site/sim\x00ple"])
def test_no_value_writes_a_line_of_its_own_into_what_the_build_reads(url, tmp_path):
    """The command line's way in (--pip-index-url) meets the same check as the site's, and the
    writers refuse a control character even if a check were skipped."""
    with pytest.raises(UserError, match="control character"):
        check(Network(pip_index_url=url))
    with pytest.raises(UserError, match="control character"):
        ini_file({"global": {"index-url": url}})
    with pytest.raises(UserError, match="control character"):
        shell_exports({"https_proxy": url})
    with pytest.raises(UserError, match="control character"):
        secret_files(Network(pip_index_url=url), tmp_path)
    assert not (tmp_path / "pip.conf").exists()
    assert ini_file({"global": {"index-url": "https://u:p@pypi.site/simple"}}) == \
        "[global]\nindex-url = https://u:p@pypi.site/simple\n"


def test_an_unknown_task_or_option_is_bad_input_as_the_table_says(tmp_path):
    for argv, said in ((["--help", "no-such-task"], "No idea what 'no-such-task' is!"),
                       (["build", "--no-such-option"], "No idea what '--no-such-option' is!")):
        out = _console(*argv, env=_env(tmp_path))
        assert out.returncode == 2 and said in out.stderr and "Traceback" not in out.stderr, out.stderr
