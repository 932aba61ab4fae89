"""A site's way to the network, for the RUN steps that download: a proxy, a private pip
index, a CA bundle. All of them reach BuildKit as secrets only (files mounted for one
RUN), never as build args, ENV, labels or layers: proxy and index URLs often carry a
password, and build args are written into the image history."""
from __future__ import annotations

import base64
import ipaddress
import os
import re
import shlex
import ssl
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ..errors import UserError
from .credentials import redact_value as redact  # one value, any shape: secrets' one home
from .credentials import split as split_credentials

DEFAULT_INDEX = "https://pypi.org/simple"


@dataclass(frozen=True)
class Network:
    """The one record of a site's network, for the builds' RUN steps (as secrets) and for
    what runs on this host (the lock's resolver and index reads)."""
    ca_bundle: Path | None = None
    pip_index_url: str | None = None
    proxy: Mapping[str, str] = field(default_factory=dict)   # http_proxy / https_proxy / no_proxy -> value
    mode: str | None = None                                 # "host": RUN steps share the host's network
    ca_source: str = ""                                     # where the CA bundle setting came from
    torch_index_url: str | None = None                      # the site's mirror of the stacks' torch index

    @property
    def index_url(self) -> str:
        return self.pip_index_url or DEFAULT_INDEX

    @property
    def proxy_url(self) -> str | None:
        """The proxy for this host's own requests (the index is https)."""
        return self.proxy.get("https_proxy") or self.proxy.get("http_proxy") or None

    def opener(self) -> urllib.request.OpenerDirector:
        """urllib's opener for this host's own requests (index pages): the CA bundle and the proxy."""
        ctx = ssl.create_default_context(cafile=str(self.ca_bundle) if self.ca_bundle else None)
        handlers: list[urllib.request.BaseHandler] = [urllib.request.HTTPSHandler(context=ctx), _UserInfo()]
        if self.proxy_url:
            handlers.append(urllib.request.ProxyHandler({"https": self.proxy_url, "http": self.proxy_url}))
        return urllib.request.build_opener(*handlers)

    def host_env(self) -> dict[str, str]:
        """The environment of a tool run on this host (uv): this process's, with the CA
        bundle and the proxy."""
        env = dict(os.environ)
        if self.ca_bundle:
            env["SSL_CERT_FILE"] = str(self.ca_bundle)
        if self.proxy_url:
            env["HTTPS_PROXY"] = env["HTTP_PROXY"] = self.proxy_url
        return env


class _UserInfo(urllib.request.BaseHandler):
    """urllib reads an index URL's `user:password@` as part of its host name (and fails to
    resolve it): the credentials go into a Basic Authorization header instead, as pip and uv
    send them. Not kept across a redirect to another host (an unredirected header)."""
    handler_order = 100

    def http_request(self, req: urllib.request.Request) -> urllib.request.Request:
        bare, user, password = split_credentials(req.full_url)
        if user is not None:
            req.full_url = bare
            token = base64.b64encode(f"{user}:{password or ''}".encode()).decode()
            req.add_unredirected_header("Authorization", f"Basic {token}")
        return req

    https_request = http_request


def proxy_settings(proxy: str | None, no_proxy: str | None = None,
                   environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """`--proxy URL` for both schemes, `--proxy none` for none; without it, the proxy
    variables of the calling shell, as curl and pip would use them there."""
    if proxy == "none":
        return {}
    if proxy:
        found = {"http_proxy": proxy, "https_proxy": proxy}
    else:
        found = {}
        for var in ("http_proxy", "https_proxy"):
            value = environ.get(var) or environ.get(var.upper())
            if value:
                found[var] = value
    rest = no_proxy if no_proxy is not None else (environ.get("no_proxy") or environ.get("NO_PROXY"))
    if found and rest:
        found["no_proxy"] = rest
    return found


# Where a host that trusts a TLS-intercepting proxy's CA says so, in the order pip reads them.
CA_VARIABLES = ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")


def ca_setting(value: str | None, environ: Mapping[str, str] = os.environ) -> tuple[Path | None, str]:
    """`--ca-bundle FILE`, `--ca-bundle none`, or (not given) the host's own trust setting:
    the CA variables above, then pip's `cert`. Returns the bundle and where it came from."""
    if value == "none":
        return None, "--ca-bundle none"
    if value:
        return Path(value), "--ca-bundle"
    for var in CA_VARIABLES:
        if environ.get(var) and Path(environ[var]).is_file():
            return Path(environ[var]), f"${var} of this shell"
    try:
        import subprocess
        import sys
        out = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.cert"], capture_output=True,
                             text=True, timeout=30, env=dict(environ))
        cert = out.stdout.strip()
        if out.returncode == 0 and cert and Path(cert).is_file():
            return Path(cert), "pip's cert setting"
    except (OSError, subprocess.TimeoutExpired):
        pass
    return None, ""


def tls_hint(log_tail: str) -> str:
    """What to say when a build step failed on TLS (a proxy's CA the build did not have)."""
    if "CERTIFICATE_VERIFY_FAILED" in log_tail or "certificate verify failed" in log_tail:
        return (" A download failed on TLS (CERTIFICATE_VERIFY_FAILED): behind a TLS-intercepting proxy, hand its "
                "CA to the build with --ca-bundle FILE (or set PIP_CERT / REQUESTS_CA_BUNDLE in this shell).")
    return ""


