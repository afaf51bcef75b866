// The NVRTC SAXPY kernel that "Dynamic Loading in the CUDA Runtime" (NVIDIA) loads through the
// runtime; `cudyn demo` runs it, and the command-line tests use it too.
extern "C" __global__
void saxpy(float a, float *x, float *y, float *out, size_t n)
{
  size_t tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (tid < n) {
    out[tid] = a * x[tid] + y[tid];
  }
}
