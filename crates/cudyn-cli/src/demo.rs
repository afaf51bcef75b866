//! `cudyn demo`: cudyn end to end. Compile the NVRTC SAXPY of "Dynamic Loading in the CUDA
//! Runtime" (NVIDIA) with NVRTC, inspect the
//! result offline, link two LTO-IR pieces with nvJitLink, and where a GPU exists load both through
//! the runtime's library API, launch them and check every element against the CPU.

use std::error::Error;
use std::process::ExitCode;
use std::time::Instant;

use cudyn::compile::{self, Arch, Output, Program};
use cudyn::{Component, Device, DeviceBuffer, Image, LaunchConfig, Library};

use crate::inspect::render_inspection;
use crate::streams::outln;
use crate::terminal::{self, GOOD, STRONG};

/// A step's failure, with the error behind it as its cause.
type Result<T, E = Box<dyn Error>> = std::result::Result<T, E>;

/// The NVRTC SAXPY kernel that "Dynamic Loading in the CUDA Runtime" (NVIDIA) loads through the
/// runtime.
const SAXPY: &str = include_str!("kernels/saxpy.cu");

/// Two pieces of one program: a kernel calling a device function defined in the other piece,
/// which only link-time optimization can inline.
const ITERATE_KERNEL: &str = r#"
extern __device__ float step(float x);
extern "C" __global__ void iterate(float *data, int steps, size_t n)
{
  size_t tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (tid < n) {
    float v = data[tid];
    for (int i = 0; i < steps; ++i) v = step(v);
    data[tid] = v;
  }
}
"#;
const ITERATE_STEP: &str = "__device__ float step(float x) { return x * 0.5f + 1.0f; }\n";

/// The architecture compiled for when there is no GPU to ask: Hopper (H100, H200).
const FALLBACK_ARCH: Arch = Arch::new(9, 0);

const AFTER_HELP: &str = "\
Without a GPU the load-and-launch step says why it is skipped, and the demo still succeeds.

Exit status: 0 when every step that ran succeeded (and matched the CPU); 1 when one failed;
2 for a usage error.

Examples:
  cudyn demo                       # 2^24 elements on the GPU
  cudyn demo --elements 1000003    # an odd size: the last block is partly idle";

/// Options of `cudyn demo`.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// Elements of the SAXPY run on the GPU, from 1 to 2^30.
    #[arg(long, default_value_t = 1 << 24, value_parser = parse_elements)]
    elements: usize,
}

/// The most elements the demo takes: its buffers (three of floats, on the host and the GPU)
/// then hold 12 GiB.
const MAX_ELEMENTS: usize = 1 << 30;

/// A count of elements from 1 to [`MAX_ELEMENTS`].
fn parse_elements(text: &str) -> Result<usize, String> {
    text.parse::<usize>()
        .ok()
        .filter(|count| (1..=MAX_ELEMENTS).contains(count))
        .ok_or_else(|| format!("`{text}` is not a count of elements from 1 to {MAX_ELEMENTS}"))
}

pub fn run(args: &Args) -> ExitCode {
    match demo(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            terminal::print_error("cudyn demo", &*error);
            ExitCode::FAILURE
        }
    }
}

fn demo(args: &Args) -> Result<()> {
    let gpu = usable_gpu();
    let arch = match &gpu {
        Ok(device) => {
            let (major, minor) = device.compute_capability()?;
            outln!("GPU 0: {}, sm_{major}{minor}", device.name()?);
            Arch::new(major, minor)
        }
        Err(reason) => {
            outln!("No GPU: {reason}");
            outln!(
                "Compiling for {FALLBACK_ARCH} (Hopper: H100, H200), since there is no GPU to ask."
            );
            FALLBACK_ARCH
        }
    };

    outln!("\n{STRONG}1. Compile the NVRTC SAXPY example to SASS for {arch}{STRONG:#}");
    let started = Instant::now();
    let saxpy = Program::new(SAXPY).name("saxpy.cu").arch(arch).compile()?;
    outln!(
        "   {} bytes of cubin in {:.1} ms",
        saxpy.code().len(),
        started.elapsed().as_secs_f64() * 1e3
    );

    outln!("\n{STRONG}2. Inspect it offline (no GPU needed){STRONG:#}");
    let inspection = Image::new(saxpy.code()).and_then(|image| image.inspect())?;
    for line in render_inspection("saxpy.cubin", &inspection).lines() {
        outln!("   {line}");
    }

    outln!("\n{STRONG}3. Link two LTO-IR pieces with nvJitLink (-lto) for {arch}{STRONG:#}");
    let linked = match lto_blocker() {
        Some(reason) => {
            outln!("   skipped: {reason}");
            None
        }
        None => Some(link_pieces(arch)?),
    };

    outln!("\n{STRONG}4. Load, launch and verify on the GPU{STRONG:#}");
    if let Err(reason) = &gpu {
        outln!("   skipped: {reason}");
        outln!("\n{GOOD}Done{GOOD:#}: compiled, inspected and linked; the GPU steps need a GPU.");
        return Ok(());
    }
    verify_saxpy(saxpy.code(), args.elements)?;
    if let Some(linked) = linked {
        verify_iterate(linked.code(), args.elements)?;
    }
    outln!("\n{GOOD}Done{GOOD:#}: every step that ran matched the CPU.");
    Ok(())
}

