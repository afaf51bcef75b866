// The NVRTC SAXPY example of the NVRTC documentation, as "Dynamic Loading in the CUDA Runtime"
// (NVIDIA) loads it through the runtime.
extern "C" __global__ void saxpy(float a, float *x, float *y, float *out, size_t n)
{
    size_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < n) {
        out[tid] = a * x[tid] + y[tid];
    }
}
