//! Benchmark of the compile cache: how long a new process takes from a CUDA C++ source to a
//! kernel handle when the disk cache already holds it, against the least any loader can do.
//!
//! Every measurement runs in a new process (this program run again with [`MODE_ENV`] set), which
//! first creates the CUDA context (`set_device(0)`, a synchronize through cudyn and one through
//! the runtime): that time is reported on its own and left out of every figure below.
//!
//! - (a) warm disk cache: `Program::new(source).load()?.kernel("saxpy")`, the cache holding it;
//! - (b) the reference, in the same run: read the same cubin from a file, raw
//!   `cudaLibraryLoadData` + `cudaLibraryGetKernel`;
//! - (c) cold: the same call with an empty cache (NVRTC opened and run);
//! - (d) a repeat in one process: `Program::compile` of the same source again (an in-memory hit),
//!   and the whole `load()?.kernel()` again, medians of many repetitions;
//! - (e) the hit's own part of (a), no GPU work: `Program::compile` for the same architecture,
//!   from the source to the code ready for `cudaLibraryLoadData`, in a new process that creates
//!   no context. It runs alone on a machine without a GPU: `CUDYN_BENCH_CACHE_MODE=hit` with
//!   `CUDYN_BENCH_CACHE_SOURCE` (the source file), `CUDYN_BENCH_CACHE_ARCH` (e.g. `sm_90`) and a
//!   `CUDYN_CACHE_DIR` that holds that compile; it prints `cudyn-bench-cache: 0 <nanoseconds>`.
//!
//! What (a) and (b) count is the same kind of work: both start after the same context creation,
//! which opens the driver and the runtime; neither opens a library while timed ((a) checks that
//! NVRTC is still unmapped afterwards); both read one file of code and hand it to
//! `cudaLibraryLoadData` then `cudaLibraryGetKernel` of that same runtime. (a) adds what the cache
//! is: the key (blake3 of the source and options), the checks of the cache's folders, the entry's
//! checksum, a `stat` of NVRTC's file that the entry names (the compiler unchanged), and cudyn's
//! bookkeeping around the load (the check of the image was done when the entry was made).
//!
//! (a) and (b) are also printed in three parts each ((a): the compile, a cache hit; the load;
//! the kernel lookup. (b): the file read; the load; the lookup), with the page faults the whole
//! start took (`getrusage`, read outside the clock), to show where a new process's time goes.
//!
//! - (f) the floor under (e): the same files read, checked and hashed by a few lines of `std` and
//!   `blake3` ([`cache_floor`]), in a new process without a context: what any cache that checks
//!   what cudyn's checks must do. (e) minus (f) is what cudyn's own code costs a new process.
//! - (g) (a) done with the least work: after the context, (f) then (b)'s `cudaLibraryLoadData` +
//!   `cudaLibraryGetKernel` of the code (f) read, in parts like (a). (g)/(b) is what (a)/(b)
//!   would be if cudyn's own code cost nothing; (a)/(g) is what it costs.
//!
//! Targets: (a) <= 1 ms and <= 2x (b); (d) <= 5 µs. `peers/bench_cupy_cache.py` of this crate
//! measures CuPy's warm disk-cache start on the same source, the same way.
//!
//! Run on a machine with a GPU: `source ~/.cache/cudyn/venv-cu13.0/bin/activate` (or have the
//! CUDA toolkit), then `cargo run --release -p cudyn-bench --bin bench_cache` (`-- --starts N` for
//! N process starts per measurement instead of 11). The caches it uses are temporary folders;
//! the user's cache is never touched.

mod cache_floor;
#[macro_use]
#[path = "../../../../cudyn/tests/raw_runtime/mod.rs"]
mod raw_runtime;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use cudyn::compile::Arch;
use cudyn::{Cache, Library, Program, Result};
use raw_runtime::RawLibrary;

/// Set only in the measuring processes: which measurement to make.
const MODE_ENV: &str = "CUDYN_BENCH_CACHE_MODE";
/// The source file, in the measuring processes.
const SOURCE_ENV: &str = "CUDYN_BENCH_CACHE_SOURCE";
/// The reference cubin file, in the measuring processes.
const CUBIN_ENV: &str = "CUDYN_BENCH_CACHE_CUBIN";
/// The architecture (e.g. `sm_90`) of (e), which asks no GPU.
const ARCH_ENV: &str = "CUDYN_BENCH_CACHE_ARCH";
/// The warm cache's files, for (f) ([`cache_floor::Files::to_env`]).
const FLOOR_ENV: &str = "CUDYN_BENCH_CACHE_FLOOR";

