//! Host time per launch: cudyn's checked `Kernel::launch`, the raw `cuLaunchKernel` through the
//! symbol cudyn resolved, and cudarc's launch builder, in interleaved bursts (the crate `cudyn`'s
//! tests/launch_timing) on the same kernels, loaded once.

use std::ffi::c_void;
use std::ptr::addr_of_mut;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchArgs, PushKernelArg};
use cudarc::nvrtc::Ptx;
use cudyn::{DeviceBuffer, Kernel, LaunchConfig, Library, Program};

use crate::launch_timing::{interleaved, Burst, RawLauncher};
use crate::peer_arguments::{Scale, SCALARS, SCALARS_SUM};
use crate::report::{median, Row};
use crate::Bench;

/// Bursts of each path.
const ROUNDS: usize = 200;
/// Launches per burst.
const BURST: usize = 200;
/// Elements of the SAXPY and struct kernels.
const N: usize = 1024;

/// SAXPY's arguments (a, x, y, out, n) as a raw launch takes them: a pointer to each.
pub fn saxpy_params(values: &mut (f32, u64, u64, u64, u64)) -> [*mut c_void; 5] {
    [
        addr_of_mut!(values.0).cast(),
        addr_of_mut!(values.1).cast(),
        addr_of_mut!(values.2).cast(),
        addr_of_mut!(values.3).cast(),
        addr_of_mut!(values.4).cast(),
    ]
}

/// Calls `launch` `count` times: one burst.
fn burst(
    mut launch: impl FnMut() -> Result<(), String>,
) -> impl FnMut(usize) -> Result<(), String> {
    move |count| (0..count).try_for_each(|_| launch())
}

/// One row: the three paths in interleaved bursts.
fn row(
    id: &'static str,
    label: &str,
    raw: Burst<'_>,
    cudyn: Burst<'_>,
    cudarc: Burst<'_>,
) -> Result<Row, String> {
    let mut samples = interleaved(ROUNDS, BURST, &mut [raw, cudyn, cudarc])?.into_iter();
    let mut next = || median(samples.next().unwrap_or_default());
    Ok(Row::new(id, format!("launch: {label}"), "ns")
        .figures(next(), next(), next())
        .note(format!(
            "host time per launch, median of {ROUNDS} interleaved bursts of {BURST}"
        )))
}

fn cudarc_error(error: cudarc::driver::DriverError) -> String {
    format!("cudarc: {error:?}")
}

fn cudyn_error(error: cudyn::Error) -> String {
    error.to_string()
}

/// The kernels, loaded by cudyn and by cudarc from one cubin, and how every row launches them.
struct Kernels {
    library: Library,
    stream: Arc<CudaStream>,
    module: Arc<cudarc::driver::CudaModule>,
    raw: RawLauncher,
    config: LaunchConfig<'static>,
    cudarc_config: cudarc::driver::LaunchConfig,
}

impl Kernels {
    fn cudyn(&self, name: &str) -> Result<Kernel, String> {
        self.library.kernel(name).map_err(cudyn_error)
    }

    fn cudarc(&self, name: &str) -> Result<CudaFunction, String> {
        self.module.load_function(name).map_err(cudarc_error)
    }

    /// cudarc's launch of what `builder` holds.
    ///
    /// # Safety
    /// The arguments pushed are those of the kernel, and its memory accesses are valid for the
    /// configuration.
    unsafe fn cudarc_launch(&self, builder: &mut LaunchArgs<'_>) -> Result<(), String> {
        // SAFETY: the caller's contract.
        unsafe { builder.launch(self.cudarc_config) }
            .map(drop)
            .map_err(cudarc_error)
    }
}

/// Checks what a kernel wrote: a timing of wrong launches means nothing.
fn check(what: &str, values: &[f32], expected: f32) -> Result<(), String> {
    match values.iter().find(|&&v| v != expected) {
        None => Ok(()),
        Some(v) => Err(format!("{what} computed {v}, not {expected}")),
    }
}

pub fn rows(bench: &Bench) -> Result<Vec<Row>, String> {
    let compiled = Program::new(crate::SOURCE)
        .arch(bench.arch)
        .compile()
        .map_err(cudyn_error)?;
    let context = CudaContext::new(0).map_err(cudarc_error)?;
    let config = LaunchConfig::for_elements(N, 256);
    let kernels = Kernels {
        library: Library::load(compiled.code()).map_err(cudyn_error)?,
        stream: context.default_stream(),
        module: context
            .load_module(Ptx::from_binary(compiled.code().to_vec()))
            .map_err(cudarc_error)?,
        raw: RawLauncher::new()?,
        cudarc_config: cudarc::driver::LaunchConfig {
            grid_dim: (config.grid.x, 1, 1),
            block_dim: (config.block.x, 1, 1),
            shared_mem_bytes: 0,
        },
        config,
    };
    Ok(vec![
        empty(&kernels)?,
        saxpy(&kernels)?,
        args21(&kernels)?,
        scale(&kernels)?,
    ])
}

