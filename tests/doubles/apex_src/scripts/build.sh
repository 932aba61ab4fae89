#!/bin/bash
# STAND-IN for Ascend apex's scripts/build.sh (test double): the same steps as at 5.0.0.
ROOT_DIR="$(cd "$(dirname "$0")/.." && pwd)"
APEX_DIR="$ROOT_DIR/apex"
SUPPORTED_PY_VERSION=(3.7 3.8 3.9 3.10)
PY_VERSION='3.7'
for arg in "$@"; do
    case "$arg" in
        --python=*) PY_VERSION="${arg#--python=}" ;;
        *) echo "build.sh: unknown option $arg"; exit 1 ;;
    esac
done
case " ${SUPPORTED_PY_VERSION[*]} " in *" ${PY_VERSION} "*) ;; *)
    echo "build.sh: Python ${PY_VERSION} not in ${SUPPORTED_PY_VERSION[*]}"; exit 1 ;; esac
set -e
"python${PY_VERSION}" - <<'PY'
import importlib.metadata as md
import setuptools
if tuple(int(x) for x in setuptools.__version__.split(".")[:2]) > (65, 7):
    raise SystemExit(f"apex needs setuptools<=65.7 to build, found {setuptools.__version__}")
print("building apex against torch", md.version("torch"))
PY

# the clone a site must make work offline, at the pinned commit
cd "$ROOT_DIR"
git clone https://github.com/NVIDIA/apex.git
cd apex
git checkout @NVIDIA_COMMIT@

# the Ascend changes over it
cd "$APEX_DIR"
patch -p1 < "$ROOT_DIR/patch/npu.patch"
cp -r "$ROOT_DIR"/src/* "$APEX_DIR"

# the wheel, with the extension flag (no --npu_float_status since Ascend apex 6cdd5ea3)
"python${PY_VERSION}" setup.py --cpp_ext bdist_wheel