/// Process starts per measurement, unless `--starts N` says otherwise.
const STARTS: usize = 11;
/// Repetitions of (d) in one process.
const REPEATS: usize = 2000;

/// Marks a measuring process's result line among anything else it prints.
const RESULT: &str = "cudyn-bench-cache:";

const SAXPY: &str = include_str!("../../../../cudyn/tests/kernels/saxpy.cu");

/// One measurement, each in a process of its own.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// (a) source to kernel handle, the disk cache warm.
    Warm,
    /// (b) file read + raw `cudaLibraryLoadData` + `cudaLibraryGetKernel`.
    Raw,
    /// (c) source to kernel handle, the cache empty.
    Cold,
    /// (d) the same source again and again in one process.
    Repeat,
    /// (e) source to code from the warm disk cache, no GPU work.
    Hit,
    /// (f) what (e) must do at least, by hand (see [`cache_floor`]).
    Floor,
    /// (g) (f) then (b)'s load and lookup of the code it read: (a) done with the least work.
    Ideal,
}

impl Mode {
    const ALL: [Mode; 7] = [
        Mode::Warm,
        Mode::Raw,
        Mode::Cold,
        Mode::Repeat,
        Mode::Hit,
        Mode::Floor,
        Mode::Ideal,
    ];

    fn name(self) -> &'static str {
        match self {
            Mode::Warm => "warm",
            Mode::Raw => "raw",
            Mode::Cold => "cold",
            Mode::Repeat => "repeat",
            Mode::Hit => "hit",
            Mode::Floor => "floor",
            Mode::Ideal => "ideal",
        }
    }
}

fn main() -> ExitCode {
    let outcome = match std::env::var(MODE_ENV) {
        Ok(mode) => match Mode::ALL.into_iter().find(|m| m.name() == mode) {
            Some(mode) => measure(mode),
            None => Err(format!("unknown {MODE_ENV}={mode}")),
        },
        Err(_) => starts_from_arguments().and_then(benchmark),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("bench_cache: {message}");
            ExitCode::FAILURE
        }
    }
}

// ---------------------------------------------------------------- the measuring process

/// Creates the context (timed; not for `Hit`), makes `mode`'s measurement and prints one result
/// line: context nanoseconds, then the measurement's nanoseconds (two for `Repeat`).
fn measure(mode: Mode) -> std::result::Result<(), String> {
    let source = std::fs::read_to_string(env_path(SOURCE_ENV)?).map_err(|e| e.to_string())?;
    let context = match mode {
        Mode::Hit | Mode::Floor => Duration::ZERO,
        _ => {
            let start = Instant::now();
            create_context().map_err(|e| format!("no CUDA context: {e}"))?;
            start.elapsed()
        }
    };
    let figures = match mode {
        Mode::Warm | Mode::Cold => {
            let faults = minor_faults();
            let start = Instant::now();
            let compiled = Program::new(source.as_str())
                .compile()
                .map_err(|e| e.to_string())?;
            let compiled_at = Instant::now();
            let library = Library::loader()
                .load_compiled(&compiled)
                .map_err(|e| e.to_string())?;
            let loaded_at = Instant::now();
            library.kernel("saxpy").map_err(|e| e.to_string())?;
            let end = Instant::now();
            let faults = minor_faults() - faults;
            let stats = cache_stats()?;
            let served = match mode {
                Mode::Warm => stats.misses == 0 && stats.disk_hits >= 1,
                _ => stats.misses >= 1 && stats.disk_hits == 0,
            };
            if !served {
                return Err(format!(
                    "the {} start was not what it claims to time: {stats:?}",
                    mode.name()
                ));
            }
            if mode == Mode::Warm && nvrtc_mapped() {
                return Err("the warm start opened NVRTC".to_owned());
            }
            // (b) must load what (a) loaded: the cached code is the reference cubin.
            let reference = std::fs::read(env_path(CUBIN_ENV)?).map_err(|e| e.to_string())?;
            if compiled.code() != reference.as_slice() {
                return Err("the cached code differs from the reference cubin".to_owned());
            }
            timed_parts(start, [compiled_at, loaded_at, end], faults)
        }
        Mode::Raw => {
            let cubin = env_path(CUBIN_ENV)?;
            raw_start(|| std::fs::read(&cubin).map_err(|e| format!("{}: {e}", cubin.display())))?.0
        }
        Mode::Hit => {
            let arch: Arch = std::env::var(ARCH_ENV)
                .map_err(|_| format!("{ARCH_ENV} is not set"))?
                .parse()
                .map_err(|e: cudyn::Error| e.to_string())?;
            let start = Instant::now();
            let compiled = Program::new(source.as_str())
                .arch(arch)
                .compile()
                .map_err(|e| e.to_string())?;
            let elapsed = start.elapsed();
            std::hint::black_box(compiled.code());
            let stats = cache_stats()?;
            if stats.misses != 0 || nvrtc_mapped() {
                return Err(format!("the hit was a miss or opened NVRTC: {stats:?}"));
            }
            vec![nanos(elapsed)]
        }
        Mode::Floor => {
            let (files, arch) = floor_inputs()?;
            let start = Instant::now();
            let code = cache_floor::hit(&files, &source, &arch)?;
            let elapsed = start.elapsed();
            std::hint::black_box(code.as_ref());
            vec![nanos(elapsed)]
        }
        Mode::Ideal => {
            let (files, arch) = floor_inputs()?;
            let (figures, code) = raw_start(|| cache_floor::hit(&files, &source, &arch))?;
            let reference = std::fs::read(env_path(CUBIN_ENV)?).map_err(|e| e.to_string())?;
            if code.as_ref() != reference.as_slice() {
                return Err("the floor's code differs from the reference cubin".to_owned());
            }
            figures
        }
        Mode::Repeat => {
            source_to_kernel(&source).map_err(|e| e.to_string())?;
            let compile = median_of_repeats(|| Program::new(source.as_str()).compile().map(drop))?;
            let load = median_of_repeats(|| source_to_kernel(&source))?;
            if cache_stats()?.memory_hits < REPEATS as u64 {
                return Err("the repeats were not served from memory".to_owned());
            }
            vec![nanos(compile), nanos(load)]
        }
    };
    let figures: Vec<String> = std::iter::once(nanos(context))
        .chain(figures)
        .map(|figure| figure.to_string())
        .collect();
    println!("{RESULT} {}", figures.join(" "));
    Ok(())
}

