// SAXPY for any element type, instantiated through a name expression.
template <typename T>
__global__ void saxpy(T a, const T *x, const T *y, T *out, size_t n)
{
    size_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < n) {
        out[tid] = a * x[tid] + y[tid];
    }
}
