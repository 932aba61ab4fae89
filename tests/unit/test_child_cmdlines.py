"""No password on a child process's command line (any user of the machine reads those:
`ps`, /proc/PID/cmdline): `invoke lock` runs uv, `invoke update` pip, a source build and
`update --pytorch-git` git, each given an index, a proxy or a git URL with a password. The
tools are the real ones, against a loopback double that is index, proxy and git host at
once (tests/doubles/cmdline_watch.py): while a tool waits for its answer, the double reads
every process's command line. The password must be on none, and must still arrive (the
tool sent it). What is said about those commands shows the URLs redacted."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from ascend_build import console
from ascend_build.cli import data
from ascend_build.engine import credentials
from ascend_build.errors import UserError
from ascend_build.inputs import trees
from ascend_build.upstream import pytorch_git
from tests.conftest import copy_matrix
from tests.doubles import standin_repos as sr
from tests.doubles.cmdline_watch import CmdlineWatchDouble

PASSWORD, PROXY_PASSWORD = "S3CRET-PW", "PR0XY-PW"


@pytest.fixture
def quiet_site(monkeypatch, tmp_path):
    """This shell's own proxies, indexes and pip settings out of the way: the tools reach
    only the double (no_proxy would take 127.0.0.1 past the proxy)."""
    for var in ("http_proxy", "https_proxy", "no_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv(var.upper(), raising=False)
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_PROXY", "UV_INDEX_URL",
                "UV_EXTRA_INDEX_URL", "UV_INDEX", "UV_DEFAULT_INDEX", "UV_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS", "never")     # no Python fetched from the internet
    monkeypatch.setattr(console, "_level", "verbose")       # the commands are echoed
    return copy_matrix(tmp_path / "site")


def _echoed(out: str, tool: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("$ ") and tool in line)


def test_lock_gives_uv_the_index_and_proxy_passwords_by_its_environment(quiet_site, capsys):
    with CmdlineWatchDouble([PASSWORD, PROXY_PASSWORD]) as site:
        index, proxy = f"http://user:{PASSWORD}@{site.host}/simple", f"http://puser:{PROXY_PASSWORD}@{site.host}"
        with pytest.raises(UserError, match="does not resolve") as info:
            data.lock(data.LockOptions(str(quiet_site), torch=["2.1.0"], python=["3.11"], platform=["linux/arm64"],
                                       refresh=True, dry=True, pip_index_url=index, proxy=proxy))
    _delivered_by_environment(site, capsys, info, " pip compile ", "UV_INDEX_URL", "HTTPS_PROXY")


def test_update_gives_pip_the_index_and_proxy_passwords_by_its_environment(quiet_site, capsys):
    with CmdlineWatchDouble([PASSWORD, PROXY_PASSWORD]) as site:
        index, proxy = f"http://user:{PASSWORD}@{site.host}/simple", f"http://puser:{PROXY_PASSWORD}@{site.host}"
        with pytest.raises(UserError, match="cannot fetch ascend-deployer") as info:
            data.update(data.UpdateOptions(str(quiet_site), pip_index_url=index, proxy=proxy))
    _delivered_by_environment(site, capsys, info, " pip download ", "PIP_INDEX_URL", "PIP_PROXY")


def _delivered_by_environment(site, capsys, info, command: str, index_var: str, proxy_var: str) -> None:
    """The tool ran while the double looked, no command line held a password, both passwords
    reached the double in their headers, and the echoed command shows them redacted."""
    assert any(command in line for line in site.seen), f"{command.strip()} was running while the double looked"
    assert site.leaks == []
    assert f"user:{PASSWORD}" in site.authorization and f"puser:{PROXY_PASSWORD}" in site.proxy_authorization
    said = capsys.readouterr()
    echo = _echoed(said.out, command)
    assert f"{index_var}=http://user:***@{site.host}/simple" in echo and f"{proxy_var}=http://puser:***@{site.host}" in echo
    assert not any(s in said.out + said.err + str(info.value) for s in (PASSWORD, PROXY_PASSWORD))


@pytest.fixture
def git_host(tmp_path) -> Path:
    """A bare repository, `repo.git`, with a commit tagged v1, in the folder the double serves."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "README").write_text("stand-in\n")
    sr.git("init", "-q", cwd=work)
    sr.git("add", "README", cwd=work)
    sr.git("commit", "-q", "-m", "stand-in", cwd=work)
    sr.git("tag", "v1", cwd=work)
    root = tmp_path / "served"
    root.mkdir()
    sr.git("clone", "-q", "--bare", str(work), str(root / "repo.git"), cwd=tmp_path)
    return root


