// A kernel compiled into this program by nvcc, its handle taken with cudaGetKernel (as in the
// third use case of "Dynamic Loading in the CUDA Runtime", NVIDIA), handed to cudyn through the
// C API: cudyn reads its parameter layout, refuses launches whose count or sizes differ, and
// launches it with checked arguments. Releasing cudyn's handle leaves the kernel loaded: the
// program's own runtime launches it afterwards.
//
// Build: nvcc -std=c++17 -cudart static -I crates/cudyn-capi/include foreign_kernel.cu \
//            -L target/debug -lcudyn_capi -Xlinker -rpath -Xlinker target/debug
// Exit status: 0 when every check holds, 1 on a failure, 3 when there is no GPU.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#include "cudyn.h"

__global__ void scale(float *data, float factor, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) data[i] *= factor;
}

static int failures = 0;

static void check(bool holds, const char *what) {
    if (!holds) {
        std::printf("FAIL %s (last cudyn message: %s)\n", what, cudyn_last_error());
        failures++;
    }
}

static bool matches(const std::vector<float> &got, const std::vector<float> &input, float by) {
    for (size_t i = 0; i < got.size(); i++) {
        if (got[i] != input[i] * by) return false;
    }
    return true;
}

int main() {
    cudaKernel_t raw = nullptr;
    cudaError_t error = cudaGetKernel(&raw, reinterpret_cast<const void *>(scale));
    if (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver) {
        std::printf("no GPU: cudaGetKernel: %s\n", cudaGetErrorString(error));
        return 3;
    }
    if (error != cudaSuccess) {
        std::printf("FAIL cudaGetKernel: %s\n", cudaGetErrorString(error));
        return 1;
    }

    cudyn_kernel *kernel = nullptr;
    check(cudyn_kernel_from_raw(raw, &kernel) == CUDYN_SUCCESS, "cudyn_kernel_from_raw");
    void *back = nullptr;
    check(cudyn_kernel_raw(kernel, &back) == CUDYN_SUCCESS && back == raw,
          "cudyn_kernel_raw gives the same handle back");

    // void scale(float *data, float factor, unsigned long long n): 8 bytes at 0, 4 at 8, 8 at 16.
    size_t count = 0;
    check(cudyn_kernel_param_count(kernel, &count) == CUDYN_SUCCESS && count == 3,
          "three parameters");
    const cudyn_param_layout expected[3] = {{0, 8}, {8, 4}, {16, 8}};
    for (size_t i = 0; i < 3; i++) {
        cudyn_param_layout layout = {0, 0};
        check(cudyn_kernel_param(kernel, i, &layout) == CUDYN_SUCCESS &&
                  layout.offset == expected[i].offset && layout.size == expected[i].size,
              "the parameter layout of scale");
    }
    cudyn_param_layout beyond;
    check(cudyn_kernel_param(kernel, 3, &beyond) == CUDYN_ERROR_INVALID_ARGUMENT,
          "no fourth parameter");

    const unsigned long long n = 100000;
    std::vector<float> input(n);
    for (size_t i = 0; i < n; i++) input[i] = static_cast<float>(i % 977) - 400.0f;
    cudyn_buffer *data = nullptr;
    check(cudyn_buffer_alloc(n * sizeof(float), &data) == CUDYN_SUCCESS, "allocating");
    check(cudyn_buffer_copy_from_host(data, 0, input.data(), n * sizeof(float)) == CUDYN_SUCCESS,
          "copying in");
    uint64_t address = 0;
    check(cudyn_buffer_address(data, &address) == CUDYN_SUCCESS, "the buffer's address");

    float factor = 3.0f;
    void *args[] = {&address, &factor, const_cast<unsigned long long *>(&n)};
    size_t sizes[] = {sizeof address, sizeof factor, sizeof n};
    cudyn_launch_config config = {{(unsigned)((n + 255) / 256), 1, 1}, {256, 1, 1}, 0, nullptr};
    check(cudyn_launch(kernel, &config, args, 2, sizes) == CUDYN_ERROR_LAUNCH,
          "two arguments for three parameters are refused");
    size_t wrong_sizes[] = {sizeof address, sizeof(double), sizeof n};
    check(cudyn_launch(kernel, &config, args, 3, wrong_sizes) == CUDYN_ERROR_LAUNCH,
          "a double for the float factor is refused");
    cudyn_launch_config too_large = config;
    too_large.block.x = 4096;
    check(cudyn_launch(kernel, &too_large, args, 3, sizes) == CUDYN_ERROR_LAUNCH,
          "a block of 4096 threads is refused");
    check(cudyn_launch(kernel, &config, args, 3, sizes) == CUDYN_SUCCESS, "the checked launch");
    check(cudyn_synchronize() == CUDYN_SUCCESS, "synchronizing");

    std::vector<float> got(n);
    check(cudyn_buffer_copy_to_host(data, 0, got.data(), n * sizeof(float)) == CUDYN_SUCCESS,
          "copying out");
    check(matches(got, input, 3.0f), "cudyn's launch scaled every element by 3 as the CPU does");

    // Borrowed: releasing cudyn's handle unloads nothing; the program's runtime launches it.
    check(cudyn_kernel_release(kernel) == CUDYN_SUCCESS, "releasing the kernel");
    factor = 0.5f;
    error = cudaLaunchKernel(reinterpret_cast<const void *>(raw), dim3(config.grid.x),
                             dim3(256), args, 0, nullptr);
    check(error == cudaSuccess, "cudaLaunchKernel of the handle after cudyn released it");
    check(cudaDeviceSynchronize() == cudaSuccess, "cudaDeviceSynchronize");
    check(cudyn_buffer_copy_to_host(data, 0, got.data(), n * sizeof(float)) == CUDYN_SUCCESS,
          "copying out again");
    check(matches(got, input, 1.5f), "the runtime's launch scaled every element by 0.5 more");
    check(cudyn_buffer_free(data) == CUDYN_SUCCESS, "freeing");

    std::printf("%d failures\n", failures);
    return failures == 0 ? 0 : 1;
}