fn empty(kernels: &Kernels) -> Result<Row, String> {
    let (raw, config) = (kernels.raw, &kernels.config);
    let (kernel, function) = (kernels.cudyn("empty")?, kernels.cudarc("empty")?);
    let measured = row(
        "launch.empty",
        "empty kernel",
        // SAFETY: a kernel without parameters; the primary context is current.
        &mut burst(|| unsafe { raw.launch(&kernel, config, std::ptr::null_mut()) }),
        // SAFETY: the empty kernel takes no parameters and touches no memory.
        &mut burst(|| unsafe { kernel.launch(config, ()) }.map_err(cudyn_error)),
        &mut burst(|| {
            let mut builder = kernels.stream.launch_builder(&function);
            // SAFETY: as above.
            unsafe { kernels.cudarc_launch(&mut builder) }
        }),
    );
    measured
}

fn saxpy(kernels: &Kernels) -> Result<Row, String> {
    let (raw, config) = (kernels.raw, &kernels.config);
    let (kernel, function) = (kernels.cudyn("saxpy")?, kernels.cudarc("saxpy")?);
    let a = 3.0f32;
    let x = DeviceBuffer::from_slice(&[1.0f32; N]).map_err(cudyn_error)?;
    let y = DeviceBuffer::from_slice(&[2.0f32; N]).map_err(cudyn_error)?;
    let mut out = DeviceBuffer::<f32>::zeroed(N).map_err(cudyn_error)?;
    let stream = &kernels.stream;
    let cudarc_x = stream.clone_htod(&[1.0f32; N]).map_err(cudarc_error)?;
    let cudarc_y = stream.clone_htod(&[2.0f32; N]).map_err(cudarc_error)?;
    let mut cudarc_out = stream.alloc_zeros::<f32>(N).map_err(cudarc_error)?;
    let mut values = (a, x.as_raw(), y.as_raw(), out.as_raw(), N as u64);
    let mut params = saxpy_params(&mut values);
    let n = N as u64;
    let measured = row(
        "launch.saxpy",
        "SAXPY, 5 arguments",
        // SAFETY: five pointers to values of the parameters' types; saxpy reads x[i], y[i] and
        // writes out[i] for i < n, and the buffers hold n floats and outlive every launch (each
        // burst is synchronized).
        &mut burst(|| unsafe { raw.launch(&kernel, config, params.as_mut_ptr()) }),
        &mut burst(|| {
            // SAFETY: as above.
            unsafe { kernel.launch(config, (a, &x, &y, &mut out, n)) }.map_err(cudyn_error)
        }),
        &mut burst(|| {
            let mut builder = stream.launch_builder(&function);
            builder
                .arg(&a)
                .arg(&cudarc_x)
                .arg(&cudarc_y)
                .arg(&mut cudarc_out)
                .arg(&n);
            // SAFETY: as above, with cudarc's buffers.
            unsafe { kernels.cudarc_launch(&mut builder) }
        }),
    )?;
    check("SAXPY", &out.to_vec().map_err(cudyn_error)?, 5.0)?;
    check(
        "SAXPY (cudarc)",
        &stream.clone_dtoh(&cudarc_out).map_err(cudarc_error)?,
        5.0,
    )?;
    Ok(measured)
}

/// The 21 parameter pointers of `args21`: `out`, then the 20 scalars.
macro_rules! args21_params {
    ($out:expr, $scalars:ident; $($i:tt),*) => {
        [$out, $(addr_of_mut!($scalars.$i).cast::<c_void>()),*]
    };
}

/// cudyn's argument tuple of `args21`.
macro_rules! args21_tuple {
    ($out:expr, $scalars:ident; $($i:tt),*) => {
        ($out, $($scalars.$i),*)
    };
}

