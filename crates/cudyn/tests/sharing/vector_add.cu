// libvector_add: a library built by nvcc with its own static CUDA runtime (-cudart static). Its
// kernel is registered with that runtime instance only; the library hands out a handle to it,
// taken with cudaGetKernel, which any runtime instance, the driver and cudyn can launch.

#include <cuda_runtime.h>

__global__ void vectorAdd(const float *a, const float *b, float *c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

// The shareable handle of vectorAdd, or the runtime's error status.
extern "C" int vector_add_kernel(cudaKernel_t *kernel) {
    return cudaGetKernel(kernel, vectorAdd);
}

// The host entry function of vectorAdd (the address C++ code names as `vectorAdd`), which only
// this library's runtime instance knows.
extern "C" const void *vector_add_entry(void) {
    return reinterpret_cast<const void *>(vectorAdd);
}
