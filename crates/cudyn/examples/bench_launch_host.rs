//! cudyn's own host cost per launch, measured without a GPU: every launch goes to a fake CUDA
//! driver (tests/fake_driver: a `libcuda.so.1` compiled here from C, whose entry points answer
//! at once), so that what is left of a launch's time is the caller's work.
//!
//! `cargo build --release -p cudyn --example bench_launch_host && target/release/examples/bench_launch_host`
//! (needs a C compiler, `cc` or `$CC`; `--rounds N` and `--burst N` change the sampling,
//! `--caches warm|cold|both` the modes measured, both by default).
//!
//! Four kernels, as in cudyn-bench's launch rows: none, 5 (a SAXPY), 21 (a pointer and five
//! rounds of int, unsigned long long, float, double) and one 24-byte struct argument. Each is
//! launched by four paths, in interleaved bursts timed on the host (tests/launch_timing, as
//! cudyn-bench does on a GPU):
//!
//! - **direct**: the fake `cuLaunchKernel`, called through the symbol cudyn resolved, with an
//!   argument array built once: the least a caller can do, what the GPU benchmark calls raw;
//! - **+ctx**: the same after a `cuCtxGetCurrent`, which cudyn's launch asks before every launch
//!   (another context may have been made current since the last one);
//! - **unchecked**: cudyn's `Kernel::launch_unchecked` with that array;
//! - **checked**: cudyn's `Kernel::launch` with typed arguments, checked against the kernel's
//!   parameter layout and the device's limits, packed on the stack.
//!
//! Printed per kernel: each path's median nanoseconds per launch, and its cost over direct as
//! the median of the per-round differences (each burst against the direct burst next to it, so
//! that drift of the machine cancels). The fake launch copies the arguments into a parameter
//! buffer, as the driver does, so the paths do the same work but for cudyn's own.
//!
//! Two modes. With warm caches the fake launch does nothing more, so cudyn's code and data stay
//! in the core's L1 caches from one launch to the next: the cost of its instructions. With cold
//! caches each fake launch also writes 64 KiB of data and runs 28 KiB of code of its own (about
//! 4 µs, like a real launch on an H200 host), so that every launch finds cudyn's code and data
//! evicted from L1, as after a real driver's launch: the cost of the cache lines cudyn touches
//! too, which is what the GPU benchmark's ratio sees.

#[path = "../tests/fake_driver/mod.rs"]
mod fake_driver;
#[path = "../tests/launch_timing/mod.rs"]
mod launch_timing;

use std::ffi::c_void;
use std::process::ExitCode;

use cudyn::sys::driver;
use cudyn::{DeviceBuffer, DeviceRepr, Kernel, LaunchConfig};
use fake_driver::{c_params, param_pointer, FakeDriver};
use launch_timing::{interleaved, median, RawLauncher};

/// `scale`'s struct argument: 24 bytes, 8-byte aligned.
#[repr(C)]
#[derive(Debug, Clone, Copy, DeviceRepr)]
struct Scale {
    x: u64,
    out: u64,
    a: f32,
    n: u32,
}

/// The 20 scalars of the 21-argument kernel.
#[rustfmt::skip]
type Scalars = (
    i32, u64, f32, f64, i32, u64, f32, f64, i32, u64, f32, f64, i32, u64, f32, f64,
    i32, u64, f32, f64,
);
#[rustfmt::skip]
const SCALARS: Scalars = (
    1, 11, 0.5, 0.25, 2, 12, 1.0, 0.5, 3, 13, 1.5, 0.75, 4, 14, 2.0, 1.0,
    5, 15, 2.5, 1.25,
);

/// The paths, in the order they are printed.
const PATHS: [&str; 4] = ["direct", "+ctx", "unchecked", "checked"];

struct Options {
    rounds: usize,
    /// Launches per burst; by default 1000 with warm caches, 100 with cold ones.
    burst: Option<usize>,
    warm: bool,
    cold: bool,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        rounds: 400,
        burst: None,
        warm: true,
        cold: true,
    };
    let mut args = std::env::args().skip(1);
    let usage = "options: --rounds N, --burst N, --caches warm|cold|both";
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} takes a value; {usage}"))?;
        let number = || {
            value
                .parse::<usize>()
                .ok()
                .filter(|&number| number > 0)
                .ok_or(format!("{flag} takes a positive number"))
        };
        match flag.as_str() {
            "--rounds" => options.rounds = number()?,
            "--burst" => options.burst = Some(number()?),
            "--caches" => {
                (options.warm, options.cold) = match value.as_str() {
                    "warm" => (true, false),
                    "cold" => (false, true),
                    "both" => (true, true),
                    _ => return Err(format!("--caches takes warm, cold or both")),
                }
            }
            _ => return Err(format!("unknown option {flag}; {usage}")),
        }
    }
    Ok(options)
}

