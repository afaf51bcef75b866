//! Host cost of one launch: cudyn's checked `Kernel::launch` against the raw `cuLaunchKernel`,
//! called through the same symbol in the same process, for an empty kernel and a 5-argument
//! SAXPY.
//!
//! Run on a machine with a GPU and nvcc at `$CUDA_HOME/bin/nvcc` (the kernels are compiled at run time):
//!
//! ```text
//! cargo run --release --example bench_launch [-- ROUNDS LAUNCHES_PER_ROUND]
//! ```
//!
//! Each round times a burst of launches (host time only: the burst is short enough not to fill
//! the launch queue, and the device is synchronized between rounds, untimed). Raw and cudyn
//! rounds alternate so that drift affects both alike. The table shows the median, 10th and 90th
//! percentile of the per-launch cost over the rounds, and the ratio of the medians. A third row,
//! the raw launch after `cuCtxGetCurrent`, shows what knowing the current context costs: cudyn
//! asks before every launch, since the runtime or the user may switch contexts between launches.

use std::ffi::c_void;
use std::process::{Command, ExitCode};
use std::time::Instant;

use cudyn::sys::driver;
use cudyn::{DeviceBuffer, Kernel, LaunchConfig, Library};

const SOURCE: &str = r#"
extern "C" __global__ void empty() {}

extern "C" __global__ void saxpy(float a, const float* x, const float* y, float* out,
                                 unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
"#;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("bench_launch: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let rounds = args
        .next()
        .transpose()
        .map_err(|e| e.to_string())?
        .unwrap_or(200);
    let burst = args
        .next()
        .transpose()
        .map_err(|e| e.to_string())?
        .unwrap_or(200);

    let device = cudyn::set_device(0).map_err(|e| e.to_string())?;
    let (major, minor) = device.compute_capability().map_err(|e| e.to_string())?;
    let cubin = compile(&format!("sm_{major}{minor}"))?;
    let library = Library::load(&cubin).map_err(|e| e.to_string())?;
    let empty = library.kernel("empty").map_err(|e| e.to_string())?;
    let saxpy = library.kernel("saxpy").map_err(|e| e.to_string())?;
    let api = cudyn::sys::driver().map_err(|e| e.to_string())?.api;
    let launch_raw = api
        .cuLaunchKernel
        .ok_or("the driver has no cuLaunchKernel")?;
    let get_current = api
        .cuCtxGetCurrent
        .ok_or("the driver has no cuCtxGetCurrent")?;

    let n = 1024usize;
    let x = DeviceBuffer::from_slice(&vec![1.0f32; n]).map_err(|e| e.to_string())?;
    let y = DeviceBuffer::from_slice(&vec![2.0f32; n]).map_err(|e| e.to_string())?;
    let mut out = DeviceBuffer::<f32>::zeroed(n).map_err(|e| e.to_string())?;
    let config = LaunchConfig::for_elements(n, 256);
    let a = 3.0f32;

    println!(
        "device: {} (sm_{major}{minor}); {rounds} rounds of {burst} launches each",
        device.name().map_err(|e| e.to_string())?
    );
    println!();
    println!(
        "{:<8} {:<26} {:>12} {:>10} {:>10}",
        "kernel", "path", "median ns", "p10 ns", "p90 ns"
    );

    let mut ratios = Vec::new();
    // The empty kernel.
    {
        let raw = |count: usize, query_context: bool| {
            for _ in 0..count {
                if query_context {
                    current_context(get_current);
                }
                // SAFETY: a kernel without parameters; the primary context is current.
                unsafe { raw_launch(launch_raw, &empty, &config, std::ptr::null_mut()) };
            }
        };
        let mut checked = |count: usize| {
            for _ in 0..count {
                // SAFETY: the empty kernel takes no parameters and touches no memory.
                unsafe { empty.launch(&config, ()) }.expect("launch");
            }
        };
        ratios.push(compare("empty", rounds, burst, &raw, &mut checked)?);
    }
    // The 5-argument SAXPY.
    {
        let (xp, yp, outp, count) = (x.as_raw(), y.as_raw(), out.as_raw(), n as u64);
        let raw = |launches: usize, query_context: bool| {
            let mut values = (a, xp, yp, outp, count);
            let mut params: [*mut c_void; 5] = [
                (&mut values.0 as *mut f32).cast(),
                (&mut values.1 as *mut u64).cast(),
                (&mut values.2 as *mut u64).cast(),
                (&mut values.3 as *mut u64).cast(),
                (&mut values.4 as *mut u64).cast(),
            ];
            for _ in 0..launches {
                if query_context {
                    current_context(get_current);
                }
                // SAFETY: five pointers to values of the kernel's parameter sizes.
                unsafe { raw_launch(launch_raw, &saxpy, &config, params.as_mut_ptr()) };
            }
        };
        let out = &mut out;
        let mut checked = |launches: usize| {
            for _ in 0..launches {
                // SAFETY: saxpy reads x[i], y[i] and writes out[i] for i < n, and the three
                // buffers hold n floats; they outlive every launch (the rounds synchronize, and
                // `out` is read after the last).
                unsafe { saxpy.launch(&config, (a, &x, &y, &mut *out, n as u64)) }.expect("launch");
            }
        };
        ratios.push(compare("saxpy", rounds, burst, &raw, &mut checked)?);
    }
    let result = out.to_vec().map_err(|e| e.to_string())?;
    if result.iter().any(|&v| v != 5.0) {
        return Err("SAXPY computed a wrong result".into());
    }
    println!();
    for (kernel, ratio) in ratios {
        let verdict = if ratio <= 1.03 { "within" } else { "OVER" };
        println!("{kernel}: cudyn / raw median = {ratio:.3} ({verdict} the 1.03 target)");
    }
    Ok(())
}

