#!/usr/bin/env python3
"""CuPy and cuda.core on the kernels and rows of cudyn-bench, measured the same way; prints JSON.

The rows and their ids are those of crates/cudyn-bench (scripts/bench-peers merges the two):

- launch.empty, launch.saxpy, launch.args21, launch.struct: host time per launch, median of
  ROUNDS bursts of BURST launches with a synchronize after each burst (untimed), kernels loaded
  from the cubin cudyn-bench wrote (--images);
- load.cubin, load.ptx, load.fatbin: load of that image with the lookup of `saxpy`, median of LOADS
  (CuPy loads from the file, as its API takes a path; cuda.core from bytes in memory);
- start.cold, start.warm: source to first completed launch in a new Python process (this script run
  again), `import` and context creation apart; cold with an empty CUPY_CACHE_DIR, warm with one that
  holds the compile (cuda.core has no disk cache: no warm figure);
- start.repeat: the same source again in one process (µs).

Run on a machine with a GPU: python3 scripts/bench_peers.py --images DIR [--json FILE] [--starts N].
A peer that cannot be imported, or a row it cannot do, is reported with the reason, not fatal.
"""

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "..", "crates", "cudyn-bench", "kernels", "peers.cu")
ROUNDS, BURST = 200, 200
LOADS = 51
REPEATS = 21
N = 1024
START_N = 4096
RESULT = "bench-peers-result:"
# The scalars of args21 (int, unsigned long long, float, double) x 5, and the sum it writes.
SCALARS = [(k, 10 + k, 0.5 * k, 0.25 * k) for k in range(1, 6)]
SCALARS_SUM = 91.25


def median(samples):
    return statistics.median(samples) if samples else None


def time_launches(launch_once, synchronize):
    """Median host nanoseconds per launch over ROUNDS bursts of BURST launches."""
    for _ in range(BURST):
        launch_once()
    synchronize()
    samples = []
    clock = time.perf_counter_ns
    for _ in range(ROUNDS):
        start = clock()
        for _ in range(BURST):
            launch_once()
        samples.append((clock() - start) / BURST)
        synchronize()
    return median(samples)


def time_loads(load_once):
    """Median milliseconds of LOADS calls."""
    samples = []
    for _ in range(LOADS):
        start = time.perf_counter_ns()
        load_once()
        samples.append((time.perf_counter_ns() - start) / 1e6)
    return median(samples)


def check(what, values, expected):
    if any(v != expected for v in values):
        raise RuntimeError(f"{what} computed a wrong result")


