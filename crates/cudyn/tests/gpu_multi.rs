//! Several GPUs: one library, loaded once, serving every device; per-device kernel attributes;
//! handles made on device 1 released on device 1 whatever is current; loads after
//! `set_device(1)` going to device 1.
//!
//! Every test needs at least two GPUs and fails without them. They run one at a time (some
//! measure a device's memory, which another test's allocations would disturb). Run with
//! `cargo test -p cudyn --test gpu_multi -- --include-ignored` on a machine with two GPUs.

mod common;

use std::sync::{Mutex, MutexGuard};

use common::{compile, random_floats, Output, SAXPY};
use cudyn::{
    ConfigViolation, Device, DeviceBuffer, Error, Event, KernelAttribute, LaunchConfig, Library,
    Program, Stream,
};

/// Held by the running test: the tests of this file run one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Devices 0 and 1, and this test's turn; fails the test on a machine with fewer than two GPUs.
fn two_devices() -> (Device, Device, MutexGuard<'static, ()>) {
    // A test that failed while holding the lock leaves nothing to repair.
    let turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    let count = Device::count().expect("a CUDA driver");
    assert!(
        count >= 2,
        "this test needs two GPUs; the driver sees {count}"
    );
    (Device::get(0).unwrap(), Device::get(1).unwrap(), turn)
}

/// Inputs and the CPU's result of `saxpy` with `a` over `n` elements (fused multiply-add, as the
/// kernel computes it).
fn saxpy_case(a: f32, n: usize, seed: u64) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let (x, y) = (random_floats(n, seed), random_floats(n, seed + 1));
    let expected = x.iter().zip(&y).map(|(x, y)| a.mul_add(*x, *y)).collect();
    (x, y, expected)
}

/// Buffers of one saxpy launch on the current device.
struct SaxpyRun {
    out: DeviceBuffer<f32>,
    _inputs: (DeviceBuffer<f32>, DeviceBuffer<f32>),
    expected: Vec<f32>,
}

/// Launches `saxpy` of `library` on the current device (on `stream`, or the default stream),
/// without waiting for it.
fn launch_saxpy(library: &Library, a: f32, seed: u64, stream: Option<&Stream>) -> SaxpyRun {
    let n = 100_003;
    let (x, y, expected) = saxpy_case(a, n, seed);
    let (dx, dy) = (
        DeviceBuffer::from_slice(&x).unwrap(),
        DeviceBuffer::from_slice(&y).unwrap(),
    );
    let mut out = DeviceBuffer::<f32>::alloc(n).unwrap();
    let config = LaunchConfig::for_elements(n, 256);
    let config = match stream {
        Some(stream) => config.stream(stream),
        None => config,
    };
    let saxpy = library.kernel("saxpy").unwrap();
    // SAFETY: saxpy reads x[i], y[i] and writes out[i] for i < n, all n floats long, allocated on
    // the current device; the buffers live in the returned value until they are read back, which
    // waits for the kernel (the stream is synchronized first when one is used).
    unsafe { saxpy.launch(&config, (a, &dx, &dy, &mut out, n as u64)) }.unwrap();
    SaxpyRun {
        out,
        _inputs: (dx, dy),
        expected,
    }
}

#[test]
#[ignore = "gpu: needs two GPUs"]
fn multi_gpu_one_library_launches_on_both_gpus_from_one_thread() {
    let (gpu0, gpu1, _turn) = two_devices();
    let library = Library::from_file(&compile(SAXPY, Output::Cubin).path).unwrap();
    let mut runs = Vec::new();
    for (device, a) in [(gpu0, 2.0f32), (gpu1, -3.0)] {
        assert_eq!(cudyn::set_device(device.ordinal()).unwrap(), device);
        let run = launch_saxpy(&library, a, device.ordinal() as u64 * 10, None);
        assert_eq!(run.out.device(), Some(device));
        runs.push(run);
    }
    // Device 1 is current now; device 0's result is read without switching back: a buffer's
    // copy waits for the work on its own device.
    for run in &runs {
        assert_eq!(run.out.to_vec().unwrap(), run.expected);
    }
    assert_eq!(cudyn::current_device().unwrap(), gpu1);
}

