//! Devices as the driver reports them, checked against the runtime's own answer; handles
//! (buffers, streams, events) released in the context they were made in, from any thread.
//! Run with `cargo test -p cudyn --test gpu_device -- --include-ignored` on a machine with a GPU.

use std::sync::Mutex;

use cudyn::sys::driver::CUcontext;
use cudyn::sys::{self, call, runtime};
use cudyn::{Device, DeviceBuffer, DeviceLimits, Error, Event, Stream};

#[test]
#[ignore = "gpu: needs the NVIDIA driver and a GPU"]
fn devices_agree_with_the_runtime() {
    let count = Device::count().expect("the driver lists devices");
    assert!(count > 0, "no GPU");
    let rt = sys::runtime().expect("the CUDA runtime opens");
    let mut runtime_count = 0;
    // SAFETY: writes one int.
    unsafe { call!(rt, cudaGetDeviceCount(&mut runtime_count)) }.unwrap();
    assert_eq!(count, runtime_count as usize);
    for device in Device::all().unwrap() {
        let (major, minor) = device.compute_capability().unwrap();
        let ordinal = device.ordinal() as i32;
        let (mut rt_major, mut rt_minor) = (0, 0);
        // SAFETY: each call writes one int for a valid ordinal.
        unsafe {
            call!(
                rt,
                cudaDeviceGetAttribute(
                    &mut rt_major,
                    runtime::cudaDevAttrComputeCapabilityMajor,
                    ordinal
                )
            )
            .unwrap();
            call!(
                rt,
                cudaDeviceGetAttribute(
                    &mut rt_minor,
                    runtime::cudaDevAttrComputeCapabilityMinor,
                    ordinal
                )
            )
            .unwrap();
        }
        assert_eq!((major, minor), (rt_major as u32, rt_minor as u32));
        assert!(!device.name().unwrap().is_empty());
        assert!(device.total_memory().unwrap() > 1 << 30);
    }
    match Device::get(count) {
        Err(Error::DeviceOutOfRange {
            ordinal,
            count: reported,
        }) => {
            assert_eq!((ordinal, reported), (count, count));
        }
        other => panic!("an ordinal past the end is DeviceOutOfRange, got {other:?}"),
    }
}

/// The calling thread's current context, straight from the driver.
#[test]
#[ignore = "gpu: compares the driver's limits with the offline table"]
fn the_offline_sm_90_limits_are_what_a_compute_9_0_gpu_reports() {
    let mut checked = 0;
    for device in Device::all().unwrap() {
        if device.compute_capability().unwrap() == (9, 0) {
            assert_eq!(*device.limits().unwrap(), DeviceLimits::SM_90);
            checked += 1;
        }
    }
    assert!(
        checked > 0,
        "this test needs a GPU of compute capability 9.0"
    );
}

fn current_context() -> CUcontext {
    let driver = sys::driver().unwrap();
    let mut context: CUcontext = std::ptr::null_mut();
    // SAFETY: writes one pointer.
    unsafe { call!(driver, cuCtxGetCurrent(&mut context)) }.unwrap();
    context
}

/// Free bytes of the current context's device.
fn free_memory() -> usize {
    let driver = sys::driver().unwrap();
    let (mut free, mut total) = (0, 0);
    // SAFETY: writes two size_t; the caller has a context current.
    unsafe { call!(driver, cuMemGetInfo_v2(&mut free, &mut total)) }.unwrap();
    free
}

/// Every failure reported by a drop in this test binary.
static DROP_FAILURES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Held by the tests that measure free memory, so that one's allocation does not skew another's.
static MEASURING: Mutex<()> = Mutex::new(());

fn record_drop_failures() {
    cudyn::context::set_drop_error_hook(|handle, error| {
        DROP_FAILURES
            .lock()
            .unwrap()
            .push(format!("{handle}: {error}"));
    });
}

fn assert_no_drop_failure() {
    let failures = DROP_FAILURES.lock().unwrap();
    assert!(failures.is_empty(), "drops failed: {failures:?}");
}

#[test]
#[ignore = "gpu: buffers, streams and events released on a thread with no context"]
fn handles_are_released_on_a_fresh_thread_without_giving_it_a_context() {
    let _measuring = MEASURING
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    record_drop_failures();
    let device = cudyn::current_device().unwrap();
    const BYTES: usize = 1 << 30;
    let before = free_memory();
    let dropped = DeviceBuffer::<u8>::alloc(BYTES).unwrap();
    let freed = DeviceBuffer::<u32>::from_slice(&[1, 2, 3]).unwrap();
    assert_eq!(dropped.device(), Some(device));
    let stream = Stream::new().unwrap();
    let event = Event::new().unwrap();
    event.record(Some(&stream)).unwrap();
    let dropped_stream = Stream::new().unwrap();
    let dropped_event = Event::new().unwrap();
    assert!(
        free_memory() + BYTES <= before + (64 << 20),
        "1 GiB was allocated"
    );

    std::thread::spawn(move || {
        assert!(
            current_context().is_null(),
            "a new thread starts with no context"
        );
        drop(dropped);
        drop(dropped_stream);
        drop(dropped_event);
        freed.free().expect("an explicit free reports success");
        stream
            .destroy()
            .expect("an explicit stream destroy reports success");
        event
            .destroy()
            .expect("an explicit event destroy reports success");
        assert!(
            current_context().is_null(),
            "releasing handles left a context current on the releasing thread"
        );
    })
    .join()
    .unwrap();

    assert_no_drop_failure();
    // Freed in the device's context: the gigabyte is back (other tests of this binary allocate
    // little, so a 64 MiB margin absorbs them).
    assert!(
        free_memory() + (64 << 20) >= before,
        "the buffer dropped on another thread was not freed"
    );
}

#[test]
#[ignore = "gpu: a buffer of one device dropped while another device is current"]
fn a_buffer_is_freed_on_its_own_device_and_the_current_device_is_kept() {
    // With two or more GPUs the buffer lives on the last one and is dropped while device 0 is
    // current. With one GPU both roles are device 0: the free still goes through the buffer's
    // recorded context, and the checks below (the free succeeds, the memory comes back, the
    // thread's current context is unchanged) all run.
    let _measuring = MEASURING
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    record_drop_failures();
    let last = Device::count().unwrap() - 1;
    cudyn::set_device(last).unwrap();
    const BYTES: usize = 1 << 30;
    let before_on_last = free_memory();
    let buffer = DeviceBuffer::<u8>::alloc(BYTES).unwrap();
    assert_eq!(buffer.device(), Some(Device::get(last).unwrap()));

    cudyn::set_device(0).unwrap();
    let context_of_0 = current_context();
    drop(buffer);
    assert_eq!(
        current_context(),
        context_of_0,
        "dropping the buffer changed the thread's context"
    );
    assert_eq!(cudyn::current_device().unwrap().ordinal(), 0);
    assert_no_drop_failure();

    cudyn::set_device(last).unwrap();
    assert!(
        free_memory() + (64 << 20) >= before_on_last,
        "the buffer was not freed on device {last}"
    );
}
