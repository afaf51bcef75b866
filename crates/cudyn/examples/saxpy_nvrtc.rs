//! SAXPY compiled by NVRTC at run time and loaded through the CUDA runtime's library API
//! (`cudaLibraryLoadData`, `cudaLibraryGetKernel`, `cudaLaunchKernel`), with checked arguments.
//!
//! `cargo run -p cudyn --example saxpy_nvrtc` (without a GPU: `-- --arch sm_90`, the compile
//! alone)

mod common;

use std::process::ExitCode;

use cudyn::{Backend, DeviceBuffer, LaunchConfig, Library, Program};

const SAXPY: &str = r#"
extern "C" __global__ void saxpy(float a, const float *x, const float *y, float *out, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
"#;

fn main() -> ExitCode {
    let compile = |options: &_| common::compile(options, Program::new(SAXPY), "saxpy.cu");
    common::run("saxpy_nvrtc", compile, |compiled| {
        let n = 1 << 20;
        let a = 2.0f32;
        // Whole numbers below 2^24: every result is exact, with or without a fused multiply-add.
        let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let ys: Vec<f32> = (0..n).map(|i| (2 * i) as f32).collect();

        let library = Library::loader()
            .backend(Backend::Runtime)
            .load_compiled(&compiled)?;
        let saxpy = library.kernel("saxpy")?;
        let (x, y) = (
            DeviceBuffer::from_slice(&xs)?,
            DeviceBuffer::from_slice(&ys)?,
        );
        let mut out = DeviceBuffer::<f32>::zeroed(n)?;
        // SAFETY: saxpy reads x[i] and y[i] and writes out[i] for i < n, and each buffer holds n
        // floats; the buffers outlive the kernel, and `out` is read after it (to_vec waits).
        unsafe {
            saxpy.launch(
                &LaunchConfig::for_elements(n, 256),
                (a, &x, &y, &mut out, n as u64),
            )
        }?;

        let cpu: Vec<f32> = xs.iter().zip(&ys).map(|(x, y)| a * x + y).collect();
        Ok(vec![common::compare(
            format!(
                "saxpy of {n} floats, NVRTC {} for {}, loaded through the {:?} API",
                cudyn::sys::nvrtc()?.version,
                compiled.arch(),
                library.backend()
            ),
            &out.to_vec()?,
            &cpu,
        )])
    })
}
