//! cudyn's own host cost per launch, measured without a GPU: every launch goes to a fake CUDA
//! driver (the `cudyn` crate's tests/fake_driver: a `libcuda.so.1` compiled here from C, whose entry points answer
//! at once), so that what is left of a launch's time is the caller's work.
//!
//! ```text
//! cargo build --release -p cudyn-bench --bin bench_launch_host
//! target/release/bench_launch_host                  # times, warm and cold caches
//! target/release/bench_launch_host --instructions   # instructions, with valgrind
//! ```
//!
//! It needs a C compiler (`cc`, or `$CC`), and valgrind for `--instructions`. Options:
//! `--rounds N` and `--burst N` change the sampling, `--caches warm|cold|both` the modes timed
//! (both by default), `--launches N` the launches counted by `--instructions`.
//!
//! Four kernels, as in cudyn-bench's launch rows: none, 5 (a SAXPY), 21 (a pointer and five
//! rounds of int, unsigned long long, float, double) and one 24-byte struct argument. Each is
//! launched by four paths:
//!
//! - **direct**: the fake `cuLaunchKernel`, called through the symbol cudyn resolved, with an
//!   argument array built once: the least a caller can do, what the GPU benchmark calls raw;
//! - **+ctx**: the same after a `cuCtxGetId`, which cudyn's launch asks before every launch
//!   (another context may have been made current since the last one);
//! - **unchecked**: cudyn's `Kernel::launch_unchecked` with that array;
//! - **checked**: cudyn's `Kernel::launch` with typed arguments, checked against the kernel's
//!   parameter layout and the device's limits, packed on the stack;
//! - **cudarc**: cudarc's `launch_builder` per launch, with cudarc's own buffers, as its
//!   documentation writes it and cudyn-bench measures it (cudarc opens the same fake driver).
//!
//! The fake launch copies the arguments into a parameter buffer, as the driver does, so the
//! paths do the same work but for cudyn's own.
//!
//! **Times** (the default): the paths in interleaved bursts timed on the host
//! (the `cudyn` crate's tests/launch_timing, as cudyn-bench does on a GPU). Printed per kernel: each path's median
//! nanoseconds per launch, and its cost over direct as the median of the per-round differences
//! (each burst against the direct burst next to it, so that drift of the machine cancels). With
//! warm caches the fake launch does nothing more, so cudyn's code and data stay in the core's
//! L1 caches from one launch to the next. With cold caches each fake launch also writes 64 KiB
//! of data and runs 28 KiB of code of its own (a few microseconds, like a real launch), so that
//! every launch finds cudyn's code and data evicted from L1, as after a real driver's launch.
//!
//! **Instructions** (`--instructions`): the instructions each path executes per launch, the
//! fake driver's included, counted by valgrind's callgrind: this program is run under it with
//! `--only KERNEL/PATH --launches N` twice, with 1000 and with 1000 + N launches, and the
//! difference of the totals is divided by N. Exact and free of the machine's noise, where a
//! shared machine's times move by more than the differences measured.

#[path = "../../../cudyn/tests/fake_driver/mod.rs"]
mod fake_driver;
#[path = "../../../cudyn/tests/launch_timing/mod.rs"]
mod launch_timing;
#[allow(dead_code)]
#[path = "../../../cudyn/tests/peer_arguments/mod.rs"]
mod peer_arguments;

use std::ffi::c_void;
use std::process::{Command, ExitCode};

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaStream, DriverError, PushKernelArg};
use cudarc::nvrtc::Ptx;
use cudyn::sys::driver;
use cudyn::{DeviceBuffer, Kernel, LaunchConfig};
use fake_driver::{c_params, param_pointer, FakeDriver};
use launch_timing::{interleaved, median, Burst, RawLauncher};
use peer_arguments::{Scale, SCALARS};