class CuPy:
    name = "cupy"

    def __init__(self):
        import cupy
        import numpy

        self.cp, self.np = cupy, numpy
        self.version = cupy.__version__
        cupy.cuda.Device(0).use()
        self.synchronize = cupy.cuda.runtime.deviceSynchronize

    def launch_rows(self, images, rows, missing):
        cp, np = self.cp, self.np
        module = cp.RawModule(path=os.path.join(images, "peers.cubin"))
        grid, block = ((N + 255) // 256,), (256,)
        x = cp.ones(N, cp.float32)
        y = cp.full(N, 2, cp.float32)
        out = cp.zeros(N, cp.float32)
        empty = module.get_function("empty")
        rows["launch.empty"] = time_launches(lambda: empty(grid, block, ()), self.synchronize)
        saxpy = module.get_function("saxpy")
        args = (np.float32(3), x, y, out, np.uint64(N))
        rows["launch.saxpy"] = time_launches(lambda: saxpy(grid, block, args), self.synchronize)
        check("saxpy", out.get(), 5.0)
        args21 = module.get_function("args21")
        sum_out = cp.zeros(1, cp.float32)
        scalars = tuple(
            value
            for a, b, c, d in SCALARS
            for value in (np.int32(a), np.uint64(b), np.float32(c), np.float64(d))
        )
        args = (sum_out,) + scalars
        rows["launch.args21"] = time_launches(lambda: args21(grid, block, args), self.synchronize)
        check("args21", sum_out.get(), SCALARS_SUM)
        try:
            scale = module.get_function("scale")
            layout = np.dtype(
                [("x", np.uint64), ("out", np.uint64), ("a", np.float32), ("n", np.uint32)]
            )
            argument = np.array([(x.data.ptr, out.data.ptr, 1.5, N)], dtype=layout)[0]
            rows["launch.struct"] = time_launches(
                lambda: scale(grid, block, (argument,)), self.synchronize
            )
            check("scale", out.get(), 1.5)
        except Exception as error:  # CuPy versions without structured scalars as arguments
            missing["launch.struct"] = f"{type(error).__name__}: {error}"

    def load(self, path, data):
        return lambda: self.cp.RawModule(path=path).get_function("saxpy")

    def source_to_launch(self, source, buffers):
        x, y, out = buffers
        module = self.cp.RawModule(code=source)
        saxpy = module.get_function("saxpy")
        grid = ((START_N + 127) // 128,)
        saxpy(grid, (128,), (self.np.float32(2), x, y, out, self.np.uint64(START_N)))
        self.synchronize()

    def start_buffers(self):
        cp = self.cp
        return cp.ones(START_N, cp.float32), cp.ones(START_N, cp.float32), cp.zeros(
            START_N, cp.float32
        )

    def read(self, buffer):
        return buffer.get()


class CudaCore:
    name = "cuda.core"

    def __init__(self):
        try:
            import cuda.core as core

            core.Device  # noqa: B018 (older releases keep the API in cuda.core.experimental)
        except (ImportError, AttributeError):
            import cuda.core.experimental as core
        try:
            from cuda.bindings import driver
        except ImportError:
            from cuda import cuda as driver
        import numpy

        self.core, self.driver, self.np = core, driver, numpy
        self.version = getattr(core, "__version__", None) or _distribution_version("cuda-core")
        self.device = core.Device(0)
        self.device.set_current()
        self.stream = self.device.default_stream
        major, minor = self.device.compute_capability
        self.arch = f"sm_{major}{minor}"

    def _call(self, result):
        error, *values = result
        if int(error) != 0:
            raise RuntimeError(f"CUDA driver error {error}")
        return values[0] if values else None

    def alloc(self, host):
        nbytes = host.nbytes
        pointer = self._call(self.driver.cuMemAlloc(nbytes))
        self._call(self.driver.cuMemcpyHtoD(pointer, host.ctypes.data, nbytes))
        return pointer

    def read_back(self, pointer, count):
        host = self.np.zeros(count, self.np.float32)
        self._call(self.driver.cuMemcpyDtoH(host.ctypes.data, pointer, host.nbytes))
        return host

    def synchronize(self):
        self.stream.sync()

    def launch_rows(self, images, rows, missing):
        core, np = self.core, self.np
        with open(os.path.join(images, "peers.cubin"), "rb") as f:
            code = core.ObjectCode.from_cubin(f.read())
        config = core.LaunchConfig(grid=(N + 255) // 256, block=256)
        x = self.alloc(np.ones(N, np.float32))
        y = self.alloc(np.full(N, 2, np.float32))
        out = self.alloc(np.zeros(N, np.float32))
        pointer = lambda p: np.uint64(int(p))  # noqa: E731
        stream = self.stream

        def timed(kernel, *args):
            return time_launches(
                lambda: core.launch(stream, config, kernel, *args), self.synchronize
            )

        rows["launch.empty"] = timed(code.get_kernel("empty"))
        rows["launch.saxpy"] = timed(
            code.get_kernel("saxpy"), np.float32(3), pointer(x), pointer(y), pointer(out),
            np.uint64(N),
        )
        check("saxpy", self.read_back(out, N), 5.0)
        sum_out = self.alloc(np.zeros(1, np.float32))
        scalars = [
            value
            for a, b, c, d in SCALARS
            for value in (np.int32(a), np.uint64(b), np.float32(c), np.float64(d))
        ]
        rows["launch.args21"] = timed(code.get_kernel("args21"), pointer(sum_out), *scalars)
        check("args21", self.read_back(sum_out, 1), SCALARS_SUM)

        class Scale(ctypes.Structure):
            _fields_ = [
                ("x", ctypes.c_uint64),
                ("out", ctypes.c_uint64),
                ("a", ctypes.c_float),
                ("n", ctypes.c_uint32),
            ]

        try:
            argument = Scale(int(x), int(out), 1.5, N)
            rows["launch.struct"] = timed(code.get_kernel("scale"), argument)
            check("scale", self.read_back(out, N), 1.5)
        except Exception as error:  # versions that take no struct arguments
            missing["launch.struct"] = f"{type(error).__name__}: {error}"

    def load(self, path, data):
        kind = path.rsplit(".", 1)[-1]
        make = getattr(self.core.ObjectCode, f"from_{kind}", None)
        if make is None:
            raise RuntimeError(f"this cuda.core has no ObjectCode.from_{kind}")
        return lambda: make(data).get_kernel("saxpy")

    def source_to_launch(self, source, buffers):
        core, np = self.core, self.np
        x, y, out = buffers
        options = core.ProgramOptions(arch=self.arch)
        code = core.Program(source, code_type="c++", options=options).compile("cubin")
        saxpy = code.get_kernel("saxpy")
        config = core.LaunchConfig(grid=(START_N + 127) // 128, block=128)
        core.launch(
            self.stream, config, saxpy, np.float32(2), np.uint64(int(x)), np.uint64(int(y)),
            np.uint64(int(out)), np.uint64(START_N),
        )
        self.synchronize()

    def start_buffers(self):
        np = self.np
        return (
            self.alloc(np.ones(START_N, np.float32)),
            self.alloc(np.ones(START_N, np.float32)),
            self.alloc(np.zeros(START_N, np.float32)),
        )

    def read(self, buffer):
        return self.read_back(buffer, START_N)


PEERS = {"cupy": CuPy, "cuda.core": CudaCore}


def _distribution_version(name):
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return None


def child(peer_name, mode, source_path):
    """A new process: context and buffers untimed, then the source to a completed launch."""
    with open(source_path) as f:
        source = f.read()
    peer = PEERS[peer_name]()
    buffers = peer.start_buffers()
    peer.synchronize()
    if mode == "repeat":
        peer.source_to_launch(source, buffers)
        samples = []
        for _ in range(REPEATS):
            start = time.perf_counter_ns()
            peer.source_to_launch(source, buffers)
            samples.append((time.perf_counter_ns() - start) / 1e3)
        figure = median(samples)
    else:
        start = time.perf_counter_ns()
        peer.source_to_launch(source, buffers)
        figure = (time.perf_counter_ns() - start) / 1e6
    check("saxpy", peer.read(buffers[2]), 3.0)
    print(f"{RESULT} {figure}", flush=True)


def run_child(peer_name, mode, source_path, cache_dir):
    env = dict(os.environ, CUPY_CACHE_DIR=cache_dir)
    for name in ("CUPY_CACHE_IN_MEMORY", "CUPY_CACHE_SAVE_CUDA_SOURCE"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", peer_name, mode, source_path],
        env=env, capture_output=True, text=True,
    )
    for line in done.stdout.splitlines():
        if done.returncode == 0 and line.startswith(RESULT):
            return float(line[len(RESULT):])
    raise RuntimeError(
        f"the {peer_name} {mode} start failed (exit status {done.returncode}): "
        f"{(done.stdout + done.stderr).strip()[-2000:]}"
    )


def measure(peer_class, images, starts, scratch):
    """Every row one peer can do: {"version", "rows": {id: figure}, "missing": {id: reason}}."""
    try:
        peer = peer_class()
    except Exception as error:
        return {"unavailable": f"{type(error).__name__}: {error}"}
    rows, missing = {}, {}

    def attempt(ids, what):
        try:
            what()
        except Exception as error:
            for row in ids:
                if row not in rows:
                    missing.setdefault(row, f"{type(error).__name__}: {error}")

    launch_ids = ["launch.empty", "launch.saxpy", "launch.args21", "launch.struct"]
    load_ids = ["load.cubin", "load.ptx", "load.fatbin"]
    if images:
        attempt(launch_ids, lambda: peer.launch_rows(images, rows, missing))
        for row in load_ids:
            path = os.path.join(images, "peers." + row.split(".")[1])

            def load_row(row=row, path=path):
                with open(path, "rb") as f:
                    data = f.read()
                load = peer.load(path, data)
                load()
                rows[row] = time_loads(load)

            attempt([row], load_row)
    else:
        for row in launch_ids + load_ids:
            missing[row] = "no --images folder (cudyn-bench --images writes it)"

    with open(KERNELS) as f:
        kernels = f.read()
    source_path = os.path.join(scratch, f"{peer.name}.cu")
    with open(source_path, "w") as f:
        f.write(f"{kernels}\n// bench_peers run {time.time_ns()}, {peer.name}\n")
    warm_cache = os.path.join(scratch, f"{peer.name}-warm")

    def starts_row():
        cold, warm = [], []
        run_child(peer.name, "cold", source_path, warm_cache)  # fills the warm cache
        for start in range(starts):
            empty = os.path.join(scratch, f"{peer.name}-cold-{start}")
            cold.append(run_child(peer.name, "cold", source_path, empty))
            if peer.name == "cupy":
                warm.append(run_child(peer.name, "warm", source_path, warm_cache))
        rows["start.cold"] = median(cold)
        if warm:
            rows["start.warm"] = median(warm)
        else:
            missing["start.warm"] = "no disk cache"

    attempt(["start.cold", "start.warm"], starts_row)
    attempt(
        ["start.repeat"],
        lambda: rows.__setitem__(
            "start.repeat", run_child(peer.name, "repeat", source_path, warm_cache)
        ),
    )
    return {"version": peer.version, "rows": rows, "missing": missing}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", help="the folder cudyn-bench --images wrote")
    parser.add_argument("--json", help="write the JSON here too")
    parser.add_argument("--starts", type=int, default=5, help="new processes per start figure")
    parser.add_argument("--only", help="one peer: cupy or cuda.core")
    parser.add_argument("--child", nargs=3, metavar=("PEER", "MODE", "SOURCE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    if args.starts < 1:
        parser.error("--starts must be at least 1")
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, peer_class in PEERS.items():
            if args.only in (None, name):
                results[name] = measure(peer_class, args.images, args.starts, scratch)
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
