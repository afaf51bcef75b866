//! cudyn-bench: cudyn against the raw CUDA C API and cudarc, measured side by side in one run.
//!
//! It prints one table. Each row is one piece of work done three ways, in the same process (or in
//! new processes of this same program, where the row is about a process's start): by cudyn, by
//! the raw CUDA C API (the driver, runtime and NVRTC cudyn itself opened, called as a C program
//! calls them), and by cudarc; medians over many repetitions, and each figure's ratio to the raw
//! one. "—" marks work with no equivalent. The kernels are `kernels/peers.cu`. Each group's rows
//! are printed, and the `--json` file rewritten, as soon as the group is measured, so that a run
//! stopped part way (a time limit) still shows what it measured.
//!
//! - `launch`: host time per launch of an empty kernel, a 5-argument SAXPY, a 21-argument kernel
//!   and a kernel taking a struct by value (interleaved bursts; the crate `cudyn`'s
//!   tests/launch_timing describes the method).
//! - `load`: `cudaLibraryLoadData`-style load of a cubin, a PTX and a fatbin, with the lookup of
//!   one kernel.
//! - `start`: source to first completed launch in a new process, cold and from a warm disk cache
//!   (context creation apart), and a repeat of the same source in one process.
//! - `lto`: nvJitLink LTO of two LTO-IR pieces against one NVRTC compile of the same code: build
//!   time (`compile::link_lto_programs`, and the same build step by step, each step timed) and
//!   kernel time.
//! - `parallel`: `cudyn::compile::compile_all` of 32 and 128 different sources against NVRTC one
//!   after another, each in a new process.
//! - `sharing`: device and host memory of 100 loads of one 16 MiB image.
//!
//! Usage: `cudyn-bench [--json FILE] [--images DIR] [--only GROUP,...] [--starts N]
//! [--max-ratio PREFIX=RATIO]...`. `--max-ratio load=1.10` makes the run fail when a row whose id
//! starts with `load` (`load.cubin`, `load.ptx`, `load.fatbin`) has cudyn above 1.10x raw in this
//! same run, and `--max-ratio new=1.25` when the load of cubins new to the process (`new.cubin`)
//! is above 1.25x: the regression checks of the GPU run (tests/gpu_overhead.rs runs them). `--json`
//! writes the table for scripts/bench-peers, `--images` writes the cubin, PTX and fatbin the
//! `load` rows load (for peers/bench_peers.py), `--starts` sets the number of new processes per
//! figure of the `start` and `parallel` rows. On a machine without a GPU the groups that need one
//! say so; the program exits non-zero when any group did not run.
//!
//! This crate is cudyn's one home for benchmarks. Its other programs each measure one thing
//! more closely (docs/BENCHMARKS.md gives their figures and commands):
//!
//! - `bench_cache`: a new process's warm start through the compile cache, against the least any
//!   loader can do (needs a GPU);
//! - `bench_curves`: how costs grow (load against image size, lookup and memory against kernels
//!   per library, parallel compile against sources and cores, a cache hit against cache size),
//!   as JSON that `scripts/bench-plots` draws into docs/;
//! - `bench_compile`: NVRTC and nvJitLink through cudyn against the raw calls (the GPU parts say
//!   why they are skipped without one);
//! - `bench_launch_host`: cudyn's host cost per launch on a fake driver, no GPU needed;
//! - `bench_load_host`: the host-side work of a load (detection, checks, hashes), no GPU needed;
//! - `bench_parallel_compile`: `compile_all`'s worker processes against one compile after
//!   another, no GPU needed;
//! - `load_parts`: every way of loading an image, raw and through cudyn, timed apart; how much a
//!   load's neighbours move it (`order`); and the steps of a first launch from a warm disk cache
//!   (needs a GPU);
//! - `nvrtc_start`: NVRTC's start-up in new processes, what each compile worker pays first.
//!
//! The peers written in Python, CuPy and cuda.core, are measured by `peers/bench_peers.py` (the
//! table's rows) and `peers/bench_cupy_cache.py` (CuPy's side of `bench_cache`);
//! `scripts/bench-peers` runs this program and the peers and writes the table.

#[macro_use]
#[path = "../../cudyn/tests/batch_sources/mod.rs"]
mod batch_sources;
#[path = "../../cudyn/tests/footprint/mod.rs"]
mod footprint;
#[path = "../../cudyn/tests/launch_timing/mod.rs"]
mod launch_timing;
#[path = "../../cudyn/tests/peer_arguments/mod.rs"]
mod peer_arguments;
#[path = "../../cudyn/tests/raw_runtime/mod.rs"]
mod raw_runtime;

