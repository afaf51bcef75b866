//! The driver calls of a launch, counted by a fake driver (tests/fake_driver), on any machine: a
//! launch makes exactly two, `cuCtxGetId` (another context may have been made current since the
//! last launch, and the configuration is checked against its device) and the launch itself, of
//! the kernel's function in that context; everything else it needs (the kernel's parameter
//! layout and function, the device and its limits) is asked once and kept. A launch refused by
//! a check reaches no launch call. A function is kept by the context's id, never its handle: a
//! context made at the address of one destroyed gets the function found again.
//!
//! A launch after another context was made current is checked against that context's device:
//! the fake driver's device 1 allows 512 threads per block, device 0 1024.
//!
//! One process, one fake driver: it is installed by the first test that needs it. The counts
//! and the current context are per thread, so the tests, each on its own thread, count apart.

mod fake_driver;

use std::sync::OnceLock;

use cudyn::{ArgList, ConfigViolation, DeviceBuffer, Error, Kernel, LaunchConfig};
use fake_driver::{c_params, FakeDriver};

/// The fake driver, installed once for the process.
fn fake() -> &'static FakeDriver {
    static FAKE: OnceLock<FakeDriver> = OnceLock::new();
    FAKE.get_or_init(|| FakeDriver::install().expect("the fake driver installs"))
}

/// The counts of the entry points a launch may call, on this thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Calls {
    launch: u64,
    /// Launches of the kernel's function rather than its handle.
    of_function: u64,
    context_id: u64,
    total: u64,
}

impl Calls {
    fn now() -> Calls {
        let fake = fake();
        Calls {
            launch: fake.calls("cuLaunchKernel"),
            of_function: fake.function_launches(),
            context_id: fake.calls("cuCtxGetId"),
            total: fake.total_calls(),
        }
    }

    /// The calls made since `earlier`.
    fn since(earlier: Calls) -> Calls {
        let now = Calls::now();
        Calls {
            launch: now.launch - earlier.launch,
            of_function: now.of_function - earlier.of_function,
            context_id: now.context_id - earlier.context_id,
            total: now.total - earlier.total,
        }
    }
}

/// The driver calls of `launches` calls of `launch`, after a first one (which asks for the
/// kernel's layout and, on a new thread, for the context).
fn calls_of(launches: u64, mut launch: impl FnMut() -> cudyn::Result<()>) -> Calls {
    launch().expect("the first launch");
    calls_of_first(launches, launch)
}

/// The driver calls of `launches` calls of `launch`, the first of them included.
fn calls_of_first(launches: u64, mut launch: impl FnMut() -> cudyn::Result<()>) -> Calls {
    let before = Calls::now();
    for _ in 0..launches {
        launch().expect("a launch");
    }
    Calls::since(before)
}

/// Exactly one launch call, of the kernel's function, and one context query per launch, nothing
/// else.
fn assert_two_calls_per_launch(what: &str, calls: Calls, launches: u64) {
    assert_eq!(
        calls,
        Calls {
            launch: launches,
            of_function: launches,
            context_id: launches,
            total: 2 * launches,
        },
        "{what}: driver calls of {launches} launches"
    );
}

/// SAXPY's parameters: a float, three pointers and a size_t.
fn saxpy() -> Kernel {
    fake_driver::kernel(
        "saxpy",
        &c_params(&[(4, 4), (8, 8), (8, 8), (8, 8), (8, 8)]),
    )
}