def test_a_source_clone_gives_git_the_password_by_a_credential_helper(quiet_site, git_host, tmp_path):
    with CmdlineWatchDouble([PASSWORD], git_host, f"user:{PASSWORD}") as site:
        url = f"http://user:{PASSWORD}@{site.host}/git/repo.git"
        src = trees.checkout(url, "v1", tmp_path / "cache")
    assert (src.path / "README").read_text() == "stand-in\n", "the clone was made, so git had the password"
    assert any(" clone " in line and site.host in line for line in site.seen), "git was running while the double looked"
    assert site.leaks == []
    assert src.origin == f"http://user:***@{site.host}/git/repo.git@v1"
    assert PASSWORD not in (src.path / ".git" / "config").read_text(), "nor is it kept in the clone's remote"


def test_pytorch_git_clones_with_the_password_out_of_argv_and_out_of_the_matrix(quiet_site, git_host, tmp_path):
    with CmdlineWatchDouble([PASSWORD], git_host, f"user:{PASSWORD}") as site:
        gitdir, origin = pytorch_git.git_dir(f"http://user:{PASSWORD}@{site.host}/git/repo.git", tmp_path)
    assert (gitdir / "HEAD").is_file() and site.leaks == []
    assert any(" clone " in line and site.host in line for line in site.seen)
    assert origin == f"http://{site.host}/git/repo.git", "imported.yaml names the URL without the password"


def test_a_refused_clone_says_the_url_redacted(quiet_site, git_host, tmp_path):
    with CmdlineWatchDouble([PASSWORD], git_host, "user:another") as site:
        url = f"http://user:{PASSWORD}@{site.host}/git/repo.git"
        with pytest.raises(UserError) as info:
            trees.checkout(url, "v1", tmp_path / "cache")
    assert f"cannot fetch http://user:***@{site.host}/git/repo.git@v1" in str(info.value)
    assert PASSWORD not in str(info.value) and site.leaks == []
    assert f"user:{PASSWORD}" in site.authorization, "git did offer the password, by its helper"


@pytest.mark.parametrize(("text", "shown"), [
    ("http://user:S3CRET-PW@host:8080/simple", "http://user:***@host:8080/simple"),
    ("https://TOKEN-S3CRET@github.com/a/b.git", "https://***@github.com/a/b.git"),
    ("http://u:p@ss:w@rd@host/x", "http://u:***@host/x"),                  # a raw @ in the password
    ("see 'http://u:S3CRET@a/x' and https://b/y@v1", "see 'http://u:***@a/x' and https://b/y@v1"),
    ("https://pypi.org/simple", "https://pypi.org/simple"),
])
def test_urls_are_redacted_in_what_is_said(text, shown):
    assert credentials.redact(text) == shown


def test_an_echoed_command_hides_the_credentials_of_its_environment_and_arguments():
    url, env = credentials.git_url("https://user:S3CRET-PW@git.example.com/r.git")
    line = credentials.show(["git", "clone", url, "http://TOKEN@host/x"], {"PIP_PROXY": "http://u:S3CRET-PW@p:3128", **env})
    assert "S3CRET-PW" not in line and "TOKEN" not in line
    assert "PIP_PROXY=http://u:***@p:3128" in line and "http://***@host/x" in line
    assert url == "https://git.example.com/r.git"
