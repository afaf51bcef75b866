//! Plain types as kernel arguments without a GPU: derived structs, arrays, `half`'s types and
//! `Bytemuck<T>`, checked against the parameter layouts NVRTC gives the CUDA types they stand
//! for (compiled for sm_90 and read back from the cubin), and against `offset_of!`.

mod plain_types;

use std::mem::{align_of, offset_of, size_of};
use std::sync::OnceLock;

use bytemuck::allocation::TransparentWrapperAlloc;
use bytemuck::TransparentWrapper;
use cudyn::launch::check_arguments;
use cudyn::{Arch, ArgumentMismatch, Bytemuck, DeviceRepr, KernelArgs, Output, ParamLayout};
use half::{bf16, f16};
use plain_types::{sample, Complex, Float4, Sample, CUDA_TYPES};

/// A transparent wrapper is its field.
#[derive(Debug, Clone, Copy, PartialEq, DeviceRepr)]
#[repr(transparent)]
struct Meters(f64);

/// A struct of derived structs.
#[derive(Debug, Clone, Copy, PartialEq, DeviceRepr)]
#[repr(C)]
struct Segment {
    from: Float4,
    to: Float4,
    length: Meters,
    _pad: [u8; 8],
}

/// `#[pragma pack(1)]`-style: no padding, so accepted.
#[derive(Debug, Clone, Copy, DeviceRepr)]
#[repr(C, packed)]
struct Packed {
    tag: u8,
    value: u32,
}

/// cudyn reached through another path, as a crate re-exporting it would.
mod reexport {
    pub use cudyn;
}

#[derive(Debug, Clone, Copy, cudyn::DeviceRepr)]
#[cudyn(crate = "reexport::cudyn")]
#[repr(C)]
struct ThroughAReexport {
    value: u32,
}

const KERNELS: &str = r#"
#include <cuda_fp16.h>
#include <cuda_bf16.h>
struct Segment { float4 from; float4 to; double length; };
extern "C" __global__ void sample(char tag, Sample s, int n, float4 v, int3 i3, float3 f3) {}
extern "C" __global__ void vector_first(float4 v, int n) {}
extern "C" __global__ void segment(char tag, Segment s) {}
extern "C" __global__ void halves(__half a, char c, __nv_bfloat16 b) {}
extern "C" __global__ void complex(char c, Complex z, const Complex* zs) {}
struct Padded { char kind; double scale; int count; };
extern "C" __global__ void padded(int n, Padded p, char c) {}
"#;

/// The parameter layout of each kernel in `KERNELS`, as compiled by NVRTC for sm_90.
fn kernel_params(kernel: &str) -> Vec<ParamLayout> {
    static CUBIN: OnceLock<Vec<u8>> = OnceLock::new();
    let cubin = CUBIN.get_or_init(|| {
        cudyn::Program::new(format!("{CUDA_TYPES}{KERNELS}"))
            .name("plain_types.cu")
            .arch("sm_90".parse::<Arch>().unwrap())
            .output(Output::Cubin)
            .compile()
            .unwrap()
            .code()
            .to_vec()
    });
    cudyn::Image::new(cubin)
        .unwrap()
        .inspect()
        .unwrap()
        .param_layout(kernel)
        .unwrap_or_else(|error| panic!("{kernel}: {error}"))
        .unwrap_or_else(|| panic!("{kernel} is in the cubin"))
}

/// A struct with padding, as C has it: 7 bytes after `kind`, 4 after `count`.
#[derive(Debug, Clone, Copy, DeviceRepr)]
#[cudyn(c_name = "Padded", padded)]
#[repr(C)]
struct Padded {
    kind: u8,
    scale: f64,
    count: i32,
}

#[test]
fn a_padded_struct_packs_into_zeroed_bytes_with_its_c_layout() {
    use cudyn::Pack;
    let value = Padded {
        kind: 0xab,
        scale: -2.5,
        count: 0x0102_0304,
    };
    let packed = value.pack();
    assert_eq!(size_of_val(&packed), size_of::<Padded>());
    assert_eq!(align_of_val(&packed), align_of::<Padded>());
    // The bytes, written out independently: each field at its C offset, zeros between.
    let mut expected = vec![0xab];
    expected.extend([0; 7]);
    expected.extend((-2.5f64).to_ne_bytes());
    expected.extend(0x0102_0304i32.to_ne_bytes());
    expected.extend([0; 4]);
    // SAFETY: `Packed` is DeviceRepr: every byte initialized, no padding.
    let bytes = unsafe {
        std::slice::from_raw_parts(
            std::ptr::from_ref(&packed).cast::<u8>(),
            size_of_val(&packed),
        )
    };
    assert_eq!(bytes, expected);
    // The packed value passes the kernel's parameter, and names its C type.
    assert_eq!(
        check_arguments(&kernel_params("padded"), (3i32, packed, 1i8).layouts()),
        Ok(())
    );
    assert_eq!(
        (3i32, packed, 1i8).types()[1].c_spelling(),
        "Padded",
        "the packed value means the struct it packs"
    );
}

