"""Site settings written once (cli/siteconfig.py): an air-gapped site's mirrors, proxy, base
images and repository in invoke's own config (/etc/invoke.yaml, a file given with `invoke -f`,
the user's ~/.invoke.yaml, INVOKE_ASCEND_BUILD_* variables; `invoke site` shows which) reach every task that has the option, the
command line wins, a typo or a wrong kind of value is refused naming the key, and a secret in
a setting is never printed."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from invoke import Config

from ascend_build.cli import siteconfig
from ascend_build.errors import UserError
from tests.forked import invoke

ROOT = Path(__file__).resolve().parents[2]

DRY = ["build", "--torch", "2.1.0", "--os", "debian12", "--dry"]
SITE = """ascend_build:
  repository: site.example/ascend-runtime
  base_image: ["debian:bookworm=mirror.site/debian:bookworm-{arch}"]
  proxy: http://user:site-secret-pw@proxy.site:3128
  require_pins: true
"""


def _env(home: Path, **more: str) -> dict[str, str]:
    # A HOME of the test's own: the user's ~/.invoke.yaml is the test's, not this machine's.
    return {**{k: v for k, v in os.environ.items() if not k.startswith("INVOKE_")}, "HOME": str(home), **more}


def _taken(stderr: str) -> set[str]:
    line = next(line for line in stderr.splitlines() if line.startswith("site settings from invoke's config: "))
    return set(line.split(": ", 1)[1].split(" (")[0].split(", "))


def test_a_site_file_fills_every_option_the_command_line_leaves_out(tmp_path, checkout):
    site = tmp_path / "site.yaml"
    site.write_text(SITE)
    out = invoke("-f", str(site), *DRY, env=_env(tmp_path), cwd=checkout)     # no ./packages a build left
    assert out.returncode == 0, out.stdout + out.stderr
    assert "BASE_IMAGE=mirror.site/debian:bookworm-arm64" in out.stdout
    assert "site.example/ascend-runtime:cann8.0.rc3-910b-debian12-py3.11-torch2.1.0-arm64" in out.stdout
    assert "proxy.site:3128" in out.stdout + out.stderr
    assert _taken(out.stderr) == {"repository", "base_image", "proxy", "require_pins"}
    assert "site-secret-pw" not in out.stdout + out.stderr
    # The command line wins over the setting; the others still apply.
    mine = invoke("-f", str(site), *DRY, "--repository", "mine/runtime", env=_env(tmp_path), cwd=checkout)
    assert mine.returncode == 0, mine.stdout + mine.stderr
    assert "mine/runtime:cann8.0.rc3" in mine.stdout and "site.example/" not in mine.stdout
    assert _taken(mine.stderr) == {"base_image", "proxy", "require_pins"}


def test_the_users_file_and_the_environment_take_part_in_invokes_cascade(tmp_path, checkout):
    (tmp_path / ".invoke.yaml").write_text("ascend_build:\n  repository: user.example/runtime\n")
    out = invoke(*DRY, env=_env(tmp_path), cwd=checkout)
    assert out.returncode == 0 and "user.example/runtime:cann8.0.rc3" in out.stdout, out.stdout + out.stderr
    # invoke's order: an INVOKE_ variable wins over the user's file.
    env = invoke(*DRY, env=_env(tmp_path, INVOKE_ASCEND_BUILD_REPOSITORY="env.example/runtime"), cwd=checkout)
    assert env.returncode == 0 and "env.example/runtime:cann8.0.rc3" in env.stdout, env.stdout + env.stderr


def test_a_task_takes_only_the_settings_it_has_an_option_for(tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text(SITE)
    out = invoke("-f", str(site), "matrix", env=_env(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "site settings" not in out.stderr


@pytest.mark.parametrize("text, message", [
    ("ascend_build:\n  prxy: http://proxy:3128\n", "ascend_build.prxy in invoke's config"),
    # --unlocked is said per build, never a site's default: a copied matrix would build unlocked unseen again
    ("ascend_build:\n  unlocked: true\n", "ascend_build.unlocked in invoke's config"),
    ("ascend_build:\n  offline: maybe\n", "'maybe' is not true or false"),
    ("ascend_build:\n  repository: --rm\n", "expected a text value (not empty, not one starting with '-')"),
    ("ascend_build:\n  packages: [[a]]\n", "ascend_build.packages in invoke's config"),
    ("ascend_build:\n  base_image: [--privileged]\n", "not one starting with '-'"),
    ("ascend_build:\n  packages: {a: b}\n", "expected a list of text values (or one; none starting with '-'), "
                                               "got a mapping"),
    ("ascend_build: [proxy]\n", "ascend_build in {site}: expected a mapping of settings, got a list"),
    ("ascend_build:\n  repository: ''\n", "not empty"),
])
def test_a_setting_that_is_not_one_or_of_the_wrong_kind_is_refused(tmp_path, text, message):
    site = tmp_path / "bad.yaml"
    site.write_text(text)
    out = invoke("-f", str(site), *DRY, env=_env(tmp_path))
    assert out.returncode == 2, out.stdout + out.stderr
    assert message.replace("{site}", str(site)) in out.stderr and "Traceback" not in out.stderr
    assert "docker build" not in out.stdout


def _settings() -> dict[str, siteconfig.Setting]:
    import tasks  # the checkout's tasks.py
    return siteconfig.settings(vars(tasks))


def test_the_settings_are_the_options_the_tasks_records_declare_site():
    """The keys are read from the declarations (opt(..., site=True)), never listed by hand:
    each is an option of the tasks that take it, a flag's is a flag everywhere (off by
    default), a list's a repeatable option, and a task whose record has none takes none."""
    from invoke import Collection

    import tasks
    from ascend_build.cli.options import flags
    known = _settings()
    declared: dict[str, dict[str, object]] = {}
    for t in Collection.from_module(tasks).tasks.values():
        for x in flags(t.record):
            if x.name not in t.without and x.site:
                declared.setdefault(x.name, {})[t.name.replace("_", "-")] = x
    assert set(known) == set(declared) and {"proxy", "matrix", "base_image", "require_pins"} <= set(known)
    for key, setting in known.items():
        assert setting.takers == tuple(sorted(declared[key])), key
        for x in declared[key].values():
            assert (setting.kind == "flag") == (x.default is False) and (setting.kind == "list") == x.iterable, key
    assert "unlocked" not in known and "like" not in known, "said per build, never a site's default"
    assert "ranktable" not in {t for s in known.values() for t in s.takers}
    assert siteconfig.apply([], Config(), known, {"proxy": None}, []) == {"proxy": None}
    with pytest.raises(UserError, match="not a site setting; did you mean proxy"):
        siteconfig.sources(Config(), known, {"INVOKE_ASCEND_BUILD_PROXI": "http://p:1"})


