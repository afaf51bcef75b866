/* SAXPY through cudyn's C API: print the version and what CUDA is here, compile the kernel
 * with NVRTC for the current GPU, launch it with a checked launch, and compare with the CPU.
 *
 * Build: cc -std=c11 -I crates/cudyn-capi/include saxpy.c -L target/debug -lcudyn_capi -lm \
 *           -Wl,-rpath,target/debug -o saxpy
 * Exit status: 0 when the GPU agrees with the CPU, 1 on a failure, 3 when there is no GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cudyn.h"

#define EXIT_NO_GPU 3

static const char *const SAXPY =
    "extern \"C\" __global__ void saxpy(float a, const float *x, const float *y, float *out,\n"
    "                                   size_t n) {\n"
    "    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;\n"
    "    if (i < n) out[i] = __fmaf_rn(a, x[i], y[i]);\n"
    "}\n";

/* Prints what failed with cudyn's message and says whether to go on. */
static int ok(cudyn_status status, const char *what) {
    if (status == CUDYN_SUCCESS) return 1;
    fprintf(stderr, "saxpy: %s failed: %s: %s\n", what, cudyn_status_name(status),
            cudyn_last_error());
    return 0;
}

int main(void) {
    printf("cudyn %s\n", cudyn_version());
    char *report = NULL;
    if (!ok(cudyn_toolchain_report(&report), "the toolchain report")) return EXIT_FAILURE;
    fputs(report, stdout);
    cudyn_string_free(report);

    size_t devices = 0;
    cudyn_status status = cudyn_device_count(&devices);
    if (status == CUDYN_ERROR_NO_GPU || (status == CUDYN_SUCCESS && devices == 0)) {
        printf("no GPU: %s\n", status == CUDYN_SUCCESS ? "the driver reports none"
                                                       : cudyn_last_error());
        return EXIT_NO_GPU;
    }
    if (!ok(status, "counting GPUs")) return EXIT_FAILURE;

    int result = EXIT_FAILURE;
    const size_t n = 1 << 20;
    const size_t bytes = n * sizeof(float);
    float *x = malloc(bytes), *y = malloc(bytes), *out = malloc(bytes);
    cudyn_library *library = NULL;
    cudyn_kernel *saxpy = NULL;
    cudyn_buffer *x_dev = NULL, *y_dev = NULL, *out_dev = NULL;
    if (!x || !y || !out) goto done;
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)(i % 1000) / 7.0f;
        y[i] = 1.0f - (float)(i % 333);
    }

    if (!ok(cudyn_library_compile(SAXPY, NULL, NULL, &library), "compiling saxpy")) goto done;
    if (!ok(cudyn_library_kernel(library, "saxpy", &saxpy), "finding saxpy")) goto done;
    /* The kernel keeps its library loaded: this handle is no longer needed. */
    cudyn_library_unload(library);
    library = NULL;

    size_t count = 0;
    if (!ok(cudyn_kernel_param_count(saxpy, &count), "reading the parameters")) goto done;
    printf("saxpy takes %zu parameters:", count);
    for (size_t i = 0; i < count; i++) {
        cudyn_param_layout layout;
        if (!ok(cudyn_kernel_param(saxpy, i, &layout), "reading a parameter")) goto done;
        printf(" %zu@%zu", layout.size, layout.offset);
    }
    printf("\n");

    if (!ok(cudyn_buffer_alloc(bytes, &x_dev), "allocating x") ||
        !ok(cudyn_buffer_alloc(bytes, &y_dev), "allocating y") ||
        !ok(cudyn_buffer_alloc(bytes, &out_dev), "allocating out") ||
        !ok(cudyn_buffer_copy_from_host(x_dev, 0, x, bytes), "copying x") ||
        !ok(cudyn_buffer_copy_from_host(y_dev, 0, y, bytes), "copying y") ||
        !ok(cudyn_buffer_fill(out_dev, 0, 0xff, bytes), "poisoning out"))
        goto done;

    float a = 2.5f;
    uint64_t x_address, y_address, out_address;
    if (!ok(cudyn_buffer_address(x_dev, &x_address), "x's address") ||
        !ok(cudyn_buffer_address(y_dev, &y_address), "y's address") ||
        !ok(cudyn_buffer_address(out_dev, &out_address), "out's address"))
        goto done;
    size_t elements = n;
    void *args[] = {&a, &x_address, &y_address, &out_address, &elements};
    size_t sizes[] = {sizeof a, sizeof x_address, sizeof y_address, sizeof out_address,
                      sizeof elements};
    cudyn_launch_config config = {
        .grid = {(uint32_t)((n + 255) / 256), 1, 1}, .block = {256, 1, 1}};
    if (!ok(cudyn_launch(saxpy, &config, args, 5, sizes), "launching saxpy")) goto done;

    /* A double where the kernel takes a float: refused before the driver sees it. */
    sizes[0] = sizeof(double);
    status = cudyn_launch(saxpy, &config, args, 5, sizes);
    printf("a double for `float a`: %s: %s\n", cudyn_status_name(status), cudyn_last_error());
    if (status != CUDYN_ERROR_LAUNCH) goto done;

    if (!ok(cudyn_buffer_copy_to_host(out_dev, 0, out, bytes), "copying out back")) goto done;
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) {
        if (out[i] != fmaf(a, x[i], y[i])) wrong++;
    }
    printf("%zu of %zu elements agree with the CPU\n", n - wrong, n);
    if (wrong == 0) result = EXIT_SUCCESS;

done:
    cudyn_buffer_free(x_dev);
    cudyn_buffer_free(y_dev);
    cudyn_buffer_free(out_dev);
    cudyn_kernel_release(saxpy);
    cudyn_library_unload(library);
    free(x);
    free(y);
    free(out);
    return result;
}
