// A 64 MiB uninitialized __device__ table: the image stays small, but a library of this code
// loaded into a device's context is plain to see in that device's memory.
__device__ unsigned int table[16 << 20];

extern "C" __global__ void touch(unsigned int *out) {
    table[threadIdx.x] = threadIdx.x;
    out[threadIdx.x] = table[threadIdx.x] + 1;
}