def test_one_key_declared_with_two_kinds_of_value_is_refused():
    """A site writes a key once: two records that declare it, one as text and one as a
    list, would leave its value's check to chance."""
    from dataclasses import dataclass
    from types import SimpleNamespace

    from ascend_build.cli.options import opt
    from ascend_build.cli.wrap import task

    @dataclass(frozen=True)
    class One:
        mirror: str | None = opt(None, "one mirror", site=True)

    @dataclass(frozen=True)
    class Many:
        mirror: list[str] | None = opt(None, "mirrors (repeatable)", iterable=True, site=True)

    one, many = task(One, name="one")(lambda c, o: None), task(Many, name="many")(lambda c, o: None)
    assert siteconfig.settings(vars(SimpleNamespace(one=one)))["mirror"].kind == "text"
    with pytest.raises(TypeError, match="Many.mirror: the site setting mirror is declared elsewhere"):
        siteconfig.settings(vars(SimpleNamespace(one=one, many=many)))
    with pytest.raises(TypeError, match="site=True too"):
        opt(None, "a URL no site sets", url=True)


# A tasks module of the test's own, with a record of its own: one option a site may set (a
# URL), one it may not. Run by `python -m ascend_build -c probe_tasks`, as ascend-build runs
# tasks.py; the site's settings and `site` come from the declarations alone.
PROBE_TASKS = '''
from __future__ import annotations

import sys
from dataclasses import dataclass

from ascend_build.cli import siteconfig
from ascend_build.cli.options import opt
from ascend_build.cli.wrap import task

THIS = sys.modules[__name__]


@dataclass(frozen=True)
class ProbeOptions:
    mirror_url: str | None = opt(None, "a mirror this task prints", site=True, url=True)
    retries: str = opt("1", "how often (not a site setting)")


@task(ProbeOptions)
def probe(c, o):
    """Print what the task was given."""
    print(f"mirror_url={o.mirror_url} retries={o.retries}")


@task(siteconfig.SiteOptions)
def site(c, o):
    """The site's settings."""
    siteconfig.show(c.config, siteconfig.settings(vars(THIS)), o.wide)
'''


