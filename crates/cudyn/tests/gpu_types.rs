//! Type-checked launches on a GPU, of kernels built three ways: by nvcc (templates, overloads,
//! C++ signatures), by NVRTC (name expressions, and `extern "C"` from PTX) and from PTX. Each
//! wrong-type case is refused before the driver, naming both types, and each right case
//! launches and computes what the CPU computes.
//!
//! Run on a machine with a GPU: `cargo test -p cudyn --test gpu_types -- --include-ignored`.

mod common;

mod typed_structs;

use common::Output as NvccOutput;
use cudyn::{
    ArgumentMismatch, DeviceBuffer, Error, Kernel, KernelArgs, LaunchConfig, Library, Output,
    Program,
};
use half::{bf16, f16};
use typed_structs::{Even, Odd};

const KERNELS: &str = r#"
#include <cuda_fp16.h>
#include <cuda_bf16.h>


template <typename T>
__global__ void axpy(T a, const T* x, T* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
template __global__ void axpy<float>(float, const float*, float*, int);
template __global__ void axpy<__half>(__half, const __half*, __half*, int);

__global__ void scale(float* data, float factor, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] *= factor;
}
__global__ void scale(double* data, double factor, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] *= factor;
}

__global__ void odd_sum(Odd odd, float* out) { out[0] = odd.a + odd.b; }

extern "C" __global__ void fill(float* out, float value, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = value + i;
}
"#;

/// The kernels after the structs they take.
fn source() -> String {
    format!("{}{KERNELS}", typed_structs::CUDA)
}

const N: usize = 1000;

fn config() -> LaunchConfig<'static> {
    LaunchConfig::for_elements(N, 128)
}

/// The index of the parameter a refused check names, and its message, which must name both
/// types.
fn refused(kernel: &Kernel, args: &impl KernelArgs, expected: &str) -> usize {
    let error = kernel.check(&config(), args).unwrap_err();
    let message = error.to_string();
    assert!(message.contains(expected), "`{expected}` not in: {message}");
    match error {
        Error::LaunchArguments {
            mismatch: ArgumentMismatch::Type { index, .. },
            ..
        } => index,
        other => panic!("not a type mismatch: {other:?}"),
    }
}

/// The wrong-type cases and the right ones of `axpy<float>`, `scale` and `odd_sum` from
/// `library`, whichever compiler made it.
fn typed_cases(library: &Library) {
    let floats: Vec<f32> = (0..N).map(|i| i as f32 * 0.5).collect();
    let ys: Vec<f32> = (0..N).map(|i| 1.0 - i as f32).collect();
    let x = DeviceBuffer::from_slice(&floats).unwrap();
    let mut y = DeviceBuffer::from_slice(&ys).unwrap();
    let mut ints = DeviceBuffer::<i32>::zeroed(N).unwrap();
    let n = N as i32;

    let axpy = library.kernel("axpy<float>").unwrap();
    let f32_for_int = (2.0f32, &x, &mut y, N as f32);
    assert_eq!(
        refused(
            &axpy,
            &f32_for_int,
            "parameter 3 is `int` but an `f32` was given"
        ),
        3
    );
    let u32_for_int = (2.0f32, &x, &mut y, N as u32);
    assert_eq!(
        refused(&axpy, &u32_for_int, "is `int` but a `u32` was given"),
        3
    );
    let ints_for_floats = (2.0f32, &x, &mut ints, n);
    assert_eq!(
        refused(
            &axpy,
            &ints_for_floats,
            "is `float*` but a mutable buffer of `i32`"
        ),
        2
    );
    let read_only = (2.0f32, &x, &y, n);
    assert_eq!(
        refused(
            &axpy,
            &read_only,
            "is `float*` but a read-only buffer of `f32`"
        ),
        2
    );
    // A refused launch reaches no driver call: `y` is unchanged.
    // SAFETY: refused before the driver.
    let launch = unsafe { axpy.launch(&config(), (2.0f32, &x, &mut y, N as u32)) };
    assert!(launch.is_err());
    assert_eq!(y.to_vec().unwrap(), ys);
    // SAFETY: axpy<float> reads n floats of x and writes n of y, both holding n; to_vec
    // synchronizes before the buffers are read or dropped.
    unsafe { axpy.launch(&config(), (2.0f32, &x, &mut y, n)) }.unwrap();
    let expected: Vec<f32> = floats
        .iter()
        .zip(&ys)
        .map(|(x, y)| 2.0f32.mul_add(*x, *y))
        .collect();
    assert_eq!(y.to_vec().unwrap(), expected);

    // bf16 for __half, then __half.
    let axpy_half = library.kernel("axpy<__half>").unwrap();
    let halves: Vec<f16> = (0..N)
        .map(|i| f16::from_f32((i % 64) as f32 / 8.0))
        .collect();
    let hx = DeviceBuffer::from_slice(&halves).unwrap();
    let mut hy = DeviceBuffer::<f16>::zeroed(N).unwrap();
    let bf16_for_half = (bf16::from_f32(2.0), &hx, &mut hy, n);
    assert_eq!(
        refused(
            &axpy_half,
            &bf16_for_half,
            "is `__half` but a `half::bf16` was given"
        ),
        0
    );
    // SAFETY: as above, in __half.
    unsafe { axpy_half.launch(&config(), (f16::from_f32(2.0), &hx, &mut hy, n)) }.unwrap();
    let doubled: Vec<f16> = halves
        .iter()
        .map(|h| f16::from_f32(h.to_f32() * 2.0))
        .collect();
    assert_eq!(hy.to_vec().unwrap(), doubled);

    // Overloads: each takes its own element type only.
    let scale_float = library.kernel("scale(float*, float, int)").unwrap();
    let mut doubles = DeviceBuffer::from_slice(&[1.5f64; N]).unwrap();
    let doubles_for_floats = (&mut doubles, 2.0f32, n);
    assert_eq!(
        refused(
            &scale_float,
            &doubles_for_floats,
            "is `float*` but a mutable buffer of `f64`"
        ),
        0
    );
    let scale_double = library.kernel("scale(double*, double, int)").unwrap();
    // SAFETY: scale(double*) multiplies n doubles in place, the buffer holds n.
    unsafe { scale_double.launch(&config(), (&mut doubles, 4.0f64, n)) }.unwrap();
    assert_eq!(doubles.to_vec().unwrap(), vec![6.0f64; N]);

    // A different struct of the same size, then the right one.
    let odd_sum = library.kernel("odd_sum").unwrap();
    let mut out = DeviceBuffer::<f32>::zeroed(1).unwrap();
    let even = (Even { a: 1.0, b: 2 }, &mut out);
    assert_eq!(
        refused(&odd_sum, &even, "is `Odd` but a struct `Even` was given"),
        0
    );
    // SAFETY: odd_sum writes one float to out, which holds one.
    unsafe { odd_sum.launch(&LaunchConfig::new(1, 1), (Odd { a: 3, b: 0.25 }, &mut out)) }.unwrap();
    assert_eq!(out.to_vec().unwrap(), [3.25]);
}