/// `cuCtxGetCurrent` then `cuLaunchKernel`, both through the symbols cudyn resolved.
#[derive(Clone, Copy)]
struct Direct {
    raw: RawLauncher,
    get_current: unsafe extern "C" fn(*mut driver::CUcontext) -> driver::CUresult,
}

impl Direct {
    /// # Safety
    /// As [`RawLauncher::launch`].
    unsafe fn launch_after_context_query(
        &self,
        kernel: &Kernel,
        config: &LaunchConfig<'_>,
        params: *mut *mut c_void,
    ) -> Result<(), String> {
        let mut context = std::ptr::null_mut();
        // SAFETY: writes one pointer.
        if unsafe { (self.get_current)(&mut context) } != driver::CUDA_SUCCESS || context.is_null()
        {
            return Err("no current context".into());
        }
        // SAFETY: the caller's contract.
        unsafe { self.raw.launch(kernel, config, params) }
    }
}

/// Calls `launch` `count` times: one burst.
fn burst(
    mut launch: impl FnMut() -> Result<(), String>,
) -> impl FnMut(usize) -> Result<(), String> {
    move |count| (0..count).try_for_each(|_| launch())
}

fn cudyn_error(error: cudyn::Error) -> String {
    error.to_string()
}

/// Times the four paths of `kernel` and prints its line: the three that take the argument array
/// `params`, and `checked`, cudyn's checked launch of the same arguments.
///
/// # Safety
/// `params` points to one pointer per parameter of `kernel`, each to a value of the parameter's
/// size, alive during this call.
unsafe fn row(
    label: &str,
    (rounds, burst_size): (usize, usize),
    direct: Direct,
    kernel: &Kernel,
    params: *mut *mut c_void,
    checked: impl FnMut() -> cudyn::Result<()>,
) -> Result<(), String> {
    let config = LaunchConfig::for_elements(1024, 256);
    let mut checked = checked;
    let samples = interleaved(
        rounds,
        burst_size,
        &mut [
            // SAFETY: the caller's contract; the fake driver only copies the arguments.
            &mut burst(|| unsafe { direct.raw.launch(kernel, &config, params) }),
            // SAFETY: as above.
            &mut burst(|| unsafe { direct.launch_after_context_query(kernel, &config, params) }),
            // SAFETY: as above.
            &mut burst(|| unsafe { kernel.launch_unchecked(&config, params) }.map_err(cudyn_error)),
            &mut burst(|| checked().map_err(cudyn_error)),
        ],
    )?;
    let mut line = format!("{label:<20}");
    for (name, path) in PATHS.iter().zip(&samples) {
        let mut own = path.clone();
        let mut over: Vec<f64> = path.iter().zip(&samples[0]).map(|(p, d)| p - d).collect();
        line += &match *name {
            "direct" => format!(" {name} {:6.1}", median(&mut own)),
            _ => format!(
                " | {name} {:6.1} ({:+5.1})",
                median(&mut own),
                median(&mut over)
            ),
        };
    }
    println!("{line}");
    Ok(())
}

fn run() -> Result<(), String> {
    let options = options()?;
    let fake = FakeDriver::install()?;
    let api = &cudyn::sys::driver().map_err(cudyn_error)?.api;
    let direct = Direct {
        raw: RawLauncher::new()?,
        get_current: api.cuCtxGetCurrent.ok_or("no cuCtxGetCurrent")?,
    };
    println!(
        "host ns per launch through the fake driver in {}; (+x): cost over direct, median of \
         the per-round differences",
        fake.folder().display()
    );
    for (cold, wanted, burst) in [(false, options.warm, 1000), (true, options.cold, 100)] {
        if !wanted {
            continue;
        }
        let sampling = (options.rounds, options.burst.unwrap_or(burst));
        fake.set_cold_caches(cold);
        println!(
            "{} caches, median of {} interleaved bursts of {}:",
            if cold { "cold" } else { "warm" },
            sampling.0,
            sampling.1
        );
        kernels(direct, sampling)?;
    }
    Ok(())
}

