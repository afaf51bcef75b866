//! Parameter C types read from real NVRTC output (mangled names and PTX), and the type check
//! of launch arguments against them, without a GPU.

mod typed_structs;

use cudyn::ctype::param_types_of_symbol;
use cudyn::launch::check_types;
use cudyn::{
    Arch, ArgType, ArgumentMismatch, CType, DeviceBuffer, Image, KernelArgs, Output, Program,
    Reinterpret,
};
use half::{bf16, f16};
use typed_structs::{Even, Odd};

/// Kernels whose parameter types the test states independently, in C, next to each.
const SOURCE: &str = r#"
#include <cuda_fp16.h>
#include <cuda_bf16.h>
namespace geo { struct Point { double x, y; }; }

template <typename T>
__global__ void axpy(T a, const T* x, T* y, int n) {}
template __global__ void axpy<float>(float, const float*, float*, int);
template __global__ void axpy<__half>(__half, const __half*, __half*, int);
template __global__ void axpy<__nv_bfloat16>(__nv_bfloat16, const __nv_bfloat16*, __nv_bfloat16*, int);

__global__ void scale(float* data, float factor, unsigned int n) {}
__global__ void scale(double* data, double factor, unsigned long long n) {}
__global__ void structs(Odd odd, const Even* evens, geo::Point* points, const void* raw) {}
__global__ void integers(char c, signed char sc, unsigned char uc, short s, unsigned short us,
                         long l, unsigned long ul, long long ll, size_t n, bool flag) {}
__global__ void pointers(float** table, const float* const* rows, float4 v) {}

extern "C" __global__ void plain(float a, const float* x, float* y, int n, double d,
                                 long long l, __half h, Odd odd) {}
"#;

fn compiled(output: Output) -> Vec<u8> {
    Program::new(format!("{}{SOURCE}", typed_structs::CUDA))
        .arch(Arch::new(9, 0))
        .output(output)
        .compile()
        .expect("NVRTC compiles (run scripts/cuda-wheels and activate its venv)")
        .code()
        .to_vec()
}

/// The C spelling of each parameter type read from the kernel whose C++ signature is
/// `signature`, among the kernels of `image`.
fn spelled_types(image: &[u8], signature: &str) -> Vec<String> {
    let kernels = Image::new(image).unwrap().kernel_list().unwrap();
    let kernel = kernels
        .iter()
        .find(|kernel| kernel.signature.as_deref() == Some(signature))
        .unwrap_or_else(|| panic!("no kernel {signature} in {kernels:?}"));
    param_types_of_symbol(&kernel.symbol)
        .expect("a mangled name")
        .into_iter()
        .map(|ty| ty.map_or_else(|| "?".to_owned(), |ty| ty.to_string()))
        .collect()
}

#[test]
fn mangled_names_of_real_nvrtc_output_give_every_parameter_type() {
    let cubin = compiled(Output::Cubin);
    let cases: [(&str, &[&str]); 8] = [
        (
            "axpy<float>(float, float const*, float*, int)",
            &["float", "const float*", "float*", "int"],
        ),
        (
            "axpy<__half>(__half, __half const*, __half*, int)",
            &["__half", "const __half*", "__half*", "int"],
        ),
        (
            "axpy<__nv_bfloat16>(__nv_bfloat16, __nv_bfloat16 const*, __nv_bfloat16*, int)",
            &[
                "__nv_bfloat16",
                "const __nv_bfloat16*",
                "__nv_bfloat16*",
                "int",
            ],
        ),
        (
            "scale(float*, float, unsigned int)",
            &["float*", "float", "unsigned int"],
        ),
        (
            "scale(double*, double, unsigned long long)",
            &["double*", "double", "unsigned long long"],
        ),
        (
            "structs(Odd, Even const*, geo::Point*, void const*)",
            &["Odd", "const Even*", "geo::Point*", "const void*"],
        ),
        (
            "integers(char, signed char, unsigned char, short, unsigned short, long, unsigned \
             long, long long, unsigned long, bool)",
            &[
                "char",
                "signed char",
                "unsigned char",
                "short",
                "unsigned short",
                "long",
                "unsigned long",
                "long long",
                "unsigned long",
                "bool",
            ],
        ),
        (
            "pointers(float**, float const* const*, float4)",
            &["float**", "const float* const*", "float4"],
        ),
    ];
    for (signature, expected) in cases {
        assert_eq!(spelled_types(&cubin, signature), expected, "{signature}");
    }
    // An extern "C" kernel's name says nothing.
    assert_eq!(param_types_of_symbol("plain"), None);
}

