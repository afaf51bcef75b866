#!/usr/bin/env python3
"""CuPy's warm disk-cache start on the SAXPY of cudyn's cache benchmark, measured the same way.

Each start is a new Python process (this script run again with --child) that imports CuPy, creates
the CUDA context (device 0, a one-element allocation, which is a memset and runs no kernel, and a
synchronize) and only then times source to kernel handle: cupy.RawModule(code=...) +
get_function("saxpy"), which compiles or finds the module, loads it (cuModuleLoadData) and looks
the kernel up (cuModuleGetFunction), with CUPY_CACHE_DIR holding the compiled module from an
earlier start (warm) or empty (cold). Import and context creation are reported apart and left out,
as cudyn-bench's bench_cache leaves them out.

Nothing is compiled in the process before the clock starts (the process checks that CuPy's
compiler has no per-process state yet), so a warm start counts what CuPy does once per process
before it can look its disk cache up: opening NVRTC for its version and compiling an empty source
with it (`_preprocess('')` in cupy/cuda/compiler.py, whose output is part of every cache key), and
reading CuPy's own headers (also part of the key). A cudyn warm start pays its first-use costs the
same way. Each start checks afterwards that it was what it claims: a warm start wrote nothing to
the cache, a cold one wrote the module.

(a2), reported apart and not a process's start: the warm start after CuPy compiled another kernel
in the same process (untimed), so that the one-time work above is already done; the difference
with (a) is that work. A measurement that builds its buffers with cupy.ones or cupy.full (CuPy's
fill kernel) before the clock measures (a2), not (a).

Run on a machine with a GPU and CuPy: python3 crates/cudyn-bench/peers/bench_cupy_cache.py [--starts N]
The caches are temporary folders; the user's CuPy cache is never touched.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

from fresh_process import run_fresh

RESULT = "cupy-bench-cache:"
SAXPY = os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "..", "..", "cudyn", "tests", "kernels", "saxpy.cu",
)
# Compiled before the clock by the (a2) starts only.
OTHER_KERNEL = 'extern "C" __global__ void bench_cupy_cache_other(float *p) { p[0] = 1.0f; }'


def cache_files(folder):
    return set(os.listdir(folder)) if os.path.isdir(folder) else set()


def child(source_path, mode):
    """One start: prints import, context and source-to-kernel times in nanoseconds, and the number
    of files the timed part wrote to the cache. Before the clock, mode `start` compiles nothing
    and `after-compile` compiles OTHER_KERNEL."""
    start = time.perf_counter_ns()
    import cupy
    import cupy.cuda.compiler

    imported = time.perf_counter_ns() - start
    with open(source_path) as f:
        source = f.read()
    start = time.perf_counter_ns()
    cupy.cuda.Device(0).use()
    cupy.zeros(1, dtype=cupy.float32)
    cupy.cuda.runtime.deviceSynchronize()
    context = time.perf_counter_ns() - start
    # Per process, CuPy's compiler keeps NVRTC's output for an empty source, part of every key.
    if getattr(cupy.cuda.compiler, "_empty_file_preprocess_cache", None):
        sys.exit("bench_cupy_cache: CuPy compiled something before the clock started")
    if mode == "after-compile":
        cupy.RawKernel(OTHER_KERNEL, "bench_cupy_cache_other").compile()
    folder = os.environ["CUPY_CACHE_DIR"]
    before = cache_files(folder)
    start = time.perf_counter_ns()
    module = cupy.RawModule(code=source)
    module.get_function("saxpy")
    kernel = time.perf_counter_ns() - start
    written = cache_files(folder) - before
    print(f"{RESULT} {imported} {context} {kernel} {len(written)}", flush=True)


def run_child(source_path, cache_dir, mode, warm):
    words, failure = run_fresh(__file__, [source_path, mode], cache_dir, RESULT)
    if words is None:
        sys.exit(f"bench_cupy_cache: a start failed ({failure})")
    *figures, written = (int(n) for n in words)
    if warm == bool(written):
        sys.exit(f"bench_cupy_cache: a {'warm' if warm else 'cold'} start "
                 f"{'wrote to' if written else 'wrote nothing to'} its cache")
    return figures


def ms(nanos):
    return nanos / 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=11, help="process starts (default 11)")
    parser.add_argument("--child", nargs=2, metavar=("SOURCE", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    if args.starts < 1:
        parser.error("--starts must be at least 1")
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # no CuPy, no driver, no GPU: say which and stop
        sys.exit(f"bench_cupy_cache: needs CuPy and a GPU: {error}")

    with tempfile.TemporaryDirectory() as scratch:
        source_path = os.path.join(scratch, "saxpy.cu")
        with open(SAXPY) as f:
            saxpy = f.read()
        # A source of this run only, so that no cache of an earlier run can answer.
        with open(source_path, "w") as f:
            f.write(f"{saxpy}\n// bench_cupy_cache run {time.time_ns()}\n")
        warm_cache = os.path.join(scratch, "warm")
        run_child(source_path, warm_cache, "start", warm=False)  # fills the warm cache
        warm, cold, after_compile = [], [], []
        for start in range(args.starts):
            warm.append(run_child(source_path, warm_cache, "start", warm=True))
            cold.append(run_child(source_path, os.path.join(scratch, f"cold-{start}"), "start",
                                  warm=False))
            after_compile.append(run_child(source_path, warm_cache, "after-compile", warm=True))

    def column(samples, at):
        return statistics.median(sample[at] for sample in samples)

    everything = warm + cold + after_compile
    print(f"CuPy {cupy.__version__} cache (medians of {args.starts} process starts each; "
          "import and context creation excluded)")
    print(f"  import cupy (new process)                     {ms(column(everything, 0)):>10.3f} ms")
    print(f"  context creation (new process)                {ms(column(everything, 1)):>10.3f} ms")
    print(f"  (a) source -> kernel, warm disk cache         {ms(column(warm, 2)):>10.3f} ms")
    print(f"  (c) source -> kernel, cold (empty cache)      {ms(column(cold, 2)):>10.3f} ms")
    after = ms(column(after_compile, 2))
    print(f"  (a2) (a) after another kernel's compile       {after:>10.3f} ms"
          "  (not a start: CuPy's one-time NVRTC probe done untimed)")
    print(f"warm disk-cache start, source to kernel handle, context excluded: "
          f"CuPy {ms(column(warm, 2)):.3f} ms (median of {args.starts} process starts)")


if __name__ == "__main__":
    main()
