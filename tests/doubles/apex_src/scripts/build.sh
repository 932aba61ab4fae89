#!/bin/bash
# STAND-IN for Ascend apex's scripts/build.sh (test double): the same steps.
CUR_DIR=$(dirname $(readlink -f $0))
ROOT_DIR=$CUR_DIR/..
APEX_DIR=$ROOT_DIR/apex
SUPPORTED_PY_VERSION=(3.7 3.8 3.9)
PY_VERSION='3.7'
for arg in "$@"; do
    case "$arg" in
        --python=*) PY_VERSION="${arg#--python=}" ;;
        *) echo "ERROR Unsupported parameters: $arg"; exit 1 ;;
    esac
done
case " ${SUPPORTED_PY_VERSION[*]} " in *" ${PY_VERSION} "*) ;; *)
    echo "${PY_VERSION} is an unsupported python version, we suggest ${SUPPORTED_PY_VERSION[*]}"; exit 1 ;; esac
set -e
"python${PY_VERSION}" - <<'PY'
import importlib.metadata as md
import setuptools
if tuple(int(x) for x in setuptools.__version__.split(".")[:2]) > (65, 7):
    raise SystemExit(f"apex needs setuptools<=65.7 to build, found {setuptools.__version__}")
print("building apex against torch", md.version("torch"), "and torch_npu", md.version("torch_npu"))
PY

# download origin code
cd $ROOT_DIR || exit
git clone https://github.com/NVIDIA/apex.git
cd apex
git checkout @NVIDIA_COMMIT@

# making patch
cd ..
cp $ROOT_DIR/patch/npu.patch $APEX_DIR
cd $APEX_DIR || exit
patch -p1 <npu.patch
rm -rf npu.patch
cp -r $ROOT_DIR/src/* $APEX_DIR

# compile
cd $APEX_DIR || exit
"python${PY_VERSION}" setup.py --cpp_ext --npu_float_status bdist_wheel
