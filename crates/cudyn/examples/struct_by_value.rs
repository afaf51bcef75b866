//! A struct passed to a kernel by value: a `#[repr(C)]` Rust struct with
//! `#[derive(DeviceRepr)]` stands for the CUDA struct, the derive refuses it at compile time if it
//! has padding, and the launch checks its size against the kernel's parameter before anything
//! runs.
//!
//! `cargo run -p cudyn --example struct_by_value` (without a GPU: `-- --arch sm_90`, the compile
//! alone)

mod common;

use std::process::ExitCode;

use cudyn::{DeviceBuffer, DeviceRepr, LaunchConfig, Library, Program};

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

/// The CUDA `Transform`, field for field: 8 + 4 + 6 bytes, which C++ pads to 24 by its alignment
/// of 8. The derive refuses implicit padding (its bytes would be uninitialized), so the last 6
/// bytes are a field of their own, zeros in every value.
#[repr(C)]
#[derive(Debug, Clone, Copy, DeviceRepr)]
struct Transform {
    scale: f64,
    offset: i32,
    steps: [i16; 3],
    _pad: [u8; 6],
}

fn main() -> ExitCode {
    let compile = |options: &_| common::compile(options, Program::new(TRANSFORM), "transform.cu");
    common::run("struct_by_value", compile, |compiled| {
        let apply = Library::loader()
            .load_compiled(&compiled)?
            .kernel("apply")?;
        let transform = Transform {
            scale: 0.5,
            offset: 10,
            steps: [1, -2, 3],
            _pad: [0; 6],
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
