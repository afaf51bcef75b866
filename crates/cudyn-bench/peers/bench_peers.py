#!/usr/bin/env python3
"""CuPy and cuda.core on the kernels and rows of cudyn-bench, measured the same way; prints JSON.

The rows and their ids are those of crates/cudyn-bench (scripts/bench-peers merges the two):

- launch.empty, launch.saxpy, launch.args21, launch.struct: host time per launch, median of
  ROUNDS bursts of BURST launches with a synchronize after each burst (untimed), kernels loaded
  from the cubin cudyn-bench wrote (--images);
- load.cubin, load.ptx, load.fatbin: a real load of that image, from its bytes in memory, with the
  lookup of `saxpy`, median of LOADS; each repetition loads anew and the unload (dropping the last
  reference) happens after the clock stops. CuPy: `cupy.cuda.Module().load(bytes)`
  (cuModuleLoadData, the call CuPy's compile cache loads every module with) + `get_function`
  (cuModuleGetFunction). `cupy.RawModule(path=...)` is not used: it memoizes the loaded module per
  path for the life of the process (`_get_raw_module`, `@cupy._util.memoize`), so a second
  RawModule of the same file loads nothing. cuda.core: `ObjectCode.from_<kind>(bytes)` +
  `get_kernel`, where `get_kernel` does the load (cuLibraryLoadData, lazily, once per ObjectCode)
  and cuLibraryGetKernel; cuda.core 1.2 never unloads a library (the cuLibraryUnload of its
  library handle's deleter is commented out in its _resource_handles), so its loads pile up;
- start.cold, start.warm: source text to first completed launch of `saxpy` in a new Python process
  (this script run again), `import`, context creation and buffers done before the clock starts;
  cold with an empty disk cache, warm with one that holds the compile. Each start checks
  afterwards that it was what it claims: a cold start wrote an entry to the cache, a warm one wrote
  nothing. Nothing is compiled in the process before the clock starts (the buffers are copied from
  the host: `cupy.ones` would compile CuPy's fill kernel and so do the warm start's one-time work
  untimed); CuPy's process checks that its compiler's per-process state is still empty. So the
  one-time costs of a library's first compile in a process are counted, as cudyn's are: for CuPy,
  its cache key, which needs NVRTC's version and the output of NVRTC compiling an empty source
  (`_preprocess('')` in `cupy/cuda/compiler.py`, once per process and set of options) even when
  the disk cache holds the module. CuPy: `RawModule(code=source).get_function("saxpy")`, a launch,
  a synchronize, with CUPY_CACHE_DIR set. cuda.core: `Program(source, "c++",
  ProgramOptions(arch=...)).compile("cubin", cache=FileStreamProgramCache(folder))` (its disk
  cache, cuda.core.utils, made at the process's first compile, on the clock; its key asks NVRTC
  its version, which opens NVRTC but compiles nothing), `get_kernel`, `launch`, a synchronize; a
  cuda.core without FileStreamProgramCache compiles without a cache and has no warm figure;
- start.repeat: the same source again in one process (µs), the previous launch's module and kernel
  unreferenced; the median of --starts processes' medians of 21. CuPy keeps every module it
  compiled loaded for the life of the process (the memo above), so its repeat is a lookup,
  cuModuleGetFunction and the launch; cuda.core keeps nothing in memory, so its repeat reads its
  disk cache and loads again.

Run on a machine with a GPU (scripts/bench-peers runs it so, after cudyn-bench):
    python3 crates/cudyn-bench/peers/bench_peers.py --images DIR [--json FILE] [--starts N] \
        [--groups G,...]
--groups measures only those groups of rows: launch, load, start (default all three).
A peer that cannot be imported, or a row it cannot do, is reported with the reason, not fatal.
The JSON gives per peer its version, its rows, the reason for each row it lacks ("missing") and
what each row measured ("notes").
"""

import argparse
import ctypes
import json
import os
import statistics
import sys
import tempfile
import time

from fresh_process import run_fresh

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "..", "kernels", "peers.cu")
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
    """Median milliseconds of LOADS calls of `load_once`, which returns the looked-up kernel: it
    holds the loaded module, whose unload (the kernel dropped) comes after the clock stops."""
    samples = []
    clock = time.perf_counter_ns
    for _ in range(LOADS):
        start = clock()
        kernel = load_once()
        samples.append((clock() - start) / 1e6)
        del kernel
    return median(samples)


