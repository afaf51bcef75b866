//! Launching on a GPU: results against a CPU reference, the checks made before the driver is
//! reached, concurrent launches, streams and events.
//! Run with `cargo test -p cudyn --test gpu_launch -- --include-ignored` on a machine with a GPU.

mod common;

use common::{compile, random_floats, saxpy_matches_the_cpu, Output, SAXPY};
use cudyn::{
    ArgumentMismatch, ConfigViolation, DeviceBuffer, Error, Event, Kernel, LaunchConfig, Library,
    Stream,
};

fn kernel(name: &str) -> Kernel {
    let cubin = compile(SAXPY, Output::Cubin);
    Library::load(cubin.bytes()).unwrap().kernel(name).unwrap()
}

#[test]
#[ignore = "gpu: SAXPY on 2^26 random elements against the CPU"]
fn saxpy_on_two_to_the_26_random_elements_equals_the_cpu() {
    saxpy_matches_the_cpu(&kernel("saxpy"), 1.75, 1 << 26, 1);
}

#[test]
#[ignore = "gpu: launches refused by cudyn's checks leave the output untouched"]
fn wrong_arguments_and_a_too_large_block_are_refused_before_the_driver() {
    let saxpy = kernel("saxpy");
    let n = 1000usize;
    let x = DeviceBuffer::from_slice(&random_floats(n, 3)).unwrap();
    let y = DeviceBuffer::from_slice(&random_floats(n, 4)).unwrap();
    let mut out = DeviceBuffer::<f32>::alloc(n).unwrap();
    out.fill_bytes(0xff).unwrap();
    let config = LaunchConfig::for_elements(n, 256);

    // SAFETY: each launch in this test is refused by cudyn's checks before the driver, so
    // nothing runs (asserted at the end); were one to run, saxpy would stay within the n floats
    // of each buffer, all alive until the final synchronization.
    let count = unsafe { saxpy.launch(&config, (2.0f32, &x, &y, &mut out)) };
    match count {
        Err(Error::LaunchArguments {
            kernel,
            mismatch:
                ArgumentMismatch::Count {
                    expected: 5,
                    given: 4,
                },
        }) => assert_eq!(kernel, "saxpy"),
        other => panic!("expected a count mismatch, got {other:?}"),
    }

    // SAFETY: refused, as above.
    let size = unsafe { saxpy.launch(&config, (2.0f64, &x, &y, &mut out, n as u64)) };
    assert!(
        matches!(
            size,
            Err(Error::LaunchArguments {
                mismatch: ArgumentMismatch::Size {
                    index: 0,
                    expected: 4,
                    given: 8
                },
                ..
            })
        ),
        "{size:?}"
    );
    // SAFETY: refused, as above.
    let size = unsafe { saxpy.launch(&config, (2.0f32, &x, &y, &mut out, n as u32)) };
    assert!(
        matches!(
            size,
            Err(Error::LaunchArguments {
                mismatch: ArgumentMismatch::Size {
                    index: 4,
                    expected: 8,
                    given: 4
                },
                ..
            })
        ),
        "{size:?}"
    );

    // SAFETY: refused, as above.
    let block = unsafe {
        saxpy.launch(
            &LaunchConfig::new(1, 2048),
            (2.0f32, &x, &y, &mut out, n as u64),
        )
    };
    assert!(
        matches!(
            block,
            Err(Error::LaunchConfig {
                violation: ConfigViolation::BlockTooLarge {
                    threads: 2048,
                    max: 1024
                },
                ..
            })
        ),
        "{block:?}"
    );
    let message = block.unwrap_err().to_string();
    assert!(
        message.contains("2048") && message.contains("1024"),
        "{message}"
    );

    // Nothing ran: the output is still all NaN, and the context is healthy.
    cudyn::synchronize().unwrap();
    assert!(out.to_vec().unwrap().iter().all(|v| v.is_nan()));
}