#[test]
fn ptx_gives_width_and_float_or_integer_never_signedness() {
    let ptx = compiled(Output::Ptx);
    let module = cudyn::inspect::ptx::parse(&ptx).unwrap();
    let plain = module.entry("plain").expect("the extern \"C\" entry");
    let types: Vec<Option<String>> = plain
        .params
        .iter()
        .map(|param| param.c_type().map(|ty| ty.to_string()))
        .collect();
    let some = |text: &str| Some(text.to_owned());
    assert_eq!(
        types,
        [
            some("float"),
            // NVRTC writes pointers as .u64 without .ptr: an integer or a pointer.
            some("64-bit integer or pointer"),
            some("64-bit integer or pointer"),
            // `int` is .u32: the width, not the signedness.
            some("32-bit integer"),
            some("double"),
            some("64-bit integer or pointer"),
            // __half and structs are bytes: their size only.
            None,
            None,
        ]
    );
    // What the PTX types let a launch refuse, and what they do not.
    let int = plain.params[3].c_type().unwrap();
    assert!(!int.accepts(&ArgType::Scalar(cudyn::Scalar::Float)));
    assert!(int.accepts(&ArgType::Scalar(cudyn::Scalar::Int)));
    assert!(int.accepts(&ArgType::Scalar(cudyn::Scalar::UnsignedInt)));
    let float = plain.params[0].c_type().unwrap();
    assert!(!float.accepts(&ArgType::Scalar(cudyn::Scalar::Int)));
    assert!(!float.accepts(&ArgType::Scalar(cudyn::Scalar::Double)));
}

/// The parameter types of the kernel whose C++ signature is `signature`, as NVRTC mangles it.
fn types_of(signature: &str) -> Vec<Option<CType>> {
    let cubin = compiled(Output::Cubin);
    let kernels = Image::new(&cubin).unwrap().kernel_list().unwrap();
    let kernel = kernels
        .iter()
        .find(|kernel| kernel.signature.as_deref() == Some(signature))
        .unwrap();
    param_types_of_symbol(&kernel.symbol).unwrap()
}

fn refusal(params: &[Option<CType>], args: impl KernelArgs) -> Option<ArgumentMismatch> {
    check_types(params, args.types()).err()
}

#[test]
fn each_wrong_type_is_refused_naming_both_types_and_each_right_one_passes() {
    let axpy = types_of("axpy<float>(float, float const*, float*, int)");
    let xs = DeviceBuffer::<f32>::alloc(0).unwrap();
    let mut ys = DeviceBuffer::<f32>::alloc(0).unwrap();
    let mut ints = DeviceBuffer::<i32>::alloc(0).unwrap();

    assert_eq!(refusal(&axpy, (2.0f32, &xs, &mut ys, 4i32)), None);
    // A mutable buffer for a const pointer is fine: the kernel only reads it.
    let mut xs_mut = DeviceBuffer::<f32>::alloc(0).unwrap();
    assert_eq!(refusal(&axpy, (2.0f32, &mut xs_mut, &mut ys, 4i32)), None);

    // f32 for int.
    let wrong = refusal(&axpy, (2.0f32, &xs, &mut ys, 4.0f32)).unwrap();
    assert_eq!(
        wrong.to_string(),
        "parameter 3 is `int` but an `f32` was given: pass a value of the parameter's type"
    );
    // u32 for int, unless reinterpreted.
    let wrong = refusal(&axpy, (2.0f32, &xs, &mut ys, 4u32)).unwrap();
    assert!(
        wrong
            .to_string()
            .starts_with("parameter 3 is `int` but a `u32` was given"),
        "{wrong}"
    );
    assert!(wrong.to_string().contains("cudyn::Reinterpret"), "{wrong}");
    assert_eq!(
        refusal(&axpy, (2.0f32, &xs, &mut ys, Reinterpret(4u32))),
        None
    );
    // An i32 buffer for float*.
    let wrong = refusal(&axpy, (2.0f32, &xs, &mut ints, 4i32)).unwrap();
    assert_eq!(
        wrong,
        ArgumentMismatch::Type {
            index: 2,
            expected: CType::Pointer {
                pointee: Some(Box::new(CType::Scalar(cudyn::Scalar::Float))),
                is_const: false
            },
            given: <&mut DeviceBuffer<i32> as cudyn::KernelArg>::C_TYPE,
        }
    );
    assert!(wrong
        .to_string()
        .starts_with("parameter 2 is `float*` but a mutable buffer of `i32` (`int*`) was given"));
    // A read-only buffer for a pointer the kernel may write.
    let wrong = refusal(&axpy, (2.0f32, &xs, &ys, 4i32)).unwrap();
    assert!(
        wrong.to_string().starts_with(
            "parameter 2 is `float*` but a read-only buffer of `f32` (`const float*`) was given: \
             the kernel may write"
        ),
        "{wrong}"
    );

    // bf16 for __half, and the right type.
    let half_axpy = types_of("axpy<__half>(__half, __half const*, __half*, int)");
    let hx = DeviceBuffer::<f16>::alloc(0).unwrap();
    let mut hy = DeviceBuffer::<f16>::alloc(0).unwrap();
    let wrong = refusal(&half_axpy, (bf16::ONE, &hx, &mut hy, 4i32)).unwrap();
    assert!(
        wrong
            .to_string()
            .starts_with("parameter 0 is `__half` but a `half::bf16` was given"),
        "{wrong}"
    );
    assert_eq!(refusal(&half_axpy, (f16::ONE, &hx, &mut hy, 4i32)), None);
}