#[test]
fn a_checked_launch_calls_the_driver_twice_whatever_its_arguments() {
    fake();
    let config = LaunchConfig::for_elements(1024, 256);
    let x = DeviceBuffer::<f32>::alloc(1024).unwrap();
    let mut out = DeviceBuffer::<f32>::alloc(1024).unwrap();

    let empty = fake_driver::kernel("empty", &[]);
    let calls = calls_of(100, || {
        // SAFETY: the fake driver runs nothing; it only copies the arguments, which have the
        // kernel's layout (or are refused before it). The same holds for every launch below.
        unsafe { empty.launch(&config, ()) }
    });
    assert_two_calls_per_launch("empty kernel", calls, 100);

    let saxpy = saxpy();
    let calls = calls_of(100, || {
        // SAFETY: as above.
        unsafe { saxpy.launch(&config, (2.0f32, &x, x.as_slice(), &mut out, 1024u64)) }
    });
    assert_two_calls_per_launch("SAXPY", calls, 100);

    let mut types = vec![(8, 8)];
    for _ in 0..10 {
        types.extend([(4, 4), (8, 8)]);
    }
    let many = fake_driver::kernel("many", &c_params(&types));
    let values: Vec<(i32, u64)> = (0..10).map(|i| (i, i as u64)).collect();
    let calls = calls_of(100, || {
        let mut args = ArgList::new();
        args.push(&x);
        for (int, long) in &values {
            args.push(int).push(long);
        }
        // SAFETY: as above.
        unsafe { many.launch(&config, &args) }
    });
    assert_two_calls_per_launch("21 arguments in an ArgList", calls, 100);

    let unchecked = calls_of(100, || {
        // SAFETY: as above; the kernel takes no parameters.
        unsafe { empty.launch_unchecked(&config, std::ptr::null_mut()) }
    });
    assert_two_calls_per_launch("unchecked launch", unchecked, 100);
}

#[test]
fn the_parameter_layout_is_asked_once_per_kernel() {
    fake();
    let config = LaunchConfig::for_elements(1024, 256);
    let x = DeviceBuffer::<f32>::alloc(1024).unwrap();
    let saxpy = saxpy();
    let before = fake().calls("cuKernelGetParamInfo");
    for _ in 0..10 {
        // SAFETY: the fake driver runs nothing.
        unsafe { saxpy.launch(&config, (2.0f32, &x, &x, &x, 1024u64)) }.unwrap();
    }
    // Five parameters, then the index the driver refuses, which ends the list.
    assert_eq!(fake().calls("cuKernelGetParamInfo") - before, 6);
}

#[test]
fn a_launch_refused_by_a_check_reaches_no_launch_call() {
    fake();
    let config = LaunchConfig::for_elements(1024, 256);
    let x = DeviceBuffer::<f32>::alloc(1024).unwrap();
    let saxpy = saxpy();
    // SAFETY: the fake driver runs nothing.
    unsafe { saxpy.launch(&config, (2.0f32, &x, &x, &x, 1024u64)) }.unwrap();
    let launches = fake().calls("cuLaunchKernel");

    // SAFETY: as above.
    let error = unsafe { saxpy.launch(&config, (2.0f32, &x, &x, &x)) }.unwrap_err();
    assert!(matches!(error, Error::LaunchArguments { .. }), "{error:?}");
    // A u32 where the kernel takes a size_t.
    // SAFETY: as above.
    let error = unsafe { saxpy.launch(&config, (2.0f32, &x, &x, &x, 1024u32)) }.unwrap_err();
    assert!(matches!(error, Error::LaunchArguments { .. }), "{error:?}");
    let too_large = LaunchConfig::new(1, 2048);
    // SAFETY: as above.
    let error = unsafe { saxpy.launch(&too_large, (2.0f32, &x, &x, &x, 1024u64)) }.unwrap_err();
    assert!(matches!(error, Error::LaunchConfig { .. }), "{error:?}");
    let zero_grid = LaunchConfig::new((1, 0), 32);
    // SAFETY: as above.
    let error = unsafe { saxpy.launch(&zero_grid, (2.0f32, &x, &x, &x, 1024u64)) }.unwrap_err();
    assert!(matches!(error, Error::LaunchConfig { .. }), "{error:?}");

    assert_eq!(fake().calls("cuLaunchKernel"), launches);
}

