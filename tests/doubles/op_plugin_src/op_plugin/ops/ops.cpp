// STAND-IN op-plugin kernels (test double).
int op_add(int x) { return x + 1; }
int op_mul(int x) { return x * 2; }