fn args21(kernels: &Kernels) -> Result<Row, String> {
    let (raw, config) = (kernels.raw, &kernels.config);
    let (kernel, function) = (kernels.cudyn("args21")?, kernels.cudarc("args21")?);
    let mut out = DeviceBuffer::<f32>::zeroed(1).map_err(cudyn_error)?;
    let mut cudarc_out = kernels.stream.alloc_zeros::<f32>(1).map_err(cudarc_error)?;
    let mut out_pointer = out.as_raw();
    let mut scalars = SCALARS;
    let mut params: [*mut c_void; 21] = args21_params!(
        addr_of_mut!(out_pointer).cast(), scalars;
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19
    );
    let s = SCALARS;
    let measured = row(
        "launch.args21",
        "21 arguments",
        // SAFETY: 21 pointers to values of the parameters' types; args21 writes out[0], and
        // `out` holds one float and outlives every launch.
        &mut burst(|| unsafe { raw.launch(&kernel, config, params.as_mut_ptr()) }),
        &mut burst(|| {
            let args = args21_tuple!(
                &mut out, s;
                0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19
            );
            // SAFETY: as above.
            unsafe { kernel.launch(config, args) }.map_err(cudyn_error)
        }),
        &mut burst(|| {
            let mut builder = kernels.stream.launch_builder(&function);
            builder.arg(&mut cudarc_out);
            builder
                .arg(&s.0)
                .arg(&s.1)
                .arg(&s.2)
                .arg(&s.3)
                .arg(&s.4)
                .arg(&s.5)
                .arg(&s.6)
                .arg(&s.7)
                .arg(&s.8)
                .arg(&s.9)
                .arg(&s.10)
                .arg(&s.11)
                .arg(&s.12)
                .arg(&s.13)
                .arg(&s.14)
                .arg(&s.15)
                .arg(&s.16)
                .arg(&s.17)
                .arg(&s.18)
                .arg(&s.19);
            // SAFETY: as above, with cudarc's buffer.
            unsafe { kernels.cudarc_launch(&mut builder) }
        }),
    )?;
    check("args21", &out.to_vec().map_err(cudyn_error)?, SCALARS_SUM)?;
    check(
        "args21 (cudarc)",
        &kernels
            .stream
            .clone_dtoh(&cudarc_out)
            .map_err(cudarc_error)?,
        SCALARS_SUM,
    )?;
    Ok(measured)
}

fn scale(kernels: &Kernels) -> Result<Row, String> {
    let (raw, config) = (kernels.raw, &kernels.config);
    let (kernel, function) = (kernels.cudyn("scale")?, kernels.cudarc("scale")?);
    let x = DeviceBuffer::from_slice(&[2.0f32; N]).map_err(cudyn_error)?;
    let out = DeviceBuffer::<f32>::zeroed(N).map_err(cudyn_error)?;
    let argument = Scale {
        x: x.as_raw(),
        out: out.as_raw(),
        a: 1.5,
        n: N as u32,
    };
    let mut raw_argument = argument;
    let mut params = [addr_of_mut!(raw_argument).cast::<c_void>()];
    let measured = row(
        "launch.struct",
        "a 24-byte struct by value",
        // SAFETY: one pointer to a value laid out as the kernel's struct; scale reads x[i] and
        // writes out[i] for i < n, and both buffers hold n floats and outlive every launch.
        &mut burst(|| unsafe { raw.launch(&kernel, config, params.as_mut_ptr()) }),
        // SAFETY: as above.
        &mut burst(|| unsafe { kernel.launch(config, (argument,)) }.map_err(cudyn_error)),
        &mut burst(|| {
            let mut builder = kernels.stream.launch_builder(&function);
            builder.arg(&argument);
            // SAFETY: as above.
            unsafe { kernels.cudarc_launch(&mut builder) }
        }),
    )?;
    check("scale", &out.to_vec().map_err(cudyn_error)?, 3.0)?;
    Ok(measured)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cudyn::launch::check_arguments;
    use cudyn::KernelArgs;

    /// The argument lists of the launch rows match the kernels' parameters as compiled (a device
    /// pointer stands in for each buffer: the same layout), so no row times a launch that cudyn's
    /// check would refuse.
    #[test]
    fn the_arguments_of_every_row_match_the_kernels() {
        cudyn::cache::set_enabled(false);
        let compiled = Program::new(crate::SOURCE)
            .arch(cudyn::Arch::new(9, 0))
            .compile()
            .unwrap();
        let cubin = cudyn::inspect::cubin::parse(compiled.code()).unwrap();
        let params = |name: &str| {
            let kernel = cubin.kernels.iter().find(|kernel| kernel.name == name);
            kernel
                .unwrap_or_else(|| panic!("no kernel {name}"))
                .params
                .clone()
        };
        let pointer = 0u64;
        let s = SCALARS;
        let args21 = args21_tuple!(
            pointer, s;
            0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19
        );
        let scale = Scale {
            x: 0,
            out: 0,
            a: 1.0,
            n: 1,
        };
        check_arguments(&params("empty"), ().layouts()).unwrap();
        let saxpy = (1.0f32, pointer, pointer, pointer, 1u64);
        check_arguments(&params("saxpy"), saxpy.layouts()).unwrap();
        check_arguments(&params("args21"), args21.layouts()).unwrap();
        check_arguments(&params("scale"), (scale,).layouts()).unwrap();
        // And the check does look: the scalars in another order are refused.
        let swapped = (pointer, s.1, s.0);
        assert!(check_arguments(&params("args21"), swapped.layouts()).is_err());
    }
}
