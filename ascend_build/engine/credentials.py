"""Credentials for the tools run on this host (uv, pip, git): handed over in the child's
environment, never on its command line. Any user of the machine reads every process's
command line (`ps`, /proc/PID/cmdline); a process's environment only its owner and root.
And what is said about those commands, a log line or an error, shows the URLs redacted."""
from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Mapping

from .. import console
from .runner import show as _show

# A URL's user information: greedy up to the netloc's last "@" (a raw "@" in a password),
# never past its end ("/", "?", "#", a blank or a quote).
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<info>[^/?#\s'\"]+)@")

# What git's credential helper below reads: the two never reach a command line.
GIT_USERNAME = "ASCEND_BUILD_GIT_USERNAME"
GIT_PASSWORD = "ASCEND_BUILD_GIT_PASSWORD"
SECRET_VARIABLES = (GIT_USERNAME, GIT_PASSWORD)     # a user name alone may be a token

# git runs a "!" helper with sh; printf is sh's builtin, so no process on the way holds the
# secret in its arguments. The helper answers `get` only: nothing is stored or erased.
_HELPER = ('!f() { test "$1" = get && printf "username=%s\\npassword=%s\\n" '
           f'"${GIT_USERNAME}" "${GIT_PASSWORD}"; }}; f')


def redact(text: str) -> str:
    """`text` (a URL, a command, a tool's complaint) with every URL's credentials hidden:
    `user:***@` where there is a password, `***@` for a user name alone (a token, as in
    `https://TOKEN@host`)."""
    def hide(m: re.Match[str]) -> str:
        user, colon, _ = m["info"].partition(":")
        return f"{m['scheme']}{user + ':***' if colon else '***'}@"
    return _USERINFO.sub(hide, text)


def redact_value(value: str) -> str:
    """A URL, proxy or token fit for any output: what stands before the host's `@` hidden,
    whatever its shape: `user:pw@` keeps the user (`user:***@`), a bare `TOKEN@` goes whole
    (`***@`), with a scheme or without (`user:pw@proxy:3128`). Read as text, never parsed as
    a URL: a value that is no URL at all (a bad port, a newline) is redacted too."""
    scheme, sep, rest = value.partition("://")
    if not sep:
        scheme, rest = "", value
    authority, slash, path = _split_authority(rest)
    user, at, host = authority.rpartition("@")
    if not at:
        return value
    shown = f"{user.split(':', 1)[0]}:***" if ":" in user else "***"
    return f"{scheme}{sep}{shown}@{host}{slash}{path}"


def _split_authority(rest: str) -> tuple[str, str, str]:
    """host part, '/', the rest: the authority ends at the first '/', '?' or '#' after the last '@'
    (a password may hold '/' or '?')."""
    at = rest.rfind("@")
    for i in range(max(at, 0), len(rest)):
        if rest[i] in "/?#":
            return rest[:i], rest[i], rest[i + 1:]
    return rest, "", ""


def show(cmd: list[str], env: Mapping[str, str] | None = None) -> str:
    """A command for a log line, after the environment it is given: credentials hidden."""
    shown = {k: "***" if k in SECRET_VARIABLES else v for k, v in (env or {}).items()}
    return redact(_show(cmd, shown))


def echo(cmd: list[str], env: Mapping[str, str] | None = None) -> None:
    """A command about to run, said with --verbose (console.command), credentials hidden."""
    console.command(show(cmd, env))


def split(url: str) -> tuple[str, str | None, str | None]:
    """The URL without its user information, and the user name and password it held
    (unquoted; None where it has none)."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None, None
    info, host = parts.netloc.rsplit("@", 1)
    user, colon, password = info.partition(":")
    return (urllib.parse.urlunsplit(parts._replace(netloc=host)), urllib.parse.unquote(user),
            urllib.parse.unquote(password) if colon else None)


def git_url(url: str, environ: Mapping[str, str] = os.environ) -> tuple[str, dict[str, str]]:
    """The URL for git's command line, and what to add to its environment: a URL's user
    and password go to a credential helper (in GIT_CONFIG_* entries, for that host only)
    that reads them from the environment. A URL without them is returned as it is."""
    bare, user, password = split(url)
    if user is None:
        return url, {}
    parts = urllib.parse.urlsplit(bare)
    key = f"credential.{parts.scheme}://{parts.netloc}.helper"
    n = int(environ.get("GIT_CONFIG_COUNT") or 0)          # entries the caller's shell set stay
    return bare, {
        "GIT_CONFIG_COUNT": str(n + 2),
        # an empty helper first: the helpers configured before (a store) are neither asked nor told
        f"GIT_CONFIG_KEY_{n}": key, f"GIT_CONFIG_VALUE_{n}": "",
        f"GIT_CONFIG_KEY_{n + 1}": key, f"GIT_CONFIG_VALUE_{n + 1}": _HELPER,
        GIT_USERNAME: user, GIT_PASSWORD: password or "",
        "GIT_TERMINAL_PROMPT": "0",       # refused credentials fail; nobody is asked on a terminal
    }
