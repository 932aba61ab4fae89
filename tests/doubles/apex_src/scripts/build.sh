#!/bin/bash
# STAND-IN for Ascend apex's scripts/build.sh (test double).
set -euo pipefail
cd "$(dirname "$0")/.."
py_version=""
for arg in "$@"; do
    case "$arg" in
        --python=*) py_version="${arg#--python=}" ;;
        *) echo "build.sh: unknown option $arg" >&2; exit 1 ;;
    esac
done
python="python${py_version:?--python=X is required}"
"$python" - <<'PY'
import setuptools
if tuple(int(x) for x in setuptools.__version__.split(".")[:2]) > (65, 7):
    raise SystemExit(f"apex needs setuptools<=65.7 to build, found {setuptools.__version__}")
import torch
print("building apex against torch", torch.__version__)
PY
rm -rf apex/dist build
"$python" setup.py -q bdist_wheel --dist-dir apex/dist
ls apex/dist/*.whl
