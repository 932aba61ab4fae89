"""The site's network settings (proxy, pip index, CA): where they come from, how they
are written for BuildKit, and what is refused before a build."""
from __future__ import annotations

import dataclasses
import stat
import subprocess

import pytest

from ascend_build.engine.network import Network, check, describe, proxy_settings, redact, secret_files
from ascend_build.errors import UserError


def test_proxy_comes_from_the_option_else_the_shell():
    env = {"HTTPS_PROXY": "http://u:pw@proxy.corp:3128", "http_proxy": "http://proxy.corp:3128", "no_proxy": ".corp"}
    assert proxy_settings(None, environ=env) == {"http_proxy": "http://proxy.corp:3128",
                                                 "https_proxy": "http://u:pw@proxy.corp:3128", "no_proxy": ".corp"}
    assert proxy_settings("http://p:8080", environ=env) == {"http_proxy": "http://p:8080", "https_proxy": "http://p:8080",
                                                            "no_proxy": ".corp"}
    assert proxy_settings("http://p:8080", "localhost", environ=env)["no_proxy"] == "localhost"
    assert proxy_settings("none", environ=env) == {}
    assert proxy_settings(None, environ={"no_proxy": ".corp"}) == {}, "no_proxy alone means nothing"


def test_redact_hides_only_the_password():
    assert redact("http://user:s3cret@proxy:3128/") == "http://user:***@proxy:3128/"
    assert redact("https://mirror.local/simple") == "https://mirror.local/simple"


@pytest.mark.parametrize("url", ["http://127.0.0.1:3128", "http://localhost:3128", "http://[::1]:3128"])
def test_a_loopback_proxy_or_index_needs_the_host_network(url):
    for net in (Network(proxy={"https_proxy": url}), Network(pip_index_url=url + "/simple")):
        with pytest.raises(UserError, match="loopback.*add --network host"):
            check(net)
        check(dataclasses.replace(net, mode="host"))


def test_bad_settings_are_refused_without_showing_the_password(tmp_path):
    with pytest.raises(UserError, match="not a URL"):
        check(Network(proxy={"http_proxy": "proxy.corp:3128"}))
    with pytest.raises(UserError, match="only 'host'"):
        check(Network(mode="bridge2"))
    with pytest.raises(UserError, match="no such file"):
        check(Network(ca_bundle=tmp_path / "missing.pem"))
    with pytest.raises(UserError) as info:
        check(Network(pip_index_url="ftp://u:s3cret@mirror/simple"))
    assert "s3cret" not in str(info.value)


def test_secret_files_are_private_and_the_proxy_file_is_sourceable(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("pem\n")
    net = Network(ca, "https://u:s3cret@mirror/simple",
                  {"http_proxy": "http://u:p'w@proxy:3128", "https_proxy": "http://u:p'w@proxy:3128", "no_proxy": ".corp"})
    folder = tmp_path / "secrets"
    folder.mkdir()
    files = secret_files(net, folder)
    assert set(files) == {"ca-bundle", "pip-conf", "proxy-env"} and files["ca-bundle"] == ca.resolve()
    for sid in ("pip-conf", "proxy-env"):
        assert stat.S_IMODE(files[sid].stat().st_mode) == 0o600
    assert "index-url = https://u:s3cret@mirror/simple" in files["pip-conf"].read_text()
    # What a RUN step sees after sourcing it: the exact values, quotes and all, in both cases.
    shown = subprocess.run(["bash", "-c", f". {files['proxy-env']}; echo \"$https_proxy|$HTTPS_PROXY|$no_proxy|$NO_PROXY\""],
                           capture_output=True, text=True).stdout.strip()
    assert shown == "http://u:p'w@proxy:3128|http://u:p'w@proxy:3128|.corp|.corp"
    assert not any("s3cret" in line or "p'w" in line for line in describe(net))
    assert secret_files(Network(), folder) == {}


def test_no_cache_asks_for_fresh_downloads_in_the_sourced_secret(tmp_path):
    """--no-cache's PIP_FRESH comes in proxy-env, which a RUN sources, with or without a
    proxy: a build arg would key the layer cache, a secret's content does not."""
    for net, name in ((Network(), "none"), (Network(proxy={"https_proxy": "http://proxy:3128"}), "proxy")):
        folder = tmp_path / name
        folder.mkdir()
        files = secret_files(net, folder, fresh=True)
        shown = subprocess.run(["bash", "-c", f". {files['proxy-env']}; echo \"$PIP_FRESH|${{https_proxy:-}}\""],
                               capture_output=True, text=True).stdout.strip()
        assert shown == ("1|http://proxy:3128" if net.proxy else "1|")
    assert "PIP_FRESH" not in secret_files(Network(proxy={"http_proxy": "http://p:1"}), tmp_path)["proxy-env"].read_text()


def test_the_ca_bundle_comes_from_the_hosts_trust_settings_unless_told(tmp_path):
    from ascend_build.engine.network import ca_setting
    bundle = tmp_path / "proxy-ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    env = {"REQUESTS_CA_BUNDLE": str(bundle), "PIP_CONFIG_FILE": "/dev/null", "PATH": "/usr/bin:/bin"}
    assert ca_setting(None, env) == (bundle, "$REQUESTS_CA_BUNDLE of this shell")
    assert ca_setting("none", env) == (None, "--ca-bundle none")
    assert ca_setting(str(tmp_path / "given.pem"), env) == (tmp_path / "given.pem", "--ca-bundle")
    # A variable naming a file that is not there is not a bundle.
    assert ca_setting(None, {"PIP_CERT": str(tmp_path / "gone.pem"), "PIP_CONFIG_FILE": "/dev/null"})[0] is None


def test_a_tls_failure_names_its_cause_and_the_option():
    from ascend_build.engine.network import tls_hint
    log = ("#9 12.3 WARNING: Retrying ... SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] "
           "certificate verify failed: self-signed certificate in certificate chain (_ssl.c:1006)'))")
    assert "--ca-bundle FILE" in tls_hint(log) and "CERTIFICATE_VERIFY_FAILED" in tls_hint(log)
    assert tls_hint("#9 ERROR: No matching distribution found for torch==9.9") == ""


def test_the_hosts_own_index_reads_send_a_urls_credentials_as_pip_does():
    """An index URL with `user:password@` (a site's private index): urllib alone would take them
    as part of the host name; the opener sends them as a Basic header, to the index only."""
    import base64
    import http.server
    import threading

    seen: list[str | None] = []

    class Index(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.headers.get("Authorization"))
            self.send_response(200 if seen[-1] else 401)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Index)
    threading.Thread(target=server.handle_request, daemon=True).start()
    url = f"http://reader:pa%40ss@127.0.0.1:{server.server_address[1]}/simple/torch/"
    try:
        with Network(pip_index_url=url, mode="host").opener().open(url, timeout=30) as r:
            assert r.status == 200 and r.read() == b"ok"
    finally:
        server.server_close()
    assert seen == ["Basic " + base64.b64encode(b"reader:pa@ss").decode()]