def test_an_option_declared_site_is_taken_from_a_site_file_and_listed_by_site(tmp_path):
    (tmp_path / "probe_tasks.py").write_text(PROBE_TASKS)
    site = tmp_path / "site.yaml"
    site.write_text("ascend_build:\n  mirror_url: https://user:probe-pw@mirror.site/simple\n")

    def run(*argv: str, config: Path = site) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "ascend_build", "-r", str(tmp_path), "-c", "probe_tasks",
                               "-f", str(config), *argv], cwd=tmp_path, env=_env(tmp_path),
                              capture_output=True, text=True, timeout=120)

    taken = run("probe")
    assert taken.returncode == 0, taken.stdout + taken.stderr
    assert "mirror_url=https://user:probe-pw@mirror.site/simple retries=1" in taken.stdout
    assert _taken(taken.stderr) == {"mirror_url"}
    given = run("probe", "--mirror-url", "https://mine.example/simple")
    assert "mirror_url=https://mine.example/simple" in given.stdout, given.stdout + given.stderr
    rows = _table(run("site", "--wide"))
    assert rows == {"mirror_url": ("https://user:***@mirror.site/simple", str(site), "probe")}
    # checked as a URL, its option's kind; a key of the same record not declared site is none
    for text, message in (("mirror_url: mirror.site\n", "ascend_build.mirror_url in invoke's config"),
                          ("retries: 3\n", "not a site setting; the settings are mirror_url")):
        bad = tmp_path / "bad.yaml"
        bad.write_text("ascend_build:\n  " + text)
        refused = run("probe", config=bad)
        assert refused.returncode == 2 and message in refused.stderr, refused.stdout + refused.stderr
        assert "Traceback" not in refused.stderr and "mirror_url=" not in refused.stdout


def test_invoke_site_shows_each_value_where_it_came_from_and_who_takes_it(tmp_path):
    (tmp_path / ".invoke.yaml").write_text("ascend_build:\n  repository: user.example/runtime\n"
                                           "  proxy: http://user:site-secret-pw@proxy.site:3128\n")
    run_file = tmp_path / "run.yaml"
    run_file.write_text("ascend_build:\n  repository: run.example/runtime\n  offline: true\n")
    out = invoke("-f", str(run_file), "site", "--wide", env=_env(
        tmp_path, INVOKE_ASCEND_BUILD_PIP_INDEX_URL="https://reader:index-secret-pw@pypi.site/simple",
        INVOKE_ASCEND_BUILD_REPOSITORY="env.example/runtime"))
    assert out.returncode == 0, out.stdout + out.stderr
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()[2:]}
    assert rows.keys() == set(_settings())
    # the -f file wins over the variable and the user's file (invoke's order); each value names its level
    assert rows["repository"][1:3] == ["run.example/runtime", str(run_file)]
    assert rows["proxy"][1:3] == ["http://user:***@proxy.site:3128", str(tmp_path / ".invoke.yaml")]
    assert rows["pip_index_url"][1:3] == ["https://reader:***@pypi.site/simple", "INVOKE_ASCEND_BUILD_PIP_INDEX_URL"]
    assert rows["offline"][1:3] == ["True", str(run_file)]
    # unset ones too, with the tasks that would take them
    assert rows["wheelhouse"][1:] == ["unset", "build,", "verify"] and rows["cache_registry"][1:] == ["unset", "build"]
    assert "secret-pw" not in out.stdout + out.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("ascend_build:\n  prxy: http://proxy:3128\n")
    refused = invoke("-f", str(bad), "site", env=_env(tmp_path))
    assert refused.returncode == 2 and "ascend_build.prxy in invoke's config" in refused.stderr, refused.stderr


def test_the_file_invoke_reads_at_each_level_is_the_one_read_strictly_and_shown(tmp_path):
    """invoke takes the first of invoke.yaml, .yml, .json, .py there at each level, and the -f
    file by its suffix; entry.SiteConfig reads that same file first, through invoke's public
    methods (tests/unit/test_invoke_api.py), and `invoke site` names it."""
    (tmp_path / ".invoke.py").write_text('ascend_build = {"repository": "py.example/runtime"}\n')
    run_file = tmp_path / "run.json"
    run_file.write_text('{"ascend_build": {"offline": true}}')
    rows = _table(invoke("-f", str(run_file), "site", "--wide", env=_env(tmp_path)))
    assert rows["repository"][:2] == ("py.example/runtime", str(tmp_path / ".invoke.py"))
    assert rows["offline"][:2] == ("True", str(run_file))
    (tmp_path / ".invoke.yml").write_text("ascend_build:\n  repository: yml.example/runtime\n")
    rows = _table(invoke("site", "--wide", env=_env(tmp_path)))
    assert rows["repository"][:2] == ("yml.example/runtime", str(tmp_path / ".invoke.yml"))
    # the file invoke would read is the one refused, though the .py after it is fine
    (tmp_path / ".invoke.yml").write_text("ascend_build:\n\trepository: x\n")
    refused = invoke("site", env=_env(tmp_path))
    assert refused.returncode == 2 and f"{tmp_path / '.invoke.yml'}: not a YAML/JSON file" in refused.stderr, \
        refused.stderr


