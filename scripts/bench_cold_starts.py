#!/usr/bin/env python3
"""Cold starts of every column of the peers table, interleaved: source to first completed launch
in new processes, one of each per round, in an order that rotates from round to round.

The peers table takes each column's cold start from five processes that its program runs one
after another (cudyn-bench for raw, cudyn and cudarc, then crates/cudyn-bench/peers/bench_peers.py
for CuPy and cuda.core), minutes apart. A cold start is dominated by NVRTC's opening and first compile, whose
time varies from process to process by a quarter and drifts with the machine's state, so columns
measured at different times can swap places. Here every round writes a new source and runs the
five measuring processes back to back, so each column sees the same moments of the machine.

The measuring processes are the very ones of the table: cudyn-bench run as its own child
(CUDYN_BENCH_CHILD=first-launch:<raw|cudyn|cudarc>:cold) and `bench_peers.py --child <peer>
cold`, each with an empty cache folder of its own; each checks its launch's result, and the cudyn
and peer processes that they compiled rather than hit a cache. "cudyn, no cache" is cudyn's cold
start with CUDYN_CACHE=off: its difference from "cudyn" is what the compile cache costs a cold
start (finding and remembering the toolchain, the key, the entry written).

Usage, from the repository's root on a machine with a GPU (python3 with CuPy and cuda.core):
    python3 scripts/bench_cold_starts.py --bin DIR [--rounds N]
DIR holds cudyn-bench (`cargo build --release -p cudyn-bench`). $CUDA_HOME/lib64 (default
/usr/local/cuda/lib64) goes first on LD_LIBRARY_PATH, where cudarc looks for NVRTC, as
scripts/bench-peers does. The first round, run while the machine's caches are cold, is left out.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SOURCE = os.path.join(ROOT, "crates", "cudyn-bench", "kernels", "peers.cu")
PEERS_SCRIPT = os.path.join(ROOT, "crates", "cudyn-bench", "peers", "bench_peers.py")
COLUMNS = ["raw", "cudyn", "cudyn, no cache", "cudarc", "cuda.core", "cupy"]
RESULTS = {"cudyn-bench": "cudyn-bench-result:", "peers": "bench-peers-result:"}


def measure(column, bench, source, cache, mode="cold"):
    """The figure of one new process of `column`: the cold start in ms (`mode` "cold"), or the
    median of its repeats of the same source in µs (`mode` "repeat", the table's start.repeat)."""
    if column in ("raw", "cudyn", "cudyn, no cache", "cudarc"):
        framework = column.split(",")[0]
        child = f"first-launch:{framework}:cold" if mode == "cold" else f"repeat:{framework}"
        env = dict(os.environ, CUDYN_BENCH_CHILD=child,
                   CUDYN_BENCH_SOURCE=source, CUDYN_CACHE_DIR=cache)
        env.pop("CUDYN_CACHE", None)
        if column == "cudyn, no cache":
            env["CUDYN_CACHE"] = "off"
        command, marker = [bench], RESULTS["cudyn-bench"]
    else:
        env = dict(os.environ, CUPY_CACHE_DIR=cache)
        command = [sys.executable, PEERS_SCRIPT, "--child",
                   column, mode, source, cache]
        marker = RESULTS["peers"]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    for line in done.stdout.splitlines():
        if done.returncode == 0 and line.startswith(marker):
            return float(line[len(marker):].split()[0])
    said = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    raise RuntimeError(f"exit status {done.returncode}: " + (said[-1] if said else "no output"))


def rounds_of_processes(bench, rounds, columns=COLUMNS, mode="cold"):
    """({column: [figure, one per counted round]}, {column: why it failed}): `rounds` rounds
    counted after a first one left out, each a new source and one measuring process per column
    (see `measure` for `mode`), in an order that rotates from round to round. A column that fails
    once is not run again."""
    with open(SOURCE) as f:
        text = f.read()
    figures = {column: [] for column in columns}
    failures = {}
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(rounds + 1):
            source = os.path.join(scratch, f"round-{round_}.cu")
            with open(source, "w") as f:
                f.write(text + f"\n// cold start round {round_}, {time.time_ns()}\n")
            shift = round_ % len(columns)
            for column in columns[shift:] + columns[:shift]:
                if column in failures:
                    continue
                try:
                    figure = measure(column, bench, source, tempfile.mkdtemp(dir=scratch), mode)
                except RuntimeError as error:
                    failures[column] = str(error)
                    continue
                if round_:
                    figures[column].append(figure)
    return figures, failures


def with_toolkit_libraries():
    """$CUDA_HOME/lib64 first on LD_LIBRARY_PATH, where cudarc looks for NVRTC."""
    toolkit_libs = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "lib64")
    if os.path.isdir(toolkit_libs):
        os.environ["LD_LIBRARY_PATH"] = os.pathsep.join(
            filter(None, [toolkit_libs, os.environ.get("LD_LIBRARY_PATH")]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, "target", "release"),
                        help="the folder holding cudyn-bench")
    parser.add_argument("--rounds", type=int, default=15, help="rounds counted (default 15)")
    args = parser.parse_args()
    with_toolkit_libraries()
    figures, failures = rounds_of_processes(os.path.join(args.bin, "cudyn-bench"), args.rounds)
    raw = statistics.median(figures["raw"]) if figures["raw"] else None
    print(f"cold start, source to first launch, new processes interleaved, {args.rounds} rounds")
    for column in COLUMNS:
        values = sorted(figures[column])
        if not values:
            print(f"{column:>15}: failed: {failures.get(column, 'no figure')}")
            continue
        median = statistics.median(values)
        quartiles = f"{values[len(values) // 4]:.2f}-{values[(3 * len(values)) // 4]:.2f}"
        ratio = f"{median / raw:.3f}x raw" if raw else ""
        print(f"{column:>15}: median {median:7.2f} ms {ratio}, quartiles {quartiles} ms")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
