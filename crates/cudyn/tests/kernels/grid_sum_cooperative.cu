// A two-phase grid-wide sum with cooperative groups: needs a cooperative launch.
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

// Each block reduces a grid-stride slice of `in` into partial[blockIdx.x]; after grid.sync()
// block 0's thread 0 sums partial[0..gridDim.x) into out[0]. blockDim.x must be a power of two
// no larger than 1024.
extern "C" __global__ void grid_sum(const float* in, float* partial, float* out,
                                    unsigned long long n) {
    __shared__ float block_sums[1024];
    cg::grid_group grid = cg::this_grid();
    float sum = 0.0f;
    for (unsigned long long i = grid.thread_rank(); i < n; i += grid.size()) {
        sum += in[i];
    }
    block_sums[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) block_sums[threadIdx.x] += block_sums[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = block_sums[0];
    grid.sync();
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        float total = 0.0f;
        for (unsigned int block = 0; block < gridDim.x; ++block) total += partial[block];
        out[0] = total;
    }
}
