#!/usr/bin/env bash
# This project's Python dependencies in the checkout's virtual environment (.venv), with
# the system's python3: Debian 12 and Ubuntu 24.04 refuse `pip install` outside a venv
# (PEP 668). Needs python3 with its venv module (Debian: python3-venv). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    echo "python-env: python3 has no venv module; install it (Debian/Ubuntu: apt-get install python3-venv)" >&2
    exit 1
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
echo "python-env: .venv ready ($(.venv/bin/python --version))"
