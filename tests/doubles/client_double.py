"""Test double of an engine client running a build: prints BuildKit-like progress until
told to stop. On SIGINT it does what `docker build` does: cancels, says "context
canceled" and exits 1. Records what it received in DIR/client.log.

    python client_double.py DIR [--fail]     (--fail: the build fails on its own)
"""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path


def main() -> None:
    folder = Path(sys.argv[1])
    record = folder / "client.log"

    def cancel(signum, frame):
        with open(record, "a") as fh:
            fh.write(f"signal {signal.Signals(signum).name}\n")
        print("#3 CANCELED", flush=True)
        print("ERROR: failed to solve: context canceled", flush=True)
        sys.exit(1)

    signal.signal(signal.SIGINT, cancel)
    signal.signal(signal.SIGTERM, cancel)
    (folder / "client.pid").write_text(str(os.getpid()))
    print("#1 [internal] load build definition", flush=True)
    if "--fail" in sys.argv:
        print("#2 ERROR: process \"/bin/sh -c false\" did not complete successfully: exit code: 1", flush=True)
        sys.exit(1)
    for step in range(600):
        print(f"#2 {step * 0.1:.1f} Collecting torch", flush=True)
        time.sleep(0.1)
    sys.exit(0)


if __name__ == "__main__":
    main()