/// Times the four kernels, each by the four paths.
fn kernels(direct: Direct, sampling: (usize, usize)) -> Result<(), String> {
    let config = LaunchConfig::for_elements(1024, 256);

    let empty = fake_driver::kernel("empty", &[]);
    // SAFETY: no parameters.
    unsafe {
        row("empty kernel", sampling, direct, &empty, std::ptr::null_mut(), || {
            // SAFETY: the fake driver runs nothing.
            empty.launch(&config, ())
        })
    }?;

    let saxpy = fake_driver::kernel("saxpy", &c_params(&[(4, 4), (8, 8), (8, 8), (8, 8), (8, 8)]));
    let x = DeviceBuffer::<f32>::alloc(1024).map_err(cudyn_error)?;
    let y = DeviceBuffer::<f32>::alloc(1024).map_err(cudyn_error)?;
    let mut out = DeviceBuffer::<f32>::alloc(1024).map_err(cudyn_error)?;
    let (a, n) = (3.0f32, 1024u64);
    let mut values = (a, x.as_raw(), y.as_raw(), out.as_raw(), n);
    let mut params = [
        param_pointer(&mut values.0),
        param_pointer(&mut values.1),
        param_pointer(&mut values.2),
        param_pointer(&mut values.3),
        param_pointer(&mut values.4),
    ];
    // SAFETY: five pointers to values of the parameters' sizes, alive during the call.
    unsafe {
        row("SAXPY, 5 arguments", sampling, direct, &saxpy, params.as_mut_ptr(), || {
            // SAFETY: the fake driver runs nothing.
            saxpy.launch(&config, (a, &x, &y, &mut out, n))
        })
    }?;

    let mut types = vec![(8, 8)];
    for _ in 0..5 {
        types.extend([(4, 4), (8, 8), (4, 4), (8, 8)]);
    }
    let args21 = fake_driver::kernel("args21", &c_params(&types));
    let mut out_address = out.as_raw();
    let mut t = SCALARS;
    #[rustfmt::skip]
    let mut params = [
        param_pointer(&mut out_address),
        param_pointer(&mut t.0), param_pointer(&mut t.1), param_pointer(&mut t.2),
        param_pointer(&mut t.3), param_pointer(&mut t.4), param_pointer(&mut t.5),
        param_pointer(&mut t.6), param_pointer(&mut t.7), param_pointer(&mut t.8),
        param_pointer(&mut t.9), param_pointer(&mut t.10), param_pointer(&mut t.11),
        param_pointer(&mut t.12), param_pointer(&mut t.13), param_pointer(&mut t.14),
        param_pointer(&mut t.15), param_pointer(&mut t.16), param_pointer(&mut t.17),
        param_pointer(&mut t.18), param_pointer(&mut t.19),
    ];
    let s = SCALARS;
    // SAFETY: 21 pointers to values of the parameters' sizes, alive during the call.
    unsafe {
        row("21 arguments", sampling, direct, &args21, params.as_mut_ptr(), || {
            #[rustfmt::skip]
            let args = (
                &out, s.0, s.1, s.2, s.3, s.4, s.5, s.6, s.7, s.8, s.9, s.10, s.11, s.12, s.13,
                s.14, s.15, s.16, s.17, s.18, s.19,
            );
            // SAFETY: the fake driver runs nothing.
            args21.launch(&config, args)
        })
    }?;

    let scale = fake_driver::kernel("scale", &c_params(&[(24, 8)]));
    let value = Scale {
        x: x.as_raw(),
        out: out.as_raw(),
        a,
        n: 1024,
    };
    let mut raw_value = value;
    let mut params = [param_pointer(&mut raw_value)];
    // SAFETY: one pointer to a value of the parameter's size, alive during the call.
    unsafe {
        row("a 24-byte struct", sampling, direct, &scale, params.as_mut_ptr(), || {
            // SAFETY: the fake driver runs nothing.
            scale.launch(&config, (value,))
        })
    }?;
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("bench_launch_host: {error}");
            ExitCode::FAILURE
        }
    }
}
