//! Keeping released libraries loaded: when the last user of a shared library (without device
//! variables, or with variables shared on request) is dropped, cudyn keeps it loaded (within
//! `cudyn::library::retention()`), and the next identical load takes it back; `release_retained`
//! unloads what is kept, and `set_retained(0)` brings back unloading with the last user.
//!
//! Whether a load is a real one is told by state that only the loaded library holds: a kernel
//! attribute set on the first load's kernel (`MaxDynamicSharedSizeBytes`) is still set on the
//! kernel of a load that took the library back, and back at its default on a fresh load (even if
//! the driver happened to hand out the same handle value again). Unloading is also told by device
//! memory: a library of a 16 MiB initialized `__device__` table, shared on request (so kept with
//! its variables), holds 16 MiB of device memory while loaded or kept.
//!
//! The limits are process-wide, so the tests of this binary take turns.
//! Run with `cargo test -p cudyn --test gpu_retention -- --include-ignored` on a machine with a
//! GPU (a few seconds).

mod common;
mod footprint;

use std::sync::{Mutex, MutexGuard};

use common::{compile, random_floats, Output, SAXPY};
use cudyn::library::{release_retained, retention, set_retained, Retention};
use cudyn::{
    Device, DeviceBuffer, Kernel, KernelAttribute, LaunchConfig, Library, Program, Sharing,
};
use footprint::{mib, Footprint};

/// Dynamic shared memory a kernel is opted in to on the first load: never its default.
const OPTED_IN: i32 = 100 * 1024;

/// The limits and the kept libraries are process-wide: one test at a time changes and relies on
/// them, starting with none kept.
fn turn(limit: Retention) -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    let guard = TURN.lock().unwrap_or_else(|poison| poison.into_inner());
    set_retained(limit);
    release_retained();
    guard
}

/// SAXPY with a comment of its own, so that no other test's load shares its library.
fn saxpy_source(tag: &str) -> String {
    format!("// gpu_retention: {tag}\n{SAXPY}")
}

fn device() -> Device {
    cudyn::set_device(0).unwrap()
}

/// The dynamic shared memory `kernel` is opted in to on device 0.
fn opted_in(kernel: &Kernel) -> i32 {
    kernel
        .attribute(KernelAttribute::MaxDynamicSharedSizeBytes, device())
        .unwrap()
}

/// Opts `kernel` in to [`OPTED_IN`] bytes: state that lives exactly as long as its library.
fn opt_in(kernel: &Kernel) {
    kernel
        .set_attribute(
            KernelAttribute::MaxDynamicSharedSizeBytes,
            OPTED_IN,
            device(),
        )
        .unwrap();
    assert_eq!(opted_in(kernel), OPTED_IN);
}

/// Runs `saxpy` of `kernel` on 4099 elements and checks every result.
fn saxpy_works(kernel: &Kernel) {
    let n = 4099usize;
    let (x, y) = (random_floats(n, 1), random_floats(n, 2));
    let (dx, dy) = (
        DeviceBuffer::from_slice(&x).unwrap(),
        DeviceBuffer::from_slice(&y).unwrap(),
    );
    let mut out = DeviceBuffer::<f32>::alloc(n).unwrap();
    // SAFETY: saxpy reads x[i], y[i] and writes out[i] for i < n, all n floats long; the copy
    // below waits for it on the same stream.
    unsafe {
        kernel.launch(
            &LaunchConfig::for_elements(n, 128),
            (2.5f32, &dx, &dy, &mut out, n as u64),
        )
    }
    .unwrap();
    let expected: Vec<f32> = x
        .iter()
        .zip(&y)
        .map(|(x, y)| 2.5f32.mul_add(*x, *y))
        .collect();
    assert_eq!(out.to_vec().unwrap(), expected);
}