#[test]
#[ignore = "gpu: launches nvcc-built C++ kernels, refusing each wrong argument type"]
fn nvcc_kernels_are_type_checked() {
    let cubin = common::compile(&source(), NvccOutput::Cubin);
    let library = Library::from_file(&cubin.path).unwrap();
    typed_cases(&library);
    // The extern "C" kernel of the same cubin is checked by size only.
    let fill = library.kernel("fill").unwrap();
    assert_eq!(fill.param_types().unwrap(), [None, None, None]);
    let mut out = DeviceBuffer::<f32>::zeroed(N).unwrap();
    fill.check(&config(), &(&mut out, 1.0f32, N as f32))
        .unwrap();
}

#[test]
#[ignore = "gpu: launches NVRTC-built kernels by name expression, refusing wrong types"]
fn nvrtc_kernels_by_name_expression_are_type_checked() {
    let library = Program::new(source())
        .name_expression("axpy<float>")
        .name_expression("axpy<__half>")
        .load()
        .unwrap();
    typed_cases(&library);
}

#[test]
#[ignore = "gpu: launches kernels loaded from PTX, refusing what PTX's types refuse"]
fn ptx_kernels_are_checked_by_what_ptx_says() {
    let ptx = Program::new(source())
        .output(Output::Ptx)
        .compile()
        .unwrap();
    let library = Library::loader().load_compiled(&ptx).unwrap();
    // A C++ kernel from PTX has its mangled name's types, as from a cubin.
    typed_cases(&library);
    // An extern "C" kernel from PTX: a float and an integer told apart, never signedness.
    let fill = library.kernel("fill").unwrap();
    let types: Vec<Option<String>> = fill
        .param_types()
        .unwrap()
        .iter()
        .map(|ty| ty.as_ref().map(ToString::to_string))
        .collect();
    assert_eq!(
        types,
        [
            Some("64-bit integer or pointer".to_owned()),
            Some("float".to_owned()),
            Some("32-bit integer".to_owned())
        ]
    );
    let mut out = DeviceBuffer::<f32>::zeroed(N).unwrap();
    let f32_for_int = (&mut out, 1.0f32, N as f32);
    assert_eq!(
        refused(
            &fill,
            &f32_for_int,
            "parameter 2 is `32-bit integer` but an `f32`"
        ),
        2
    );
    let int_for_float = (&mut out, 1i32, N as i32);
    assert_eq!(
        refused(&fill, &int_for_float, "parameter 1 is `float` but an `i32`"),
        1
    );
    // SAFETY: fill writes n floats of out, which holds n.
    unsafe { fill.launch(&config(), (&mut out, 0.5f32, N as i32)) }.unwrap();
    let expected: Vec<f32> = (0..N).map(|i| 0.5 + i as f32).collect();
    assert_eq!(out.to_vec().unwrap(), expected);
}
