//! Plain types of the derive and feature tests and the CUDA types they stand for.

#![allow(dead_code)] // each test binary uses part of them

use cudyn::DeviceRepr;

/// The CUDA side of the types below, to put before a test's kernels.
pub const CUDA_TYPES: &str = r#"
struct Sample { unsigned char kind; unsigned char pad[7]; double value; float3 direction; int count; };
struct Complex { float re, im; };
"#;

/// `Sample`: the 7 bytes C++ leaves implicit after `kind` are a field here.
#[derive(Debug, Clone, Copy, PartialEq, DeviceRepr)]
#[repr(C)]
pub struct Sample {
    pub kind: u8,
    pub _pad: [u8; 7],
    pub value: f64,
    pub direction: [f32; 3],
    pub count: i32,
}

/// A value with a distinct, non-zero pattern in every field, and bytes that would show a shift
/// by any offset.
pub fn sample() -> Sample {
    Sample {
        kind: 0xa5,
        _pad: [0; 7],
        value: -1234.5625,
        direction: [0.25, -3.5, 1e-3],
        count: -77_777,
    }
}

/// `float4`: 16-byte aligned, where `[f32; 4]` is 4.
#[derive(Debug, Clone, Copy, PartialEq, DeviceRepr)]
#[repr(C, align(16))]
pub struct Float4(pub [f32; 4]);

/// `Complex`, standing for a `bytemuck::Pod` type of another crate.
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C)]
pub struct Complex {
    pub re: f32,
    pub im: f32,
}
// SAFETY: repr(C), two floats, no padding, any bits valid.
unsafe impl bytemuck::Zeroable for Complex {}
// SAFETY: as above.
unsafe impl bytemuck::Pod for Complex {}

/// `param_4k_t` of `kernels/large_params.cu`: a 4,096-byte parameter.
#[derive(Debug, Clone, Copy, PartialEq, DeviceRepr)]
#[repr(C)]
pub struct Param4k {
    pub a: [i32; 1024],
}

/// `param_large_t` of `kernels/large_params.cu`: a 32,000-byte parameter.
#[derive(Debug, Clone, Copy, PartialEq, DeviceRepr)]
#[repr(C)]
pub struct ParamLarge {
    pub a: [i32; 8000],
}

/// One int short of `param_large_t`: an argument of the wrong size.
#[derive(Debug, Clone, Copy, PartialEq, DeviceRepr)]
#[repr(C)]
pub struct ParamLargeShort {
    pub a: [i32; 7999],
}