def check(what, values, expected):
    if any(v != expected for v in values):
        raise RuntimeError(f"{what} computed a wrong result")


def nvrtc_mapped():
    """Whether an NVRTC library is mapped into this process (Linux; False where unknown)."""
    try:
        with open("/proc/self/maps") as f:
            return "libnvrtc" in f.read()
    except OSError:
        return False


def cache_files(folder):
    """Every file under `folder`: a start that compiles writes one, a disk hit writes none."""
    return {os.path.join(d, name) for d, _, names in os.walk(folder) for name in names}


class CuPy:
    name = "cupy"
    has_disk_cache = True
    notes = {
        "load": "cupy.cuda.Module().load(bytes) (cuModuleLoadData, as CuPy's compile cache loads) "
                "+ get_function (cuModuleGetFunction), a new module each time, unloaded untimed; "
                "cupy.RawModule(path=...) memoizes the module per path, so it would load only once",
        "start.cold": "RawModule(code=source).get_function + launch, CUPY_CACHE_DIR empty",
        "start.warm": "RawModule(code=source).get_function + launch, CUPY_CACHE_DIR holding the "
                      "module (checked: nothing written); counts CuPy's cache key, which runs "
                      "NVRTC on an empty source once per process to learn its version",
        "start.repeat": "RawModule(code=source) again: CuPy keeps the loaded module for the "
                        "process's life (memoized per source and options), so a repeat is a "
                        "lookup + cuModuleGetFunction + the launch, no load",
    }

    def __init__(self):
        import cupy
        import cupy.cuda.compiler
        import numpy

        self.cp, self.np = cupy, numpy
        self.version = cupy.__version__
        cupy.cuda.Device(0).use()
        self.synchronize = cupy.cuda.runtime.deviceSynchronize

    def array(self, host):
        """A device copy of a host array: a copy only (cupy.ones and cupy.full run CuPy's fill
        kernel, which NVRTC compiles on first use and which would warm CuPy's compiler)."""
        return self.cp.asarray(host)

    def launch_rows(self, images, rows, missing):
        cp, np = self.cp, self.np
        module = cp.RawModule(path=os.path.join(images, "peers.cubin"))
        grid, block = ((N + 255) // 256,), (256,)
        x = self.array(np.ones(N, np.float32))
        y = self.array(np.full(N, 2, np.float32))
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

    def load(self, kind, data):
        new_module = self.cp.cuda.Module

        def load_once():
            module = new_module()
            module.load(data)
            return module.get_function("saxpy")  # the Function keeps its module loaded

        return load_once

    def use_cache(self, folder):
        """CuPy reads CUPY_CACHE_DIR when it is imported: it must already name `folder`."""
        if os.environ.get("CUPY_CACHE_DIR") != folder:
            raise RuntimeError(f"CUPY_CACHE_DIR is not {folder}")

    def assert_nothing_compiled(self):
        """CuPy's compiler keeps, per process, NVRTC's output for an empty source (part of every
        cache key): empty means that nothing was compiled or looked up in this process yet."""
        probed = getattr(self.cp.cuda.compiler, "_empty_file_preprocess_cache", None)
        if probed:
            raise RuntimeError("CuPy compiled something before the clock started")

    def source_to_launch(self, source, buffers):
        x, y, out = buffers
        module = self.cp.RawModule(code=source)
        saxpy = module.get_function("saxpy")
        grid = ((START_N + 127) // 128,)
        saxpy(grid, (128,), (self.np.float32(2), x, y, out, self.np.uint64(START_N)))
        self.synchronize()

    def start_buffers(self):
        np = self.np
        return (
            self.array(np.ones(START_N, np.float32)),
            self.array(np.ones(START_N, np.float32)),
            self.cp.zeros(START_N, self.cp.float32),  # a memset, no kernel
        )

    def read(self, buffer):
        return buffer.get()


class CudaCore:
    name = "cuda.core"
    notes = {
        "load": "ObjectCode.from_<kind>(bytes) + get_kernel, which loads (cuLibraryLoadData, "
                "lazily, once per ObjectCode) and looks up (cuLibraryGetKernel); a new ObjectCode "
                "each time; cuda.core 1.2 never unloads a library (the cuLibraryUnload of its "
                "library handle is disabled), so the loads pile up",
        "start.cold": "Program(source).compile('cubin', cache=FileStreamProgramCache(empty "
                      "folder)) + get_kernel + launch",
        "start.warm": "Program(source).compile('cubin', cache=FileStreamProgramCache) holding the "
                      "cubin (checked: nothing written; its key asks NVRTC its version, no "
                      "compile) + get_kernel + launch",
        "start.repeat": "each repeat a hit of FileStreamProgramCache on disk and a new load: "
                        "cuda.core keeps no compiled code in memory (and unloads nothing)",
    }

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
        try:
            from cuda.core.utils import FileStreamProgramCache

            self.file_cache = FileStreamProgramCache
        except ImportError:  # cuda.core releases before its program cache
            self.file_cache = None
            self.notes = dict(self.notes, **{
                "start.cold": "Program(source).compile('cubin') + get_kernel + launch, no cache",
                "start.repeat": "Program(source).compile('cubin') again: no cache",
            })
        self.has_disk_cache = self.file_cache is not None
        self.cache_folder, self.cache = None, None
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
        self.struct_row(code.get_kernel("scale"), timed, (x, out), rows, missing)

    def struct_row(self, scale, timed, buffers, rows, missing):
        """The struct row, if this cuda.core passes a struct by value: as a ctypes.Structure or a
        numpy structured scalar. cuda.core 1.2's launch packs each argument in ParamHolder
        (_kernel_arg_handler.pyx), which takes Buffers, Python and numpy scalars and ctypes
        simple types and raises TypeError for anything else ("TODO: support ctypes/numpy
        struct")."""
        np = self.np
        x, out = buffers

        class Scale(ctypes.Structure):
            _fields_ = [
                ("x", ctypes.c_uint64),
                ("out", ctypes.c_uint64),
                ("a", ctypes.c_float),
                ("n", ctypes.c_uint32),
            ]

        layout = np.dtype(
            [("x", np.uint64), ("out", np.uint64), ("a", np.float32), ("n", np.uint32)]
        )
        candidates = [
            ("a ctypes.Structure", Scale(int(x), int(out), 1.5, N)),
            ("a numpy structured scalar",
             np.array([(int(x), int(out), 1.5, N)], dtype=layout)[0]),
        ]
        for _, argument in candidates:
            try:
                rows["launch.struct"] = timed(scale, argument)
            except TypeError:
                continue
            check("scale", self.read_back(out, N), 1.5)
            return
        missing["launch.struct"] = (
            f"cuda.core {self.version} passes no struct by value: its launch takes scalars, "
            f"pointers and Buffers, and {' and '.join(what for what, _ in candidates)} "
            "both raise TypeError"
        )

    def load(self, kind, data):
        make = getattr(self.core.ObjectCode, f"from_{kind}", None)
        if make is None:
            raise RuntimeError(f"this cuda.core has no ObjectCode.from_{kind}")
        return lambda: make(data).get_kernel("saxpy")  # the Kernel keeps its library loaded

    def use_cache(self, folder):
        self.cache_folder = folder

    def assert_nothing_compiled(self):
        """cuda.core keeps no compiler state of its own between compiles: nothing to check."""

    def compile(self, source):
        core = self.core
        program = core.Program(source, code_type="c++", options=core.ProgramOptions(arch=self.arch))
        if self.file_cache is None:
            return program.compile("cubin")
        if self.cache is None:  # one per process, made at its first compile (on the clock)
            self.cache = self.file_cache(self.cache_folder)
        return program.compile("cubin", cache=self.cache)

    def source_to_launch(self, source, buffers):
        core, np = self.core, self.np
        x, y, out = buffers
        saxpy = self.compile(source).get_kernel("saxpy")
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


def child(peer_name, mode, source_path, cache_folder):
    """A new process: context and buffers untimed, then the source to a completed launch. Prints
    the figure and whether NVRTC was already mapped when the clock started (1 or 0)."""
    with open(source_path) as f:
        source = f.read()
    peer = PEERS[peer_name]()
    peer.use_cache(cache_folder)
    buffers = peer.start_buffers()
    peer.synchronize()
    peer.assert_nothing_compiled()
    nvrtc_before = nvrtc_mapped()
    before = cache_files(cache_folder)
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
    written = cache_files(cache_folder) - before
    if peer.has_disk_cache and mode == "warm" and written:
        raise RuntimeError(f"the warm start was a miss: it wrote {sorted(written)}")
    if peer.has_disk_cache and mode == "cold" and not written:
        raise RuntimeError("the cold start wrote nothing to its cache: it compiled nothing")
    print(f"{RESULT} {figure} {int(nvrtc_before)}", flush=True)


def run_child(peer_name, mode, source_path, cache_folder):
    """(figure, whether NVRTC was mapped before the clock) of one new process."""
    words, failure = run_fresh(__file__, [peer_name, mode, source_path, cache_folder],
                               cache_folder, RESULT)
    if words is None:
        raise RuntimeError(f"the {peer_name} {mode} start failed ({failure})")
    figure, nvrtc_before = words
    return float(figure), nvrtc_before == "1"


GROUPS = ("launch", "load", "start")


def measure(peer_class, images, starts, scratch, groups=GROUPS):
    """Every row of `groups` one peer can do: {"version", "rows": {id: figure}, "missing":
    {id: reason}, "notes": {id or group ("load"): what was measured}}."""
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
    if not images:
        for group, ids in (("launch", launch_ids), ("load", load_ids)):
            for row in ids if group in groups else []:
                missing[row] = "no --images folder (cudyn-bench --images writes it)"
    if images and "launch" in groups:
        attempt(launch_ids, lambda: peer.launch_rows(images, rows, missing))
    if images and "load" in groups:
        for row in load_ids:
            kind = row.split(".")[1]

            def load_row(row=row, kind=kind):
                with open(os.path.join(images, "peers." + kind), "rb") as f:
                    data = f.read()
                load = peer.load(kind, data)
                load()
                rows[row] = time_loads(load)

            attempt([row], load_row)
    notes = {"load": peer.notes["load"]} if any(row in rows for row in load_ids) else {}
    if "start" not in groups:
        return {"version": peer.version, "rows": rows, "missing": missing, "notes": notes}

    with open(KERNELS) as f:
        kernels = f.read()
    source_path = os.path.join(scratch, f"{peer.name}.cu")
    with open(source_path, "w") as f:
        f.write(f"{kernels}\n// bench_peers run {time.time_ns()}, {peer.name}\n")
    warm_cache = os.path.join(scratch, f"{peer.name}-warm")
    nvrtc_early = set()

    def starts_row():
        cold, warm = [], []
        run_child(peer.name, "cold", source_path, warm_cache)  # fills the warm cache
        for start in range(starts):
            empty = os.path.join(scratch, f"{peer.name}-cold-{start}")
            figure, early = run_child(peer.name, "cold", source_path, empty)
            cold.append(figure)
            if early:
                nvrtc_early.add("start.cold")
            if peer.has_disk_cache:
                figure, early = run_child(peer.name, "warm", source_path, warm_cache)
                warm.append(figure)
                if early:
                    nvrtc_early.add("start.warm")
        rows["start.cold"] = median(cold)
        if warm:
            rows["start.warm"] = median(warm)
        else:
            missing["start.warm"] = f"no disk cache in {peer.name} {peer.version}"

    attempt(["start.cold", "start.warm"], starts_row)
    attempt(
        ["start.repeat"],
        # The median of several processes' medians, as cudyn-bench's row.
        lambda: rows.__setitem__(
            "start.repeat",
            median([run_child(peer.name, "repeat", source_path, warm_cache)[0]
                    for _ in range(starts)]),
        ),
    )
    for row in ("start.cold", "start.warm", "start.repeat"):
        if row in rows:
            early = "; NVRTC was loaded before the clock started" if row in nvrtc_early else ""
            notes[row] = peer.notes[row] + early
    return {"version": peer.version, "rows": rows, "missing": missing, "notes": notes}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", help="the folder cudyn-bench --images wrote")
    parser.add_argument("--json", help="write the JSON here too")
    parser.add_argument("--starts", type=int, default=5, help="new processes per start figure")
    parser.add_argument("--only", help="one peer: cupy or cuda.core")
    parser.add_argument("--groups", default=",".join(GROUPS),
                        help="groups of rows, comma-separated (default launch,load,start)")
    parser.add_argument("--child", nargs=4, metavar=("PEER", "MODE", "SOURCE", "CACHE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    if args.starts < 1:
        parser.error("--starts must be at least 1")
    groups = args.groups.split(",")
    unknown = [group for group in groups if group not in GROUPS]
    if unknown:
        parser.error(f"--groups: no group {unknown[0]} (groups: {', '.join(GROUPS)})")
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, peer_class in PEERS.items():
            if args.only in (None, name):
                results[name] = measure(peer_class, args.images, args.starts, scratch, groups)
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
