// cuda::std::complex from CCCL's libcu++, found with no -I.
#include <cuda/std/complex>

// out[i] = a[i] * b[i] + conj(a[i]) for interleaved (re, im) float pairs.
extern "C" __global__ void complex_multiply(const cuda::std::complex<float>* a,
                                            const cuda::std::complex<float>* b,
                                            cuda::std::complex<float>* out,
                                            unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] * b[i] + cuda::std::conj(a[i]);
}
