//! The launch-overhead regression test: cudyn's checked launch may cost at most 1.10 times the
//! raw `cuLaunchKernel` measured in the same process.
//!
//! Method (tests/launch_timing): an empty kernel and a 5-argument SAXPY, each launched by cudyn's
//! checked `Kernel::launch` and by the raw `cuLaunchKernel` through the symbol cudyn resolved.
//! Host time only, in bursts of [`BURST`] launches with an untimed synchronize after each burst;
//! a round times one burst of each path, the order alternating between rounds. Each round gives
//! one ratio, cudyn's burst over the raw burst next to it, so that drift of the machine cancels;
//! an attempt takes the median of [`ROUNDS`] such ratios, which one slow burst (an interrupt,
//! another tenant) cannot move. The cost the limit protects is cudyn's own work, about 2 to 3%
//! of a raw launch of 3 µs on an H200 host; run-to-run noise of the median is about 1%.
//!
//! A kernel passes when one of [`ATTEMPTS`] attempts is within the limit: noise can make one
//! attempt look slow, but a regression of more than 10% makes every attempt slow, and fails. The
//! test takes about a second (plus nvcc's compile of the two kernels).
//!
//! Run with `cargo test --release -p cudyn --test gpu_launch_overhead -- --include-ignored
//! --nocapture` on a machine with a GPU and nvcc (`$CUDA_HOME/bin/nvcc`); it prints every
//! attempt's ratio. The limit is for optimized code: a debug build fails, saying so.

mod common;
mod launch_timing;

use std::ffi::c_void;

use common::{compile, Output, SAXPY};
use cudyn::{DeviceBuffer, Kernel, LaunchConfig, Library};
use launch_timing::{interleaved, median_ratio, RawLauncher};

/// cudyn's checked launch over the raw launch, at most.
const LIMIT: f64 = 1.10;
/// Launches per timed burst.
const BURST: usize = 100;
/// Bursts of each path per attempt.
const ROUNDS: usize = 200;
/// Attempts per kernel before the test fails.
const ATTEMPTS: usize = 3;

const EMPTY: &str = r#"extern "C" __global__ void empty() {}"#;

/// The median ratio of each attempt, stopping at the first within [`LIMIT`].
fn attempts(
    raw: &mut dyn FnMut(usize) -> Result<(), String>,
    checked: &mut dyn FnMut(usize) -> Result<(), String>,
) -> Vec<f64> {
    let mut ratios = Vec::new();
    while ratios.len() < ATTEMPTS && ratios.last().is_none_or(|&ratio| ratio > LIMIT) {
        let samples = interleaved(ROUNDS, BURST, &mut [&mut *raw, &mut *checked]).unwrap();
        ratios.push(median_ratio(&samples[1], &samples[0]));
    }
    ratios
}

fn assert_within_limit(kernel: &str, ratios: &[f64]) {
    println!("{kernel}: cudyn / raw per attempt {ratios:.3?} (limit {LIMIT})");
    assert!(
        ratios.iter().any(|&ratio| ratio <= LIMIT),
        "{kernel}: cudyn's checked launch cost more than {LIMIT}x the raw cuLaunchKernel in each \
         of {ATTEMPTS} attempts: {ratios:.3?} (median of {ROUNDS} interleaved bursts of {BURST})"
    );
}

fn launch_empty_raw(
    raw: RawLauncher,
    kernel: &Kernel,
    config: &LaunchConfig<'_>,
    count: usize,
) -> Result<(), String> {
    for _ in 0..count {
        // SAFETY: a kernel without parameters; cudyn made the primary context current.
        unsafe { raw.launch(kernel, config, std::ptr::null_mut()) }?;
    }
    Ok(())
}

#[test]
#[ignore = "gpu: cudyn's checked launch within 1.10x the raw cuLaunchKernel, same process"]
fn checked_launch_costs_at_most_ten_percent_over_the_raw_launch() {
    if cfg!(debug_assertions) {
        panic!("the limit is for cudyn's optimized launch: run this test with --release");
    }
    let cubin = compile(&format!("{EMPTY}\n{SAXPY}"), Output::Cubin).bytes();
    cudyn::set_device(0).unwrap();
    let library = Library::load(&cubin).unwrap();
    let empty = library.kernel("empty").unwrap();
    let saxpy = library.kernel("saxpy").unwrap();
    let raw = RawLauncher::new().unwrap();

    let n = 1024usize;
    let config = LaunchConfig::for_elements(n, 256);
    let empty_ratios = attempts(
        &mut |count| launch_empty_raw(raw, &empty, &config, count),
        &mut |count| {
            for _ in 0..count {
                // SAFETY: the empty kernel takes no parameters and touches no memory.
                unsafe { empty.launch(&config, ()) }.map_err(|e| e.to_string())?;
            }
            Ok(())
        },
    );

    let a = 3.0f32;
    let x = DeviceBuffer::from_slice(&vec![1.0f32; n]).unwrap();
    let y = DeviceBuffer::from_slice(&vec![2.0f32; n]).unwrap();
    let mut out = DeviceBuffer::<f32>::zeroed(n).unwrap();
    let mut values = (a, x.as_raw(), y.as_raw(), out.as_raw(), n as u64);
    let mut params: [*mut c_void; 5] = [
        (&mut values.0 as *mut f32).cast(),
        (&mut values.1 as *mut u64).cast(),
        (&mut values.2 as *mut u64).cast(),
        (&mut values.3 as *mut u64).cast(),
        (&mut values.4 as *mut u64).cast(),
    ];
    let saxpy_ratios = {
        let out = &mut out;
        attempts(
            &mut |count| {
                for _ in 0..count {
                    // SAFETY: five pointers to values of the kernel's parameter types; saxpy
                    // reads x[i], y[i] and writes out[i] for i < n, and the buffers hold n floats.
                    unsafe { raw.launch(&saxpy, &config, params.as_mut_ptr()) }?;
                }
                Ok(())
            },
            &mut |count| {
                for _ in 0..count {
                    // SAFETY: as above; the buffers outlive every launch (each burst is
                    // synchronized, and `out` is read after the last).
                    unsafe { saxpy.launch(&config, (a, &x, &y, &mut *out, n as u64)) }
                        .map_err(|e| e.to_string())?;
                }
                Ok(())
            },
        )
    };
    // Both paths launched the same kernel on the same data: the timing was of working launches.
    let expected = a * 1.0 + 2.0;
    assert!(out.to_vec().unwrap().iter().all(|&v| v == expected));

    assert_within_limit("empty kernel", &empty_ratios);
    assert_within_limit("5-argument SAXPY", &saxpy_ratios);
}