def test_a_clone_keeps_the_files_read_and_reads_none_again(tmp_path):
    """invoke's clone copies each level and reads no file; SiteConfig's neither (read again,
    the file changed since would be refused)."""
    from ascend_build.cli.entry import SiteConfig
    site = tmp_path / "invoke.yaml"

    class Here(SiteConfig):         # as tests/forked.py's: a clone is made with the same prefixes
        def __init__(self, **kwargs):
            super().__init__(**{"system_prefix": f"{tmp_path}/", "user_prefix": f"{tmp_path}/none.", **kwargs})

    site.write_text("ascend_build:\n  repository: etc.example/runtime\n")
    config = Here()
    site.write_text("ascend_build:\n\trepository: x\n")
    clone = config.clone()
    assert clone.site_files == config.site_files == ((str(site), {"ascend_build": {"repository": "etc.example/runtime"}}),)
    assert clone.ascend_build.repository == "etc.example/runtime"


def _table(out: subprocess.CompletedProcess) -> dict[str, tuple[str, str, str]]:
    """`invoke site`'s rows by setting: (value, from, taken by), cut at the header's columns
    (a value or an origin may hold spaces)."""
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()[1:]
    starts = [lines[0].index(word) for word in ("value", "from", "taken by")]
    return {line.split()[0]: (line[starts[0]:starts[1]].strip(), line[starts[1]:starts[2]].strip(),
                              line[starts[2]:].strip()) for line in lines[1:]}


def _shell(tmp_path: Path, **more: str) -> dict[str, str]:
    """The test's HOME and none of this shell's CA or proxy settings (pip's config file
    neither), but `more`."""
    from ascend_build.engine.network import CA_VARIABLES
    ours = set(CA_VARIABLES) | {v for name in ("http_proxy", "https_proxy", "no_proxy") for v in (name, name.upper())}
    env = {k: v for k, v in _env(tmp_path).items() if k not in ours}
    return {**env, "PIP_CONFIG_FILE": os.devnull, **more}


def test_invoke_site_shows_what_a_task_takes_from_this_shell_where_no_setting_is_written(tmp_path, checkout):
    """`invoke site` said ca_bundle was unset while `build` took $PIP_CERT from the shell, and
    said nothing of the shell's proxy. Now each row is what the build takes, from where; a
    setting still wins over the shell, as in the build."""
    ca = tmp_path / "corp-ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    env = _shell(tmp_path, PIP_CERT=str(ca), https_proxy="http://me:shell-pw@proxy.shell:3128", NO_PROXY=".corp")
    rows = _table(invoke("site", "--wide", env=env))
    assert rows["ca_bundle"][:2] == (str(ca), "$PIP_CERT of this shell")
    assert rows["proxy"][:2] == ("http://me:***@proxy.shell:3128", "$https_proxy of this shell")
    assert rows["no_proxy"][:2] == (".corp", "$NO_PROXY of this shell")
    assert "build" in rows["ca_bundle"][2] and "build" in rows["proxy"][2]
    plan = invoke(*DRY, env=env, cwd=checkout)
    assert plan.returncode == 0, plan.stderr
    assert f"CA bundle: {ca} (secret, from $PIP_CERT of this shell;" in plan.stdout
    assert "https_proxy: http://me:***@proxy.shell:3128 (secret)" in plan.stdout and "no_proxy: .corp" in plan.stdout
    assert "shell-pw" not in plan.stdout + plan.stderr
    # a setting wins over the shell: in the build, and so in `invoke site`
    (tmp_path / ".invoke.yaml").write_text("ascend_build:\n  ca_bundle: none\n  proxy: http://proxy.site:3128\n")
    rows = _table(invoke("site", "--wide", env=env))
    assert rows["ca_bundle"][:2] == ("none", str(tmp_path / ".invoke.yaml"))
    assert rows["proxy"][:2] == ("http://proxy.site:3128", str(tmp_path / ".invoke.yaml"))
    assert rows["no_proxy"][:2] == (".corp", "$NO_PROXY of this shell")     # the build takes it with the site's proxy
    plan = invoke(*DRY, env=env, cwd=checkout)
    assert plan.returncode == 0, plan.stderr
    assert "CA bundle:" not in plan.stdout and "proxy.shell" not in plan.stdout
    assert "https_proxy: http://proxy.site:3128 (secret)" in plan.stdout and "no_proxy: .corp" in plan.stdout


