// A library linked with the shared CUDA runtime (libcudart.so.13): its kernel is registered with
// the one runtime instance of the process that cudyn uses too, so cudyn's cudaGetKernel finds it
// from the host entry function alone.

#include <cuda_runtime.h>

__global__ void vectorAddShared(const float *a, const float *b, float *c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

extern "C" const void *vector_add_shared_entry(void) {
    return reinterpret_cast<const void *>(vectorAddShared);
}
