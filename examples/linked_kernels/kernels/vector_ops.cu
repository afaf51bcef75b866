// Kernels compiled by nvcc and linked into the Rust program (see build.rs): an ordinary C++
// kernel and one instance of a kernel template.

__global__ void vectorAdd(const float *a, const float *b, float *c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

template <typename T>
__global__ void scale(T *data, T factor, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] *= factor;
}

template __global__ void scale<float>(float *, float, int);
