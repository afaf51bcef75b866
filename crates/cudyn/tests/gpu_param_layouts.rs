//! The parameter layouts the driver reports (`cuKernelGetParamInfo`) and the ones cudyn reads
//! offline from the same device code agree, so launches on drivers without that query are
//! checked against the right layout: for ordinary kernels, and for kernels taking parameters of
//! 4,096 and 32,000 bytes, which launch checked with those arguments and refuse others.
//!
//! Run on a machine with a GPU: `cargo test -p cudyn --test gpu_param_layouts -- --include-ignored`.

mod common;
mod plain_types;

use cudyn::compile::{Output, Program};
use cudyn::{ArgumentMismatch, DeviceBuffer, Error, Image, LaunchConfig, Library, ParamLayout};
use plain_types::{Param4k, ParamLarge, ParamLargeShort};

const KERNELS: &str = r#"
struct Coefficients { float a; double b; char tag; };

extern "C" __global__ void saxpy(float a, const float *x, const float *y, float *out, size_t n) {}

extern "C" __global__ void by_value(Coefficients c, int n, short s, double d) {}

extern "C" __global__ void many(int p0, float p1, double p2, char p3, long long p4, int p5,
                                float *p6, short p7, int p8, double p9, int p10, char p11,
                                float p12, int p13, size_t p14, int p15, float p16, int p17,
                                double p18, char p19, int p20, float p21) {}

template <typename T> __global__ void scale(T *data, T factor, unsigned n) {}
"#;

#[test]
#[ignore = "gpu: compares the driver's parameter layouts with the offline ones"]
fn driver_and_offline_parameter_layouts_agree() {
    for output in [Output::Cubin, Output::Ptx] {
        let program = Program::new(KERNELS)
            .output(output)
            .name_expression("scale<double>");
        let compiled = program.compile().unwrap();
        let library = Library::loader().load_compiled(&compiled).unwrap();
        let image = Image::new(compiled.code()).unwrap();
        let lowered = compiled.lowered_name("scale<double>").unwrap();
        for name in ["saxpy", "by_value", "many", lowered] {
            let kernel = library.kernel(name).unwrap();
            let driver = pairs(kernel.params().unwrap());
            let offline = pairs(&image.param_layout(name).unwrap());
            assert_eq!(driver, offline, "{name} from {output:?}");
            assert!(!driver.is_empty(), "{name}");
        }
        let many = library.kernel("many").unwrap();
        assert_eq!(many.params().unwrap().len(), 22);
    }
}

/// Kernels with a 4,096-byte and a 32,000-byte parameter (`__grid_constant__`), recorded in the
/// two formats of parameter record.
const LARGE_PARAMS: &str = include_str!("kernels/large_params.cu");

/// `(offset, size)` of each parameter.
fn pairs(layout: &[ParamLayout]) -> Vec<(usize, usize)> {
    layout.iter().map(|p| (p.offset, p.size)).collect()
}

#[test]
#[ignore = "gpu: loads kernels taking 4,096- and 32,000-byte parameters (NVRTC and nvcc), compares \
            the driver's layouts with the offline ones, and launches them checked"]
fn large_parameters_match_the_driver_and_launch_checked() {
    let nvrtc = |output| {
        Program::new(LARGE_PARAMS)
            .output(output)
            .compile()
            .unwrap()
            .code()
            .to_vec()
    };
    let builds = [
        ("NVRTC cubin", nvrtc(Output::Cubin)),
        ("NVRTC PTX", nvrtc(Output::Ptx)),
        (
            "nvcc cubin",
            common::compile(LARGE_PARAMS, common::Output::Cubin).bytes(),
        ),
        (
            "nvcc fatbin",
            common::compile(LARGE_PARAMS, common::Output::Fatbin).bytes(),
        ),
    ];
    let mut rng = fastrand::Rng::with_seed(32_000);
    for (build, code) in builds {
        let library = Library::load(&code).unwrap();
        let image = Image::new(&code[..]).unwrap();
        for (name, expected) in [
            ("kernel4k", vec![(0, 4096), (4096, 8)]),
            ("kernelLargeParam", vec![(0, 32000), (32000, 8)]),
            (
                "kernelMixed",
                vec![(0, 1), (4, 32000), (32004, 2), (32008, 8), (32016, 8)],
            ),
        ] {
            let driver = pairs(library.kernel(name).unwrap().params().unwrap());
            let offline = pairs(&image.param_layout(name).unwrap());
            assert_eq!(driver, offline, "{build}: {name}");
            assert_eq!(driver, expected, "{build}: {name}");
        }

        let large = ParamLarge {
            a: std::array::from_fn(|_| rng.i32(-100_000..100_000)),
        };
        let small = Param4k {
            a: std::array::from_fn(|_| rng.i32(-100_000..100_000)),
        };
        let weighted = |values: &[i32]| -> i64 {
            values
                .iter()
                .enumerate()
                .map(|(i, &v)| i64::from(v) * i as i64)
                .sum()
        };
        let one = LaunchConfig::new(1, 1);
        let mut out = DeviceBuffer::<i64>::from_slice(&[i64::MIN; 5]).unwrap();
        let kernel = library.kernel("kernelLargeParam").unwrap();
        // SAFETY: the kernel reads its parameter and writes out[0], which the buffer holds; the
        // copy below, on the legacy default stream, waits for it.
        unsafe { kernel.launch(&one, (large, &mut out)) }.unwrap();
        let (gpu, cpu) = (out.to_vec().unwrap()[0], weighted(&large.a));
        assert_eq!(gpu, cpu, "{build}");
        println!("{build}: kernelLargeParam, one 32,000-byte argument launched checked: {gpu} (CPU {cpu})");

        let kernel = library.kernel("kernel4k").unwrap();
        // SAFETY: as above.
        unsafe { kernel.launch(&one, (small, &mut out)) }.unwrap();
        assert_eq!(out.to_vec().unwrap()[0], weighted(&small.a), "{build}");

        let kernel = library.kernel("kernelMixed").unwrap();
        let (c, s, d) = (-7i8, -12_345i16, 98_765.0f64);
        // SAFETY: the kernel writes out[0..5], which the buffer holds; as above.
        unsafe { kernel.launch(&one, (c, large, s, d, &mut out)) }.unwrap();
        let expected = [
            i64::from(c),
            i64::from(large.a[0]),
            i64::from(large.a[7999]),
            i64::from(s),
            98_765,
        ];
        assert_eq!(out.to_vec().unwrap(), expected, "{build}");

        // Arguments of the wrong size are refused before the driver sees them.
        let short = ParamLargeShort { a: [1; 7999] };
        let kernel = library.kernel("kernelLargeParam").unwrap();
        // SAFETY: refused by the argument check, never launched.
        let refused = unsafe { kernel.launch(&one, (short, &mut out)) };
        assert_refused(refused, &format!("{build}: kernelLargeParam"));
        let kernel = library.kernel("kernel4k").unwrap();
        // SAFETY: as above.
        let refused = unsafe { kernel.launch(&one, (large, &mut out)) };
        assert_refused(refused, &format!("{build}: kernel4k"));
    }
}

/// Asserts that a launch was refused for the size of its first argument.
fn assert_refused(launched: cudyn::Result<()>, what: &str) {
    let error = launched.unwrap_err();
    assert!(
        matches!(
            error,
            Error::LaunchArguments {
                mismatch: ArgumentMismatch::Size { index: 0, .. },
                ..
            }
        ),
        "{what}: {error}"
    );
}
