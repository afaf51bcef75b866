//! Where a load's time goes, and a warm start's: the calls a loader can make, raw and through
//! cudyn, timed one against another in one process (interleaved, medians in µs), and the steps of
//! a first launch from a warm disk cache, each in a new process. Needs a GPU.
//!
//! `load_parts IMAGE... [--repetitions N]`: for each image (a cubin, PTX or fatbin with a kernel
//! `saxpy`, such as those `cudyn-bench --images DIR` writes), each way below loads it and looks
//! `saxpy` up, its unload not counted:
//!
//! - `driver`: `cuLibraryLoadData` + `cuLibraryGetKernel`, no options. With lazy loading (the
//!   driver's default) nothing is loaded into a context yet, and PTX is not JIT-compiled.
//! - `driver, logs`: the same with the JIT's info and error log buffers, as cudyn passes them.
//! - `driver, eager` and `driver, eager, logs`: the same + `cuLibraryGetModule`, which loads the
//!   library into the current context now and so runs the JIT for PTX (or finds its result in the
//!   driver's JIT cache). cudyn's load of PTX does this.
//! - `runtime`: `cudaLibraryLoadData` + `cudaLibraryGetKernel`, the raw side of `cudyn-bench`.
//! - `module`: `cuModuleLoadData` + `cuModuleGetFunction`, always eager (CuPy's way).
//! - `cudyn check`: `Image::check` alone, the host-side check every load of outside bytes makes.
//! - `cudyn load`: `Library::loader().sharing(Sharing::Never).load`, no lookup.
//! - `cudyn load + kernel` (the `cudyn-bench` row) and the same through the driver backend.
//! - `runtime kernel` and `cudyn kernel`: the first lookup alone, in a library loaded untimed.
//!
//! `load_parts order IMAGE... [--repetitions N]`: how much a load's neighbours move it, for
//! each image: the runtime's load and cudyn's (`cudyn load + kernel`) right after an eager module
//! load and unload (`module`, untimed), each in turn in the place right after it; the two
//! without it, in turn first; and cudyn's check right after the runtime's load (its code and
//! data as a load finds them) and again right after itself. A benchmark that always gives one
//! side the place after `module` favours the other.
//!
//! `load_parts start SOURCE [--starts N]`: the first launch of `saxpy` from a warm disk cache in
//! new processes, cudyn's and raw's interleaved, each step timed: cudyn's finding of the GPU's
//! architecture (`Arch::current`), its cache hit (`Program::compile`), load, lookup, the parameters asked of the driver (`Kernel::params`), the
//! rest of the launch's checks (`Kernel::check`), the launch and synchronize; raw's read of the cubin
//! file, `cudaLibraryLoadData`, `cudaLibraryGetKernel`, the same `cuKernelGetParamInfo` calls
//! (which raw launches need not make), `cudaLaunchKernel` and synchronize. As in
//! `cudyn-bench`'s `start` rows, the context and buffers are made before the clock starts.
//!
//! ```text
//! cargo build --release -p cudyn-bench --bin load_parts
//! target/release/load_parts DIR/peers.cubin DIR/peers.ptx DIR/peers.fatbin
//! target/release/load_parts order DIR/peers.cubin DIR/peers.fatbin
//! target/release/load_parts start crates/cudyn-bench/kernels/peers.cu
//! ```

#[path = "../../../cudyn/tests/raw_runtime/mod.rs"]
mod raw_runtime;

#[path = "../durations.rs"]
mod durations;
#[path = "../in_turn.rs"]
mod in_turn;

use std::ffi::{c_char, c_uint, c_void};
use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use cudarc::driver::sys;
use cudyn::{Backend, DeviceBuffer, Image, LaunchConfig, Library, Program, Sharing};
use durations::median;
use in_turn::in_turn;
use raw_runtime::RawLibrary;

const LOG_BYTES: usize = 16 * 1024;
/// Elements of the warm start's SAXPY, and threads per block.
const N: usize = 4096;
const BLOCK: u32 = 128;
/// Set in the processes of `start`: which side the process times.
const CHILD_ENV: &str = "CUDYN_LOAD_PARTS_CHILD";

/// The ways to load, in the order printed.
const WAYS: [&str; 12] = [
    "driver",
    "driver, logs",
    "driver, eager",
    "driver, eager, logs",
    "runtime",
    "module",
    "cudyn check",
    "cudyn load",
    "cudyn load + kernel",
    "cudyn load + kernel, driver",
    "runtime kernel",
    "cudyn kernel",
];

