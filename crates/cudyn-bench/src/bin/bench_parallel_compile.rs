//! Benchmark: a batch of different sources compiled by `cudyn::compile_all` (the worker processes
//! of cudyn's compile server) against the same sources compiled one after another in one process,
//! each run in a fresh process, cold: NVRTC's start-up and the starts of the compile server and
//! its workers are all counted. Needs no GPU.
//!
//! Run: `cargo build --release -p cudyn-bench --bin bench_parallel_compile -p cudyn-cli` (both
//! with the same profile, so that `cudyn` is beside it), `source
//! ~/.cache/cudyn/venv-cu13.0/bin/activate` (or have the CUDA toolkit), then
//! `target/release/bench_parallel_compile [ROUNDS] [SIZES...]` (defaults: 5 rounds, 8, 32 and 128
//! sources). The worker executable is `CUDYN_WORKER` when set, else the `cudyn` cargo built
//! beside this program (see `cudyn::workers`). Prints, per batch size, the
//! median of each way and their ratio; the runs alternate, and the disk cache is off in them.
//!
//! The sources are the `cudyn` crate's `tests/batch_sources`: five template instantiations each, about 50-80 ms of
//! NVRTC's time on a 16-core H200 host; `CUDYN_BENCH_LINKS` sizes them.

#[path = "../../../cudyn/tests/batch_sources/mod.rs"]
mod batch_sources;

#[path = "../durations.rs"]
mod durations;

use std::process::Command;
use std::time::{Duration, Instant};

use durations::median;

use cudyn::compile::{compile_all_on, compile_batch, Arch, BatchRun, Program};

/// The architecture compiled for: no GPU is needed.
const ARCH: Arch = Arch::new(9, 0);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--one") {
        return one_run(&args[1], args[2].parse().expect("a count"));
    }
    let rounds: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(5);
    let sizes: Vec<usize> = match args.get(1..) {
        Some(sizes) if !sizes.is_empty() => {
            sizes.iter().map(|s| s.parse().expect("a size")).collect()
        }
        _ => vec![8, 32, 128],
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "compiling N different sources (five template instantiations each) for {ARCH}, each run \
         in a fresh process, cold, {cores} cores, median of {rounds} runs"
    );
    for count in sizes {
        let (mut one_by_one, mut batch, mut how) = (Vec::new(), Vec::new(), String::new());
        for _ in 0..rounds {
            one_by_one.push(run_child("one-by-one", count).0);
            let (time, run) = run_child("batch", count);
            batch.push(time);
            how = run;
        }
        let (one_by_one, batch) = (median(one_by_one), median(batch));
        println!(
            "{count:>4} sources: one after another {:>8.1} ms, compile_all {:>8.1} ms, \
             speed-up {:.2}x  [{how}]",
            ms(one_by_one),
            ms(batch),
            one_by_one.as_secs_f64() / batch.as_secs_f64()
        );
    }
}

/// Runs this program again for one timed run of `mode`; its time and how the batch ran.
fn run_child(mode: &str, count: usize) -> (Duration, String) {
    let exe = std::env::current_exe().expect("the benchmark's own path");
    let output = Command::new(exe)
        .args(["--one", mode, &count.to_string()])
        .env("CUDYN_CACHE", "off")
        .output()
        .expect("the benchmark runs itself");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "a run failed: {text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let (micros, how) = text.trim().split_once(' ').unwrap_or((text.trim(), ""));
    let micros: u64 = micros.parse().expect("the run prints its time");
    (Duration::from_micros(micros), how.to_owned())
}

/// One timed run, from this process's start of work: prints microseconds and how it ran.
fn one_run(mode: &str, count: usize) {
    let start = Instant::now();
    let programs = programs(count);
    let (results, how) = match mode {
        "one-by-one" => (compile_all_on(&programs, 1), "one thread".to_owned()),
        _ => {
            let batch = compile_batch(&programs);
            let how = match &batch.run {
                BatchRun::Workers { workers, .. } => format!("{workers} worker processes"),
                BatchRun::InProcess { why, .. } => format!("in this process: {why}"),
                other => format!("{other:?}"),
            };
            (batch.results, how)
        }
    };
    let elapsed = start.elapsed();
    for result in results {
        let compiled = result.expect("every source compiles");
        assert_eq!(compiled.lowered_names().count(), 5);
    }
    println!("{} {how}", elapsed.as_micros());
}

/// `count` different sources of the targets' size (see `batch_sources`).
fn programs(count: usize) -> Vec<Program> {
    let links = batch_sources::links();
    (0..count)
        .map(|k| {
            batch_sources::INSTANTIATIONS.into_iter().fold(
                Program::new(batch_sources::batch_source(
                    k,
                    "bench_parallel_compile",
                    links,
                ))
                .name(format!("poly_{k}.cu"))
                .arch(ARCH),
                Program::name_expression,
            )
        })
        .collect()
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}
