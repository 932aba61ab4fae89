#!/bin/bash
# STAND-IN for torch_npu's ci/build.sh (test double): same flag, same output folder.
set -euo pipefail
cd "$(dirname "$0")/.."
py_version=""
for arg in "$@"; do
    case "$arg" in
        --python=*) py_version="${arg#--python=}" ;;
        *) echo "build.sh: unknown option $arg" >&2; exit 1 ;;
    esac
done
[ -n "$py_version" ] || { echo "build.sh: --python=X is required" >&2; exit 1; }
python="python${py_version}"
command -v "$python" >/dev/null || { echo "build.sh: $python not found" >&2; exit 1; }
"$python" -c "import torch; print('building against torch', torch.__version__)"
rm -rf build dist
"$python" setup.py -q bdist_wheel
ls dist/*.whl