#[test]
fn a_derived_struct_has_the_c_layout_of_its_cuda_twin() {
    assert_eq!((size_of::<Sample>(), align_of::<Sample>()), (32, 8));
    let offsets = [
        offset_of!(Sample, kind),
        offset_of!(Sample, value),
        offset_of!(Sample, direction),
        offset_of!(Sample, count),
    ];
    assert_eq!(offsets, [0, 8, 16, 28]);
    assert_eq!((size_of::<Float4>(), align_of::<Float4>()), (16, 16));
    assert_eq!((size_of::<Segment>(), align_of::<Segment>()), (48, 16));
    assert_eq!(size_of::<Meters>(), 8);
    assert_eq!((size_of::<Packed>(), align_of::<Packed>()), (5, 1));
    assert_eq!(size_of::<ThroughAReexport>(), 4);

    // The same sizes and offsets as NVRTC gives the CUDA structs and vector types.
    let tag = 1i8;
    let args = (
        tag,
        sample(),
        3i32,
        Float4([1.0; 4]),
        [1i32, 2, 3],
        [0.5f32; 3],
    );
    let params = kernel_params("sample");
    assert_eq!(
        params[1],
        ParamLayout {
            offset: 8,
            size: 32
        }
    );
    assert_eq!(check_arguments(&params, args.layouts()), Ok(()));
    let segment = Segment {
        from: Float4([0.0; 4]),
        to: Float4([1.0; 4]),
        length: Meters(2.0),
        _pad: [0; 8],
    };
    assert_eq!(
        check_arguments(&kernel_params("segment"), (tag, segment).layouts()),
        Ok(())
    );
}

#[test]
fn an_array_is_accepted_where_its_size_and_c_offset_match_the_kernels() {
    // float3 and int3 are 4-byte aligned, like [f32; 3] and [i32; 3]: accepted anywhere (the
    // `sample` kernel above takes them after a float4). A float4 first lies at offset 0 for a
    // [f32; 4] too, and the int after it at 16 either way.
    let vector_first = kernel_params("vector_first");
    assert_eq!(
        check_arguments(&vector_first, ([1.0f32; 4], 2i32).layouts()),
        Ok(())
    );
    // After a 1-byte char, a float4 lies at 16 but a [f32; 4] at 4: refused, naming the fix.
    let params = kernel_params("sample");
    let args = (1i8, sample(), 3i32, [1.0f32; 4], [1i32, 2, 3], [0.5f32; 3]);
    let mismatch = check_arguments(&params, args.layouts()).unwrap_err();
    assert_eq!(
        mismatch,
        ArgumentMismatch::Offset {
            index: 3,
            expected: 48,
            given: 44
        }
    );
    assert!(
        mismatch.to_string().contains("#[repr(C, align(16))]"),
        "{mismatch}"
    );
}

#[test]
fn a_struct_argument_of_the_wrong_size_is_refused() {
    // Without the explicit 8 bytes at its end, Segment would be 40 bytes against the kernel's 48.
    #[derive(Clone, Copy, DeviceRepr)]
    #[repr(C)]
    struct ShortSegment {
        from: [f32; 4],
        to: [f32; 4],
        length: f64,
    }
    let short = ShortSegment {
        from: [0.0; 4],
        to: [0.0; 4],
        length: 0.0,
    };
    assert_eq!(
        check_arguments(&kernel_params("segment"), (1i8, short).layouts()),
        Err(ArgumentMismatch::Size {
            index: 1,
            expected: 48,
            given: 40
        })
    );
}

#[test]
fn half_and_bfloat16_match_their_cuda_types() {
    assert_eq!((size_of::<f16>(), align_of::<f16>()), (2, 2));
    assert_eq!((size_of::<bf16>(), align_of::<bf16>()), (2, 2));
    let args = (f16::from_f32(1.5), 1i8, bf16::from_f32(-0.25));
    let params = kernel_params("halves");
    assert_eq!(check_arguments(&params, args.layouts()), Ok(()));
    // A float where a __half goes is caught by its size.
    let floats = (1.5f32, 1i8, bf16::ZERO);
    assert_eq!(
        check_arguments(&params, floats.layouts()),
        Err(ArgumentMismatch::Size {
            index: 0,
            expected: 2,
            given: 4
        })
    );
}

#[test]
fn a_bytemuck_pod_type_passes_as_its_wrapper() {
    assert_eq!(size_of::<Bytemuck<Complex>>(), size_of::<Complex>());
    assert_eq!(align_of::<Bytemuck<Complex>>(), align_of::<Complex>());
    let buffer = cudyn::DeviceBuffer::<Bytemuck<Complex>>::alloc(0).unwrap();
    let z = Bytemuck(Complex { re: 1.0, im: -1.0 });
    assert_eq!(
        check_arguments(&kernel_params("complex"), (1i8, z, &buffer).layouts()),
        Ok(())
    );
    // Slices and vectors convert in place, both ways.
    let values = vec![Complex { re: 1.0, im: 2.0 }, Complex { re: 3.0, im: 4.0 }];
    let wrapped: &[Bytemuck<Complex>] = Bytemuck::wrap_slice(&values);
    assert_eq!(wrapped[1], Bytemuck(values[1]));
    assert_eq!(Bytemuck::peel_vec(wrapped.to_vec()), values);
}

/// The value passed for a kernel parameter is its bytes: a derived struct's are exactly its
/// fields', with nothing uninitialized between them.
#[test]
fn a_derived_value_is_its_fields_bytes() {
    let value = sample();
    let bytes = (value,).with_pointers(|pointers| {
        // SAFETY: one pointer, to the 32 bytes of `value` inside the tuple, alive here; a derived
        // struct has no padding, so every byte is initialized.
        unsafe { std::slice::from_raw_parts((*pointers).cast::<u8>(), 32) }.to_vec()
    });
    let mut expected = vec![value.kind, 0, 0, 0, 0, 0, 0, 0];
    expected.extend(value.value.to_ne_bytes());
    for v in value.direction {
        expected.extend(v.to_ne_bytes());
    }
    expected.extend(value.count.to_ne_bytes());
    assert_eq!(bytes, expected);
}
