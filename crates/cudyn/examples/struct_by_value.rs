//! A struct passed to a kernel by value: a `#[repr(C)]` Rust struct that implements
//! `DeviceRepr` stands for the CUDA struct, and the launch checks its size against the kernel's
//! parameter before anything runs.
//!
//! `cargo run -p cudyn --example struct_by_value`

mod common;

use std::process::ExitCode;

use cudyn::{DeviceBuffer, DeviceRepr, LaunchConfig, Program};

const TRANSFORM: &str = r#"
struct Transform {
    double scale;
    int offset;
    short steps[3];
};
extern "C" __global__ void apply(Transform t, double *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = t.scale * (i + t.offset) + t.steps[i % 3];
}
"#;

/// The CUDA `Transform`, field for field: 8 + 4 + 6 bytes, padded to 24 by its alignment of 8.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct Transform {
    scale: f64,
    offset: i32,
    steps: [i16; 3],
}

// SAFETY: repr(C) with the device struct's fields in its order, no pointers, and every bit
// pattern is a valid f64, i32 and i16 array.
unsafe impl DeviceRepr for Transform {}

fn main() -> ExitCode {
    common::run("struct_by_value", || {
        let apply = Program::new(TRANSFORM)
            .name("transform.cu")
            .load()?
            .kernel("apply")?;
        let transform = Transform {
            scale: 0.5,
            offset: 10,
            steps: [1, -2, 3],
        };
        let n = 999;
        let mut out = DeviceBuffer::<f64>::zeroed(n)?;
        // SAFETY: apply writes out[i] for i < n, and the buffer holds n doubles; it is read after
        // the kernel (to_vec waits).
        unsafe {
            apply.launch(
                &LaunchConfig::for_elements(n, 128),
                (transform, &mut out, n as i32),
            )
        }?;

        // Multiples of 0.5 plus small integers: exact in double on both sides.
        let cpu: Vec<f64> = (0..n)
            .map(|i| {
                transform.scale * (i as f64 + f64::from(transform.offset))
                    + f64::from(transform.steps[i % 3])
            })
            .collect();
        Ok(vec![common::compare(
            format!(
                "a {}-byte struct by value, applied to {n} doubles",
                size_of::<Transform>()
            ),
            &out.to_vec()?,
            &cpu,
        )])
    })
}
