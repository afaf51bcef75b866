// A block-level reduction with CUB from CCCL, found with no -I.
#include <cub/block/block_reduce.cuh>

constexpr int THREADS = 256;
constexpr int ITEMS_PER_THREAD = 4;

// Each block of THREADS threads sums THREADS * ITEMS_PER_THREAD consecutive ints of `in`
// (missing ones count as 0) into block_sums[blockIdx.x].
extern "C" __global__ void __launch_bounds__(THREADS)
cub_block_sum(const int* in, long long* block_sums, unsigned long long n) {
    using BlockReduce = cub::BlockReduce<long long, THREADS>;
    __shared__ typename BlockReduce::TempStorage temp;
    unsigned long long base =
        (unsigned long long)blockIdx.x * THREADS * ITEMS_PER_THREAD + threadIdx.x;
    long long items[ITEMS_PER_THREAD];
    for (int k = 0; k < ITEMS_PER_THREAD; ++k) {
        unsigned long long i = base + (unsigned long long)k * THREADS;
        items[k] = i < n ? in[i] : 0;
    }
    long long sum = BlockReduce(temp).Sum(items);
    if (threadIdx.x == 0) block_sums[blockIdx.x] = sum;
}