mod child;
mod compile_rows;
mod in_turn;
mod launch;
mod load;
mod new_sources;
mod report;
mod sharing;
mod spawn;
mod start;

use std::path::PathBuf;
use std::process::ExitCode;

use cudyn::Arch;
use report::{Row, Skipped};

/// The kernels of every row but `lto`, `parallel` and `sharing`.
pub const SOURCE: &str = include_str!("../kernels/peers.cu");

/// What every group of rows gets.
#[derive(Debug)]
pub struct Bench {
    /// The GPU's architecture, or `sm_90` where there is no GPU (for the compile rows).
    pub arch: Arch,
    /// The GPU's name, or why there is none to use.
    pub gpu: Result<String, String>,
    /// New processes per figure of the `start` and `parallel` rows.
    pub starts: usize,
    /// Where to write the images of the `load` rows, if anywhere.
    pub images: Option<PathBuf>,
    /// A folder for this run's files, removed at the end.
    pub scratch: tempfile::TempDir,
    /// Makes this run's sources new to NVRTC and to every cache.
    pub run_tag: u128,
}

impl Bench {
    /// `source` with a comment unique to this run and `tag`.
    pub fn fresh(&self, source: &str, tag: impl std::fmt::Display) -> String {
        format!("{source}\n// cudyn-bench run {}, {tag}\n", self.run_tag)
    }
}

/// A group of rows: its name (for `--only`), whether it needs a GPU, and what measures it.
type Group = (&'static str, bool, fn(&Bench) -> Result<Vec<Row>, String>);

const GROUPS: [Group; 7] = [
    ("launch", true, launch::rows),
    ("load", true, load::rows),
    ("start", true, start::rows),
    ("lto", false, compile_rows::lto_build_rows),
    ("lto-kernel", true, compile_rows::lto_kernel_rows),
    ("parallel", false, compile_rows::parallel_rows),
    ("sharing", true, sharing::rows),
];

#[derive(Debug, Default)]
struct Options {
    json: Option<PathBuf>,
    images: Option<PathBuf>,
    only: Vec<String>,
    starts: Option<usize>,
    /// Row id prefixes and the most cudyn may take of raw on them.
    max_ratios: Vec<(String, f64)>,
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--json" => options.json = Some(value()?.into()),
            "--images" => options.images = Some(value()?.into()),
            "--only" => options.only = value()?.split(',').map(str::to_owned).collect(),
            "--starts" => {
                let starts = value()?;
                options.starts = Some(
                    starts
                        .parse()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or(format!("--starts takes a positive number, not {starts}"))?,
                );
            }
            "--max-ratio" => {
                let limit = value()?;
                let parsed = limit
                    .split_once('=')
                    .and_then(|(prefix, ratio)| Some((prefix.to_owned(), ratio.parse().ok()?)))
                    .filter(|(_, ratio): &(String, f64)| *ratio > 0.0);
                options
                    .max_ratios
                    .push(parsed.ok_or(format!("--max-ratio takes PREFIX=RATIO, not {limit}"))?);
            }
            "-h" | "--help" => return Err(usage()),
            other => return Err(format!("unknown argument {other}\n{}", usage())),
        }
    }
    if let Some(unknown) = options
        .only
        .iter()
        .find(|name| !GROUPS.iter().any(|(group, ..)| group == name))
    {
        return Err(format!("--only: no group {unknown}\n{}", usage()));
    }
    Ok(options)
}

fn usage() -> String {
    let groups: Vec<&str> = GROUPS.iter().map(|(name, ..)| *name).collect();
    format!(
        "usage: cudyn-bench [--json FILE] [--images DIR] [--only GROUP,...] [--starts N] \
         [--max-ratio PREFIX=RATIO]...\n\
         groups: {}",
        groups.join(", ")
    )
}

