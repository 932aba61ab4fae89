"""Site settings written once (cli/siteconfig.py): an air-gapped site's mirrors, proxy, base
images and repository in invoke's own config (a file given with `invoke -f`, the user's
~/.invoke.yaml, INVOKE_ASCEND_BUILD_* variables) reach every task that has the option, the
command line wins, a typo or a wrong kind of value is refused naming the key, and a secret in
a setting is never printed."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from ascend_build.cli import siteconfig
from ascend_build.errors import UserError
from tests.forked import invoke

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


def test_a_site_file_fills_every_option_the_command_line_leaves_out(tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text(SITE)
    out = invoke("-f", str(site), *DRY, env=_env(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "BASE_IMAGE=mirror.site/debian:bookworm-arm64" in out.stdout
    assert "site.example/ascend-runtime:cann8.0.rc3-910b-debian12-py3.11-torch2.1.0-arm64" in out.stdout
    assert "proxy.site:3128" in out.stdout + out.stderr
    assert _taken(out.stderr) == {"repository", "base_image", "proxy", "require_pins"}
    assert "site-secret-pw" not in out.stdout + out.stderr
    # The command line wins over the setting; the others still apply.
    mine = invoke("-f", str(site), *DRY, "--repository", "mine/runtime", env=_env(tmp_path))
    assert mine.returncode == 0, mine.stdout + mine.stderr
    assert "mine/runtime:cann8.0.rc3" in mine.stdout and "site.example/" not in mine.stdout
    assert _taken(mine.stderr) == {"base_image", "proxy", "require_pins"}


def test_the_users_file_and_the_environment_take_part_in_invokes_cascade(tmp_path):
    (tmp_path / ".invoke.yaml").write_text("ascend_build:\n  repository: user.example/runtime\n")
    out = invoke(*DRY, env=_env(tmp_path))
    assert out.returncode == 0 and "user.example/runtime:cann8.0.rc3" in out.stdout, out.stdout + out.stderr
    # invoke's order: an INVOKE_ variable wins over the user's file.
    env = invoke(*DRY, env=_env(tmp_path, INVOKE_ASCEND_BUILD_REPOSITORY="env.example/runtime"))
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
    ("ascend_build:\n  repository: --rm\n", "expected a text value (not one starting with '-')"),
    ("ascend_build:\n  packages: [[a]]\n", "ascend_build.packages in invoke's config"),
    ("ascend_build:\n  base_image: [--privileged]\n", "none starting with '-'"),
    # shapes invoke's own merge refuses, before any task
    ("ascend_build:\n  packages: {a: b}\n", "invoke's config (a file or an INVOKE_ variable) does not fit"),
    ("ascend_build: [proxy]\n", "invoke's config (a file or an INVOKE_ variable) does not fit"),
])
def test_a_setting_that_is_not_one_or_of_the_wrong_kind_is_refused(tmp_path, text, message):
    site = tmp_path / "bad.yaml"
    site.write_text(text)
    out = invoke("-f", str(site), *DRY, env=_env(tmp_path))
    assert out.returncode == 2, out.stdout + out.stderr
    assert message in out.stderr and "Traceback" not in out.stderr
    assert "docker build" not in out.stdout


def test_every_setting_is_an_option_of_some_task_with_the_same_kind_of_value():
    """Each key names an option of at least one task (a key no task takes would be a no-op),
    and the repeatable ones are the tasks' iterable options."""
    import inspect

    import tasks
    params: dict[str, list] = {}
    for name in dir(tasks):
        body = getattr(getattr(tasks, name), "body", None)
        if body is not None:
            for p in inspect.signature(body).parameters.values():
                params.setdefault(p.name, []).append(p.default)
    for key in siteconfig.KEYS:
        assert key in params, key
        if key in siteconfig.FLAGS:
            assert all(d is False for d in params[key]), key
    assert siteconfig.apply(lambda c, proxy=None: None, {"ascend_build": None}, {"proxy": None}, []) == {"proxy": None}
    with pytest.raises(UserError, match="not a site setting"):
        siteconfig.apply(lambda c: None, {"ascend_build": {"nope": 1}}, {}, [])