/// Why LTO cannot work with the libraries found, if it cannot: LTO-IR from an NVRTC newer than
/// nvJitLink is refused (NVJITLINK_ERROR_OUTDATED_LIBRARY).
fn lto_blocker() -> Option<String> {
    let nvrtc = cudyn::toolchain::library_version(Component::Nvrtc).ok()?;
    let nvjitlink = cudyn::toolchain::library_version(Component::NvJitLink).ok()?;
    (nvrtc > nvjitlink).then(|| {
        format!("NVRTC {nvrtc} is newer than nvJitLink {nvjitlink}, which cannot read its LTO-IR")
    })
}

/// Compiles the two pieces to LTO-IR and links them with link-time optimization.
fn link_pieces(arch: Arch) -> Result<compile::Linked> {
    let piece = |source: &str, name: &str| {
        Program::new(source)
            .name(name)
            .arch(arch)
            .output(Output::LtoIr)
            .relocatable(true)
            .compile()
    };
    let pieces = [
        piece(ITERATE_KERNEL, "iterate.cu")?,
        piece(ITERATE_STEP, "step.cu")?,
    ];
    let linked = compile::link_lto(&[pieces[0].code(), pieces[1].code()], Some(arch))?;
    let iterate_params = Image::new(linked.code())
        .and_then(|image| image.param_layout("iterate"))?
        .len();
    outln!(
        "   {} + {} bytes of LTO-IR -> {} bytes of cubin with kernel iterate ({iterate_params} \
         parameters)",
        pieces[0].code().len(),
        pieces[1].code().len(),
        linked.code().len()
    );
    Ok(linked)
}

/// Device 0, or in one line why there is none (`cudyn doctor` tells the whole story).
fn usable_gpu() -> Result<Device, String> {
    let first_line = |error: cudyn::Error| {
        let text = error.to_string();
        text.lines().next().unwrap_or_default().to_owned()
    };
    match Device::count() {
        Ok(0) => Err("the driver sees no GPU".into()),
        Ok(_) => Device::get(0).map_err(first_line),
        Err(error) => Err(first_line(error)),
    }
}

fn verify_saxpy(cubin: &[u8], n: usize) -> Result<()> {
    let started = Instant::now();
    let library = Library::load(cubin)?;
    let kernel = library.kernel("saxpy")?;
    outln!(
        "   loaded through the {:?} API in {:.0} us; kernel handle {:p} (a cudaKernel_t is a CUkernel)",
        library.backend(),
        started.elapsed().as_secs_f64() * 1e6,
        kernel.as_raw()
    );
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    let x: Vec<f32> = (0..n).map(|_| rng.f32() * 2.0 - 1.0).collect();
    let y: Vec<f32> = (0..n).map(|_| rng.f32() * 2.0 - 1.0).collect();
    let a = 2.5f32;
    let dx = DeviceBuffer::from_slice(&x)?;
    let dy = DeviceBuffer::from_slice(&y)?;
    let mut out = DeviceBuffer::from_slice(&vec![f32::NAN; n])?;
    let started = Instant::now();
    // SAFETY: saxpy reads x[i], y[i] and writes out[i] for i < n, and the three buffers hold n
    // floats; they outlive the kernel, which the synchronization below waits for.
    unsafe {
        kernel.launch(
            &LaunchConfig::for_elements(n, 256),
            (a, &dx, &dy, &mut out, n as u64),
        )
    }?;
    cudyn::synchronize()?;
    let elapsed = started.elapsed();
    let out = out.to_vec()?;
    // NVRTC contracts a * x + y into one fused multiply-add, which the CPU does exactly too.
    let wrong = out
        .iter()
        .zip(x.iter().zip(&y))
        .filter(|(got, (x, y))| got.to_bits() != a.mul_add(**x, **y).to_bits())
        .count();
    outln!(
        "   saxpy on {n} random elements: launch + sync {:.2} ms, {wrong} of {n} differ from the CPU",
        elapsed.as_secs_f64() * 1e3
    );
    if wrong == 0 {
        Ok(())
    } else {
        Err(format!("{wrong} SAXPY results differ from the CPU's").into())
    }
}

fn verify_iterate(cubin: &[u8], n: usize) -> Result<()> {
    let library = Library::load(cubin)?;
    let kernel = library.kernel("iterate")?;
    let data: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 - 100.0).collect();
    let mut buffer = DeviceBuffer::from_slice(&data)?;
    let steps = 7;
    // SAFETY: iterate updates data[i] in place for i < n, and the buffer holds n floats; it
    // outlives the kernel, which the synchronization below waits for.
    unsafe {
        kernel.launch(
            &LaunchConfig::for_elements(n, 256),
            (&mut buffer, steps, n as u64),
        )
    }?;
    cudyn::synchronize()?;
    let got = buffer.to_vec()?;
    // Halving and adding one are exact in binary, so the CPU's result is the GPU's bit for bit.
    let wrong = got
        .iter()
        .zip(&data)
        .filter(|(got, v)| **got != (0..steps).fold(**v, |v, _| v * 0.5 + 1.0))
        .count();
    outln!("   LTO-linked iterate on {n} elements: {wrong} of {n} differ from the CPU");
    if wrong == 0 {
        Ok(())
    } else {
        Err(format!("{wrong} iterate results differ from the CPU's").into())
    }
}