fn main() -> ExitCode {
    let result = match std::env::var(CHILD_ENV) {
        Ok(side) => start_child(&side),
        Err(_) => run(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("load_parts: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let usage = "usage: load_parts [order] IMAGE... [--repetitions N] | load_parts start SOURCE \
                 [--starts N]";
    let mut arguments: Vec<String> = std::env::args().skip(1).collect();
    let count = |arguments: &mut Vec<String>, flag: &str, default: usize| {
        let Some(at) = arguments.iter().position(|a| a == flag) else {
            return Ok(default);
        };
        let text = arguments.get(at + 1).cloned().unwrap_or_default();
        arguments.drain(at..(at + 2).min(arguments.len()));
        text.parse::<usize>().ok().filter(|&n| n > 0).ok_or(format!(
            "{flag} takes a whole number above 0, not `{text}`\n{usage}"
        ))
    };
    let repetitions = count(&mut arguments, "--repetitions", 101)?;
    let starts = count(&mut arguments, "--starts", 21)?;
    match cudyn::Device::count() {
        Ok(0) => return Err("needs a GPU: the driver sees none".to_owned()),
        Ok(_) => {}
        Err(error) => return Err(format!("needs a GPU: {error}")),
    }
    match arguments.as_slice() {
        [] => Err(usage.to_owned()),
        [start, source] if start == "start" => warm_start(Path::new(source), starts),
        [order, files @ ..] if order == "order" && !files.is_empty() => files
            .iter()
            .try_for_each(|file| neighbours(Path::new(file), repetitions)),
        files => files
            .iter()
            .try_for_each(|file| load_ways(Path::new(file), repetitions)),
    }
}

/// Times every way of [`WAYS`] on the image in `file`, interleaved, and prints their medians.
fn load_ways(file: &Path, repetitions: usize) -> Result<(), String> {
    let image = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut terminated = image.clone();
    if Image::detect(&image).map_err(|e| e.to_string())? == cudyn::ImageKind::Ptx
        && terminated.last() != Some(&0)
    {
        terminated.push(0);
    }
    let mut driver = Driver::new()?;
    let mut samples = vec![Vec::with_capacity(repetitions); WAYS.len()];
    // The first round fills the driver's JIT cache and every lazy state: left out.
    for repetition in 0..=repetitions {
        let mut order: Vec<usize> = (0..WAYS.len()).collect();
        if repetition % 2 == 1 {
            order.reverse();
        }
        for way in order {
            let elapsed = match way {
                0..=5 => driver.load(way, &terminated)?,
                _ => cudyn_way(way, &image)?,
            };
            if repetition > 0 {
                samples[way].push(elapsed);
            }
        }
    }
    println!(
        "{} ({} bytes), {repetitions} repetitions:",
        file.display(),
        image.len()
    );
    for (way, times) in WAYS.iter().zip(samples) {
        let least = times.iter().min().copied().unwrap_or_default();
        let median = median(times);
        println!(
            "  {way:>28}: median {:8.2} µs, least {:8.2} µs",
            micros(median),
            micros(least)
        );
    }
    Ok(())
}

/// The arrangements of `load_parts order`, in the order printed: what each times, in µs.
const ARRANGEMENTS: [&str; 4] = [
    "runtime right after module, then cudyn",
    "cudyn right after module, then runtime",
    "runtime and cudyn in turn first, no module",
    "check after the runtime's load, then again",
];

/// Times the runtime's load and cudyn's in each arrangement of [`ARRANGEMENTS`] on the image
/// in `file`, interleaved, and prints their medians.
fn neighbours(file: &Path, repetitions: usize) -> Result<(), String> {
    let image = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut driver = Driver::new()?;
    let (runtime, module, check, cudyn) = (4, 5, 6, 8);
    // Per arrangement, the two figures it times.
    let mut samples = vec![[Vec::new(), Vec::new()]; ARRANGEMENTS.len()];
    for repetition in 0..=repetitions {
        let mut figures = [[Duration::ZERO; 2]; ARRANGEMENTS.len()];
        driver.load(module, &image)?;
        figures[0] = [driver.load(runtime, &image)?, cudyn_way(cudyn, &image)?];
        driver.load(module, &image)?;
        let cudyn_first = cudyn_way(cudyn, &image)?;
        figures[1] = [driver.load(runtime, &image)?, cudyn_first];
        let (runtime_time, cudyn_time) = in_turn(
            repetition,
            || driver.load(runtime, &image),
            || cudyn_way(cudyn, &image),
        )?;
        figures[2] = [runtime_time, cudyn_time];
        driver.load(runtime, &image)?;
        figures[3] = [cudyn_way(check, &image)?, cudyn_way(check, &image)?];
        // The first round fills the driver's JIT cache and every lazy state: left out.
        if repetition > 0 {
            for (kept, figures) in samples.iter_mut().zip(figures) {
                kept[0].push(figures[0]);
                kept[1].push(figures[1]);
            }
        }
    }
    println!(
        "{} ({} bytes), {repetitions} repetitions, medians in µs:",
        file.display(),
        image.len()
    );
    for (arrangement, [first, second]) in ARRANGEMENTS.iter().zip(samples) {
        let (first, second) = (micros(median(first)), micros(median(second)));
        let figures = if arrangement.starts_with("check") {
            format!("first {first:.2}, second {second:.2}")
        } else {
            format!(
                "runtime {first:.2}, cudyn {second:.2}: {:.3}x",
                second / first
            )
        };
        println!("  {arrangement:>42}: {figures}");
    }
    Ok(())
}

/// One load (or check, or lookup) of `image` the cudyn way numbered `way`, or the runtime's
/// lookup alone; the unload not counted.
fn cudyn_way(way: usize, image: &[u8]) -> Result<Duration, String> {
    let error = |e: cudyn::Error| e.to_string();
    let loader = Library::loader().sharing(Sharing::Never);
    let start = Instant::now();
    let elapsed = match way {
        6 => {
            Image::check(image).map_err(error)?;
            start.elapsed()
        }
        7 => {
            let library = loader.load(image).map_err(error)?;
            let elapsed = start.elapsed();
            drop(library);
            elapsed
        }
        8 | 9 => {
            let loader = match way {
                9 => loader.backend(Backend::Driver),
                _ => loader,
            };
            let library = loader.load(image).map_err(error)?;
            library.kernel("saxpy").map_err(error)?;
            let elapsed = start.elapsed();
            drop(library);
            elapsed
        }
        10 => {
            let library = RawLibrary::load(image).map_err(|e| e.to_string())?;
            let start = Instant::now();
            library.kernel("saxpy").map_err(|e| e.to_string())?;
            start.elapsed()
        }
        _ => {
            let library = loader.load(image).map_err(error)?;
            let start = Instant::now();
            library.kernel("saxpy").map_err(error)?;
            start.elapsed()
        }
    };
    Ok(elapsed)
}

/// The driver, initialized, with device 0's primary context current and the JIT's log buffers.
struct Driver {
    info: Vec<u8>,
    error: Vec<u8>,
}

/// A driver call through cudarc's bindings, its status as a `Result` that names the call.
macro_rules! driver {
    ($name:ident ( $($arg:expr),* $(,)? )) => {
        check(sys::$name($($arg),*), stringify!($name))
    };
}

/// A driver call's status as a `Result`.
fn check(status: sys::CUresult, call: &str) -> Result<(), String> {
    match status {
        sys::CUresult::CUDA_SUCCESS => Ok(()),
        status => Err(format!("{call} failed with {status:?}")),
    }
}

impl Driver {
    fn new() -> Result<Driver, String> {
        let mut context: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: plain driver calls; the context pointer is a live local the driver writes.
        unsafe {
            driver!(cuInit(0))?;
            driver!(cuDevicePrimaryCtxRetain(&mut context, 0))?;
            driver!(cuCtxSetCurrent(context))?;
        }
        Ok(Driver {
            info: vec![0; LOG_BYTES],
            error: vec![0; LOG_BYTES],
        })
    }

    /// One load of `image` (NUL-terminated when PTX) by the raw way numbered `way` of [`WAYS`],
    /// its unload not counted.
    fn load(&mut self, way: usize, image: &[u8]) -> Result<Duration, String> {
        let name: *const c_char = c"saxpy".as_ptr();
        let data = image.as_ptr().cast::<c_void>();
        if way == 4 {
            let start = Instant::now();
            let library = RawLibrary::load(image).map_err(|e| e.to_string())?;
            library.kernel("saxpy").map_err(|e| e.to_string())?;
            return Ok(start.elapsed());
        }
        if way == 5 {
            let (mut module, mut function) = (std::ptr::null_mut(), std::ptr::null_mut());
            let start = Instant::now();
            // SAFETY: a whole image and a NUL-terminated name that outlive the calls; the
            // handles are live locals the driver writes, and the module is unloaded once.
            unsafe {
                driver!(cuModuleLoadData(&mut module, data))?;
                driver!(cuModuleGetFunction(&mut function, module, name))?;
                let elapsed = start.elapsed();
                driver!(cuModuleUnload(module))?;
                return Ok(elapsed);
            }
        }
        let (eager, logs) = (way >= 2, way % 2 == 1);
        let mut options = [
            sys::CUjit_option::CU_JIT_INFO_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        // The driver writes the logs through these pointers, as C programs pass them.
        let mut values = [
            self.info.as_mut_ptr().cast::<c_void>(),
            std::ptr::without_provenance_mut(LOG_BYTES),
            self.error.as_mut_ptr().cast::<c_void>(),
            std::ptr::without_provenance_mut(LOG_BYTES),
        ];
        let count = if logs { options.len() as c_uint } else { 0 };
        let (mut library, mut kernel, mut module) = (
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
        let start = Instant::now();
        // SAFETY: as above; the option arrays hold `count` entries, and the log buffers
        // LOG_BYTES each, alive for the load.
        unsafe {
            driver!(cuLibraryLoadData(
                &mut library,
                data,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
                count,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            ))?;
            if eager {
                driver!(cuLibraryGetModule(&mut module, library))?;
            }
            driver!(cuLibraryGetKernel(&mut kernel, library, name))?;
            let elapsed = start.elapsed();
            driver!(cuLibraryUnload(library))?;
            Ok(elapsed)
        }
    }
}

/// The steps of a first launch, in the order a child prints their times.
const STEPS: [&str; 8] = [
    "arch",
    "code",
    "load",
    "lookup",
    "params",
    "check",
    "launch",
    "synchronize",
];

/// Fills a warm cache with `source`'s cubin, then runs `starts` pairs of new processes (cudyn's
/// and raw's, alternating which goes first) and prints each step's median.
fn warm_start(source: &Path, starts: usize) -> Result<(), String> {
    let folder = tempfile::tempdir().map_err(|e| e.to_string())?;
    let text = std::fs::read_to_string(source).map_err(|e| format!("{}: {e}", source.display()))?;
    let cache = folder.path().join("cache");
    std::fs::create_dir_all(&cache).map_err(|e| e.to_string())?;
    let cubin = folder.path().join("saxpy.cubin");
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let spawn = |side: &str| -> Result<Vec<f64>, String> {
        let output = Command::new(&me)
            .env(CHILD_ENV, side)
            .env("CUDYN_LOAD_PARTS_SOURCE", source)
            .env("CUDYN_LOAD_PARTS_CUBIN", &cubin)
            .env(cudyn::cache::DIR_ENV, &cache)
            .output()
            .map_err(|e| e.to_string())?;
        if !output.status.success() {
            return Err(format!(
                "{side} process: {}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        String::from_utf8_lossy(&output.stdout)
            .split_whitespace()
            .map(|t| {
                t.parse::<f64>()
                    .map_err(|e| format!("{side} process printed {t}: {e}"))
            })
            .collect()
    };
    // The cubin for raw, and the cache entry for cudyn, from one compile in a process of its
    // own (so that the entry is written as any first start writes it).
    spawn("fill")?;
    let compiled = std::fs::read(&cubin).map_err(|e| e.to_string())?;
    let mut sides = [Vec::new(), Vec::new()];
    for start in 0..starts {
        let order: [usize; 2] = if start % 2 == 0 { [0, 1] } else { [1, 0] };
        for side in order {
            sides[side].push(spawn(["cudyn", "raw"][side])?);
        }
    }
    println!(
        "first launch from a warm cache, {} ({} bytes of cubin), medians of {starts} new processes, µs:",
        text.lines().next().unwrap_or_default(),
        compiled.len()
    );
    println!(
        "  {:>6} {}",
        "",
        STEPS.map(|s| format!("{s:>12}")).join("") + "       total"
    );
    for (name, runs) in ["cudyn", "raw"].iter().zip(sides) {
        let mut row = String::new();
        for step in 0..=STEPS.len() {
            let times = runs.iter().map(|run| match step {
                s if s == STEPS.len() => run.iter().sum(),
                s => run[s],
            });
            let times = times.map(|micros: f64| Duration::from_secs_f64(micros / 1e6));
            row += &format!("{:>12.1}", micros(median(times.collect())));
        }
        println!("  {name:>6} {row}");
    }
    Ok(())
}

/// A process of `start`: `fill` compiles into the cache and writes the cubin; `cudyn` and `raw`
/// time the steps of a first launch and print them in µs.
fn start_child(side: &str) -> Result<(), String> {
    let env = |name: &str| std::env::var(name).map_err(|_| format!("{name} is not set"));
    let error = |e: cudyn::Error| e.to_string();
    let source =
        std::fs::read_to_string(env("CUDYN_LOAD_PARTS_SOURCE")?).map_err(|e| e.to_string())?;
    let cubin = env("CUDYN_LOAD_PARTS_CUBIN")?;
    if side == "fill" {
        let compiled = Program::new(source.as_str()).compile().map_err(error)?;
        return std::fs::write(&cubin, compiled.code()).map_err(|e| e.to_string());
    }
    cudyn::set_device(0).map_err(error)?;
    cudyn::synchronize().map_err(error)?;
    raw_runtime::synchronize().map_err(|e| e.to_string())?;
    let x = DeviceBuffer::from_slice(&[1.0f32; N]).map_err(error)?;
    let y = DeviceBuffer::from_slice(&[1.0f32; N]).map_err(error)?;
    let mut out = DeviceBuffer::<f32>::zeroed(N).map_err(error)?;
    let grid = N.div_ceil(BLOCK as usize) as u32;
    let mut marks = [Instant::now(); STEPS.len() + 1];
    if side == "cudyn" {
        marks[0] = Instant::now();
        let arch = cudyn::Arch::current().map_err(error)?;
        marks[1] = Instant::now();
        let compiled = Program::new(source.as_str())
            .arch(arch)
            .compile()
            .map_err(error)?;
        marks[2] = Instant::now();
        let library = Library::loader().load_compiled(&compiled).map_err(error)?;
        marks[3] = Instant::now();
        let saxpy = library.kernel("saxpy").map_err(error)?;
        marks[4] = Instant::now();
        saxpy.params().map_err(error)?;
        marks[5] = Instant::now();
        let config = LaunchConfig::new(grid, BLOCK);
        saxpy
            .check(&config, &(2.0f32, &x, &y, &mut out, N as u64))
            .map_err(error)?;
        marks[6] = Instant::now();
        // SAFETY: saxpy reads x[i], y[i] and writes out[i] for i < n, and the buffers hold n
        // floats; the synchronize below waits for it.
        unsafe { saxpy.launch(&config, (2.0f32, &x, &y, &mut out, N as u64)) }.map_err(error)?;
        marks[7] = Instant::now();
        cudyn::synchronize().map_err(error)?;
        marks[8] = Instant::now();
        if !matches!(compiled.cache_use(), cudyn::compile::CacheUse::Hit) {
            return Err(format!("not a cache hit: {:?}", compiled.cache_use()));
        }
    } else {
        // No architecture to find: the cubin's is known.
        marks[0] = Instant::now();
        marks[1] = Instant::now();
        let image = std::fs::read(&cubin).map_err(|e| e.to_string())?;
        marks[2] = Instant::now();
        let library = RawLibrary::load(&image).map_err(|e| e.to_string())?;
        marks[3] = Instant::now();
        let kernel = library.kernel("saxpy").map_err(|e| e.to_string())?;
        marks[4] = Instant::now();
        // The parameters as cudyn asks for them (`cuKernelGetParamInfo` until it refuses the
        // index), to see what the driver's answer costs; nothing else is checked.
        let mut index = 0;
        loop {
            let (mut offset, mut size) = (0usize, 0usize);
            // SAFETY: the kernel's library is loaded; the driver writes two size_t.
            let status =
                unsafe { sys::cuKernelGetParamInfo(kernel.cast(), index, &mut offset, &mut size) };
            if status != sys::CUresult::CUDA_SUCCESS {
                break;
            }
            index += 1;
        }
        marks[5] = Instant::now();
        marks[6] = Instant::now();
        let mut values = (2.0f32, x.as_raw(), y.as_raw(), out.as_raw(), N as u64);
        let mut args: [*mut c_void; 5] = [
            std::ptr::addr_of_mut!(values.0).cast(),
            std::ptr::addr_of_mut!(values.1).cast(),
            std::ptr::addr_of_mut!(values.2).cast(),
            std::ptr::addr_of_mut!(values.3).cast(),
            std::ptr::addr_of_mut!(values.4).cast(),
        ];
        raw_runtime::launch(kernel, grid, BLOCK, &mut args).map_err(|e| e.to_string())?;
        marks[7] = Instant::now();
        raw_runtime::synchronize().map_err(|e| e.to_string())?;
        marks[8] = Instant::now();
    }
    if out.to_vec().map_err(error)?.iter().any(|&v| v != 3.0) {
        return Err(format!("{side}: saxpy computed a wrong result"));
    }
    let steps: Vec<String> = marks
        .windows(2)
        .map(|pair| format!("{:.2}", (pair[1] - pair[0]).as_secs_f64() * 1e6))
        .collect();
    println!("{}", steps.join(" "));
    Ok(())
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}