#[test]
#[ignore = "gpu: needs two GPUs"]
fn multi_gpu_one_library_launches_on_both_gpus_from_one_thread_per_gpu() {
    let (gpu0, gpu1, _turn) = two_devices();
    let library = Library::from_file(&compile(SAXPY, Output::Cubin).path).unwrap();
    std::thread::scope(|scope| {
        for device in [gpu0, gpu1] {
            let library = &library;
            scope.spawn(move || {
                cudyn::set_device(device.ordinal()).unwrap();
                let stream = Stream::new().unwrap();
                assert_eq!(stream.device(), device);
                for round in 0..20u64 {
                    let seed = device.ordinal() as u64 * 1000 + round;
                    let on_stream = launch_saxpy(library, 0.5, seed, Some(&stream));
                    let on_default = launch_saxpy(library, 1.5, seed + 500, None);
                    stream.synchronize().unwrap();
                    for run in [on_stream, on_default] {
                        assert_eq!(run.out.device(), Some(device));
                        assert_eq!(run.out.to_vec().unwrap(), run.expected);
                    }
                }
                assert_eq!(cudyn::current_device().unwrap(), device);
            });
        }
    });
}

/// Reverses each block of `in` through dynamic shared memory.
const REVERSE: &str = r#"
extern "C" __global__ void reverse_blocks(const int *in, int *out) {
    extern __shared__ int tile[];
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = in[i];
    __syncthreads();
    out[i] = tile[blockDim.x - 1 - threadIdx.x];
}
"#;

#[test]
#[ignore = "gpu: needs two GPUs"]
fn multi_gpu_kernel_attributes_are_set_per_device() {
    let (gpu0, gpu1, _turn) = two_devices();
    let kernel = Library::from_file(&compile(REVERSE, Output::Cubin).path)
        .unwrap()
        .kernel("reverse_blocks")
        .unwrap();
    let shared = 64 * 1024;
    // Set with device 0 current: the device named in the call is the one changed.
    cudyn::set_device(0).unwrap();
    let allowed = |device| {
        kernel
            .attribute(KernelAttribute::MaxDynamicSharedSizeBytes, device)
            .unwrap()
    };
    let (before0, before1) = (allowed(gpu0), allowed(gpu1));
    assert!(before0 < shared && before1 < shared, "{before0} {before1}");
    kernel
        .set_attribute(KernelAttribute::MaxDynamicSharedSizeBytes, shared, gpu1)
        .unwrap();
    assert_eq!(allowed(gpu1), shared);
    assert_eq!(allowed(gpu0), before0, "device 0 keeps its own value");
    assert_eq!(cudyn::current_device().unwrap(), gpu0);

    let (block, blocks) = (256u32, 64usize);
    let input: Vec<i32> = (0..block as i32 * blocks as i32).collect();
    let expected: Vec<i32> = input
        .chunks(block as usize)
        .flat_map(|chunk| chunk.iter().rev().copied())
        .collect();
    let config = LaunchConfig::new(blocks as u32, block).shared_mem(shared as u32);
    let launch = || {
        let device_in = DeviceBuffer::from_slice(&input).unwrap();
        let mut out = DeviceBuffer::<i32>::zeroed(input.len()).unwrap();
        // SAFETY: each of the blocks * block threads reads in[i] and writes out[i], both that
        // long, and uses tile[0..block) of the 64 KiB of dynamic shared memory; the copy below
        // waits for the kernel.
        unsafe { kernel.launch(&config, (&device_in, &mut out)) }.map(|()| out.to_vec().unwrap())
    };
    // Device 1 was opted in to 64 KiB; device 0 was not, so cudyn refuses before the driver.
    cudyn::set_device(1).unwrap();
    assert_eq!(launch().unwrap(), expected);
    cudyn::set_device(0).unwrap();
    match launch() {
        Err(Error::LaunchConfig {
            violation: ConfigViolation::SharedMemoryNotOptedIn { given, allowed },
            ..
        }) => assert_eq!((given, allowed as i32), (shared as u32, before0)),
        other => panic!("device 0 was not opted in, yet the launch gave {other:?}"),
    }
}

/// Used memory of `device`, in bytes.
fn used(device: Device) -> u64 {
    device.memory_info().unwrap().used()
}

const BIG: usize = 512 << 20;