#[test]
#[ignore = "gpu: 8 threads x 1000 launches of one kernel"]
fn one_kernel_launched_from_8_threads_1000_times_each_counts_right() {
    let increment = kernel("increment");
    let n = 4096usize;
    let results: Vec<Vec<i32>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let increment = &increment;
                scope.spawn(move || {
                    let stream = Stream::new().unwrap();
                    let mut data = DeviceBuffer::<i32>::zeroed(n).unwrap();
                    let config = LaunchConfig::for_elements(n, 128).stream(&stream);
                    for _ in 0..1000 {
                        // SAFETY: increment updates data[i] for i < n, and data holds n ints,
                        // owned by this thread; launches on `stream` run in order, and the
                        // stream is synchronized before data is read or dropped.
                        unsafe { increment.launch(&config, (&mut data, n as u64)) }.unwrap();
                    }
                    stream.synchronize().unwrap();
                    data.to_vec().unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for data in results {
        assert_eq!(data, vec![1000; n]);
    }
}

#[test]
#[ignore = "gpu: events time work on a stream"]
fn events_measure_the_time_of_work_on_a_stream() {
    let saxpy = kernel("saxpy");
    let n = 1usize << 24;
    let x = DeviceBuffer::from_slice(&random_floats(n, 5)).unwrap();
    let mut out = DeviceBuffer::<f32>::alloc(n).unwrap();
    let stream = Stream::new().unwrap();
    let (start, end) = (Event::new().unwrap(), Event::new().unwrap());
    start.record(Some(&stream)).unwrap();
    let config = LaunchConfig::for_elements(n, 256).stream(&stream);
    for _ in 0..10 {
        // SAFETY: saxpy reads x[i] and writes out[i] for i < n, and both buffers hold n floats;
        // the launches run in order on `stream`, and the event waited on below follows them.
        unsafe { saxpy.launch(&config, (0.5f32, &x, &x, &mut out, n as u64)) }.unwrap();
    }
    end.record(Some(&stream)).unwrap();
    end.synchronize().unwrap();
    let elapsed = end.elapsed_since(&start).unwrap();
    // 10 passes over 3 x 64 MiB cannot take no time, nor a second on an H200.
    assert!(
        elapsed.as_nanos() > 0 && elapsed.as_secs_f64() < 1.0,
        "{elapsed:?}"
    );
    let got = out.to_vec().unwrap();
    let host = x.to_vec().unwrap();
    assert!(got
        .iter()
        .zip(&host)
        .all(|(g, x)| *g == 0.5f32.mul_add(*x, *x)));
}

#[test]
#[ignore = "gpu: views are kernel arguments"]
fn views_launch_on_part_of_a_buffer() {
    let fill = kernel("fill");
    let mut data = DeviceBuffer::<i32>::zeroed(100).unwrap();
    let view = data.slice_mut(10..20).unwrap();
    // SAFETY: fill writes view[i] for i < 10, and the view holds elements 10..20 of the buffer;
    // the copy below waits for it.
    unsafe { fill.launch(&LaunchConfig::new(1, 32), (view, 9i32, 10u64)) }.unwrap();
    let got = data.to_vec().unwrap();
    let expected: Vec<i32> = (0..100)
        .map(|i| if (10..20).contains(&i) { 9 } else { 0 })
        .collect();
    assert_eq!(got, expected);
}

#[test]
#[ignore = "gpu: threads choose their device runtime-style"]
fn the_current_device_is_per_thread_and_defaults_to_0() {
    assert_eq!(cudyn::current_device().unwrap().ordinal(), 0);
    let last = cudyn::Device::count().unwrap() - 1;
    std::thread::spawn(move || {
        assert_eq!(cudyn::set_device(last).unwrap().ordinal(), last);
        assert_eq!(cudyn::current_device().unwrap().ordinal(), last);
    })
    .join()
    .unwrap();
    assert_eq!(cudyn::current_device().unwrap().ordinal(), 0);
}
