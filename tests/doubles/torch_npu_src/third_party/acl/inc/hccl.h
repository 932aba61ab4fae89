/* STAND-IN HCCL header (test double). */
#ifdef __cplusplus
extern "C" {
#endif
int HcclStub(void);
#ifdef __cplusplus
}
#endif
