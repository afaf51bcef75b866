//! A template kernel compiled by NVRTC and found by its name expressions (`scale<float>`,
//! `scale<double>`): NVRTC instantiates each and reports its mangled name, which cudyn looks up.
//!
//! `cargo run -p cudyn --example template_kernel` (without a GPU: `-- --arch sm_90`, the compile
//! alone)

mod common;

use std::process::ExitCode;

use cudyn::{DeviceBuffer, LaunchConfig, Library, Program};

const SCALE: &str = r#"
template <typename T>
__global__ void scale(T *values, T factor, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) values[i] *= factor;
}
"#;

fn main() -> ExitCode {
    let program = Program::new(SCALE)
        .name_expression("scale<float>")
        .name_expression("scale<double>");
    let compile = |options: &_| common::compile(options, program, "scale.cu");
    common::run("template_kernel", compile, |compiled| {
        let library = Library::loader().load_compiled(&compiled)?;
        let scale_f32 = library.kernel("scale<float>")?;
        let scale_f64 = library.kernel("scale<double>")?;

        let n = 1000;
        let floats: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let doubles: Vec<f64> = (0..n).map(|i| i as f64 * 0.5).collect();
        let mut on_gpu_f32 = DeviceBuffer::from_slice(&floats)?;
        let mut on_gpu_f64 = DeviceBuffer::from_slice(&doubles)?;
        let config = LaunchConfig::for_elements(n, 128);
        // SAFETY: each instantiation reads and writes values[i] for i < n of a buffer of n
        // elements of its type; both are read after the kernels (to_vec waits).
        unsafe {
            scale_f32.launch(&config, (&mut on_gpu_f32, 4.0f32, n as u64))?;
            scale_f64.launch(&config, (&mut on_gpu_f64, -2.0f64, n as u64))?;
        }

        let cpu_f32: Vec<f32> = floats.iter().map(|x| x * 4.0).collect();
        let cpu_f64: Vec<f64> = doubles.iter().map(|x| x * -2.0).collect();
        Ok(vec![
            common::compare(
                format!("scale<float> ({}) on {n} floats", scale_f32.name()?),
                &on_gpu_f32.to_vec()?,
                &cpu_f32,
            ),
            common::compare(
                format!("scale<double> ({}) on {n} doubles", scale_f64.name()?),
                &on_gpu_f64.to_vec()?,
                &cpu_f64,
            ),
        ])
    })
}
