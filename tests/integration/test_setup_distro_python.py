"""The README's set-up against a distribution's own Python: in a Debian 12 container
(from the debootstrapped base) with Debian's python3, which refuses `pip install`
outside a virtual environment (PEP 668), scripts/python-env.sh (the Python part of
scripts/bootstrap.sh) installs the project and its command, `ascend-build`, runs from the venv."""
from __future__ import annotations

import subprocess
from pathlib import Path

from tests.integration.conftest import CA, ROOT


def test_the_set_up_works_with_debians_own_python(engine, amd64_base):
    base = amd64_base
    ca = ["-v", f"{CA}:/etc/ssl/certs/host-ca.pem:ro", "-e", "PIP_CERT=/etc/ssl/certs/host-ca.pem"] if CA.exists() else []
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True).stdout.split()
    script = (
        "set -eu; apt-get update -qq >/dev/null; "
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 python3-venv "
        "python3-pip >/dev/null; "
        "mkdir /src && cd /src && tar -xf /in/tree.tar; "
        # Debian's python3 is externally managed: the old set-up line (pip outside a venv) fails here.
        "if python3 -m pip install -q invoke 2>/tmp/pep668; then echo 'not a PEP 668 Python'; exit 3; fi; "
        "grep -q externally-managed-environment /tmp/pep668; "
        "scripts/python-env.sh; .venv/bin/ascend-build matrix >/tmp/matrix.txt; "
        "grep -q 'cann8.0.rc3-910b-ubuntu22.04-py3.10-torch2.1.0' /tmp/matrix.txt && echo SET-UP-OK")
    tar = subprocess.run(["tar", "-cf", "-", *files], cwd=ROOT, capture_output=True)
    assert tar.returncode == 0
    workdir = Path(subprocess.run(["mktemp", "-d"], capture_output=True, text=True).stdout.strip())
    (workdir / "tree.tar").write_bytes(tar.stdout)
    out = subprocess.run(engine.command("run", "--rm", "--platform", "linux/amd64", *ca, "-v", f"{workdir}:/in:ro",
                                        base, "bash", "-c", script), capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "SET-UP-OK" in out.stdout and "python-env: .venv ready (Python 3.11" in out.stdout
