// Kernels taking a large parameter by value. Since CUDA 12.1 a kernel's parameters may take up to
// 32,764 bytes (they took at most 4,096 before). Up to 4,352 bytes of parameters the compilers
// record each parameter with EIATTR_KPARAM_INFO (kernel4k); above, with EIATTR_KPARAM_INFO_V2
// (kernelLargeParam, kernelMixed). Each writes what it received for the host to check.

struct param_4k_t { int a[1024]; };
struct param_large_t { int a[8000]; };

// *result = the sum of p.a[i] * i.
extern "C" __global__ void kernel4k(const param_4k_t p, long long *result) {
    long long sum = 0;
    for (int i = 0; i < 1024; i++) sum += (long long)p.a[i] * i;
    *result = sum;
}

// *result = the sum of p.a[i] * i.
extern "C" __global__ void kernelLargeParam(__grid_constant__ const param_large_t p,
                                            long long *result) {
    long long sum = 0;
    for (int i = 0; i < 8000; i++) sum += (long long)p.a[i] * i;
    *result = sum;
}

// The large parameter between small ones: those after it lie past 32,000 bytes.
extern "C" __global__ void kernelMixed(char c, __grid_constant__ const param_large_t p, short s,
                                       double d, long long *out) {
    out[0] = c;
    out[1] = p.a[0];
    out[2] = p.a[7999];
    out[3] = s;
    out[4] = (long long)d;
}
