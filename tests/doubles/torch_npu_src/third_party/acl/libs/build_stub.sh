#!/bin/bash
# STAND-IN stub builder (test double): plain gcc, as upstream's build_stub.sh.
CDIR="$(cd "$(dirname "$0")" ; pwd -P)"
cd ${CDIR}
gcc -fPIC -shared -o libhccl.so -I../inc hccl.cpp