/// A start's figures: its total nanoseconds, the nanoseconds of each part (from `start` to the
/// first mark, then between marks), and the page faults it took.
fn timed_parts(start: Instant, marks: [Instant; 3], faults: u64) -> Vec<u64> {
    let mut figures = vec![nanos(marks[2] - start)];
    let mut from = start;
    for mark in marks {
        figures.push(nanos(mark - from));
        from = mark;
    }
    figures.push(faults);
    figures
}

/// The page faults this process has taken that needed no disk read: a process's first touch of
/// a page of its code, data or heap.
fn minor_faults() -> u64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a writable `rusage`; getrusage fills it or fails, leaving it zeroed.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    // SAFETY: zero-initialized, then at most written by getrusage: every field is an integer.
    let usage = unsafe { usage.assume_init() };
    u64::try_from(usage.ru_minflt).unwrap_or(0)
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// The primary context of device 0, current, with the runtime initialized on it.
fn create_context() -> Result<()> {
    cudyn::set_device(0)?;
    cudyn::synchronize()?;
    raw_runtime::synchronize()
}

/// What the cache is here for: from source text to a kernel handle.
fn source_to_kernel(source: &str) -> Result<()> {
    let library = Program::new(source).load()?;
    library.kernel("saxpy")?;
    Ok(())
}

/// Whether NVRTC is mapped into this process (a warm start must not open it).
fn nvrtc_mapped() -> bool {
    std::fs::read_to_string("/proc/self/maps").is_ok_and(|maps| maps.contains("libnvrtc"))
}

fn cache_stats() -> std::result::Result<cudyn::cache::CacheStats, String> {
    let cache = Cache::global().ok_or("the cache is off: CUDYN_CACHE_DIR is not usable")?;
    cache.stats().map_err(|e| e.to_string())
}

/// The median time of `REPEATS` calls of `call`.
fn median_of_repeats(
    mut call: impl FnMut() -> Result<()>,
) -> std::result::Result<Duration, String> {
    let mut times = Vec::with_capacity(REPEATS);
    for _ in 0..REPEATS {
        let start = Instant::now();
        call().map_err(|e| e.to_string())?;
        times.push(start.elapsed());
    }
    Ok(median(times))
}