def test_invoke_site_names_pips_cert_setting_and_unset_where_the_shell_gives_nothing(tmp_path):
    ca = tmp_path / "corp-ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    # the user's pip.conf (`pip config get`, which ca_setting asks, does not read $PIP_CONFIG_FILE)
    (tmp_path / "pip").mkdir()
    (tmp_path / "pip" / "pip.conf").write_text(f"[global]\ncert = {ca}\n")
    env = {k: v for k, v in _shell(tmp_path, XDG_CONFIG_HOME=str(tmp_path)).items() if k != "PIP_CONFIG_FILE"}
    rows = _table(invoke("site", "--wide", env=env))
    assert rows["ca_bundle"][:2] == (str(ca), "pip's cert setting")
    rows = _table(invoke("site", "--wide", env=_shell(tmp_path, http_proxy="http://proxy.shell:3128")))
    assert rows["ca_bundle"][:2] == ("", "unset")
    assert rows["proxy"][:2] == ("http://proxy.shell:3128", "$http_proxy of this shell")
    assert rows["no_proxy"][:2] == ("", "unset")
    # `--proxy none` written as the site's: no proxy at all, the shell's exceptions neither
    (tmp_path / ".invoke.yaml").write_text("ascend_build:\n  proxy: none\n")
    rows = _table(invoke("site", "--wide", env=_shell(tmp_path, https_proxy="http://p:1", no_proxy=".corp")))
    assert rows["proxy"][:2] == ("none", str(tmp_path / ".invoke.yaml")) and rows["no_proxy"][:2] == ("", "unset")


def _air_gapped(tmp_path: Path) -> dict[str, object]:
    """Every network and site option an air-gapped site sets, with files that exist."""
    (tmp_path / "wheels").mkdir()
    (tmp_path / "cann").mkdir()
    ca = tmp_path / "corp-ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    return {"pip_index_url": "https://pypi.site.example/simple", "torch_index_url": "https://torch.site.example/cpu",
            "ca_bundle": str(ca), "proxy": "http://user:site-pw@proxy.site:3128", "no_proxy": "localhost,.site",
            "network": "host", "wheelhouse": str(tmp_path / "wheels"), "cache_registry": "cache.site.example/asc",
            "repository": "site.example/runtime", "base_image": ["debian:bookworm=mirror.site/debian:bookworm-{arch}"],
            "packages": [str(tmp_path / "cann")], "offline": True}


def _plan(out: subprocess.CompletedProcess) -> tuple[int, str]:
    # the secret files' folder is a fresh temp folder on each run
    return out.returncode, re.sub(r"ascend-build-secrets-[A-Za-z0-9_]+", "<secrets>", out.stdout)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                    reason="needs root and unshare to put a site file at /etc/invoke.yaml in a mount namespace")
def test_a_site_in_etc_invoke_yaml_plans_as_the_same_options_on_the_command_line(tmp_path):
    """/etc/invoke.yaml itself, seen only by this test's process: an overlay on /etc in a mount
    namespace of its own (the machine's /etc is untouched)."""
    site = _air_gapped(tmp_path)
    upper = tmp_path / "etc"
    upper.mkdir()
    (upper / "invoke.yaml").write_text(yaml.safe_dump({"ascend_build": site}))
    build = [sys.executable, "-m", "invoke", "build", "--torch", "2.1.0", "--os", "debian12", "--dry"]
    env = _env(tmp_path)
    from_etc = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                               f'mount -t overlay overlay -o lowerdir={upper}:/etc /etc && exec "$@"', "sh", *build],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert "site settings from invoke's config: " in from_etc.stderr, from_etc.stderr
    assert _taken(from_etc.stderr) == set(site)
    given: list[str] = []
    for key, value in site.items():
        flag = "--" + key.replace("_", "-")
        given += [flag] if value is True else [w for v in (value if isinstance(value, list) else [value])
                                               for w in (flag, str(v))]
    from_flags = subprocess.run([*build, *given], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    plain = subprocess.run(build, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert _plan(from_etc) == _plan(from_flags), from_etc.stdout + from_etc.stderr
    # the settings change the plan: the same build without them plans otherwise
    assert "site.example/runtime:" in from_etc.stdout and "mirror.site/debian:bookworm-arm64" in from_etc.stdout
    assert "site.example" not in plain.stdout and _plan(plain) != _plan(from_etc)
    assert "site-pw" not in from_etc.stdout + from_etc.stderr
