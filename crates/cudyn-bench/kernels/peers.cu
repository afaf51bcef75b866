// The kernels every column of cudyn-bench's table runs (cudyn, the raw CUDA API, cudarc, and CuPy
// and cuda.core through peers/bench_peers.py): the same source, compiled the same way.

// Host cost of a launch and nothing else.
extern "C" __global__ void empty() {}

// Five arguments; also the kernel of the load and start rows.
extern "C" __global__ void saxpy(float a, const float *x, const float *y, float *out, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = a * x[i] + y[i];
    }
}

// 21 arguments: a pointer, then five rounds of a 4-, an 8-, a 4- and an 8-byte scalar, so that
// every other argument needs padding to its alignment.
extern "C" __global__ void args21(float *out,
                                  int a0, unsigned long long b0, float c0, double d0,
                                  int a1, unsigned long long b1, float c1, double d1,
                                  int a2, unsigned long long b2, float c2, double d2,
                                  int a3, unsigned long long b3, float c3, double d3,
                                  int a4, unsigned long long b4, float c4, double d4)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        double sum = a0 + a1 + a2 + a3 + a4;
        sum += (double)(b0 + b1 + b2 + b3 + b4);
        sum += c0 + c1 + c2 + c3 + c4;
        sum += d0 + d1 + d2 + d3 + d4;
        out[0] = (float)sum;
    }
}

// One argument, a 24-byte struct passed by value.
struct Scale {
    const float *x;
    float *out;
    float a;
    unsigned int n;
};

extern "C" __global__ void scale(Scale s)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < s.n) {
        s.out[i] = s.a * s.x[i];
    }
}