/// A start by the raw runtime after the context: `read` gives the code (the first part timed),
/// then `cudaLibraryLoadData` and `cudaLibraryGetKernel` of it; its figures, and the code.
fn raw_start<C: AsRef<[u8]>>(
    read: impl FnOnce() -> std::result::Result<C, String>,
) -> std::result::Result<(Vec<u64>, C), String> {
    let faults = minor_faults();
    let start = Instant::now();
    let code = read()?;
    let read_at = Instant::now();
    let library = RawLibrary::load(code.as_ref()).map_err(|e| e.to_string())?;
    let loaded_at = Instant::now();
    library.kernel("saxpy").map_err(|e| e.to_string())?;
    let end = Instant::now();
    let faults = minor_faults() - faults;
    drop(library);
    Ok((timed_parts(start, [read_at, loaded_at, end], faults), code))
}

/// The warm cache's files and the architecture, for (f) and (g).
fn floor_inputs() -> std::result::Result<(cache_floor::Files, String), String> {
    let files = std::env::var(FLOOR_ENV).map_err(|_| format!("{FLOOR_ENV} is not set"))?;
    let arch = std::env::var(ARCH_ENV).map_err(|_| format!("{ARCH_ENV} is not set"))?;
    Ok((cache_floor::Files::from_env(&files)?, arch))
}

fn env_path(name: &str) -> std::result::Result<PathBuf, String> {
    std::env::var_os(name)
        .map(PathBuf::from)
        .ok_or_else(|| format!("{name} is not set"))
}

// ---------------------------------------------------------------- the parent

/// The process starts per measurement: `--starts N` (at least 1), else [`STARTS`].
fn starts_from_arguments() -> std::result::Result<usize, String> {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    match arguments.as_slice() {
        [] => Ok(STARTS),
        [flag, count] if flag == "--starts" => count
            .parse()
            .ok()
            .filter(|&count| count > 0)
            .ok_or_else(|| format!("--starts takes a whole number above 0, not `{count}`")),
        _ => Err("usage: bench_cache [--starts N]".to_owned()),
    }
}