#[derive(Clone, Copy, cudyn::DeviceRepr)]
#[cudyn(c_name = "Point")]
#[repr(C)]
struct Point {
    x: f64,
    y: f64,
}

/// A struct derived without a C name: checked by size only.
#[derive(Clone, Copy, cudyn::DeviceRepr)]
#[repr(C)]
struct Unnamed {
    a: i32,
    b: i32,
}

#[test]
fn structs_are_told_apart_by_their_c_names() {
    let structs = types_of("structs(Odd, Even const*, geo::Point*, void const*)");
    let evens = DeviceBuffer::<Even>::alloc(0).unwrap();
    let mut points = DeviceBuffer::<Point>::alloc(0).unwrap();
    let bytes = DeviceBuffer::<u8>::alloc(0).unwrap();
    let odd = Odd { a: 1, b: 2.0 };
    // `Point` names `geo::Point` by its last component; `const void*` takes any buffer.
    assert_eq!(refusal(&structs, (odd, &evens, &mut points, &bytes)), None);
    // A different struct of the same size.
    let even = Even { a: 1.0, b: 2 };
    let wrong = refusal(&structs, (even, &evens, &mut points, &bytes)).unwrap();
    assert!(
        wrong
            .to_string()
            .starts_with("parameter 0 is `Odd` but a struct `Even` was given"),
        "{wrong}"
    );
    let odds = DeviceBuffer::<Odd>::alloc(0).unwrap();
    assert!(matches!(
        refusal(&structs, (odd, &odds, &mut points, &bytes)),
        Some(ArgumentMismatch::Type { index: 1, .. })
    ));
    // Without a C name, a struct is checked by size only, as before types were known.
    assert_eq!(
        refusal(
            &structs,
            (Unnamed { a: 1, b: 2 }, &evens, &mut points, &bytes)
        ),
        None
    );
}

#[test]
fn an_arg_list_carries_the_same_types_as_a_tuple() {
    let axpy = types_of("axpy<float>(float, float const*, float*, int)");
    let xs = DeviceBuffer::<f32>::alloc(0).unwrap();
    let mut ys = DeviceBuffer::<f32>::alloc(0).unwrap();
    let (a, n, wrong_n) = (2.0f32, 4i32, 4.0f32);
    let mut list = cudyn::ArgList::new();
    list.push(&a).push(&xs).push(&mut ys).push(&n);
    assert_eq!(check_types(&axpy, list.types()), Ok(()));
    drop(list);
    // The buffer is free again once the list is no longer used.
    assert_eq!(ys.len(), 0);
    let list: cudyn::ArgList = [&a, &a, &a, &wrong_n].into_iter().collect();
    assert!(matches!(
        check_types(&axpy, list.types()),
        Err(ArgumentMismatch::Type { index: 1, .. })
    ));
}
