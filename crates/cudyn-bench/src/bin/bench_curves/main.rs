//! How cudyn's costs grow, as curves measured in one run and written as JSON, raw (the CUDA C
//! API called through the same libraries cudyn opened) beside cudyn wherever there is a raw way:
//!
//! - `load-size`: load + lookup of one kernel against the image's size, 4 KiB to 64 MiB (a cubin
//!   with an initialized `__device__` table of the size), raw `cudaLibraryLoadData` +
//!   `cudaLibraryGetKernel` against `Library::loader().sharing(Sharing::Never).load` +
//!   `kernel`, interleaved; and cudyn's check of the bytes alone (`Image::validate`), which must
//!   stay linear and small next to the driver. Each image is loaded over and over, so the check
//!   is the comparison of its headers and tables with the copy cudyn keeps of what it found whole
//!   twice (the table is data, which the check does not read). Needs a GPU.
//! - `lookup`: the first lookup of a kernel against the kernels in the library, 1 to 10,000
//!   (raw `cudaLibraryGetKernel` against `Library::kernel`), and the device and host memory one
//!   loaded library takes. Needs a GPU.
//! - `compile`: `compile_all`'s speed-up over NVRTC one after another against the number of
//!   sources (1 to 256, all cores) and against the cores (1 to 16, 128 sources); each figure a
//!   new process with an empty cache, everything counted (the workers' start-up included); the
//!   cores are limited by the measuring process's CPU affinity. No GPU needed.
//! - `cache`: a disk-cache hit (`Cache::open` + `Program::compile_in`, a new `Cache` each time
//!   so that its memory does not answer) against the entries in the cache folder, 10 to 100,000
//!   (one real entry, the rest hard links to it under other keys). No GPU needed.
//!
//! Usage: `bench_curves [--json FILE] [--only CURVE,...] [--quick]`. `--quick` takes fewer and
//! smaller points (a dry run on a small machine). The JSON is what `scripts/bench-plots` draws
//! into docs/. On a machine without a GPU the curves that need one are listed as skipped and the
//! program exits non-zero. Run on an H200 host with 16 cores the whole run takes about two
//! minutes (122 s on 2026-12-02).

#[path = "../../../../cudyn/tests/batch_sources/mod.rs"]
mod batch_sources;
#[path = "../../../../cudyn/tests/footprint/mod.rs"]
mod footprint;
#[macro_use]
#[path = "../../../../cudyn/tests/raw_runtime/mod.rs"]
mod raw_runtime;

#[path = "../../in_turn.rs"]
mod in_turn;
#[path = "../../new_sources.rs"]
mod new_sources;
#[path = "../../spawn.rs"]
mod spawn;

mod cache_curve;
mod compile_curve;
mod load_curves;

use std::process::ExitCode;
use std::time::Duration;

use serde_json::{json, Value};

/// Set only in measuring processes: what to measure.
const MODE_ENV: &str = "CUDYN_BENCH_CURVES_CHILD";
/// Marks the result line among anything else a measuring process prints.
const RESULT: &str = "bench-curves-result:";

/// What every curve gets.
#[derive(Debug)]
pub struct Run {
    /// Fewer and smaller points.
    pub quick: bool,
    /// The GPU's architecture, `sm_90` without one (for the compile curves).
    pub arch: cudyn::Arch,
    /// A folder for this run's files, removed at the end.
    pub scratch: tempfile::TempDir,
    /// Makes this run's sources new to NVRTC and every cache.
    pub tag: u128,
}

type Curve = (&'static str, bool, fn(&Run) -> Result<Value, String>);

const CURVES: [Curve; 4] = [
    ("load-size", true, load_curves::load_size),
    ("lookup", true, load_curves::lookup),
    ("compile", false, compile_curve::curves),
    ("cache", false, cache_curve::curve),
];

fn main() -> ExitCode {
    let outcome = match std::env::var(MODE_ENV) {
        Ok(mode) => child(&mode),
        Err(_) => run(),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("bench_curves: {message}");
            ExitCode::FAILURE
        }
    }
}

