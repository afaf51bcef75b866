#!/usr/bin/env python3
"""CuPy's warm disk-cache start on the SAXPY of cudyn's cache benchmark, measured the same way.

Each start is a new Python process (this script run again with --child) that imports CuPy, creates
the CUDA context (device 0, a small allocation, a synchronize) and only then times source to
kernel handle: cupy.RawModule(code=...) + get_function("saxpy"), with CUPY_CACHE_DIR holding the
compiled module from an earlier start (warm) or empty (cold). Import and context creation are
reported apart and left out, as crates/cudyn/examples/bench_cache.rs leaves them out.

Run on a machine with a GPU and CuPy: python3 scripts/bench_cupy_cache.py [--starts N]
The caches are temporary folders; the user's CuPy cache is never touched.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

RESULT = "cupy-bench-cache:"
SAXPY = os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "..", "crates", "cudyn", "tests", "kernels", "saxpy.cu",
)


def child(source_path):
    """One start: prints import, context and source-to-kernel times in nanoseconds."""
    start = time.perf_counter_ns()
    import cupy

    imported = time.perf_counter_ns() - start
    with open(source_path) as f:
        source = f.read()
    start = time.perf_counter_ns()
    cupy.cuda.Device(0).use()
    cupy.zeros(1, dtype=cupy.float32)
    cupy.cuda.runtime.deviceSynchronize()
    context = time.perf_counter_ns() - start
    start = time.perf_counter_ns()
    module = cupy.RawModule(code=source)
    module.get_function("saxpy")
    kernel = time.perf_counter_ns() - start
    print(f"{RESULT} {imported} {context} {kernel}", flush=True)


def run_child(source_path, cache_dir):
    env = dict(os.environ, CUPY_CACHE_DIR=cache_dir)
    for name in ("CUPY_CACHE_IN_MEMORY", "CUPY_CACHE_SAVE_CUDA_SOURCE"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", source_path],
        env=env, capture_output=True, text=True,
    )
    for line in done.stdout.splitlines():
        if done.returncode == 0 and line.startswith(RESULT):
            return [int(n) for n in line[len(RESULT):].split()]
    sys.exit(
        f"bench_cupy_cache: a start failed (exit status {done.returncode}):\n"
        f"{done.stdout}{done.stderr}"
    )


def ms(nanos):
    return nanos / 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=11, help="process starts (default 11)")
    parser.add_argument("--child", metavar="SOURCE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
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
        run_child(source_path, warm_cache)  # fills the warm cache
        warm, cold = [], []
        for start in range(args.starts):
            warm.append(run_child(source_path, warm_cache))
            cold.append(run_child(source_path, os.path.join(scratch, f"cold-{start}")))

    def column(samples, at):
        return statistics.median(sample[at] for sample in samples)

    everything = warm + cold
    print(f"CuPy {cupy.__version__} cache (medians of {args.starts} process starts each; "
          "import and context creation excluded)")
    print(f"  import cupy (new process)                     {ms(column(everything, 0)):>10.3f} ms")
    print(f"  context creation (new process)                {ms(column(everything, 1)):>10.3f} ms")
    print(f"  (a) source -> kernel, warm disk cache         {ms(column(warm, 2)):>10.3f} ms")
    print(f"  (c) source -> kernel, cold (empty cache)      {ms(column(cold, 2)):>10.3f} ms")
    print(f"warm disk-cache start, source to kernel handle, context excluded: "
          f"CuPy {ms(column(warm, 2)):.3f} ms (median of {args.starts} process starts)")


if __name__ == "__main__":
    main()
