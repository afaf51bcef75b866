//! The type check of a real `Kernel`'s launches, on a fake driver (tests/fake_driver), on any
//! machine: a C++ kernel's parameter types come from its mangled name, a wrong type is refused
//! by `Kernel::check` and by `Kernel::launch` before any launch call, and the right types
//! launch. An `extern "C"` kernel (the driver knows its sizes only) is checked by size.

mod fake_driver;

use std::sync::OnceLock;

use cudyn::{
    ArgList, ArgumentMismatch, DeviceBuffer, Error, ErrorKind, Kernel, LaunchConfig, Reinterpret,
};
use fake_driver::{c_params, FakeDriver};

fn fake() -> &'static FakeDriver {
    static FAKE: OnceLock<FakeDriver> = OnceLock::new();
    FAKE.get_or_init(|| FakeDriver::install().expect("the fake driver installs"))
}

/// `axpy<float>(float, const float*, float*, int)`, as nvcc and NVRTC mangle it.
fn axpy() -> Kernel {
    fake();
    fake_driver::kernel(
        "_Z4axpyIfEvT_PKS0_PS0_i",
        &c_params(&[(4, 4), (8, 8), (8, 8), (4, 4)]),
    )
}

fn mismatch(error: Error) -> ArgumentMismatch {
    match error {
        Error::LaunchArguments { mismatch, .. } => mismatch,
        other => panic!("not an argument mismatch: {other:?}"),
    }
}

#[test]
fn a_kernel_knows_its_parameter_types_from_its_mangled_name() {
    let kernel = axpy();
    let types: Vec<String> = kernel
        .param_types()
        .unwrap()
        .iter()
        .map(|ty| ty.as_ref().unwrap().to_string())
        .collect();
    assert_eq!(types, ["float", "const float*", "float*", "int"]);
    let plain = fake_driver::kernel("plain", &c_params(&[(4, 4)]));
    assert_eq!(plain.param_types().unwrap(), [None]);
}

#[test]
fn check_refuses_each_wrong_type_and_launch_reaches_no_driver_call() {
    let kernel = axpy();
    let config = LaunchConfig::new(1, 32);
    let x = DeviceBuffer::<f32>::alloc(32).unwrap();
    let mut y = DeviceBuffer::<f32>::alloc(32).unwrap();
    let mut ints = DeviceBuffer::<i32>::alloc(32).unwrap();

    kernel.check(&config, &(2.0f32, &x, &mut y, 32i32)).unwrap();
    kernel
        .check(&config, &(2.0f32, &x, &mut y, Reinterpret(32u32)))
        .unwrap();
    let refused = [
        kernel.check(&config, &(2.0f32, &x, &mut y, 32.0f32)),
        kernel.check(&config, &(2.0f32, &x, &mut y, 32u32)),
        kernel.check(&config, &(2.0f32, &x, &mut ints, 32i32)),
        kernel.check(&config, &(2.0f32, &x, &y, 32i32)),
    ];
    let indices: Vec<usize> = refused
        .into_iter()
        .map(|outcome| {
            let error = outcome.unwrap_err();
            assert_eq!(error.kind(), ErrorKind::LaunchArguments);
            match mismatch(error) {
                ArgumentMismatch::Type { index, .. } => index,
                other => panic!("not a type mismatch: {other:?}"),
            }
        })
        .collect();
    assert_eq!(indices, [3, 3, 2, 2]);

    let launches = fake().calls("cuLaunchKernel");
    // SAFETY: the fake driver runs nothing; the launch is refused before it anyway.
    let refused = unsafe { kernel.launch(&config, (2.0f32, &x, &mut y, 32.0f32)) }.unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("parameter 3 is `int` but an `f32` was given"),
        "{refused}"
    );
    // SAFETY: as above.
    unsafe { kernel.launch(&config, (2.0f32, &x, &mut y, 32i32)) }.unwrap();
    // The refused launch again, after a matching one was remembered: still refused.
    // SAFETY: as above.
    let again = unsafe { kernel.launch(&config, (2.0f32, &x, &mut y, 32u32)) };
    assert!(matches!(
        again.map_err(mismatch),
        Err(ArgumentMismatch::Type { index: 3, .. })
    ));
    assert_eq!(fake().calls("cuLaunchKernel") - launches, 1);
}

#[test]
fn an_extern_c_kernel_is_checked_by_size_only() {
    fake();
    let plain = fake_driver::kernel("plain_axpy", &c_params(&[(4, 4), (8, 8), (8, 8), (4, 4)]));
    let config = LaunchConfig::new(1, 32);
    let x = DeviceBuffer::<f32>::alloc(32).unwrap();
    let y = DeviceBuffer::<f32>::alloc(32).unwrap();
    // Nothing says the 4th parameter is an int, nor that the 3rd is written.
    plain.check(&config, &(2.0f32, &x, &y, 32.0f32)).unwrap();
    assert!(matches!(
        plain
            .check(&config, &(2.0f32, &x, &y, 32u64))
            .map_err(mismatch),
        Err(ArgumentMismatch::Size { index: 3, .. })
    ));
}

#[test]
fn two_hundred_arguments_are_collected_and_a_mutable_buffer_is_read_after() {
    fake();
    // sum(double* out, float v0, ..., float v198)
    let mangled = format!("_Z3sumPd{}", "f".repeat(199));
    let mut layout = vec![(8, 8)];
    layout.extend(std::iter::repeat_n((4, 4), 199));
    let kernel = fake_driver::kernel(&mangled, &c_params(&layout));
    let mut out = DeviceBuffer::<f64>::alloc(1).unwrap();
    let values: Vec<f32> = (0..199).map(|v| v as f32).collect();
    let mut args = ArgList::new();
    args.push(&mut out).extend(&values);
    let config = LaunchConfig::new(1, 1);
    kernel.check(&config, &args).unwrap();
    // SAFETY: the fake driver runs nothing.
    unsafe { kernel.launch(&config, &args) }.unwrap();
    assert_eq!(out.len(), 1);

    // A list of the wrong element type names the first wrong one.
    let doubles: Vec<f64> = values.iter().map(|&v| f64::from(v)).collect();
    let mut wrong = ArgList::new();
    wrong.push(&mut out).extend(&values[..198]);
    wrong.push(&doubles[0]);
    assert!(matches!(
        kernel.check(&config, &wrong).map_err(mismatch),
        Err(ArgumentMismatch::Size { index: 199, .. })
    ));
    let ints: Vec<i32> = (0..199).collect();
    let mut wrong = ArgList::new();
    wrong.push(&mut out).extend(&ints);
    assert!(matches!(
        kernel.check(&config, &wrong).map_err(mismatch),
        Err(ArgumentMismatch::Type { index: 1, .. })
    ));
    let list: ArgList = values.iter().collect();
    assert_eq!(list.len(), 199);
}
