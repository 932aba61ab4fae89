"""The engine and the network: the one room that knows docker's and podman's command
lines (engine: every operation; client: which engine a task runs with; runner: a long
command streamed, Ctrl-C handled), the site's proxy, index and CA handed to builds as
secrets (network), and Ctrl-C handled the same whichever process sees it first
(interrupts)."""
from .client import detect, for_task
from .engine import BuildRequest, Engine, Mount, RunSpec, check_ref
from .runner import run, show

__all__ = ["BuildRequest", "Engine", "Mount", "RunSpec", "check_ref", "detect", "for_task", "run", "show"]
