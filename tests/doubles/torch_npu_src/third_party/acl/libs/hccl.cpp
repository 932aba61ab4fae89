// STAND-IN HCCL stub (test double).
extern "C" int HcclStub(void) { return 0; }