/// The rows of the table: the raw launch, the raw launch after asking the driver for the current
/// context (what any launch that must know its context pays), and cudyn's checked launch.
const RAW: &str = "cuLaunchKernel (raw)";
const RAW_IN_CONTEXT: &str = "cuCtxGetCurrent + raw";
const CHECKED: &str = "cudyn Kernel::launch";

/// Asks the driver for the current context, as cudyn does before each launch.
fn current_context(get_current: unsafe extern "C" fn(*mut driver::CUcontext) -> driver::CUresult) {
    let mut context: driver::CUcontext = std::ptr::null_mut();
    // SAFETY: writes one context handle.
    let status = unsafe { get_current(&mut context) };
    assert_eq!(status, driver::CUDA_SUCCESS, "cuCtxGetCurrent failed");
    std::hint::black_box(context);
}

type LaunchFn = unsafe extern "C" fn(
    driver::CUfunction,
    u32,
    u32,
    u32,
    u32,
    u32,
    u32,
    u32,
    driver::CUstream,
    *mut *mut c_void,
    *mut *mut c_void,
) -> driver::CUresult;

/// The raw launch, as a C program would write it.
///
/// # Safety
/// `params` matches the kernel's parameters; a context is current.
unsafe fn raw_launch(
    launch: LaunchFn,
    kernel: &Kernel,
    config: &LaunchConfig<'_>,
    params: *mut *mut c_void,
) {
    let (g, b) = (config.grid, config.block);
    // SAFETY: the caller's contract; the kernel handle is accepted as a CUfunction.
    let status = unsafe {
        launch(
            kernel.as_function(),
            g.x,
            g.y,
            g.z,
            b.x,
            b.y,
            b.z,
            0,
            std::ptr::null_mut(),
            params,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(status, driver::CUDA_SUCCESS, "cuLaunchKernel failed");
}

/// Times the three rows (the raw launch, the raw launch after asking for the current context,
/// cudyn's checked launch) in alternating rounds and prints them; returns the ratio of cudyn's
/// median to the raw launch's. `raw(count, query_context)` launches `count` times.
fn compare(
    kernel: &'static str,
    rounds: usize,
    burst: usize,
    raw: &dyn Fn(usize, bool),
    checked: &mut dyn FnMut(usize),
) -> Result<(&'static str, f64), String> {
    let mut raw_only = |count: usize| raw(count, false);
    let mut raw_in_context = |count: usize| raw(count, true);
    let paths: &mut [(&str, &mut dyn FnMut(usize))] = &mut [
        (RAW, &mut raw_only),
        (RAW_IN_CONTEXT, &mut raw_in_context),
        (CHECKED, checked),
    ];
    // Warm up: first launches load the kernel into the context and fill caches.
    for (_, launches) in paths.iter_mut() {
        launches(burst);
    }
    cudyn::synchronize().map_err(|e| e.to_string())?;
    let mut samples = vec![Vec::with_capacity(rounds); paths.len()];
    for _ in 0..rounds {
        for ((_, launches), times) in paths.iter_mut().zip(&mut samples) {
            times.push(time_burst(burst, launches)?);
        }
    }
    let medians: Vec<f64> = paths
        .iter()
        .zip(&mut samples)
        .map(|((path, _), times)| row(kernel, path, times))
        .collect();
    Ok((kernel, medians[medians.len() - 1] / medians[0]))
}

/// Host nanoseconds per launch over one burst; the device drains untimed afterwards.
fn time_burst(burst: usize, launches: &mut dyn FnMut(usize)) -> Result<f64, String> {
    let start = Instant::now();
    launches(burst);
    let elapsed = start.elapsed();
    cudyn::synchronize().map_err(|e| e.to_string())?;
    Ok(elapsed.as_nanos() as f64 / burst as f64)
}

/// Prints one table row; returns the median.
fn row(kernel: &str, path: &str, samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    let median = at(0.5);
    println!(
        "{kernel:<8} {path:<26} {median:>12.1} {:>10.1} {:>10.1}",
        at(0.1),
        at(0.9)
    );
    median
}

/// The kernels as a cubin for `arch`, built by nvcc.
fn compile(arch: &str) -> Result<Vec<u8>, String> {
    let home =
        std::env::var_os("CUDA_HOME").ok_or("set CUDA_HOME (nvcc is $CUDA_HOME/bin/nvcc)")?;
    let nvcc = std::path::Path::new(&home).join("bin").join("nvcc");
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let source = dir.path().join("bench.cu");
    let cubin = dir.path().join("bench.cubin");
    std::fs::write(&source, SOURCE).map_err(|e| e.to_string())?;
    let output = Command::new(&nvcc)
        .args(["-cubin", &format!("-arch={arch}"), "-o"])
        .arg(&cubin)
        .arg(&source)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", nvcc.display()))?;
    if !output.status.success() {
        return Err(format!(
            "nvcc failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    std::fs::read(&cubin).map_err(|e| e.to_string())
}
