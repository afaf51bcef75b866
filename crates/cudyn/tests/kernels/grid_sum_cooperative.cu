// The sum of `in` in one launch, with a grid-wide synchronization from cooperative groups: each
// block reduces its grid-stride slice of `in` into partial[blockIdx.x], the whole grid waits for
// every partial, then block 0's thread 0 sums them into out[0]. grid.sync() needs a cooperative
// launch (every block resident at once). Blocks are 1-D, of up to 1024 threads; `partial` holds
// gridDim.x floats.
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

extern "C" __global__ void grid_sum(const float* in, float* partial, float* out,
                                    unsigned long long n) {
    cg::grid_group grid = cg::this_grid();
    float sum = 0.0f;
    for (unsigned long long i = grid.thread_rank(); i < n; i += grid.size()) {
        sum += in[i];
    }

    __shared__ float sums[1024];
    const unsigned int t = threadIdx.x;
    sums[t] = sum;
    __syncthreads();
    // A tree over the block, for any block size: the first stride is the largest power of two
    // below it, and a thread adds its partner only when the partner exists.
    unsigned int width = 1;
    while (width < blockDim.x) {
        width <<= 1;
    }
    for (unsigned int stride = width / 2; stride > 0; stride /= 2) {
        if (t < stride && t + stride < blockDim.x) {
            sums[t] += sums[t + stride];
        }
        __syncthreads();
    }
    if (t == 0) {
        partial[blockIdx.x] = sums[0];
    }

    grid.sync();

    if (blockIdx.x == 0 && t == 0) {
        float total = 0.0f;
        for (unsigned int block = 0; block < gridDim.x; ++block) {
            total += partial[block];
        }
        out[0] = total;
    }
}