/// The paths, in the order they are printed.
const PATHS: [&str; 5] = ["direct", "+ctx", "unchecked", "checked", "cudarc"];
/// The kernels, in the order they are printed: a short name and a label.
const KERNELS: [(&str, &str); 4] = [
    ("empty", "empty kernel"),
    ("saxpy", "SAXPY, 5 arguments"),
    ("args21", "21 arguments"),
    ("struct", "a 24-byte struct"),
];
/// Launches before the counted ones in `--instructions`: the first launches differ (the kernel's
/// layout is asked of the driver once).
const WARM_UP: usize = 1000;

const USAGE: &str = "options: [--rounds N] [--burst N] [--caches warm|cold|both] | \
                     --instructions [--launches N] | --only KERNEL/PATH --launches N";

/// What the program does.
enum Mode {
    /// Times every path of every kernel: `rounds` interleaved bursts of `burst` launches (by
    /// default 1000 with warm caches, 100 with cold ones), with warm caches, cold ones or both.
    Time {
        rounds: usize,
        burst: Option<usize>,
        warm: bool,
        cold: bool,
    },
    /// Counts the instructions per launch of every path with valgrind, over `launches`.
    Instructions { launches: usize },
    /// Launches one kernel by one path, untimed, printing nothing: what `Instructions` counts.
    Only {
        kernel: String,
        path: String,
        launches: usize,
    },
}

fn mode() -> Result<Mode, String> {
    let (mut rounds, mut burst, mut caches) = (400, None, "both".to_owned());
    let (mut instructions, mut only, mut launches) = (false, None, None);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--instructions" {
            instructions = true;
            continue;
        }
        let value = args
            .next()
            .ok_or(format!("{flag} takes a value; {USAGE}"))?;
        let number = || {
            value
                .parse::<usize>()
                .map_err(|_| format!("{flag} takes a number"))
        };
        match flag.as_str() {
            "--rounds" => rounds = number()?.max(1),
            "--burst" => burst = Some(number()?.max(1)),
            "--launches" => launches = Some(number()?),
            "--caches" => caches = value,
            "--only" => only = Some(value),
            _ => return Err(format!("unknown option {flag}; {USAGE}")),
        }
    }
    if let Some(only) = only {
        let (kernel, path) = only
            .split_once('/')
            .filter(|(kernel, path)| {
                KERNELS.iter().any(|(name, _)| name == kernel) && PATHS.contains(path)
            })
            .ok_or(format!(
                "--only takes KERNEL/PATH: a kernel of {:?}, a path of {PATHS:?}",
                KERNELS.map(|(name, _)| name)
            ))?;
        return Ok(Mode::Only {
            kernel: kernel.to_owned(),
            path: path.to_owned(),
            launches: launches.ok_or("--only needs --launches")?,
        });
    }
    if instructions {
        return Ok(Mode::Instructions {
            launches: launches.unwrap_or(20_000).max(1),
        });
    }
    let (warm, cold) = match caches.as_str() {
        "warm" => (true, false),
        "cold" => (false, true),
        "both" => (true, true),
        _ => return Err("--caches takes warm, cold or both".into()),
    };
    Ok(Mode::Time {
        rounds,
        burst,
        warm,
        cold,
    })
}

/// How the paths of each kernel run: timed in interleaved bursts, or one path of one kernel.
#[derive(Clone, Copy)]
enum Run<'a> {
    Timed {
        rounds: usize,
        burst: usize,
    },
    Only {
        kernel: &'a str,
        path: &'a str,
        launches: usize,
    },
}

/// cudarc's context on the fake driver (the same primary context cudyn uses) and its default
/// stream.
struct Cudarc {
    context: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    config: cudarc::driver::LaunchConfig,
}

