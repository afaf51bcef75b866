//! Plain types reaching a kernel intact: a derived struct whose layout has explicit padding, a
//! double, a float3-like array and an int, by value and as a typed global; arrays for vector
//! types; a `bytemuck::Pod` type through `Bytemuck<T>`. Each kernel writes back what it saw, field
//! by field into buffers of their own, and the test compares with the host's values.
//!
//! Run on a machine with a GPU: `cargo test -p cudyn --test gpu_derive -- --include-ignored`.
//! Each test fails, never skips, when the driver, the GPU or NVRTC is missing.

mod plain_types;

use std::mem::{align_of, offset_of, size_of};

use bytemuck::TransparentWrapper;
use cudyn::{Bytemuck, DeviceBuffer, LaunchConfig, Library, Program};
use plain_types::{sample, Complex, Float4, Sample, CUDA_TYPES};

const KERNELS: &str = r#"
__device__ Sample stored;

// Every field and parameter it received, each into a buffer of its own, and where the device
// placed the struct's fields.
extern "C" __global__ void echo_sample(char tag, Sample s, int n, float4 v, int3 i3,
                                       char* tag_out, unsigned char* kind, double* value,
                                       float* direction, int* count, float* vector, int* ints,
                                       unsigned long long* layout) {
    *tag_out = tag;
    *kind = s.kind;
    *value = s.value;
    direction[0] = s.direction.x;
    direction[1] = s.direction.y;
    direction[2] = s.direction.z;
    *count = s.count;
    vector[0] = v.x;
    vector[1] = v.y;
    vector[2] = v.z;
    vector[3] = v.w;
    ints[0] = i3.x;
    ints[1] = i3.y;
    ints[2] = i3.z;
    ints[3] = n;
    layout[0] = sizeof(Sample);
    layout[1] = alignof(Sample);
    layout[2] = (const char*)&s.value - (const char*)&s;
    layout[3] = (const char*)&s.direction - (const char*)&s;
    layout[4] = (const char*)&s.count - (const char*)&s;
}

// A float4 as the first parameter lies at offset 0 for a [f32; 4] too.
extern "C" __global__ void vector_first(float4 v, float* out) {
    out[0] = v.x;
    out[1] = v.y;
    out[2] = v.z;
    out[3] = v.w;
}

// Changes each field of the global in place: it reads and writes them at the device's offsets.
extern "C" __global__ void bump_stored() {
    stored.kind ^= 0xff;
    stored.value *= 2.0;
    stored.direction.y = -stored.direction.y;
    stored.count += 1;
}

extern "C" __global__ void rotate(Complex factor, const Complex* z, Complex* out,
                                  unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i].re = factor.re * z[i].re - factor.im * z[i].im;
    out[i].im = factor.re * z[i].im + factor.im * z[i].re;
}
"#;

fn library() -> Library {
    Program::new(format!("{CUDA_TYPES}{KERNELS}"))
        .name("plain_types.cu")
        .load()
        .expect("NVRTC compiles the kernels and they load")
}

