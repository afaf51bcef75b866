//! Loading identical device code once: loads of the same image with the same options share one
//! loaded library, unloaded after the last user is dropped (when not kept for a later load, see
//! tests/gpu_retention.rs); loads that opt out, and by default images with device variables, get
//! libraries of their own.
//! Run with `cargo test -p cudyn --test gpu_sharing -- --include-ignored` on a machine with a GPU.

mod common;

use std::sync::Barrier;

use common::{compile, random_floats, Output, SAXPY};
use cudyn::{Backend, Device, DeviceBuffer, Kernel, LaunchConfig, Library, Program, Sharing};

/// Runs `fill` of [`SAXPY`] from `kernel` over 1000 ints and checks every one was written.
fn fill_and_check(kernel: &Kernel, value: i32) {
    let n = 1000u64;
    let mut out = DeviceBuffer::<i32>::zeroed(n as usize).unwrap();
    // SAFETY: fill writes out[i] for i < n, and out holds n ints; the copy below, on the same
    // (legacy default) stream, waits for the kernel.
    unsafe {
        kernel.launch(
            &LaunchConfig::for_elements(n as usize, 256),
            (&mut out, value, n),
        )
    }
    .unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![value; n as usize]);
}

#[test]
#[ignore = "gpu: loads one cubin several ways and launches from each"]
fn identical_loads_share_one_library_and_each_launches() {
    let cubin = compile(SAXPY, Output::Cubin);
    let bytes = cubin.bytes();
    let from_bytes = Library::load(&bytes).unwrap();
    let from_file = Library::from_file(&cubin.path).unwrap();
    assert_eq!(from_bytes.as_raw(), from_file.as_raw());
    // The kernel handle belongs to the one library, whichever load it was taken from.
    assert_eq!(
        from_bytes.kernel("saxpy").unwrap().as_raw(),
        from_file.kernel("saxpy").unwrap().as_raw()
    );

    // Each backend loads its own library (the backend is part of what a load is), shared by the
    // loads through that backend.
    let through_driver = Library::loader()
        .backend(Backend::Driver)
        .load(&bytes)
        .unwrap();
    let through_driver_again = Library::loader()
        .backend(Backend::Driver)
        .load(&bytes)
        .unwrap();
    assert_eq!(from_bytes.backend(), Backend::Runtime);
    assert_ne!(through_driver.as_raw(), from_bytes.as_raw());
    assert_eq!(through_driver.as_raw(), through_driver_again.as_raw());

    // What NVRTC compiled, loaded twice: one library.
    let program = Program::new(SAXPY);
    let first = program.load().unwrap();
    let second = program.load().unwrap();
    assert_eq!(first.as_raw(), second.as_raw());

    // PTX too: the second load finds the library the first JIT-compiled.
    let ptx = compile(SAXPY, Output::Ptx).bytes();
    let ptx_first = Library::load(&ptx).unwrap();
    let ptx_second = Library::load(&ptx).unwrap();
    assert_eq!(ptx_first.as_raw(), ptx_second.as_raw());
    assert!(ptx_second.jit_log().error.is_empty());

    let n = 4099usize;
    let (x, y) = (random_floats(n, 1), random_floats(n, 2));
    let expected: Vec<f32> = x
        .iter()
        .zip(&y)
        .map(|(x, y)| 1.5f32.mul_add(*x, *y))
        .collect();
    for library in [&from_file, &through_driver_again, &second, &ptx_second] {
        let saxpy = library.kernel("saxpy").unwrap();
        let (dx, dy) = (
            DeviceBuffer::from_slice(&x).unwrap(),
            DeviceBuffer::from_slice(&y).unwrap(),
        );
        let mut out = DeviceBuffer::<f32>::alloc(n).unwrap();
        let config = LaunchConfig::for_elements(n, 128);
        // SAFETY: saxpy reads x[i], y[i] and writes out[i] for i < n, all n floats long; the
        // copy below waits for it on the same stream.
        unsafe { saxpy.launch(&config, (1.5f32, &dx, &dy, &mut out, n as u64)) }.unwrap();
        assert_eq!(out.to_vec().unwrap(), expected);
    }
}

#[test]
#[ignore = "gpu: a load with Sharing::Never next to shared ones"]
fn a_load_that_opts_out_gets_a_library_of_its_own() {
    let bytes = compile(SAXPY, Output::Cubin).bytes();
    let shared = Library::load(&bytes).unwrap();
    let own = Library::loader()
        .sharing(Sharing::Never)
        .load(&bytes)
        .unwrap();
    assert_ne!(own.as_raw(), shared.as_raw());
    // Nor does a later load share the opted-out one: it finds the shared library.
    let later = Library::load(&bytes).unwrap();
    assert_eq!(later.as_raw(), shared.as_raw());
    let own_fill = own.kernel("fill").unwrap();
    drop((shared, later, own));
    // The opted-out library lives on in its kernel, independently of the shared one.
    fill_and_check(&own_fill, 11);
}

/// A kernel that changes a device variable.
const COUNTER: &str = r#"
__device__ int counter;
extern "C" __global__ void bump() { counter += 1; }
"#;