/// A measuring process: prints its result line.
fn child(mode: &str) -> Result<(), String> {
    let figures = compile_curve::child(mode)?;
    let figures: Vec<String> = figures.iter().map(f64::to_string).collect();
    println!("{RESULT} {}", figures.join(" "));
    Ok(())
}

/// Runs this program in `mode` with `envs` set; the numbers of its result line.
pub fn spawn(mode: &str, envs: &[(&str, &std::ffi::OsStr)]) -> Result<Vec<f64>, String> {
    spawn::spawn(MODE_ENV, RESULT, mode, envs)
}

fn gpu() -> Result<(String, cudyn::Arch), String> {
    match cudyn::Device::count() {
        Ok(0) => Err("the driver sees no GPU".to_owned()),
        Ok(_) => {
            let device = cudyn::set_device(0).map_err(|e| e.to_string())?;
            let name = device.name().map_err(|e| e.to_string())?;
            Ok((name, cudyn::Arch::current().map_err(|e| e.to_string())?))
        }
        Err(error) => Err(error.to_string().lines().next().unwrap_or("").to_owned()),
    }
}

fn run() -> Result<(), String> {
    let (mut json_path, mut only, mut quick) = (None, Vec::new(), false);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--json" => json_path = Some(args.next().ok_or("--json needs a file")?),
            "--only" => {
                let names = args.next().ok_or("--only needs curves")?;
                only = names.split(',').map(str::to_owned).collect();
            }
            "--quick" => quick = true,
            _ => {
                let names: Vec<&str> = CURVES.iter().map(|(name, ..)| *name).collect();
                return Err(format!(
                    "usage: bench_curves [--json FILE] [--only CURVE,...] [--quick]\ncurves: {}",
                    names.join(", ")
                ));
            }
        }
    }
    // Every compile is timed or is the reference of one: none through the process-wide cache.
    cudyn::cache::set_enabled(false);
    let gpu = gpu();
    let run = Run {
        quick,
        arch: gpu
            .as_ref()
            .map_or(cudyn::Arch::new(9, 0), |(_, arch)| *arch),
        scratch: tempfile::tempdir().map_err(|e| format!("a temporary folder: {e}"))?,
        tag: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos()),
    };
    let started = std::time::Instant::now();
    let (mut curves, mut skipped) = (serde_json::Map::new(), Vec::new());
    for (name, needs_gpu, measure) in CURVES {
        if !only.is_empty() && !only.iter().any(|wanted| wanted == name) {
            continue;
        }
        let curve_start = std::time::Instant::now();
        let outcome = match (&gpu, needs_gpu) {
            (Err(reason), true) => Err(format!("needs a GPU: {reason}")),
            _ => measure(&run),
        };
        match outcome {
            Ok(curve) => {
                eprintln!("{name}: {:.1} s", curve_start.elapsed().as_secs_f64());
                println!("{name}: {curve}");
                curves.insert(name.to_owned(), curve);
            }
            Err(reason) => {
                eprintln!("{name}: not measured: {reason}");
                skipped.push(json!({"curve": name, "reason": reason}));
            }
        }
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let document = json!({
        "program": "bench_curves",
        "gpu": gpu.as_ref().ok().map(|(name, _)| name),
        "arch": run.arch.to_string(),
        "cores": cores,
        "quick": quick,
        "seconds": started.elapsed().as_secs_f64(),
        "curves": curves,
        "skipped": skipped,
    });
    if let Some(path) = json_path {
        std::fs::write(&path, format!("{document:#}\n")).map_err(|e| format!("{path}: {e}"))?;
    }
    match skipped.len() {
        0 => Ok(()),
        count => Err(format!("{count} curve(s) not measured (see above)")),
    }
}

/// The median of `samples`, in microseconds.
pub fn median_us(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples
        .get(samples.len() / 2)
        .map_or(f64::NAN, |median| median.as_secs_f64() * 1e6)
}
