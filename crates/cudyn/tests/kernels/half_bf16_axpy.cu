// Half and bfloat16 arithmetic from CUDA's own headers, found with no -I.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

// out_half[i] = a * x[i] + y[i] computed in __half, out_bf16[i] the same in __nv_bfloat16;
// the inputs are floats, converted on the device so the host needs no half type.
extern "C" __global__ void half_bf16_axpy(float a, const float* x, const float* y,
                                          float* out_half, float* out_bf16,
                                          unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    __half h = __hfma(__float2half(a), __float2half(x[i]), __float2half(y[i]));
    __nv_bfloat16 b = __hfma(__float2bfloat16(a), __float2bfloat16(x[i]), __float2bfloat16(y[i]));
    out_half[i] = __half2float(h);
    out_bf16[i] = __bfloat162float(b);
}