#[test]
#[ignore = "gpu: device variables of shared and unshared loads"]
fn device_variables_are_shared_only_when_asked() {
    let bytes = compile(COUNTER, Output::Cubin).bytes();
    // By default an image that defines a variable is loaded separately each time: each load
    // has its own counter, as with two runtime loads.
    let first = Library::load(&bytes).unwrap();
    let second = Library::load(&bytes).unwrap();
    assert_ne!(first.as_raw(), second.as_raw());
    first.global::<i32>("counter").unwrap().write(&5).unwrap();
    assert_eq!(second.global::<i32>("counter").unwrap().read().unwrap(), 0);

    // Asked for, the loads share one counter: a write through one is read through the other,
    // and a kernel launched from one changes what the other reads.
    let always = || {
        Library::loader()
            .sharing(Sharing::Always)
            .load(&bytes)
            .unwrap()
    };
    let (one, other) = (always(), always());
    assert_eq!(one.as_raw(), other.as_raw());
    one.global::<i32>("counter").unwrap().write(&7).unwrap();
    assert_eq!(other.global::<i32>("counter").unwrap().read().unwrap(), 7);
    // SAFETY: bump takes no parameters and changes only the library's own counter.
    unsafe {
        other
            .kernel("bump")
            .unwrap()
            .launch(&LaunchConfig::new(1, 1), ())
    }
    .unwrap();
    cudyn::synchronize().unwrap();
    assert_eq!(one.global::<i32>("counter").unwrap().read().unwrap(), 8);

    // A default load does not join a library that shares its variables on request.
    let default = Library::load(&bytes).unwrap();
    assert_ne!(default.as_raw(), one.as_raw());
    assert_eq!(default.global::<i32>("counter").unwrap().read().unwrap(), 0);
}

/// A 64 MiB `__device__` table and a kernel `touch` using it.
const TABLE: &str = include_str!("kernels/device_table.cu");
const TABLE_BYTES: u64 = 64 << 20;

/// Launches `touch` (which makes the driver load the library on the device) and checks it ran.
fn touch(library: &Library) {
    let mut out = DeviceBuffer::<u32>::zeroed(32).unwrap();
    let kernel = library.kernel("touch").unwrap();
    // SAFETY: touch writes out[threadIdx.x] for 32 threads into 32 ints and its own table; the
    // copy below waits for it.
    unsafe { kernel.launch(&LaunchConfig::new(1, 32), (&mut out,)) }.unwrap();
    assert_eq!(out.to_vec().unwrap(), (1..=32).collect::<Vec<u32>>());
}

#[test]
#[ignore = "gpu: device memory of a shared library, before and after its last user"]
fn the_last_drop_unloads_and_the_next_load_loads_afresh() {
    // Released libraries shared on request are kept loaded for a later load: not here, where the
    // unload after the last drop is measured. (The other tests of this file do not depend on it.)
    cudyn::library::set_retained(0);
    let bytes = compile(TABLE, Output::Cubin).bytes();
    let device = Device::get(0).unwrap();
    // The context and cudyn's own first-use costs come before the baseline.
    cudyn::set_device(0).unwrap();
    cudyn::synchronize().unwrap();
    let used = || device.memory_info().unwrap().used();
    let before = used();

    let load = || {
        Library::loader()
            .sharing(Sharing::Always)
            .load(&bytes)
            .unwrap()
    };
    let first = load();
    touch(&first);
    // Other tests of this file load and allocate meanwhile, a few MiB at most: the checks
    // leave a quarter of the table for them.
    let loaded = used();
    assert!(
        loaded >= before + TABLE_BYTES * 3 / 4,
        "one load takes the table's device memory: {before} -> {loaded} bytes used"
    );
    let second = load();
    assert_eq!(second.as_raw(), first.as_raw());
    touch(&second);
    let kernel = second.kernel("touch").unwrap();
    drop((first, second));
    // The kernel is a user: the library is still loaded and shared.
    let third = load();
    assert_eq!(third.as_raw(), kernel.library().unwrap().as_raw());
    drop((third, kernel));
    let unloaded = used();
    assert!(
        unloaded < before + TABLE_BYTES / 4,
        "the last drop unloads: {before} bytes used before the load, {loaded} loaded, \
         {unloaded} after the last drop"
    );
    // A new load loads afresh and works (the old handle is never used again).
    let fresh = load();
    touch(&fresh);
    assert!(used() >= before + TABLE_BYTES * 3 / 4);
}

#[test]
#[ignore = "gpu: threads load, launch and drop the same code at once"]
fn threads_racing_loads_and_drops_always_get_a_working_library() {
    const THREADS: usize = 8;
    const ROUNDS: usize = 50;
    let bytes = compile(SAXPY, Output::Cubin).bytes();
    let held = Library::load(&bytes).unwrap();
    let held_raw = held.as_raw() as usize;
    let barrier = Barrier::new(THREADS + 1);
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let (bytes, barrier) = (&bytes, &barrier);
            scope.spawn(move || {
                // While the main thread holds a load, every load shares it.
                let library = Library::load(bytes).unwrap();
                assert_eq!(library.as_raw() as usize, held_raw);
                fill_and_check(&library.kernel("fill").unwrap(), thread as i32);
                drop(library);
                barrier.wait();
                // Then loads and last drops race: each load must work.
                for round in 0..ROUNDS {
                    let library = Library::load(bytes).unwrap();
                    let fill = library.kernel("fill").unwrap();
                    drop(library);
                    fill_and_check(&fill, (thread * ROUNDS + round) as i32);
                }
            });
        }
        barrier.wait();
        drop(held);
    });
    // After every user is gone, a load still works.
    fill_and_check(&Library::load(&bytes).unwrap().kernel("fill").unwrap(), -1);
}
