#!/bin/bash
# STAND-IN stub builder (test double): plain gcc, as upstream's build_stub.sh.
cd "$(dirname "$0")"
gcc -fPIC -shared -o libhccl.so -I../inc hccl.cpp
