//! Host time of kernel launches, measured in interleaved bursts: cudyn's checked launch against
//! the raw `cuLaunchKernel`, called through the very symbol cudyn resolved, in the same process.
//!
//! One burst is `burst` launches back to back, timed on the host only: short enough not to fill
//! the launch queue, and the device is synchronized after each burst, untimed. A round times one
//! burst of each path; paths take turns within a round, in an order that alternates from round to
//! round, so that drift of the machine (clock, other tenants) and the position in a round affect
//! every path alike. Shared by tests/gpu_launch_overhead.rs and the cudyn-bench program (through
//! `#[path]`), so not every item is used by each.
#![allow(dead_code)]

use std::ffi::c_void;
use std::time::Instant;

use cudyn::sys::driver;
use cudyn::{Kernel, LaunchConfig};

/// `cuLaunchKernel`'s signature.
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

/// The raw launch, as a C program writes it, through the driver cudyn opened.
#[derive(Debug, Clone, Copy)]
pub struct RawLauncher {
    launch: LaunchFn,
}

impl RawLauncher {
    /// `cuLaunchKernel` of the driver cudyn uses.
    pub fn new() -> Result<RawLauncher, String> {
        let api = &cudyn::sys::driver().map_err(|e| e.to_string())?.api;
        let launch = api
            .cuLaunchKernel
            .ok_or("the driver has no cuLaunchKernel")?;
        Ok(RawLauncher { launch })
    }

    /// Launches `kernel` on the default stream with `params`, one pointer per parameter.
    ///
    /// # Safety
    /// `params` points at one value of each of the kernel's parameters, in order, and the
    /// kernel's memory accesses are valid for `config`; a context is current.
    pub unsafe fn launch(
        &self,
        kernel: &Kernel,
        config: &LaunchConfig<'_>,
        params: *mut *mut c_void,
    ) -> Result<(), String> {
        let (g, b) = (config.grid, config.block);
        // SAFETY: the caller's contract; a kernel handle is accepted where a CUfunction is.
        let status = unsafe {
            (self.launch)(
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
        if status == driver::CUDA_SUCCESS {
            Ok(())
        } else {
            Err(format!("cuLaunchKernel failed with status {status}"))
        }
    }
}

/// Launches a path's kernel `count` times.
pub type Burst<'a> = &'a mut dyn FnMut(usize) -> Result<(), String>;

/// Host nanoseconds per launch over one burst; the device drains untimed afterwards.
pub fn time_burst(
    burst: usize,
    launches: &mut dyn FnMut(usize) -> Result<(), String>,
) -> Result<f64, String> {
    let start = Instant::now();
    launches(burst)?;
    let elapsed = start.elapsed();
    cudyn::synchronize().map_err(|e| e.to_string())?;
    Ok(elapsed.as_nanos() as f64 / burst as f64)
}

/// Per-launch host nanoseconds of each path, one sample per round (`rounds` rounds of one burst of
/// each path), after one untimed burst of each (first launches load the kernel into the context).
pub fn interleaved(
    rounds: usize,
    burst: usize,
    paths: &mut [Burst<'_>],
) -> Result<Vec<Vec<f64>>, String> {
    for launches in paths.iter_mut() {
        launches(burst)?;
    }
    cudyn::synchronize().map_err(|e| e.to_string())?;
    let mut samples = vec![Vec::with_capacity(rounds); paths.len()];
    let count = paths.len();
    for round in 0..rounds {
        for turn in 0..count {
            let path = if round % 2 == 0 {
                turn
            } else {
                count - 1 - turn
            };
            samples[path].push(time_burst(burst, &mut *paths[path])?);
        }
    }
    Ok(samples)
}

/// The median of `samples` (sorted in place); NaN for none.
pub fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    match samples.len() {
        0 => f64::NAN,
        len => samples[len / 2],
    }
}

/// The median of the per-round ratios `numerator[i] / denominator[i]`: each ratio compares two
/// bursts timed next to each other, so slow drift of the machine cancels out.
pub fn median_ratio(numerator: &[f64], denominator: &[f64]) -> f64 {
    let mut ratios: Vec<f64> = numerator
        .iter()
        .zip(denominator)
        .map(|(n, d)| n / d)
        .collect();
    median(&mut ratios)
}
