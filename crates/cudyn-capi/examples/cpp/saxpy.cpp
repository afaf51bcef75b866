// SAXPY through cudyn's C++ wrapper (cudyn.hpp): print the version and what CUDA is here,
// compile the kernel with NVRTC for the current GPU, launch it with checked arguments, and
// compare with the CPU.
//
// Build: g++ -std=c++17 -I crates/cudyn-capi/include saxpy.cpp -L target/debug -lcudyn_capi
//            -Wl,-rpath,target/debug -o saxpy
// Exit status: 0 when the GPU agrees with the CPU, 1 on a failure, 3 when there is no GPU.
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <vector>

#include "cudyn.hpp"

namespace {

constexpr int exit_no_gpu = 3;

const char *const saxpy_source = R"(
extern "C" __global__ void saxpy(float a, const float *x, const float *y, float *out, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = __fmaf_rn(a, x[i], y[i]);
}
)";

int run() {
    std::cout << "cudyn " << cudyn::version() << "\n" << cudyn::toolchain_report();
    try {
        if (cudyn::device_count() == 0) {
            std::cout << "no GPU: the driver reports none\n";
            return exit_no_gpu;
        }
    } catch (const cudyn::Error &error) {
        if (error.status() != CUDYN_ERROR_NO_GPU) throw;
        std::cout << "no GPU: " << error.what() << "\n";
        return exit_no_gpu;
    }

    const std::size_t n = 1 << 20;
    std::vector<float> x(n), y(n);
    for (std::size_t i = 0; i < n; i++) {
        x[i] = static_cast<float>(i % 1000) / 7.0f;
        y[i] = 1.0f - static_cast<float>(i % 333);
    }
    // The kernel keeps its library loaded: the Library need not outlive this line.
    cudyn::Kernel saxpy = cudyn::Library::compile(saxpy_source).kernel("saxpy");
    std::cout << saxpy.name() << " takes " << saxpy.params().size() << " parameters\n";

    cudyn::Buffer x_dev = cudyn::Buffer::from(x), y_dev = cudyn::Buffer::from(y);
    cudyn::Buffer out_dev = cudyn::Buffer::alloc(n * sizeof(float));
    out_dev.fill(0xff);
    const float a = 2.5f;
    cudyn::Stream stream = cudyn::Stream::create();
    saxpy.launch(cudyn::LaunchConfig::for_elements(n, 256).stream(stream), a, x_dev, y_dev,
                 out_dev, n);
    stream.synchronize();

    try {
        // An int where the kernel takes a size_t: refused before the driver sees it.
        saxpy.launch(cudyn::LaunchConfig::for_elements(n, 256), a, x_dev, y_dev, out_dev,
                     static_cast<int>(n));
        std::cout << "an int for `size_t n` was launched\n";
        return EXIT_FAILURE;
    } catch (const cudyn::Error &error) {
        std::cout << "an int for `size_t n`: " << error.status_name() << ": " << error.what()
                  << "\n";
        if (error.status() != CUDYN_ERROR_LAUNCH) return EXIT_FAILURE;
    }

    std::vector<float> out = out_dev.to_vector<float>();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; i++) {
        if (out[i] != std::fma(a, x[i], y[i])) wrong++;
    }
    std::cout << n - wrong << " of " << n << " elements agree with the CPU\n";
    return wrong == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

}  // namespace

int main() {
    try {
        return run();
    } catch (const cudyn::Error &error) {
        std::cerr << "saxpy: " << error.status_name() << ": " << error.what() << "\n";
        return EXIT_FAILURE;
    }
}
