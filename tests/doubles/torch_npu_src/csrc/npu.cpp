// STAND-IN torch_npu library (test double).
#include "hccl.h"
int register_npu();
extern "C" int torch_npu_standin_ops() { return register_npu() + HcclStub(); }