#[test]
#[ignore = "gpu: needs two GPUs"]
fn multi_gpu_buffers_and_streams_made_on_gpu_1_are_freed_on_gpu_1() {
    let (gpu0, gpu1, _turn) = two_devices();
    cudyn::set_device(1).unwrap();
    cudyn::synchronize().unwrap();
    let before = used(gpu1);

    // Freed explicitly, on another thread that has device 0 current.
    let buffer = DeviceBuffer::<u8>::alloc(BIG).unwrap();
    let stream = Stream::new().unwrap();
    let event = Event::new().unwrap();
    assert_eq!((buffer.device(), stream.device()), (Some(gpu1), gpu1));
    let fill = Library::from_file(&compile(SAXPY, Output::Cubin).path)
        .unwrap()
        .kernel("fill")
        .unwrap();
    let mut ints = DeviceBuffer::<i32>::zeroed(1000).unwrap();
    // SAFETY: fill writes ints[i] for i < 1000 into 1000 ints; the stream is synchronized below
    // before the buffer is read or freed.
    unsafe {
        fill.launch(
            &LaunchConfig::for_elements(1000, 128).stream(&stream),
            (&mut ints, 7i32, 1000u64),
        )
    }
    .unwrap();
    event.record(Some(&stream)).unwrap();
    event.synchronize().unwrap();
    assert_eq!(ints.to_vec().unwrap(), vec![7; 1000]);
    assert!(used(gpu1) >= before + BIG as u64);
    std::thread::spawn(move || {
        cudyn::set_device(0).unwrap();
        buffer.free().unwrap();
        stream.destroy().unwrap();
        event.destroy().unwrap();
        // The releases ran in device 1's context and left this thread on device 0.
        assert_eq!(cudyn::current_device().unwrap(), gpu0);
    })
    .join()
    .unwrap();
    assert!(
        used(gpu1) < before + BIG as u64 / 2,
        "freed on device 1: {before} bytes used before, {} after",
        used(gpu1)
    );

    // Dropped on this thread with device 0 current.
    cudyn::set_device(1).unwrap();
    let buffer = DeviceBuffer::<u8>::alloc(BIG).unwrap();
    let stream = Stream::new().unwrap();
    assert!(used(gpu1) >= before + BIG as u64);
    cudyn::set_device(0).unwrap();
    drop((buffer, stream));
    assert!(
        used(gpu1) < before + BIG as u64 / 2,
        "dropped on device 1: {before} bytes used before, {} after",
        used(gpu1)
    );
    assert_eq!(cudyn::current_device().unwrap(), gpu0);
}

/// A 64 MiB `__device__` table and a kernel `touch` using it.
const TABLE: &str = include_str!("kernels/device_table.cu");
const TABLE_BYTES: u64 = 64 << 20;

#[test]
#[ignore = "gpu: needs two GPUs"]
fn multi_gpu_program_load_after_set_device_1_targets_gpu_1() {
    let (gpu0, gpu1, _turn) = two_devices();
    for device in [gpu0, gpu1] {
        cudyn::set_device(device.ordinal()).unwrap();
        cudyn::synchronize().unwrap();
    }
    // Device 1 is current.
    let (before0, before1) = (used(gpu0), used(gpu1));

    // PTX is compiled by the JIT and loaded into the current context during the load: the table
    // appears on device 1 before any launch. (Other contexts get a library when it is first used
    // there, the driver's default lazy loading; CUDA_MODULE_LOADING=EAGER would load it into
    // every context at once.)
    let ptx = Program::new(format!("// as PTX\n{TABLE}"))
        .output(cudyn::Output::Ptx)
        .load()
        .unwrap();
    assert!(
        used(gpu1) >= before1 + TABLE_BYTES,
        "PTX loaded into device 1"
    );
    // A cubin (compiled for device 1's architecture) is loaded into device 1 at its first use.
    let cubin = Program::new(TABLE).load().unwrap();
    for library in [&ptx, &cubin] {
        let mut out = DeviceBuffer::<u32>::zeroed(32).unwrap();
        assert_eq!(out.device(), Some(gpu1));
        let touch = library.kernel("touch").unwrap();
        // SAFETY: touch writes out[threadIdx.x] for 32 threads into 32 ints and its own table;
        // the copy below waits for it.
        unsafe { touch.launch(&LaunchConfig::new(1, 32), (&mut out,)) }.unwrap();
        assert_eq!(out.to_vec().unwrap(), (1..=32).collect::<Vec<u32>>());
    }
    assert!(
        used(gpu1) >= before1 + 2 * TABLE_BYTES,
        "both libraries are on device 1"
    );
    assert!(
        used(gpu0) < before0 + TABLE_BYTES / 2,
        "device 0 was never used: {before0} bytes used before, {} after",
        used(gpu0)
    );
    assert_eq!(cudyn::current_device().unwrap(), gpu1);
}
