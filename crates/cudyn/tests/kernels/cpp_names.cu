// Kernels with C++ linkage as nvcc users write them: a template instantiated twice, an overload
// set, a namespaced kernel, and one extern "C" kernel for contrast. Found by their C++ names.

template <typename T>
__global__ void axpy(T a, const T* x, T* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
template __global__ void axpy<float>(float, const float*, float*, int);
template __global__ void axpy<double>(double, const double*, double*, int);

__global__ void scale(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2.0f; }
__global__ void scale(double* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2.0; }

namespace blas {
__global__ void zero(float* x) { x[threadIdx.x] = 0.0f; }
}

extern "C" __global__ void plain(int* x) { x[threadIdx.x] = 1; }