#[test]
fn a_launch_after_the_context_was_unset_makes_it_current_again_without_asking_the_limits() {
    let fake = fake();
    let config = LaunchConfig::for_elements(1024, 256);
    let empty = fake_driver::kernel("empty", &[]);
    // SAFETY: the fake driver runs nothing.
    unsafe { empty.launch(&config, ()) }.unwrap();
    let set_current = cudyn::sys::driver().unwrap().api.cuCtxSetCurrent.unwrap();
    // What another library on this thread may do: leave no context current.
    // SAFETY: a null context is accepted: none current.
    assert_eq!(unsafe { set_current(std::ptr::null_mut()) }, 0);
    let attributes = fake.calls("cuDeviceGetAttribute");
    let before = Calls::now();
    // SAFETY: as above.
    unsafe { empty.launch(&config, ()) }.unwrap();
    let calls = Calls::since(before);
    // The launch found no context, made the primary one current again and launched; it knew
    // the device's limits already.
    assert_eq!(calls.launch, 1);
    assert_eq!(fake.calls("cuDeviceGetAttribute"), attributes);
    let mut current = std::ptr::null_mut();
    let get_current = cudyn::sys::driver().unwrap().api.cuCtxGetCurrent.unwrap();
    // SAFETY: writes one pointer.
    assert_eq!(unsafe { get_current(&mut current) }, 0);
    assert!(!current.is_null(), "the launch left a context current");
    // And the launches after it are back to two calls.
    let calls = calls_of(10, || {
        // SAFETY: as above.
        unsafe { empty.launch(&config, ()) }
    });
    assert_two_calls_per_launch("after the context came back", calls, 10);
}

/// Makes the primary context of `ordinal` current on this thread through the driver alone, as
/// the runtime's `cudaSetDevice` or another library would, without cudyn knowing.
fn make_current_behind_cudyns_back(ordinal: i32) {
    let api = &cudyn::sys::driver().unwrap().api;
    let (mut device, mut context) = (0, std::ptr::null_mut());
    // SAFETY: each call writes one value; the context is the device's primary context, alive
    // for the life of the process (cudyn retains it too).
    unsafe {
        assert_eq!(api.cuDeviceGet.unwrap()(&mut device, ordinal), 0);
        assert_eq!(
            api.cuDevicePrimaryCtxRetain.unwrap()(&mut context, device),
            0
        );
        assert_eq!(api.cuCtxSetCurrent.unwrap()(context), 0);
    }
}

#[test]
fn a_launch_is_checked_against_the_device_of_the_context_current_at_that_launch() {
    fake();
    let empty = fake_driver::kernel("empty", &[]);
    let config = LaunchConfig::new(1, 1024);
    let refused_by_device_1 = |error: Error| {
        assert!(
            matches!(
                error,
                Error::LaunchConfig {
                    violation: ConfigViolation::BlockTooLarge {
                        threads: 1024,
                        max: 512
                    },
                    ..
                }
            ),
            "{error:?}"
        )
    };
    // SAFETY: the fake driver runs nothing.
    unsafe { empty.launch(&config, ()) }.expect("device 0 runs blocks of 1024 threads");

    cudyn::set_device(1).unwrap();
    // SAFETY: as above.
    refused_by_device_1(unsafe { empty.launch(&config, ()) }.unwrap_err());

    make_current_behind_cudyns_back(0);
    // SAFETY: as above.
    unsafe { empty.launch(&config, ()) }.expect("device 0 is current again");
    make_current_behind_cudyns_back(1);
    // SAFETY: as above.
    refused_by_device_1(unsafe { empty.launch(&config, ()) }.unwrap_err());
    // SAFETY: as above.
    unsafe { empty.launch(&LaunchConfig::new(1, 512), ()) }.expect("512 threads fit device 1");
}

