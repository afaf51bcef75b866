//! Where a PTX load's time goes: the driver calls a loader of PTX can make, timed one against
//! another in one process, interleaved, medians in µs. Raw driver calls (cudarc's bindings of
//! `libcuda.so.1`), no cudyn in the timed code.
//!
//! - library, lazy: `cuLibraryLoadData` + `cuLibraryGetKernel`. With lazy loading (the driver's
//!   default) nothing is JIT-compiled yet: a PTX the JIT refuses fails later, at a launch.
//! - library, eager: the same + `cuLibraryGetModule`, which loads the library into the current
//!   context now and so runs the JIT (or finds its result in the driver's JIT cache). cudyn's load
//!   of PTX does this, so that a refused PTX fails at the load with the JIT's log.
//! - library, eager, logs: the same with the JIT's info and error log buffers (cudyn passes them).
//! - module: `cuModuleLoadData` + `cuModuleGetFunction`, the module API CuPy loads with; always
//!   eager.
//!
//! Each repetition unloads what it loaded after the clock stops; the first round, which fills the
//! driver's JIT cache, is left out. Usage, on a machine with a GPU:
//!
//! ```text
//! cargo build --release -p cudyn-bench --bin ptx_load_calls
//! target/release/ptx_load_calls PTX_FILE [REPETITIONS]      # 101 repetitions unless given
//! ```
//!
//! The PTX may be the one `cudyn-bench --images DIR` writes (DIR/peers.ptx); its kernel `saxpy`
//! is looked up.

use std::ffi::{c_char, c_uint, c_void, CString};
use std::process::ExitCode;
use std::time::Instant;

use cudarc::driver::sys;

const LOG_BYTES: usize = 16 * 1024;

/// The four ways to load, in the order printed.
const PATHS: [&str; 4] = [
    "library, lazy",
    "library, eager",
    "library, eager, logs",
    "module",
];

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("ptx_load_calls: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let mut arguments = std::env::args().skip(1);
    let usage = "usage: ptx_load_calls PTX_FILE [REPETITIONS]";
    let file = arguments.next().ok_or(usage)?;
    let repetitions = match arguments.next() {
        None => 101,
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or(format!(
                "REPETITIONS is a whole number above 0, not `{text}`\n{usage}"
            ))?,
    };
    let mut bytes = std::fs::read(&file).map_err(|e| format!("{file}: {e}"))?;
    while bytes.last() == Some(&0) {
        bytes.pop();
    }
    let ptx = CString::new(bytes).map_err(|_| format!("{file}: a NUL byte inside the PTX"))?;
    // Asked of cudyn first: cudarc's bindings abort the process where there is no driver.
    match cudyn::Device::count() {
        Ok(0) => return Err("needs a GPU: the driver sees none".to_owned()),
        Ok(_) => {}
        Err(error) => return Err(format!("needs a GPU: {error}")),
    }
    let mut driver = Driver::new()?;
    let mut samples = vec![Vec::with_capacity(repetitions); PATHS.len()];
    for repetition in 0..=repetitions {
        let mut order: Vec<usize> = (0..PATHS.len()).collect();
        if repetition % 2 == 1 {
            order.reverse();
        }
        for path in order {
            let nanoseconds = driver.load(path, &ptx)?;
            if repetition > 0 {
                samples[path].push(nanoseconds as f64 / 1e3);
            }
        }
    }
    for (path, mut times) in PATHS.iter().zip(samples) {
        times.sort_by(f64::total_cmp);
        println!(
            "{path:>22}: median {:7.1} µs, min {:7.1} µs",
            times[times.len() / 2],
            times[0]
        );
    }
    Ok(())
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

    /// One load of `ptx` by the way numbered `path` of [`PATHS`]: the nanoseconds it took, its
    /// unload not counted.
    fn load(&mut self, path: usize, ptx: &CString) -> Result<u128, String> {
        let name: *const c_char = c"saxpy".as_ptr();
        let image = ptx.as_ptr().cast::<c_void>();
        if path == 3 {
            let (mut module, mut function) = (std::ptr::null_mut(), std::ptr::null_mut());
            let start = Instant::now();
            // SAFETY: a NUL-terminated PTX and name that outlive the calls; the handles are
            // live locals the driver writes, and the module is unloaded once.
            unsafe {
                driver!(cuModuleLoadData(&mut module, image))?;
                driver!(cuModuleGetFunction(&mut function, module, name))?;
                let elapsed = start.elapsed().as_nanos();
                driver!(cuModuleUnload(module))?;
                return Ok(elapsed);
            }
        }
        let (eager, logs) = (path >= 1, path == 2);
        let mut options = [
            sys::CUjit_option::CU_JIT_INFO_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        // The driver writes the logs through these pointers, as C programs pass them.
        let mut values = [
            self.info.as_mut_ptr().cast::<c_void>(),
            LOG_BYTES as *mut c_void,
            self.error.as_mut_ptr().cast::<c_void>(),
            LOG_BYTES as *mut c_void,
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
                image,
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
            let elapsed = start.elapsed().as_nanos();
            driver!(cuLibraryUnload(library))?;
            Ok(elapsed)
        }
    }
}
