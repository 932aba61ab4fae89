#!/bin/bash
# STAND-IN for torch_npu's ci/build.sh (test double): the same flags, the same output folder.
set -euo pipefail
cd "$(dirname "$0")/.."
export DISABLE_RPC_FRAMEWORK=FALSE
py_version=""
for arg in "$@"; do
    case "$arg" in
        --python=*) py_version="${arg#--python=}" ;;
        --disable_torchair) export DISABLE_INSTALL_TORCHAIR=TRUE ;;
        --disable_rpc) export DISABLE_RPC_FRAMEWORK=TRUE ;;
        *) echo "build.sh: unknown option $arg" >&2; exit 1 ;;
    esac
done
[ -n "$py_version" ] || { echo "build.sh: --python=X is required" >&2; exit 1; }
python="python${py_version}"
command -v "$python" >/dev/null || { echo "build.sh: $python not found" >&2; exit 1; }
"$python" -c "import torch; print('building against torch', torch.__version__)"
"$python" setup.py build bdist_wheel
ls dist/*.whl
