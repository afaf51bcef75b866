//! Two pieces of device code compiled separately to LTO-IR and linked by nvJitLink with link-time
//! optimization: the kernel in one, the function it calls in the other.
//!
//! `cargo run -p cudyn --example lto_link` (without a GPU: `-- --arch sm_90`, the compile and
//! the link alone)

mod common;

use std::process::ExitCode;

use cudyn::compile::Linked;
use cudyn::{DeviceBuffer, LaunchConfig, Output, Program};

const KERNEL: &str = r#"
__device__ float polish(float x);
extern "C" __global__ void polish_all(float *values, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) values[i] = polish(values[i]);
}
"#;

const HELPER: &str = r#"
__device__ float polish(float x) { return 3.0f * x - 1.0f; }
"#;

fn main() -> ExitCode {
    common::run("lto_link", link, |linked| {
        let arch = linked.arch();
        let polish_all = linked.load()?.kernel("polish_all")?;

        let n = 4096;
        let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let mut values = DeviceBuffer::from_slice(&host)?;
        // SAFETY: polish_all reads and writes values[i] for i < n, and the buffer holds n floats;
        // it is read after the kernel (to_vec waits).
        unsafe { polish_all.launch(&LaunchConfig::for_elements(n, 256), (&mut values, n as u64)) }?;

        // Whole numbers: exact with or without a fused multiply-add.
        let cpu: Vec<f32> = host.iter().map(|x| 3.0 * x - 1.0).collect();
        Ok(vec![common::compare(
            format!(
                "{n} floats through a kernel and a helper linked with LTO for {arch} ({} bytes)",
                linked.code().len()
            ),
            &values.to_vec()?,
            &cpu,
        )])
    })
}

/// The two pieces compiled to LTO-IR and linked with link-time optimization, for the GPU or the
/// architecture named.
fn link(options: &common::Options) -> Result<(Linked, String), Box<dyn std::error::Error>> {
    let arch = options.arch()?;
    let mut pieces = Vec::new();
    for (name, source) in [("kernel.cu", KERNEL), ("helper.cu", HELPER)] {
        let lto_ir = Program::new(source).output(Output::LtoIr).relocatable(true);
        pieces.push(common::compile(options, lto_ir.arch(arch), name)?.0);
    }
    let codes: Vec<&[u8]> = pieces.iter().map(|piece| piece.code()).collect();
    let linked = cudyn::compile::link_lto(&codes, Some(arch))?;
    let what = format!(
        "kernel.cu and helper.cu compiled to LTO-IR and linked by nvJitLink into {} bytes of \
         cubin for {arch}",
        linked.code().len()
    );
    Ok((linked, what))
}
