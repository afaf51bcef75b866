#!/usr/bin/env python3
"""Where a PTX load's time goes: the driver calls a loader of PTX can make, timed one against
another in one process, interleaved, medians in µs.

- library, lazy: cuLibraryLoadData + cuLibraryGetKernel. With lazy loading (the driver's
  default) nothing is JIT-compiled yet: a PTX the JIT refuses fails later, at a launch.
- library, eager: the same + cuLibraryGetModule, which loads the library into the current
  context now and so runs the JIT (or finds its result in the driver's JIT cache). cudyn's load
  of PTX does this, so that a refused PTX fails at the load with the JIT's log.
- library, eager, logs: the same with the JIT's info and error log buffers (cudyn passes them).
- module: cuModuleLoadData + cuModuleGetFunction, the module API CuPy loads with; always eager.

Each repetition unloads what it loaded after the clock stops. Usage, on a machine with a GPU:
    python3 scripts/ptx_load_calls.py PTX_FILE [REPETITIONS]
The PTX may be the one `cudyn-bench --images DIR` writes (DIR/peers.ptx); its kernel `saxpy` is
looked up.
"""

import ctypes
import statistics
import sys
import time

LOG_BYTES = 16 * 1024
# CUjit_option values: info and error log buffers and their sizes.
JIT_INFO_BUFFER, JIT_INFO_SIZE, JIT_ERROR_BUFFER, JIT_ERROR_SIZE = 3, 4, 5, 6


def main():
    ptx = open(sys.argv[1], "rb").read().rstrip(b"\0") + b"\0"
    repetitions = int(sys.argv[2]) if len(sys.argv) > 2 else 101
    cuda = ctypes.CDLL("libcuda.so.1")

    def check(status, call):
        if status != 0:
            raise RuntimeError(f"{call} failed with CUresult {status}")

    check(cuda.cuInit(0), "cuInit")
    context = ctypes.c_void_p()
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), 0), "cuDevicePrimaryCtxRetain")
    check(cuda.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    name = b"saxpy"
    info, error = ctypes.create_string_buffer(LOG_BYTES), ctypes.create_string_buffer(LOG_BYTES)
    options = (ctypes.c_int * 4)(JIT_INFO_BUFFER, JIT_INFO_SIZE, JIT_ERROR_BUFFER, JIT_ERROR_SIZE)
    values = (ctypes.c_void_p * 4)(
        ctypes.cast(info, ctypes.c_void_p), LOG_BYTES, ctypes.cast(error, ctypes.c_void_p),
        LOG_BYTES,
    )

    def library(eager, logs):
        library, kernel, module = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        start = time.perf_counter_ns()
        if logs:
            check(cuda.cuLibraryLoadData(ctypes.byref(library), ptx, options, values, 4, None,
                                         None, 0), "cuLibraryLoadData")
        else:
            check(cuda.cuLibraryLoadData(ctypes.byref(library), ptx, None, None, 0, None, None,
                                         0), "cuLibraryLoadData")
        if eager:
            check(cuda.cuLibraryGetModule(ctypes.byref(module), library), "cuLibraryGetModule")
        check(cuda.cuLibraryGetKernel(ctypes.byref(kernel), library, name), "cuLibraryGetKernel")
        elapsed = time.perf_counter_ns() - start
        check(cuda.cuLibraryUnload(library), "cuLibraryUnload")
        return elapsed

    def module():
        module, function = ctypes.c_void_p(), ctypes.c_void_p()
        start = time.perf_counter_ns()
        check(cuda.cuModuleLoadData(ctypes.byref(module), ptx), "cuModuleLoadData")
        check(cuda.cuModuleGetFunction(ctypes.byref(function), module, name),
              "cuModuleGetFunction")
        elapsed = time.perf_counter_ns() - start
        check(cuda.cuModuleUnload(module), "cuModuleUnload")
        return elapsed

    paths = {
        "library, lazy": lambda: library(False, False),
        "library, eager": lambda: library(True, False),
        "library, eager, logs": lambda: library(True, True),
        "module": module,
    }
    samples = {path: [] for path in paths}
    for repetition in range(repetitions + 1):
        order = list(paths.items())
        if repetition % 2:
            order.reverse()
        for path, load in order:
            elapsed = load()
            if repetition:  # the first round fills the driver's JIT cache
                samples[path].append(elapsed / 1e3)
    for path, times in samples.items():
        print(f"{path:>22}: median {statistics.median(times):7.1f} µs, min {min(times):7.1f} µs")


if __name__ == "__main__":
    main()