#[test]
#[ignore = "gpu: loads, drops and loads again the same code, compiled and from bytes"]
fn a_repeat_load_after_the_last_drop_takes_the_kept_library_back() {
    let _turn = turn(Retention::DEFAULT);
    let program = Program::new(saxpy_source("repeat"));
    let first = program.load().unwrap();
    let kernel = first.kernel("saxpy").unwrap();
    opt_in(&kernel);
    let (library_raw, kernel_raw) = (first.as_raw() as usize, kernel.as_raw() as usize);
    // The library keeps what it learned of a kernel: a second lookup shares the parameter
    // layout read for the first (the same allocation), asking the driver nothing.
    let params = kernel.params().unwrap().as_ptr();
    assert_eq!(
        first.kernel("saxpy").unwrap().params().unwrap().as_ptr(),
        params
    );
    let params = params as usize;
    drop((first, kernel));

    // The same source again: the library kept, not a new load (its kernel still opted in).
    let again = program.load().unwrap();
    let kernel = again.kernel("saxpy").unwrap();
    assert_eq!(again.as_raw() as usize, library_raw);
    assert_eq!(kernel.as_raw() as usize, kernel_raw);
    assert_eq!(
        opted_in(&kernel),
        OPTED_IN,
        "a new load would have the default"
    );
    assert_eq!(kernel.params().unwrap().as_ptr() as usize, params);
    saxpy_works(&kernel);
    drop((again, kernel));

    // Bytes loaded from outside, kept and taken back the same way.
    let cubin = Program::new(saxpy_source("bytes")).compile().unwrap();
    let bytes = cubin.code().to_vec();
    let first = Library::load(&bytes).unwrap();
    let kernel = first.kernel("saxpy").unwrap();
    opt_in(&kernel);
    let library_raw = first.as_raw() as usize;
    drop((first, kernel));
    let again = Library::loader().sharing(Sharing::Always).load(&bytes);
    // Sharing::Always is part of the load, not of the key: the kept library serves it too.
    let again = again.unwrap();
    assert_eq!(again.as_raw() as usize, library_raw);
    assert_eq!(opted_in(&again.kernel("saxpy").unwrap()), OPTED_IN);
    saxpy_works(&again.kernel("saxpy").unwrap());
}

#[test]
#[ignore = "gpu: retention turned off, each library is unloaded with its last user"]
fn retention_off_unloads_with_the_last_user_as_before() {
    let _turn = turn(Retention::OFF);
    assert_eq!(retention(), Retention::OFF);
    let program = Program::new(saxpy_source("off"));
    let first = program.load().unwrap();
    let kernel = first.kernel("saxpy").unwrap();
    let default = opted_in(&kernel);
    assert_ne!(default, OPTED_IN);
    opt_in(&kernel);
    drop((first, kernel));
    let again = program.load().unwrap();
    let kernel = again.kernel("saxpy").unwrap();
    assert_eq!(opted_in(&kernel), default, "a fresh load, at the default");
    saxpy_works(&kernel);
    assert_eq!(release_retained(), 0, "nothing was kept");

    // `set_retained(0)` is the same: no library, whatever the byte budget.
    set_retained(0);
    opt_in(&kernel);
    drop((again, kernel));
    let third = program.load().unwrap();
    assert_eq!(opted_in(&third.kernel("saxpy").unwrap()), default);
}

/// A kernel that changes a device variable.
const COUNTER: &str = r#"
// gpu_retention: counter
__device__ int counter;
extern "C" __global__ void bump() { counter += 1; }
"#;

#[test]
#[ignore = "gpu: code with variables is kept only when shared on request, unshared loads never"]
fn variables_are_kept_only_when_shared_on_request_and_unshared_loads_never() {
    let _turn = turn(Retention::DEFAULT);
    let cubin = Program::new(COUNTER).compile().unwrap();
    let bytes = cubin.code().to_vec();
    let load = |sharing| Library::loader().sharing(sharing).load(&bytes).unwrap();
    let set_counter = |library: &Library| {
        library.global::<i32>("counter").unwrap().write(&5).unwrap();
    };
    let counter = |library: &Library| library.global::<i32>("counter").unwrap().read().unwrap();
    // By default code with a variable is not shared, nor kept: a load after the last drop
    // starts with the variable as the image defines it.
    let library = load(Sharing::Auto);
    set_counter(&library);
    drop(library);
    assert_eq!(
        counter(&load(Sharing::Auto)),
        0,
        "Sharing::Auto: a fresh load"
    );
    // Shared on request, its loads share the variable: the library is kept with its value.
    let library = load(Sharing::Always);
    set_counter(&library);
    drop(library);
    assert_eq!(
        counter(&load(Sharing::Always)),
        5,
        "Sharing::Always: the kept library"
    );
    // A default load does not take the kept library (it would see the variable changed).
    assert_eq!(counter(&load(Sharing::Auto)), 0);
    assert_eq!(release_retained(), 1);
    assert_eq!(counter(&load(Sharing::Always)), 0, "released: a fresh load");
    release_retained();

    // A load with Sharing::Never is its own, and gone with its last user.
    let saxpy = Program::new(saxpy_source("never")).compile().unwrap();
    let never = || {
        Library::loader()
            .sharing(Sharing::Never)
            .load(saxpy.code())
            .unwrap()
    };
    let first = never();
    let kernel = first.kernel("saxpy").unwrap();
    let default = opted_in(&kernel);
    opt_in(&kernel);
    drop((first, kernel));
    assert_eq!(opted_in(&never().kernel("saxpy").unwrap()), default);
    assert_eq!(release_retained(), 0, "an unshared load is never kept");
}

