//! What loading identical code once saves: device memory and host memory of 100 loads of one
//! image with sharing and without, against one load.
//!
//! The image is a cubin with a 16 MiB initialized `__device__` table, so one loaded library is
//! plain to see on both sides: the driver keeps its own copy of the image in host memory (unless
//! asked to use the caller's bytes in place) and puts the table in device memory when the library
//! is loaded into the context. The runtime loads lazily, so every load is followed by a launch of
//! one of its kernels, which makes the driver load it on the device.
//!
//! How it is measured, in this test binary of its own (so that no other test allocates at the
//! same time): after the context exists and a first, unrelated library has been loaded, launched
//! and dropped (cudyn's and the runtime's one-time costs), the baseline is taken; then the figures
//! after one load, after 100 loads sharing it, and, once those are dropped, after 100 loads that
//! opt out of sharing. Device memory is `total - free` from `cuMemGetInfo` (as `cudaMemGetInfo`
//! reports it) through [`cudyn::Device::memory_info`]; host memory is the process's resident set
//! (`VmRSS` in /proc/self/status), both measured by tests/footprint. The loads share with
//! [`Sharing::Always`] because the image defines a variable (the table), which the default does
//! not share.
//!
//! Run with `cargo test -p cudyn --test gpu_sharing_memory -- --include-ignored --nocapture` on
//! a machine with a GPU; it prints the figures.

mod common;
mod footprint;

use std::time::Instant;

use common::{compile, Output, SAXPY};
use cudyn::{DeviceBuffer, LaunchConfig, Library, Sharing};
use footprint::{mib, Footprint};

const LOADS: usize = 100;
const TABLE_BYTES: i64 = 16 << 20;

/// A table of 16 MiB whose first byte is 1 and the rest 0: initialized, so the cubin holds it.
const TABLE: &str = r#"
__device__ unsigned char table[16 << 20] = {1};
extern "C" __global__ void first_byte(unsigned int *out) { *out = table[0]; }
"#;

/// Loads `image` with `sharing` and launches its kernel into `out`, which makes the driver load
/// the library on the device; checks the kernel read the table.
fn load_and_run(image: &[u8], sharing: Sharing, out: &mut DeviceBuffer<u32>) -> Library {
    let library = Library::loader().sharing(sharing).load(image).unwrap();
    let kernel = library.kernel("first_byte").unwrap();
    out.fill_bytes(0).unwrap();
    // SAFETY: first_byte writes one unsigned int to out, which holds one; the copy below waits
    // for it on the same stream.
    unsafe { kernel.launch(&LaunchConfig::new(1, 1), (&mut *out,)) }.unwrap();
    assert_eq!(out.to_vec().unwrap(), [1]);
    library
}

#[test]
#[ignore = "gpu: device and host memory of 100 loads of a 16 MiB image, shared and not"]
fn a_hundred_shared_loads_cost_what_one_load_costs() {
    let image = compile(TABLE, Output::Cubin).bytes();
    assert!(
        image.len() as i64 >= TABLE_BYTES,
        "the cubin holds the table"
    );
    let device = cudyn::set_device(0).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(1).unwrap();
    // One-time costs before the baseline: the runtime's library machinery, a launch, copies.
    let warm_up = Library::loader()
        .sharing(Sharing::Never)
        .load(compile(SAXPY, Output::Cubin).bytes())
        .unwrap();
    let mut ints = DeviceBuffer::<i32>::zeroed(4).unwrap();
    // SAFETY: fill writes ints[i] for i < 4 into 4 ints; the copy below waits for it.
    unsafe {
        warm_up
            .kernel("fill")
            .unwrap()
            .launch(&LaunchConfig::new(1, 32), (&mut ints, 1i32, 4u64))
    }
    .unwrap();
    assert_eq!(ints.to_vec().unwrap(), [1; 4]);
    drop((warm_up, ints));
    cudyn::synchronize().unwrap();

    let baseline = Footprint::now(device).unwrap();
    let started = Instant::now();
    let mut shared = vec![load_and_run(&image, Sharing::Always, &mut out)];
    let first_load = started.elapsed();
    let one = Footprint::now(device).unwrap().since(baseline);
    let started = Instant::now();
    shared.extend((1..LOADS).map(|_| load_and_run(&image, Sharing::Always, &mut out)));
    let shared_loads = started.elapsed();
    let hundred_shared = Footprint::now(device).unwrap().since(baseline);
    assert!(shared
        .iter()
        .all(|library| library.as_raw() == shared[0].as_raw()));
    drop(shared);
    // Released, a library shared on request is kept loaded for a later load: unloaded now, so
    // that the loads below start from the footprint before any load.
    cudyn::library::release_retained();

    let baseline_separate = Footprint::now(device).unwrap();
    let started = Instant::now();
    let separate: Vec<Library> = (0..LOADS)
        .map(|_| load_and_run(&image, Sharing::Never, &mut out))
        .collect();
    let separate_loads = started.elapsed();
    let hundred_separate = Footprint::now(device).unwrap().since(baseline_separate);
    drop(separate);

    println!(
        "image: {:.1} MiB cubin with a {:.0} MiB initialized __device__ table",
        mib(image.len() as i64),
        mib(TABLE_BYTES)
    );
    println!("{:<28} {:>14} {:>14}", "", "device MiB", "host RSS MiB");
    for (what, footprint) in [
        ("1 load".to_owned(), one),
        (format!("{LOADS} loads, shared"), hundred_shared),
        (format!("{LOADS} loads, not shared"), hundred_separate),
    ] {
        println!(
            "{what:<28} {:>14.1} {:>14.1}",
            mib(footprint.device),
            mib(footprint.host)
        );
    }
    println!(
        "ratio to one load: shared {:.3}x device, {:.3}x host; not shared {:.1}x device, {:.1}x host",
        hundred_shared.device as f64 / one.device as f64,
        hundred_shared.host as f64 / one.host as f64,
        hundred_separate.device as f64 / one.device as f64,
        hundred_separate.host as f64 / one.host as f64,
    );
    println!(
        "time: first load + launch {:.2} ms; {} shared loads + launches {:.2} ms ({:.1} µs each); \
         {LOADS} separate {:.2} ms ({:.1} µs each)",
        first_load.as_secs_f64() * 1e3,
        LOADS - 1,
        shared_loads.as_secs_f64() * 1e3,
        shared_loads.as_secs_f64() * 1e6 / (LOADS - 1) as f64,
        separate_loads.as_secs_f64() * 1e3,
        separate_loads.as_secs_f64() * 1e6 / LOADS as f64,
    );

    // The measurement sees a load: its table on the device and the driver's copy of the image.
    assert!(one.device >= TABLE_BYTES, "one load: {one:?}");
    assert!(one.host >= TABLE_BYTES / 2, "one load: {one:?}");
    // Loading identical code once: 100 shared loads cost one load, within 10%.
    assert!(
        hundred_shared.device as f64 <= 1.1 * one.device as f64,
        "device memory: {LOADS} shared loads {hundred_shared:?}, one load {one:?}"
    );
    assert!(
        hundred_shared.host as f64 <= 1.1 * one.host as f64,
        "host memory: {LOADS} shared loads {hundred_shared:?}, one load {one:?}"
    );
    // And without sharing, each load pays again.
    assert!(
        hundred_separate.device >= 50 * one.device,
        "device memory: {LOADS} separate loads {hundred_separate:?}, one load {one:?}"
    );
}