# Control characters end a line of a config file or a header: a value holding one could write
# a line of its own (an `extra-index-url` the site never chose) into what the build reads.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def refuse_control(what: str, value: str) -> None:
    """A UserError when the value holds a control character (a newline, a tab, NUL...)."""
    found = _CONTROL.search(value)
    if found:
        raise UserError(f"{what}: {redact(_CONTROL.sub('?', value))!r} holds a control character "
                        f"({found.group()!r} at {found.start()}); a setting is one line of printable text")


def check_url(what: str, url: str, schemes: tuple[str, ...] = ("http", "https", "socks5", "socks5h")) -> None:
    """The shape of a proxy's or an index's URL, read as text: a scheme, a host, a port that is
    a number from 1 to 65535 where one is given, no control character and no space. Messages
    show it redacted."""
    refuse_control(what, url)
    like = "http://[user:password@]host:port" if "socks5" in schemes else "https://[user:password@]host[:port]/path"
    if " " in url:
        raise UserError(f"{what}: {redact(url)!r} holds a space; expected a URL like {like}")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        raise UserError(f"{what}: {redact(url)!r}: the port is not a number from 1 to 65535; expected a URL "
                        f"like {like}") from None
    if parts.scheme not in schemes or not parts.hostname or "://" not in url:
        raise UserError(f"{what}: {redact(url)!r} is not a URL like {like}")
    if port == 0:
        raise UserError(f"{what}: {redact(url)!r}: the port is not a number from 1 to 65535")


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check(net: Network) -> None:
    """Refuse what cannot work, before anything runs."""
    if net.mode not in (None, "host"):
        raise UserError(f"--network {net.mode!r}: only 'host' is supported (the default is the engine's own)")
    if net.ca_bundle and not Path(net.ca_bundle).is_file():
        raise UserError(f"--ca-bundle {net.ca_bundle}: no such file")
    urls = [(var, v) for var, v in net.proxy.items() if var != "no_proxy"]
    if net.pip_index_url:
        urls.append(("--pip-index-url", net.pip_index_url))
    for var, url in urls:
        check_url(var, url)
        # A proxy or mirror on the build machine's loopback (cntlm, px, a local devpi) is
        # not reachable from a RUN step in the engine's default network; the host network is.
        if _is_loopback(urllib.parse.urlsplit(url).hostname) and net.mode != "host":
            raise UserError(f"{var} {redact(url)} is on this machine's loopback, which build steps cannot reach "
                            f"on the engine's default network; add --network host")
    if "no_proxy" in net.proxy:
        refuse_control("no_proxy", net.proxy["no_proxy"])


def secret_files(net: Network, folder: Path, fresh: bool = False) -> dict[str, Path]:
    """Write the secrets BuildKit mounts (owner-only files in a private folder the caller
    deletes): `ca-bundle`, `pip-conf` (the index) and `proxy-env`, the environment every
    downloading RUN sources: the proxy, and with `fresh` (--no-cache) PIP_FRESH=1, which
    makes the pip steps download every wheel again. That says how to download, not what
    the image holds, and a secret's content does not key the layer cache (a build arg
    would): the layers of a --no-cache build serve the next build as they are."""
    secrets: dict[str, Path] = {}
    if net.ca_bundle:
        secrets["ca-bundle"] = Path(net.ca_bundle).resolve()
    if net.pip_index_url:
        secrets["pip-conf"] = _private(folder / "pip.conf", ini_file({"global": {"index-url": net.pip_index_url}}))
    # Both cases: curl reads only the lower-case http_proxy, pip and apt read either.
    exports = {}
    for var, value in sorted(net.proxy.items()):
        exports[var] = exports[var.upper()] = value
    if fresh:
        exports["PIP_FRESH"] = "1"
    if exports:
        secrets["proxy-env"] = _private(folder / "proxy.env", shell_exports(exports))
    return secrets


def ini_file(sections: Mapping[str, Mapping[str, str]]) -> str:
    """An INI file (pip.conf) from values, one line each: a value that could end its line and
    start another is refused, never joined in."""
    lines = []
    for name, values in sections.items():
        refuse_control(f"[{name}]", name)
        lines.append(f"[{name}]")
        for key, value in values.items():
            refuse_control(key, key)
            refuse_control(key, value)
            lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n"


def shell_exports(values: Mapping[str, str]) -> str:
    """A file a shell sources (proxy.env): one quoted `export NAME=value` per value; names are
    shell names, values one line of text."""
    lines = []
    for name, value in values.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise UserError(f"{name!r}: not a variable name a shell takes")
        refuse_control(name, value)
        lines.append(f"export {name}={shlex.quote(value)}")
    return "\n".join(lines) + "\n"


def describe(net: Network) -> list[str]:
    """What the build will use, passwords hidden, for the log."""
    lines = [f"{var}: {redact(v)} (secret)" for var, v in sorted(net.proxy.items())]
    if net.pip_index_url:
        lines.append(f"pip index: {redact(net.pip_index_url)} (secret)")
    if net.ca_bundle:
        lines.append(f"CA bundle: {net.ca_bundle} (secret{', from ' + net.ca_source if net.ca_source else ''}; "
                     f"--ca-bundle none to build without it)")
    if net.mode:
        lines.append(f"build network: {net.mode}")
    return lines


def _private(path: Path, text: str) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    return path
