//! `half::f16` and `half::bf16` as kernel arguments, buffer elements and globals (`__half` and
//! `__nv_bfloat16` on the device), compared with the same computation done on the CPU with the
//! `half` crate.
//!
//! Run on a machine with a GPU: `cargo test -p cudyn --test gpu_half -- --include-ignored`.
//! Each test fails, never skips, when the driver, the GPU or NVRTC is missing.

use cudyn::{DeviceBuffer, DeviceRepr, LaunchConfig, Library, Program};
use half::{bf16, f16};

const KERNELS: &str = r#"
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __half half_scale;
__device__ __nv_bfloat16 bf16_scale;

// out[i] = a * x[i] + y[i], rounded once (a fused multiply-add), in each type.
extern "C" __global__ void axpy_half(__half a, const __half* x, const __half* y, __half* out,
                                     unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = __hfma(a, x[i], y[i]);
}
extern "C" __global__ void axpy_bf16(__nv_bfloat16 a, const __nv_bfloat16* x,
                                     const __nv_bfloat16* y, __nv_bfloat16* out,
                                     unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = __hfma(a, x[i], y[i]);
}

// Scales both buffers by the globals, then doubles the globals for the host to read back. One
// block, so that the globals change only after every thread has read them.
extern "C" __global__ void scale_by_globals(__half* h, __nv_bfloat16* b, unsigned long long n) {
    for (unsigned long long i = threadIdx.x; i < n; i += blockDim.x) {
        h[i] = __hmul(h[i], half_scale);
        b[i] = __hmul(b[i], bf16_scale);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        half_scale = __hadd(half_scale, half_scale);
        bf16_scale = __hadd(bf16_scale, bf16_scale);
    }
}
"#;

const N: usize = 4099;

fn library() -> Library {
    Program::new(KERNELS)
        .name("halves.cu")
        .load()
        .expect("NVRTC compiles the kernels and they load")
}

/// Multiples of 1/32 in [-4, 4): exact in f16 and in bf16 (8 significant bits), so both types get
/// the same inputs, and a * x + y needs rounding in both.
fn inputs(step: usize) -> Vec<f64> {
    (0..N)
        .map(|i| ((i * step) % 256) as f64 / 32.0 - 4.0)
        .collect()
}

/// Runs `axpy_<name>` on the device with `T` values converted from `a`, `x` and `y`, and
/// returns the outputs and the CPU's: `a * x + y` computed exactly in f64 (the inputs have few
/// enough bits) and rounded once to `T`, as a fused multiply-add does.
fn axpy<T: DeviceRepr>(
    name: &str,
    from_f64: fn(f64) -> T,
    to_f64: fn(T) -> f64,
) -> (Vec<T>, Vec<T>) {
    let kernel = library().kernel(name).unwrap();
    let a = from_f64(1.53125);
    let x: Vec<T> = inputs(37).into_iter().map(from_f64).collect();
    let y: Vec<T> = inputs(101).into_iter().map(from_f64).collect();
    let dx = DeviceBuffer::from_slice(&x).unwrap();
    let dy = DeviceBuffer::from_slice(&y).unwrap();
    let mut out = DeviceBuffer::<T>::zeroed(N).unwrap();
    // SAFETY: the kernel reads x[i], y[i] and writes out[i] for i < N, each buffer N long; out is
    // read after it (to_vec waits).
    unsafe {
        kernel.launch(
            &LaunchConfig::for_elements(N, 256),
            (a, &dx, &dy, &mut out, N as u64),
        )
    }
    .unwrap();
    let exact: Vec<f64> = x
        .iter()
        .zip(&y)
        .map(|(&x, &y)| to_f64(a) * to_f64(x) + to_f64(y))
        .collect();
    // Some results must need rounding, or the comparison would not test it.
    assert!(exact.iter().any(|&e| to_f64(from_f64(e)) != e));
    (
        out.to_vec().unwrap(),
        exact.into_iter().map(from_f64).collect(),
    )
}

#[test]
#[ignore = "gpu: launches a __half kernel with half::f16 arguments and buffers"]
fn f16_arguments_and_buffers_match_the_cpu() {
    let (gpu, cpu) = axpy("axpy_half", f16::from_f64, f16::to_f64);
    assert_eq!(gpu, cpu);
}

#[test]
#[ignore = "gpu: launches a __nv_bfloat16 kernel with half::bf16 arguments and buffers"]
fn bf16_arguments_and_buffers_match_the_cpu() {
    let (gpu, cpu) = axpy("axpy_bf16", bf16::from_f64, bf16::to_f64);
    assert_eq!(gpu, cpu);
}

#[test]
#[ignore = "gpu: writes and reads __half and __nv_bfloat16 globals"]
fn f16_and_bf16_are_typed_globals() {
    let library = library();
    let half_scale = library.global::<f16>("half_scale").unwrap();
    let bf16_scale = library.global::<bf16>("bf16_scale").unwrap();
    half_scale.write(&f16::from_f32(0.5)).unwrap();
    bf16_scale.write(&bf16::from_f32(-0.25)).unwrap();
    let values = inputs(13);
    let halves: Vec<f16> = values.iter().copied().map(f16::from_f64).collect();
    let bfloats: Vec<bf16> = values.iter().copied().map(bf16::from_f64).collect();
    let mut h = DeviceBuffer::from_slice(&halves).unwrap();
    let mut b = DeviceBuffer::from_slice(&bfloats).unwrap();
    let kernel = library.kernel("scale_by_globals").unwrap();
    // SAFETY: the kernel reads and writes h[i] and b[i] for i < N, both N long, and its own
    // globals; everything is read after it.
    unsafe { kernel.launch(&LaunchConfig::new(1, 1024), (&mut h, &mut b, N as u64)) }.unwrap();
    // Powers of two: the products are exact.
    let expected_h: Vec<f16> = values.iter().map(|&v| f16::from_f64(v * 0.5)).collect();
    let expected_b: Vec<bf16> = values.iter().map(|&v| bf16::from_f64(v * -0.25)).collect();
    assert_eq!(h.to_vec().unwrap(), expected_h);
    assert_eq!(b.to_vec().unwrap(), expected_b);
    assert_eq!(half_scale.read().unwrap(), f16::ONE);
    assert_eq!(bf16_scale.read().unwrap(), bf16::from_f32(-0.5));
}