#[test]
#[ignore = "gpu: launches a kernel with a derived struct, a float4 and an int3 by value"]
fn a_derived_struct_with_explicit_padding_reaches_the_kernel_intact() {
    let echo = library().kernel("echo_sample").unwrap();
    let host = sample();
    let vector = Float4([1.5, -2.25, 3.0e5, -0.0625]);
    let ints = [i32::MIN, 0, i32::MAX];
    let n = 0x1234_5678i32;
    let mut tag = DeviceBuffer::<i8>::zeroed(1).unwrap();
    let mut kind = DeviceBuffer::<u8>::zeroed(1).unwrap();
    let mut value = DeviceBuffer::<f64>::zeroed(1).unwrap();
    let mut direction = DeviceBuffer::<f32>::zeroed(3).unwrap();
    let mut count = DeviceBuffer::<i32>::zeroed(1).unwrap();
    let mut vector_out = DeviceBuffer::<f32>::zeroed(4).unwrap();
    let mut ints_out = DeviceBuffer::<i32>::zeroed(4).unwrap();
    let mut layout = DeviceBuffer::<u64>::zeroed(5).unwrap();
    // SAFETY: echo_sample writes one element to tag, kind, value and count, 3 to direction, 4 to
    // vector and ints and 5 to layout, each buffer that long; they are read after it (to_vec
    // waits).
    unsafe {
        echo.launch(
            &LaunchConfig::new(1, 1),
            (
                -3i8,
                host,
                n,
                vector,
                ints,
                &mut tag,
                &mut kind,
                &mut value,
                &mut direction,
                &mut count,
                &mut vector_out,
                &mut ints_out,
                &mut layout,
            ),
        )
    }
    .unwrap();

    let expected_layout = [
        size_of::<Sample>(),
        align_of::<Sample>(),
        offset_of!(Sample, value),
        offset_of!(Sample, direction),
        offset_of!(Sample, count),
    ]
    .map(|v| v as u64);
    assert_eq!(layout.to_vec().unwrap(), expected_layout);
    assert_eq!(tag.to_vec().unwrap(), [-3]);
    assert_eq!(kind.to_vec().unwrap(), [host.kind]);
    assert_eq!(value.to_vec().unwrap(), [host.value]);
    assert_eq!(direction.to_vec().unwrap(), host.direction);
    assert_eq!(count.to_vec().unwrap(), [host.count]);
    assert_eq!(vector_out.to_vec().unwrap(), vector.0);
    assert_eq!(ints_out.to_vec().unwrap(), [ints[0], ints[1], ints[2], n]);
}

#[test]
#[ignore = "gpu: launches a kernel with a [f32; 4] for its float4 parameter"]
fn an_array_reaches_a_vector_parameter_where_its_offset_matches() {
    let vector_first = library().kernel("vector_first").unwrap();
    let vector = [4.0f32, -5.5, 6.25, 1e-7];
    let mut out = DeviceBuffer::<f32>::zeroed(4).unwrap();
    // SAFETY: vector_first writes 4 floats to out, which holds 4 and is read after it.
    unsafe { vector_first.launch(&LaunchConfig::new(1, 1), (vector, &mut out)) }.unwrap();
    assert_eq!(out.to_vec().unwrap(), vector);
}

#[test]
#[ignore = "gpu: writes, changes on the device, and reads a derived struct as a __device__ global"]
fn a_derived_struct_is_a_typed_global() {
    let library = library();
    let stored = library.global::<Sample>("stored").unwrap();
    let host = sample();
    stored.write(&host).unwrap();
    let bump = library.kernel("bump_stored").unwrap();
    // SAFETY: bump_stored takes no parameters and changes only its own global.
    unsafe { bump.launch(&LaunchConfig::new(1, 1), ()) }.unwrap();
    cudyn::synchronize().unwrap();
    let expected = Sample {
        kind: host.kind ^ 0xff,
        value: host.value * 2.0,
        direction: [host.direction[0], -host.direction[1], host.direction[2]],
        count: host.count + 1,
        ..host
    };
    assert_eq!(stored.read().unwrap(), expected);
}

#[test]
#[ignore = "gpu: launches a kernel with a bytemuck Pod type by value and in buffers"]
fn a_bytemuck_pod_type_reaches_the_kernel_through_its_wrapper() {
    let rotate = library().kernel("rotate").unwrap();
    // Small integers: every product and sum is exact, fused or not.
    let z: Vec<Complex> = (0..1000)
        .map(|i| Complex {
            re: (i % 17) as f32 - 8.0,
            im: (i % 23) as f32 - 11.0,
        })
        .collect();
    let factor = Complex { re: 3.0, im: -2.0 };
    let input = DeviceBuffer::from_slice(Bytemuck::wrap_slice(&z)).unwrap();
    let mut out = DeviceBuffer::<Bytemuck<Complex>>::zeroed(z.len()).unwrap();
    // SAFETY: rotate reads z[i] and writes out[i] for i < n, both n long; out is read after it.
    unsafe {
        rotate.launch(
            &LaunchConfig::for_elements(z.len(), 128),
            (Bytemuck(factor), &input, &mut out, z.len() as u64),
        )
    }
    .unwrap();
    let expected: Vec<Complex> = z
        .iter()
        .map(|z| Complex {
            re: factor.re * z.re - factor.im * z.im,
            im: factor.re * z.im + factor.im * z.re,
        })
        .collect();
    let result = out.to_vec().unwrap();
    assert_eq!(Bytemuck::peel_slice(&result), &expected[..]);
}