#[test]
fn a_remembered_match_lets_no_other_arguments_through() {
    fake();
    let config = LaunchConfig::for_elements(1024, 256);
    let x = DeviceBuffer::<f32>::alloc(1024).unwrap();
    let saxpy = saxpy();
    let (a, n, x_arg) = (2.0f32, 1024u64, &x);
    let before = fake().calls("cuLaunchKernel");
    for round in 0..3 {
        // SAFETY: the fake driver runs nothing.
        unsafe { saxpy.launch(&config, (a, &x, &x, &x, n)) }.expect("the matching tuple");
        // Same count, the last argument 4 bytes instead of 8; then the first 8 instead of 4.
        // SAFETY: as above.
        let error = unsafe { saxpy.launch(&config, (a, &x, &x, &x, 1024u32)) }.unwrap_err();
        assert!(
            matches!(error, Error::LaunchArguments { .. }),
            "{round}: {error:?}"
        );
        // SAFETY: as above.
        let error = unsafe { saxpy.launch(&config, (2.0f64, &x, &x, &x, n)) }.unwrap_err();
        assert!(
            matches!(error, Error::LaunchArguments { .. }),
            "{round}: {error:?}"
        );
        let matching = cudyn::args![a, x_arg, x_arg, x_arg, n];
        // SAFETY: as above.
        unsafe { saxpy.launch(&config, &matching) }.expect("the matching list");
        let shifted = cudyn::args![a, 7u32, x_arg, x_arg, n];
        // SAFETY: as above.
        let error = unsafe { saxpy.launch(&config, &shifted) }.unwrap_err();
        assert!(
            matches!(error, Error::LaunchArguments { .. }),
            "{round}: {error:?}"
        );
    }
    assert_eq!(fake().calls("cuLaunchKernel") - before, 6);
}

#[test]
fn a_kernel_asks_for_its_function_once_per_context_and_launches_it_there() {
    let fake = fake();
    let config = LaunchConfig::new(1, 256);
    let empty = fake_driver::kernel("empty", &[]);
    let found = || fake.calls("cuKernelGetFunction");
    let before = found();
    // SAFETY: the fake driver runs nothing.
    let launch = || unsafe { empty.launch(&config, ()) };
    let calls = calls_of_first(10, launch);
    assert_eq!(
        found() - before,
        1,
        "device 0's function was asked for once"
    );
    assert_eq!((calls.launch, calls.of_function), (10, 10));

    cudyn::set_device(1).unwrap();
    calls_of_first(10, launch);
    assert_eq!(
        found() - before,
        2,
        "device 1's function was asked for once"
    );
    cudyn::set_device(0).unwrap();
    let calls = calls_of(10, launch);
    assert_two_calls_per_launch("back on device 0", calls, 10);
    assert_eq!(found() - before, 2, "both functions were kept");
}

#[test]
fn a_context_made_where_one_was_destroyed_gets_the_function_found_again() {
    let fake = fake();
    let set_current = cudyn::sys::driver().unwrap().api.cuCtxSetCurrent.unwrap();
    let config = LaunchConfig::new(1, 256);
    let empty = fake_driver::kernel("empty", &[]);
    let found = || fake.calls("cuKernelGetFunction");
    let first = fake.remake_context();
    // SAFETY: the fake driver's context lives as long as the process.
    assert_eq!(unsafe { set_current(first) }, 0);
    // SAFETY: the fake driver runs nothing.
    unsafe { empty.launch(&config, ()) }.unwrap();
    let before = found();

    // The same handle, another context: the fake driver refuses the function found in the
    // first, as the real one has unloaded it; a launch fails unless it uses the new one's.
    let second = fake.remake_context();
    assert_eq!(second, first);
    // SAFETY: as above.
    let calls = calls_of_first(3, || unsafe { empty.launch(&config, ()) });
    assert_eq!(
        found() - before,
        1,
        "the new context's function was asked for"
    );
    assert_eq!((calls.launch, calls.of_function), (3, 3));
    cudyn::set_device(0).unwrap();
}
