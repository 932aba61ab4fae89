"""TEST DOUBLE: one server on 127.0.0.1 standing in for a site's package index, its forward
proxy and a git host (`git http-backend` over a folder of bare repositories, smart and dumb
HTTP), each wanting a password. While it answers a request, the tool that sent it (uv, pip,
git) is alive and waiting: the double then reads the command line of every process
(/proc/PID/cmdline) and keeps those holding a secret. The credentials that arrived are
recorded too, so a test proves they still reached the tool, by another way than argv.

The index has no project (404): uv and pip fail fast once they have asked."""
from __future__ import annotations

import base64
import binascii
import http.server
import os
import subprocess
import threading
import urllib.parse
from pathlib import Path


def command_lines() -> list[str]:
    """Every process's command line at this moment, its arguments joined by blanks."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                raw = (entry / "cmdline").read_bytes()
            except OSError:             # ended meanwhile
                continue
            found.append(raw.replace(b"\0", b" ").decode(errors="replace").strip())
    return found


def _basic(header: str | None) -> str | None:
    """`user:password` of a Basic credentials header."""
    if not header or not header.startswith("Basic "):
        return None
    try:
        return base64.b64decode(header[len("Basic "):]).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None


class CmdlineWatchDouble:
    """`with CmdlineWatchDouble(secrets, git_root, "user:pw") as d:` serves while the block
    runs; `d.leaks`: command lines that held a secret; `d.seen`: every command line read;
    `d.authorization` / `d.proxy_authorization`: the `user:password` that arrived."""

    def __init__(self, secrets: list[str], git_root: Path | None = None, git_credentials: str | None = None):
        self.secrets, self.git_root, self.git_credentials = secrets, git_root, git_credentials
        self.leaks: list[str] = []
        self.seen: set[str] = set()
        self.authorization: list[str] = []
        self.proxy_authorization: list[str] = []
        self._mutex = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer._answer(self)

            do_POST = do_GET

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.host = f"127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> CmdlineWatchDouble:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _watch(self) -> None:
        lines = command_lines()
        with self._mutex:
            self.seen.update(lines)
            self.leaks += [line for line in lines if any(s in line for s in self.secrets)]

    def _answer(self, h: http.server.BaseHTTPRequestHandler) -> None:
        self._watch()
        auth, proxy_auth = _basic(h.headers.get("Authorization")), _basic(h.headers.get("Proxy-Authorization"))
        with self._mutex:
            self.authorization += [auth] if auth else []
            self.proxy_authorization += [proxy_auth] if proxy_auth else []
        url = urllib.parse.urlsplit(h.path)          # an absolute URI when it came as a proxy's request
        if self.git_root is not None and url.path.startswith("/git/"):
            if auth != self.git_credentials:         # git sends credentials only when asked
                return self._send(h, 401, [("WWW-Authenticate", 'Basic realm="git double"')], b"")
            return self._git(h, url)
        self._send(h, 404, [], b"")

    def _git(self, h: http.server.BaseHTTPRequestHandler, url: urllib.parse.SplitResult) -> None:
        """The request through `git http-backend`, as a web server's CGI would run it."""
        assert self.git_root is not None
        body = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.git_root),
               "GIT_PROJECT_ROOT": str(self.git_root), "GIT_HTTP_EXPORT_ALL": "1",
               "PATH_INFO": url.path[len("/git"):], "QUERY_STRING": url.query, "REQUEST_METHOD": h.command,
               "CONTENT_TYPE": h.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(len(body)),
               "REMOTE_ADDR": "127.0.0.1", "REMOTE_USER": (self.git_credentials or "").split(":")[0]}
        for header, var in (("Git-Protocol", "HTTP_GIT_PROTOCOL"), ("Content-Encoding", "HTTP_CONTENT_ENCODING")):
            if h.headers.get(header):
                env[var] = h.headers[header]
        out = subprocess.run(["git", "http-backend"], input=body, capture_output=True, env=env).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        headers = [tuple(part.strip() for part in line.split(":", 1)) for line in head.decode().split("\r\n")
                   if ":" in line]
        status = next((int(v.split()[0]) for k, v in headers if k.lower() == "status"), 200)
        self._send(h, status, [(k, v) for k, v in headers if k.lower() not in ("status", "content-length")], payload)

    @staticmethod
    def _send(h: http.server.BaseHTTPRequestHandler, status: int, headers: list, body: bytes) -> None:
        h.send_response(status)
        for key, value in headers:
            h.send_header(key, value)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