fn main() -> ExitCode {
    let outcome = match std::env::var(child::MODE_ENV) {
        Ok(mode) => child::run(&mode),
        Err(_) => benchmark(),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("cudyn-bench: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The GPU's name and architecture, or why there is none to use.
fn find_gpu() -> Result<(String, Arch), String> {
    match cudyn::Device::count() {
        Ok(0) => Err("the driver sees no GPU".to_owned()),
        Ok(_) => {
            let device = cudyn::set_device(0).map_err(|e| e.to_string())?;
            let name = device.name().map_err(|e| e.to_string())?;
            Ok((name, Arch::current().map_err(|e| e.to_string())?))
        }
        Err(error) => Err(error.to_string().lines().next().unwrap_or("").to_owned()),
    }
}

fn benchmark() -> Result<(), String> {
    let options = parse_options()?;
    // Every compile of the parent is timed or is the reference of one: none through a cache.
    // (The processes of the `start` rows have caches of their own.)
    cudyn::cache::set_enabled(false);
    let gpu = find_gpu();
    let bench = Bench {
        arch: gpu.as_ref().map_or(Arch::new(9, 0), |(_, arch)| *arch),
        gpu: gpu.map(|(name, _)| name),
        starts: options.starts.unwrap_or(5),
        images: options.images,
        scratch: tempfile::tempdir().map_err(|e| format!("a temporary folder: {e}"))?,
        run_tag: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos()),
    };
    let header = format!(
        "cudyn-bench: {}, {}; medians, ratios to the raw CUDA API",
        bench.gpu.as_deref().unwrap_or("no GPU"),
        bench.arch
    );
    let device = serde_json::json!({
        "name": bench.gpu.as_ref().ok(),
        "arch": bench.arch.to_string(),
    });
    // Written after every group, so that a run stopped part way leaves what it measured.
    let write_json = |rows: &[Row], skipped: &[Skipped]| match &options.json {
        Some(path) => {
            let json = report::to_json(&header, &device, rows, skipped);
            std::fs::write(path, format!("{json:#}\n"))
                .map_err(|e| format!("{}: {e}", path.display()))
        }
        None => Ok(()),
    };
    report::print_header(&header);
    let (mut rows, mut skipped) = (Vec::new(), Vec::new());
    for (name, needs_gpu, measure) in GROUPS {
        if !options.only.is_empty() && !options.only.iter().any(|only| only == name) {
            continue;
        }
        let outcome = match (&bench.gpu, needs_gpu) {
            (Err(reason), true) => Err(format!("needs a GPU: {reason}")),
            _ => measure(&bench),
        };
        match outcome {
            Ok(measured) => {
                report::print_rows(&measured);
                rows.extend(measured);
            }
            Err(reason) => skipped.push(Skipped {
                group: name,
                reason,
            }),
        }
        write_json(&rows, &skipped)?;
    }
    report::print_skipped(&skipped);
    let over = over_limits(&rows, &options.max_ratios);
    if !over.is_empty() {
        return Err(format!(
            "over the limits of --max-ratio:\n{}",
            over.join("\n")
        ));
    }
    match skipped.len() {
        0 => Ok(()),
        count => Err(format!("{count} group(s) of rows not measured (see above)")),
    }
}

/// The rows whose cudyn figure is more than a `--max-ratio` limit times raw's, each said with its
/// figures; a limit that no measured row matches is one too (a check that checked nothing).
fn over_limits(rows: &[Row], limits: &[(String, f64)]) -> Vec<String> {
    let mut over = Vec::new();
    for (prefix, limit) in limits {
        let matching: Vec<&Row> = rows
            .iter()
            .filter(|row| row.id.starts_with(prefix.as_str()))
            .collect();
        if matching.is_empty() {
            over.push(format!("{prefix}: no row measured"));
        }
        for row in matching {
            match row.cudyn.zip(row.raw) {
                Some((cudyn, raw)) if cudyn / raw <= *limit => {}
                Some((cudyn, raw)) => over.push(format!(
                    "{}: cudyn {cudyn:.4} {unit} is {:.3}x raw {raw:.4} {unit}, over {limit}x",
                    row.label,
                    cudyn / raw,
                    unit = row.unit
                )),
                None => over.push(format!("{}: no cudyn or raw figure", row.label)),
            }
        }
    }
    over
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_over_a_limit_are_named_and_a_limit_matching_nothing_fails() {
        let row = |id, raw, cudyn| Row::new(id, id, "ms").figures(Some(raw), Some(cudyn), None);
        let rows = [
            row("load.cubin", 0.010, 0.0105),
            row("load.ptx", 0.040, 0.0450),
            row("launch.empty", 3000.0, 3030.0),
        ];
        let over = over_limits(&rows, &[("load".into(), 1.10)]);
        assert_eq!(over.len(), 1, "{over:?}");
        assert!(
            over[0].starts_with("load.ptx: cudyn 0.0450 ms is 1.125x raw"),
            "{over:?}"
        );
        assert!(over_limits(&rows, &[("launch".into(), 1.02)]).is_empty());
        assert_eq!(
            over_limits(&rows, &[("launch".into(), 1.005)]).len(),
            1,
            "3030 over 3000 is 1.01x"
        );
        assert_eq!(
            over_limits(&rows, &[("start".into(), 2.0)]),
            ["start: no row measured"]
        );
    }
}
