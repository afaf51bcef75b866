// Kernels as C++ code names them: templates in a namespace instantiated twice, a nested namespace,
// an overload set, a non-type template argument, and extern "C" kernels. Listed with their
// signatures by Image::kernel_list and Library::kernel_list.

namespace blas {
// y = a x + b y
template <typename T>
__global__ void axpby(T a, const T *x, T b, T *y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b * y[i];
}
template __global__ void axpby<float>(float, const float *, float, float *, unsigned);
template __global__ void axpby<double>(double, const double *, double, double *, unsigned);

namespace detail {
template <int N>
__global__ void fill(int *out) { out[threadIdx.x] = N; }
template __global__ void fill<3>(int *);
}  // namespace detail
}  // namespace blas

__global__ void scale(float *x, int n) { if ((int)threadIdx.x < n) x[threadIdx.x] *= 2.0f; }
__global__ void scale(double *x, int n) { if ((int)threadIdx.x < n) x[threadIdx.x] *= 2.0; }

extern "C" __global__ void plain(int *x) { x[threadIdx.x] = 1; }
extern "C" __global__ void zero_args() {}