/// Runs every measurement `starts` times, each in a new process, and prints medians and ratios.
fn benchmark(starts: usize) -> std::result::Result<(), String> {
    match cudyn::Device::count() {
        Ok(0) => return Err("needs a GPU: the driver sees none".to_owned()),
        Ok(_) => {}
        Err(error) => return Err(format!("needs a GPU: {error}")),
    }
    // The parent compiles only the reference cubin: not through any cache.
    cudyn::cache::set_enabled(false);
    let scratch = tempfile::tempdir().map_err(|e| e.to_string())?;
    let source = scratch.path().join("saxpy.cu");
    // A source of this run only, so that no cache of an earlier run can answer.
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    std::fs::write(&source, format!("{SAXPY}\n// bench_cache run {run}\n"))
        .map_err(|e| e.to_string())?;
    let compiled = Program::new(std::fs::read_to_string(&source).map_err(|e| e.to_string())?)
        .compile()
        .map_err(|e| e.to_string())?;
    let cubin = scratch.path().join("saxpy.cubin");
    std::fs::write(&cubin, compiled.code()).map_err(|e| e.to_string())?;

    let warm_cache = scratch.path().join("warm");
    let arch = compiled.arch().sm();
    let spawn = |mode: Mode, cache: &Path, floor: &str| {
        run_child(mode, cache, &source, &cubin, &arch, floor)
    };
    spawn(Mode::Cold, &warm_cache, "")?; // fills the warm cache
    let floor_files = cache_floor::Files::find(&warm_cache)?.to_env();

    let mut samples: [Vec<Vec<u64>>; 7] = Default::default();
    for start in 0..starts {
        for (i, mode) in Mode::ALL.into_iter().enumerate() {
            let cache = match mode {
                Mode::Cold => scratch.path().join(format!("cold-{start}")),
                _ => warm_cache.clone(),
            };
            samples[i].push(spawn(mode, &cache, &floor_files)?);
        }
    }
    let figure = |mode: Mode, at: usize| {
        let i = Mode::ALL.iter().position(|&m| m == mode).unwrap_or(0);
        let figures = samples[i]
            .iter()
            .filter_map(|figures| figures.get(at).copied());
        median(figures.collect())
    };
    let column = |mode: Mode, at: usize| Duration::from_nanos(figure(mode, at));
    // (e) and (f) make no context.
    let context = median(
        samples
            .iter()
            .zip(Mode::ALL)
            .filter(|(_, mode)| !matches!(mode, Mode::Hit | Mode::Floor))
            .flat_map(|(figures, _)| figures)
            .map(|figures| figures[0])
            .collect(),
    );
    let context = Duration::from_nanos(context);
    let warm = column(Mode::Warm, 1);
    let raw = column(Mode::Raw, 1);
    let cold = column(Mode::Cold, 1);
    let repeat_compile = column(Mode::Repeat, 1);
    let repeat_load = column(Mode::Repeat, 2);
    let hit = column(Mode::Hit, 1);
    let floor = column(Mode::Floor, 1);
    let ideal = column(Mode::Ideal, 1);

    println!(
        "compile cache, {} (medians of {starts} process starts each; context creation excluded)",
        compiled.arch()
    );
    println!(
        "  context creation (new process)               {:>10.3} ms",
        ms(context)
    );
    println!(
        "  (a) source -> kernel, warm disk cache         {:>10.3} ms",
        ms(warm)
    );
    println!(
        "  (b) read cubin + LibraryLoadData + GetKernel  {:>10.3} ms",
        ms(raw)
    );
    let parts = |mode: Mode| {
        let [first, second, third] = [2, 3, 4].map(|at| us(column(mode, at)));
        let faults = figure(mode, 5);
        format!("{first:>7.1} + {second:>7.1} + {third:>7.1} µs, {faults:>3} page faults")
    };
    println!(
        "      parts of (a): compile (hit) + load + kernel {}",
        parts(Mode::Warm)
    );
    println!(
        "      parts of (b): read + load + kernel          {}",
        parts(Mode::Raw)
    );
    println!(
        "  (c) source -> kernel, cold (empty cache)      {:>10.3} ms",
        ms(cold)
    );
    println!(
        "  (e) of (a): source -> code, no GPU work       {:>10.3} ms",
        ms(hit)
    );
    println!(
        "  (f) of (e): the same work by hand, at least   {:>10.3} ms  ((e)/(f) = {:.2})",
        ms(floor),
        hit.as_secs_f64() / floor.as_secs_f64()
    );
    println!(
        "  (g) (f) + the load and lookup of (b)          {:>10.3} ms  ((g)/(b) = {:.2}, (a)/(g) = {:.2})",
        ms(ideal),
        ideal.as_secs_f64() / raw.as_secs_f64(),
        warm.as_secs_f64() / ideal.as_secs_f64()
    );
    println!(
        "      parts of (g): floor + load + kernel        {}",
        parts(Mode::Ideal)
    );
    println!(
        "  (d) repeat in process: compile (memory hit)   {:>10.3} µs",
        us(repeat_compile)
    );
    println!(
        "      repeat in process: load + kernel         {:>10.3} µs",
        us(repeat_load)
    );
    let ratio = warm.as_secs_f64() / raw.as_secs_f64();
    println!(
        "  (a)/(b) = {ratio:.2} (target <= 2, {}); (a) target <= 1 ms ({}); (c)/(a) = {:.1}; \
         (d) target <= 5 µs ({})",
        verdict(ratio <= 2.0),
        verdict(warm <= Duration::from_millis(1)),
        cold.as_secs_f64() / warm.as_secs_f64(),
        verdict(repeat_compile <= Duration::from_micros(5)),
    );
    println!(
        "  (a) and (b) both begin after the context exists (driver and runtime opened) and open \
         no library while timed; both read one file and call cudaLibraryLoadData + \
         cudaLibraryGetKernel. (a) adds the key, the folder checks, the entry's checksum and \
         a stat of NVRTC's file: (e) is that part without the load."
    );
    println!(
        "warm disk-cache start, source to kernel handle, context excluded: cudyn {:.3} ms \
         (median of {starts} process starts)",
        ms(warm)
    );
    Ok(())
}

/// Runs one measuring process and parses its result line.
fn run_child(
    mode: Mode,
    cache: &Path,
    source: &Path,
    cubin: &Path,
    arch: &str,
    floor: &str,
) -> std::result::Result<Vec<u64>, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let output = Command::new(exe)
        .env(MODE_ENV, mode.name())
        .env(SOURCE_ENV, source)
        .env(CUBIN_ENV, cubin)
        .env(ARCH_ENV, arch)
        .env(FLOOR_ENV, floor)
        .env("CUDYN_CACHE_DIR", cache)
        .env_remove("CUDYN_CACHE")
        .output()
        .map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().find_map(|line| line.strip_prefix(RESULT));
    match (output.status.success(), line) {
        (true, Some(line)) => line
            .split_whitespace()
            .map(|n| n.parse().map_err(|e| format!("{e}")))
            .collect(),
        _ => Err(format!(
            "the {} measurement failed ({}):\n{}{}",
            mode.name(),
            output.status,
            stdout,
            String::from_utf8_lossy(&output.stderr)
        )),
    }
}

fn median<T: Ord + Copy + Default>(mut samples: Vec<T>) -> T {
    samples.sort();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn us(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "missed"
    }
}
