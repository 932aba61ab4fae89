"""TEST DOUBLES for a site's network: a forward proxy and a private pip index, both on
127.0.0.1 and both demanding a password, standing in for a corporate proxy and a
mirror with credentials (neither exists here). They count what arrived with the right
credentials, so a test can prove the build used them, then look for their bytes in the
image.

- ProxyDouble: HTTP forward proxy with Basic proxy auth; CONNECT tunnels (https) and
  absolute-URI requests (plain http, e.g. apt), one request per connection.
- IndexDouble: a PEP 503 index root with Basic auth that redirects each project page
  to PyPI's, so pip really downloads through it (the files come from PyPI via the proxy).
"""
from __future__ import annotations

import base64
import http.server
import select
import socket
import socketserver
import threading
import urllib.parse
from collections import Counter


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _pipe(a: socket.socket, b: socket.socket) -> None:
    """Copy both ways until either side closes."""
    sockets = [a, b]
    while True:
        readable, _, broken = select.select(sockets, [], sockets, 300)
        if broken or not readable:
            return
        for s in readable:
            data = s.recv(1 << 16)
            if not data:
                return
            (b if s is a else a).sendall(data)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Served:
    """Serves `self.server` on a thread while the `with` block runs."""
    server: socketserver.BaseServer

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


class ProxyDouble(_Served):
    def __init__(self, user: str, password: str):
        self.user, self.password = user, password
        self.seen: Counter[str] = Counter()        # "CONNECT host" / "GET host" with good credentials
        self.refused = 0
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = self.request.recv(4096)
                    if not chunk:
                        return
                    head += chunk
                raw, body = head.split(b"\r\n\r\n", 1)
                lines = raw.decode("latin-1").split("\r\n")
                method, target, version = lines[0].split(" ", 2)
                headers = [line.split(":", 1) for line in lines[1:] if ":" in line]
                auth = next((v.strip() for k, v in headers if k.lower() == "proxy-authorization"), None)
                if auth != _basic(outer.user, outer.password):
                    outer.refused += 1
                    self.request.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                                         b"Proxy-Authenticate: Basic realm=\"double\"\r\nContent-Length: 0\r\n"
                                         b"Connection: close\r\n\r\n")
                    return
                if method == "CONNECT":
                    host, port = target.rsplit(":", 1)
                    upstream = socket.create_connection((host, int(port)), timeout=60)
                    outer.seen[f"CONNECT {host}"] += 1
                    self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    if body:
                        upstream.sendall(body)
                else:
                    url = urllib.parse.urlsplit(target)
                    upstream = socket.create_connection((url.hostname, url.port or 80), timeout=60)
                    outer.seen[f"{method} {url.hostname}"] += 1
                    path = url.path + (f"?{url.query}" if url.query else "")
                    kept = [f"{k}:{v}" for k, v in headers
                            if k.lower() not in ("proxy-authorization", "proxy-connection", "connection")]
                    request = "\r\n".join([f"{method} {path or '/'} {version}", *kept, "Connection: close", "", ""])
                    upstream.sendall(request.encode("latin-1") + body)
                with upstream:
                    _pipe(self.request, upstream)

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://{user}:{password}@127.0.0.1:{self.port}"


class IndexDouble(_Served):
    def __init__(self, user: str, password: str, upstream: str = "https://pypi.org/simple/"):
        self.user, self.password = user, password
        self.projects: Counter[str] = Counter()     # project pages asked for with good credentials
        self.refused = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.headers.get("Authorization") != _basic(outer.user, outer.password):
                    outer.refused += 1
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="index double"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                name = self.path.strip("/").split("/")[-1] if self.path.startswith("/simple/") else ""
                outer.projects[name] += 1
                self.send_response(302)
                self.send_header("Location", upstream + (name + "/" if name else ""))
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://{user}:{password}@127.0.0.1:{self.port}/simple"


class MirrorDouble(_Served):
    """A site's CANN package mirror (CANN_PACKAGE_MIRROR) on 127.0.0.1: the files of one
    folder over plain HTTP, with the names asked for counted."""

    def __init__(self, folder: str):
        asked: Counter = Counter()
        self.asked = asked

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=folder, **kwargs)

            def do_GET(self):
                asked[self.path.lstrip("/")] += 1
                super().do_GET()

            def log_message(self, *args):      # quiet: the test reads `asked`
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
