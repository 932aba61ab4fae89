"""`invoke TASK ...` for the unit tests, run the way the command line runs it (a process of
its own: its own exit code, output, environment, working folder and signal handlers) but
without an interpreter start and tasks.py's imports each time: one server process per test
process imports them once and forks a child per call. The child runs invoke's own Program
on the checkout's tasks.py, exactly as `ascend-build` there would (cli/entry.py).

    out = invoke("build", "--dry", env={...}, cwd=ROOT)    # a subprocess.CompletedProcess

A script that calls `invoke` itself (a workflow's step, run by bash) gets an `invoke` on
PATH served the same way, through a Unix socket:

    with invoke_on_path(folder) as exe:    # folder/invoke, while the block runs
        subprocess.run(["bash", "-c", "invoke build --dry"], env={"PATH": f"{folder}:..."})
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_LOCK = threading.Lock()
_SERVER: subprocess.Popen | None = None


def invoke(*args: str, cwd: Path | str = ROOT, env: dict[str, str] | None = None,
           timeout: float = 600) -> subprocess.CompletedProcess:
    """`invoke ARGS` with this environment (the whole of it: default, this process's) in
    `cwd`; its exit code, stdout and stderr."""
    global _SERVER
    request = {"argv": list(args), "cwd": str(cwd), "env": dict(os.environ if env is None else env),
               "timeout": timeout}
    with _LOCK:
        if _SERVER is None or _SERVER.poll() is not None:
            _SERVER = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       cwd=ROOT, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert _SERVER.stdin is not None and _SERVER.stdout is not None
        _SERVER.stdin.write(json.dumps(request) + "\n")
        _SERVER.stdin.flush()
        answer = json.loads(_SERVER.stdout.readline())
    return subprocess.CompletedProcess(["invoke", *args], answer["code"], answer["out"], answer["err"])


def _run_one(program, request: dict) -> dict:
    """Fork a child that runs one command line; its code and what it printed."""
    import tempfile
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            os.setpgid(0, 0)
            code = _child(program, request, out.fileno(), err.fileno())
            os._exit(code)
        killed = False
        try:
            _, status = _wait(pid, request["timeout"])
        except TimeoutError:
            killed = True
            import signal
            os.killpg(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        code = os.waitstatus_to_exitcode(status)
        said = err.read().decode(errors="replace") + (f"\n(killed after {request['timeout']} s)" if killed else "")
        return {"code": code, "out": out.read().decode(errors="replace"), "err": said}


def _wait(pid: int, timeout: float) -> tuple[int, int]:
    import time
    end = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return done, status
        if time.monotonic() > end:
            raise TimeoutError
        time.sleep(0.005)


def _child(program, request: dict, out_fd: int, err_fd: int, in_fd: int | None = None) -> int:
    import signal
    import traceback
    if in_fd is not None:
        os.dup2(in_fd, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    os.environ.clear()
    os.environ.update(request["env"])
    signal.signal(signal.SIGINT, signal.default_int_handler)     # as a new Python process has it
    try:
        os.chdir(request["cwd"])
        sys.argv = ["invoke", *request["argv"]]
        program.run(sys.argv, exit=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def _program():
    """invoke's Program on tasks.py, with every module of the package imported once, the
    committed matrix read and its Dockerfiles rendered once (the templates compiled)."""
    import gc
    import importlib
    import pkgutil

    from invoke import Collection
    sys.path.insert(0, str(ROOT))
    import ascend_build
    import tasks
    from ascend_build.images.catalog import render_all
    from ascend_build.matrix import load_matrix
    for module in pkgutil.walk_packages(ascend_build.__path__, "ascend_build."):
        importlib.import_module(module.name)        # a task imports some at first use
    render_all(load_matrix(ROOT / "matrix.yaml"))
    from ascend_build.cli.entry import AscendProgram, SiteConfig

    # The machine's own config file (/etc/invoke.yaml) is not a test's: tests/unit/conftest.py
    # names a folder of the tests' own, fixed when this server starts (a request's env may
    # leave the variable out). Without it, /etc/ as a command line reads it.
    system_prefix = os.environ.get("ASCEND_BUILD_TEST_SYSTEM_PREFIX") or None

    class TestsConfig(SiteConfig):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("system_prefix", system_prefix)
            super().__init__(*args, **kwargs)

    # The project's own Program (ascend-build's): its config class reads each run's files
    # in the child, as a command line does; only tasks.py's import is shared.
    program = AscendProgram(namespace=Collection.from_module(tasks), name="invoke", binary="invoke",
                            config_class=TestsConfig)
    gc.collect()
    gc.freeze()     # the collector leaves these objects alone: a child's collections write to none of
    # their pages, which its fork shares with this process until written
    return program


def _serve() -> None:
    """The server: one forked child per request line."""
    program = _program()
    for line in sys.stdin:
        answer = _run_one(program, json.loads(line))
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


# ------------------------------------------------------------------ `invoke` on PATH
@contextlib.contextmanager
def invoke_on_path(folder: Path, before: str = "") -> Iterator[Path]:
    """`folder`/invoke while the block runs (`before`: shell lines it runs first): each call
    hands its arguments, environment, working folder and its own stdin, stdout and stderr
    to a server (the one above, over a Unix socket), whose forked child runs the command
    line on them; it exits with the child's code. The client is a bare Python (-S -E)."""
    import shutil
    import tempfile
    where = tempfile.mkdtemp(prefix="invoke-")      # short: a socket's path has at most 107 bytes
    sock = Path(where) / "socket"
    server = subprocess.Popen([sys.executable, __file__, "--socket", str(sock)], cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        while not sock.exists():
            assert server.poll() is None, f"the invoke server ended with {server.returncode}"
            threading.Event().wait(0.01)
        exe = folder / "invoke"
        exe.write_text(f'#!/bin/sh\n{before}exec {sys.executable} -S -E {__file__} --call {sock} "$@"\n')
        exe.chmod(0o755)
        yield exe
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(where)


def _serve_socket(path: str) -> None:
    import socket
    program = _program()
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(path + ".new")
        listener.listen()
        os.rename(path + ".new", path)         # there once it listens
        while True:
            conn, _ = listener.accept()
            with conn:
                size, fds, _, _ = socket.recv_fds(conn, 16, 3)
                data = b""
                while len(data) < int(size):
                    data += conn.recv(1 << 16)
                conn.sendall(str(_run_on(program, json.loads(data), fds)).encode())
                for fd in fds:
                    os.close(fd)


def _run_on(program, request: dict, fds: list[int]) -> int:
    """Fork a child that runs one command line on the caller's stdin, stdout and stderr;
    its exit code as a shell gives it (128 + the signal that ended it)."""
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)
        os._exit(_child(program, request, fds[1], fds[2], fds[0]))
    try:
        _, status = _wait(pid, 600)
    except TimeoutError:
        import signal
        os.killpg(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def _call(path: str, argv: list[str]) -> int:
    """The client: this process's command line, environment, folder and stdio to the server."""
    import socket
    data = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    with socket.socket(socket.AF_UNIX) as conn:
        conn.connect(path)
        socket.send_fds(conn, [str(len(data)).encode().ljust(16)], [0, 1, 2])
        conn.sendall(data)
        answer = b""
        while chunk := conn.recv(64):
            answer += chunk
    return int(answer)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--socket"]:
        _serve_socket(sys.argv[2])
    elif sys.argv[1:2] == ["--call"]:
        sys.exit(_call(sys.argv[2], sys.argv[3:]))
    else:
        _serve()
