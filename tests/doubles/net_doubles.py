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


class PackageIndexDouble(_Served):
    """A package index on 127.0.0.1 serving the files it is given: each project's simple page
    (PEP 691 JSON, or with `html` the PEP 503 page a mirror serves, data-requires-python and
    #sha256= on its links) and the files themselves, streamed in 64 kB writes. It counts the
    pages and files asked for and the bytes of each file it got out before the reader left."""

    def __init__(self, projects: dict[str, dict[str, tuple[bytes, str]]], html: bool = False,
                 yanked: tuple[str, ...] = ()):
        import hashlib
        import json
        # project -> file name -> (its bytes, its Requires-Python or "")
        files = {name: data for per in projects.values() for name, data in per.items()}
        self.asked: Counter[str] = Counter()        # "page vllm-ascend", "file vllm-0.23.0.tar.gz"
        self.sent: Counter[str] = Counter()         # file name -> bytes written before the reader left
        outer = self

        def page(project: str) -> tuple[bytes, str]:
            entries = [(name, hashlib.sha256(data).hexdigest(), requires)
                       for name, (data, requires) in sorted(projects[project].items())]
            if html:
                links = "".join(f'<a href="../../files/{n}#sha256={sha}"'
                                + (f' data-requires-python="{requires.replace("<", "&lt;").replace(">", "&gt;")}"'
                                   if requires else "") + (" data-yanked" if n in yanked else "") + f">{n}</a>\n"
                                for n, sha, requires in entries)
                return f"<!DOCTYPE html><html><body>\n{links}</body></html>".encode(), "text/html"
            body = {"meta": {"api-version": "1.1"}, "name": project, "files": [
                {"filename": n, "url": f"../../files/{n}", "hashes": {"sha256": sha}, "yanked": n in yanked,
                 **({"requires-python": requires} if requires else {})} for n, sha, requires in entries]}
            return json.dumps(body).encode(), "application/vnd.pypi.simple.v1+json"

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = self.path.strip("/").split("/")
                if len(parts) == 2 and parts[0] == "simple" and parts[1] in projects:
                    outer.asked[f"page {parts[1]}"] += 1
                    body, kind = page(parts[1])
                elif len(parts) == 2 and parts[0] == "files" and parts[1] in files:
                    outer.asked[f"file {parts[1]}"] += 1
                    body, kind = files[parts[1]][0], "application/octet-stream"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    for at in range(0, len(body), 1 << 16):
                        self.wfile.write(body[at:at + (1 << 16)])
                        if kind == "application/octet-stream":
                            outer.sent[parts[1]] += len(body[at:at + (1 << 16)])
                except (BrokenPipeError, ConnectionResetError):
                    pass            # the reader had what it wanted

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple/"