impl Cudarc {
    fn new() -> Result<Cudarc, String> {
        let context = CudaContext::new(0).map_err(cudarc_error)?;
        Ok(Cudarc {
            stream: context.default_stream(),
            context,
            config: cudarc::driver::LaunchConfig {
                grid_dim: (4, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            },
        })
    }

    /// The fake kernel behind `kernel` as cudarc loads it: a module whose text is the kernel
    /// handle, which the fake driver's module loading understands.
    fn function(&self, kernel: &Kernel) -> Result<CudaFunction, String> {
        let module = self
            .context
            .load_module(Ptx::from_src(format!("{:x}", kernel.as_raw() as usize)))
            .map_err(cudarc_error)?;
        module.load_function("kernel").map_err(cudarc_error)
    }

    /// `count` floats of cudarc's, never read.
    fn buffer(&self, count: usize) -> Result<cudarc::driver::CudaSlice<f32>, String> {
        // SAFETY: never read: the fake driver runs nothing.
        unsafe { self.stream.alloc::<f32>(count) }.map_err(cudarc_error)
    }
}

fn cudarc_error(error: DriverError) -> String {
    format!("cudarc: {error:?}")
}

/// `cuCtxGetId` then `cuLaunchKernel`, both through the symbols cudyn resolved.
#[derive(Clone, Copy)]
struct Direct {
    raw: RawLauncher,
    context_id: unsafe extern "C" fn(driver::CUcontext, *mut u64) -> driver::CUresult,
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
        let mut id = 0;
        // SAFETY: a null context asks for the current one; writes one integer.
        if unsafe { (self.context_id)(std::ptr::null_mut(), &mut id) } != driver::CUDA_SUCCESS {
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

/// Runs the five paths of the kernel `name` as `run` says: the three that take the argument
/// array `params`, `checked`, cudyn's checked launch of the same arguments, and `cudarc`,
/// cudarc's launch of them.
///
/// # Safety
/// `params` points to one pointer per parameter of `kernel`, each to a value of the parameter's
/// size, alive during this call.
unsafe fn row(
    run: Run<'_>,
    (name, label): (&str, &str),
    direct: Direct,
    kernel: &Kernel,
    params: *mut *mut c_void,
    checked: impl FnMut() -> cudyn::Result<()>,
    cudarc: impl FnMut() -> Result<(), DriverError>,
) -> Result<(), String> {
    let config = LaunchConfig::for_elements(1024, 256);
    let (mut checked, mut cudarc) = (checked, cudarc);
    let mut paths: [Burst<'_>; 5] = [
        // SAFETY: the caller's contract; the fake driver only copies the arguments.
        &mut burst(|| unsafe { direct.raw.launch(kernel, &config, params) }),
        // SAFETY: as above.
        &mut burst(|| unsafe { direct.launch_after_context_query(kernel, &config, params) }),
        // SAFETY: as above.
        &mut burst(|| unsafe { kernel.launch_unchecked(&config, params) }.map_err(cudyn_error)),
        &mut burst(|| checked().map_err(cudyn_error)),
        &mut burst(|| cudarc().map_err(cudarc_error)),
    ];
    let (rounds, burst_size) = match run {
        Run::Only {
            kernel,
            path,
            launches,
        } => {
            if kernel == name {
                let index = PATHS.iter().position(|&p| p == path).unwrap_or(0);
                paths[index](launches)?;
            }
            return Ok(());
        }
        Run::Timed { rounds, burst } => (rounds, burst),
    };
    let samples = interleaved(rounds, burst_size, &mut paths)?;
    let mut line = format!("{label:<20}");
    for (path, samples_of_path) in PATHS.iter().zip(&samples) {
        let mut own = samples_of_path.clone();
        let mut over: Vec<f64> = samples_of_path
            .iter()
            .zip(&samples[0])
            .map(|(p, d)| p - d)
            .collect();
        line += &match *path {
            "direct" => format!(" {path} {:6.1}", median(&mut own)),
            _ => format!(
                " | {path} {:6.1} ({:+5.1})",
                median(&mut own),
                median(&mut over)
            ),
        };
    }
    println!("{line}");
    Ok(())
}

/// cudarc's launch of what `builder` holds.
///
/// # Safety
/// The arguments pushed match the kernel's parameters; the fake driver runs nothing.
unsafe fn cudarc_launch(
    cudarc: &Cudarc,
    builder: &mut cudarc::driver::LaunchArgs<'_>,
) -> Result<(), DriverError> {
    // SAFETY: the caller's contract.
    unsafe { builder.launch(cudarc.config) }.map(drop)
}

/// Runs the five paths of the four kernels as `run` says.
fn kernels(run: Run<'_>, direct: Direct, cudarc: &Cudarc) -> Result<(), String> {
    let config = LaunchConfig::for_elements(1024, 256);
    let stream = &cudarc.stream;

    let empty = fake_driver::kernel("empty", &[]);
    let function = cudarc.function(&empty)?;
    // SAFETY: no parameters; in this and every launch below, the fake driver runs nothing.
    unsafe {
        row(
            run,
            KERNELS[0],
            direct,
            &empty,
            std::ptr::null_mut(),
            || empty.launch(&config, ()),
            || cudarc_launch(cudarc, &mut stream.launch_builder(&function)),
        )
    }?;

    // C++ kernels, named by their mangled names, so that the checked launch also checks types:
    // saxpy(float, const float*, const float*, float*, unsigned long long).
    let saxpy = fake_driver::kernel(
        "_Z5saxpyfPKfS0_Pfy",
        &c_params(&[(4, 4), (8, 8), (8, 8), (8, 8), (8, 8)]),
    );
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
    let function = cudarc.function(&saxpy)?;
    let (cudarc_x, cudarc_y) = (cudarc.buffer(1024)?, cudarc.buffer(1024)?);
    let mut cudarc_out = cudarc.buffer(1024)?;
    // SAFETY: five pointers to values of the parameters' sizes, alive during the call.
    unsafe {
        row(
            run,
            KERNELS[1],
            direct,
            &saxpy,
            params.as_mut_ptr(),
            || saxpy.launch(&config, (a, &x, &y, &mut out, n)),
            || {
                let mut builder = stream.launch_builder(&function);
                builder
                    .arg(&a)
                    .arg(&cudarc_x)
                    .arg(&cudarc_y)
                    .arg(&mut cudarc_out)
                    .arg(&n);
                cudarc_launch(cudarc, &mut builder)
            },
        )
    }?;

    let mut types = vec![(8, 8)];
    for _ in 0..5 {
        types.extend([(4, 4), (8, 8), (4, 4), (8, 8)]);
    }
    // args21(float*, then five rounds of int, unsigned long long, float, double).
    let args21 = fake_driver::kernel("_Z6args21Pfiyfdiyfdiyfdiyfdiyfd", &c_params(&types));
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
    let function = cudarc.function(&args21)?;
    // SAFETY: 21 pointers to values of the parameters' sizes, alive during the call.
    unsafe {
        row(
            run,
            KERNELS[2],
            direct,
            &args21,
            params.as_mut_ptr(),
            || {
                #[rustfmt::skip]
                let args = (
                    &mut out, s.0, s.1, s.2, s.3, s.4, s.5, s.6, s.7, s.8, s.9, s.10, s.11, s.12,
                    s.13, s.14, s.15, s.16, s.17, s.18, s.19,
                );
                args21.launch(&config, args)
            },
            || {
                let mut builder = stream.launch_builder(&function);
                builder.arg(&mut cudarc_out);
                builder.arg(&s.0).arg(&s.1).arg(&s.2).arg(&s.3).arg(&s.4);
                builder.arg(&s.5).arg(&s.6).arg(&s.7).arg(&s.8).arg(&s.9);
                builder
                    .arg(&s.10)
                    .arg(&s.11)
                    .arg(&s.12)
                    .arg(&s.13)
                    .arg(&s.14);
                builder
                    .arg(&s.15)
                    .arg(&s.16)
                    .arg(&s.17)
                    .arg(&s.18)
                    .arg(&s.19);
                cudarc_launch(cudarc, &mut builder)
            },
        )
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
    let function = cudarc.function(&scale)?;
    // SAFETY: one pointer to a value of the parameter's size, alive during the call.
    unsafe {
        row(
            run,
            KERNELS[3],
            direct,
            &scale,
            params.as_mut_ptr(),
            || scale.launch(&config, (value,)),
            || {
                let mut builder = stream.launch_builder(&function);
                builder.arg(&value);
                cudarc_launch(cudarc, &mut builder)
            },
        )
    }?;
    Ok(())
}

/// The instructions valgrind counted in a run of this program with `args`.
fn instructions_of(args: &[String]) -> Result<u64, String> {
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let output = Command::new("valgrind")
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .arg(exe)
        .args(args)
        .output()
        .map_err(|e| format!("running valgrind (is it installed?): {e}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!("valgrind {args:?} failed: {stderr}"));
    }
    stderr
        .lines()
        .find_map(|line| line.split_once("Collected :"))
        .and_then(|(_, count)| count.trim().parse().ok())
        .ok_or(format!(
            "no instruction count in valgrind's output: {stderr}"
        ))
}

/// Prints the instructions per launch of every path of every kernel, over `launches` launches.
fn count_instructions(launches: usize) -> Result<(), String> {
    println!(
        "instructions per launch (callgrind, {launches} launches after {WARM_UP}), the fake \
         driver's included; (+x): over direct"
    );
    for (name, label) in KERNELS {
        let mut line = format!("{label:<20}");
        let mut direct = 0.0;
        for path in PATHS {
            let run = |count: usize| {
                instructions_of(&[
                    "--only".into(),
                    format!("{name}/{path}"),
                    "--launches".into(),
                    count.to_string(),
                ])
            };
            let before = run(WARM_UP)?;
            let after = run(WARM_UP + launches)?;
            let per_launch = after.saturating_sub(before) as f64 / launches as f64;
            line += &match path {
                "direct" => {
                    direct = per_launch;
                    format!(" {path} {per_launch:6.1}")
                }
                _ => format!(" | {path} {per_launch:6.1} ({:+6.1})", per_launch - direct),
            };
        }
        println!("{line}");
    }
    Ok(())
}

fn run() -> Result<(), String> {
    let mode = mode()?;
    if let Mode::Instructions { launches } = mode {
        return count_instructions(launches);
    }
    let fake = FakeDriver::install()?;
    let api = &cudyn::sys::driver().map_err(cudyn_error)?.api;
    let direct = Direct {
        raw: RawLauncher::new()?,
        context_id: api.cuCtxGetId.ok_or("no cuCtxGetId")?,
    };
    let cudarc = Cudarc::new()?;
    match mode {
        Mode::Only {
            kernel,
            path,
            launches,
        } => {
            let run = Run::Only {
                kernel: &kernel,
                path: &path,
                launches,
            };
            kernels(run, direct, &cudarc)
        }
        Mode::Time {
            rounds,
            burst,
            warm,
            cold,
        } => {
            println!(
                "host ns per launch through the fake driver; (+x): cost over direct, median of \
                 the per-round differences"
            );
            for (cold_caches, wanted, default_burst) in [(false, warm, 1000), (true, cold, 100)] {
                if !wanted {
                    continue;
                }
                let burst = burst.unwrap_or(default_burst);
                fake.set_cold_caches(cold_caches);
                println!(
                    "{} caches, median of {rounds} interleaved bursts of {burst}:",
                    if cold_caches { "cold" } else { "warm" },
                );
                kernels(Run::Timed { rounds, burst }, direct, &cudarc)?;
            }
            Ok(())
        }
        Mode::Instructions { .. } => Ok(()),
    }
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
