"""The engine and the network: one small abstraction over docker and podman (client),
the site's proxy, index and CA handed to builds as secrets (network), and Ctrl-C handled
the same whichever process sees it first (interrupts)."""
from .client import BuildRequest, Engine, detect, for_task, run, show

__all__ = ["BuildRequest", "Engine", "detect", "for_task", "run", "show"]
