// One piece of a two-piece program: a call-heavy kernel whose step lives in the other piece
// (iterate_step.cu), so without link-time optimization every step is a real call.
extern __device__ float step(float x);

extern "C" __global__ void iterate(float *data, int steps, size_t n)
{
    size_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < n) {
        float v = data[tid];
        for (int i = 0; i < steps; ++i) {
            v = step(v);
        }
        data[tid] = v;
    }
}