/// A table of 16 MiB whose first byte is 1 and the rest 0: initialized, so the cubin holds it and
/// a loaded library of it takes 16 MiB of device memory (as in tests/gpu_sharing_memory.rs).
const TABLE: &str = r#"
// gpu_retention: table
__device__ unsigned char table[16 << 20] = {1};
__device__ unsigned int marker = 1;
extern "C" __global__ void first_byte(unsigned int *out) { *out = table[0]; }
"#;
const TABLE_BYTES: i64 = 16 << 20;

/// Loads `image` sharing its variables, and launches its kernel, which makes the driver load the
/// library on the device; checks the kernel read the table.
fn load_table(image: &[u8]) -> Library {
    let library = Library::loader()
        .sharing(Sharing::Always)
        .load(image)
        .unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(1).unwrap();
    // SAFETY: first_byte writes one unsigned int to out, which holds one; the copy below waits
    // for it on the same stream.
    unsafe {
        library
            .kernel("first_byte")
            .unwrap()
            .launch(&LaunchConfig::new(1, 1), (&mut out,))
    }
    .unwrap();
    assert_eq!(out.to_vec().unwrap(), [1]);
    library
}

#[test]
#[ignore = "gpu: device memory of a kept 16 MiB image, before and after release_retained"]
fn release_retained_unloads_the_kept_libraries_and_gives_their_memory_back() {
    let _turn = turn(Retention::DEFAULT);
    let device = device();
    let image = compile(TABLE, Output::Cubin).bytes();
    assert!(
        image.len() as i64 >= TABLE_BYTES,
        "the cubin holds the table"
    );
    // One-time costs before the baseline: the context, the library machinery, a launch.
    saxpy_works(
        &Program::new(saxpy_source("warm-up"))
            .load()
            .unwrap()
            .kernel("saxpy")
            .unwrap(),
    );
    release_retained();
    cudyn::synchronize().unwrap();
    let baseline = Footprint::now(device).unwrap();

    let library = load_table(&image);
    let loaded = Footprint::now(device).unwrap().since(baseline);
    library.global::<u32>("marker").unwrap().write(&7).unwrap();
    drop(library);
    let kept = Footprint::now(device).unwrap().since(baseline);
    assert_eq!(release_retained(), 1, "the table's library was kept");
    let released = Footprint::now(device).unwrap().since(baseline);
    println!(
        "device memory over the baseline: loaded {:.1} MiB, kept after the last drop {:.1} MiB, \
         after release_retained {:.1} MiB",
        mib(loaded.device),
        mib(kept.device),
        mib(released.device)
    );
    assert!(
        loaded.device >= TABLE_BYTES,
        "a loaded library holds its table: {loaded:?}"
    );
    assert!(
        kept.device >= TABLE_BYTES,
        "kept after the last drop: {kept:?}"
    );
    assert!(
        released.device < TABLE_BYTES / 2,
        "release_retained unloads it: loaded {loaded:?}, kept {kept:?}, released {released:?}"
    );
    // And the next load is a fresh one: the marker as the image defines it, not the 7 written.
    let fresh = load_table(&image);
    assert_eq!(fresh.global::<u32>("marker").unwrap().read().unwrap(), 1);
    drop(fresh);
    release_retained();
}
