// libcommon: a third library, with a static CUDA runtime instance of its own, that launches kernel
// handles it is given (cudaKernel_t) without knowing where they come from: one taken by another
// library with cudaGetKernel, one loaded at run time by cudyn. Device memory comes from the
// caller; every runtime instance of the process shares the device's primary context.

#include <cuda_runtime.h>

// c = a + b over n floats with `kernel`, a vectorAdd(const float*, const float*, float*, int).
extern "C" int common_vector_add(cudaKernel_t kernel, const float *a, const float *b, float *c,
                                 int n) {
    void *args[] = {&a, &b, &c, &n};
    cudaError_t status = cudaLaunchKernel(reinterpret_cast<const void *>(kernel),
                                          dim3((n + 255) / 256), dim3(256), args, 0, 0);
    return status != cudaSuccess ? status : cudaDeviceSynchronize();
}

// C = A B for n x n row-major matrices (n a multiple of 16) with `kernel`, a
// matrixMul(const float*, const float*, float*, int).
extern "C" int common_matrix_mul(cudaKernel_t kernel, const float *a, const float *b, float *c,
                                 int n) {
    void *args[] = {&a, &b, &c, &n};
    cudaError_t status = cudaLaunchKernel(reinterpret_cast<const void *>(kernel),
                                          dim3(n / 16, n / 16), dim3(16, 16), args, 0, 0);
    return status != cudaSuccess ? status : cudaDeviceSynchronize();
}
