//! `cudyn run --check`'s check of the grid, block and shared memory with no GPU: against the
//! limits of the architecture named (`--arch`, else the cubin's own), as the library checks a
//! launch against the device's, and against the kernel's own limits that the device code
//! records (`__launch_bounds__`, its registers, its static shared memory).

use cudyn::compile::Arch;
use cudyn::inspect::cubin::CubinKernel;
use cudyn::inspect::Module;
use cudyn::launch::ConfigViolation;
use cudyn::{DeviceLimits, Image, LaunchConfig};

use super::{Failure, Status};

/// Registers a block may hold on every architecture cudyn compiles for.
const REGISTERS_PER_BLOCK: u64 = 64 * 1024;

/// Checks `config` for `kernel` of `image`, for `arch` (else the architecture of the cubin that
/// defines the kernel, else the limits every GPU shares).
pub fn check_offline(
    image: &Image<'_>,
    kernel: &str,
    arch: Option<Arch>,
    config: &LaunchConfig<'_>,
) -> Result<(), Failure> {
    let found = image
        .inspect()
        .ok()
        .and_then(|inspection| defining_cubin(inspection.modules(), kernel, arch));
    let (major, minor) = match (arch, &found) {
        (Some(arch), _) => arch.compute_capability(),
        (None, Some((number, _))) => (number / 10, number % 10),
        (None, None) => (0, 0),
    };
    let (limits, named) = match DeviceLimits::of_compute_capability(major, minor) {
        Some(limits) => (limits, format!("sm_{major}{minor}")),
        // What every GPU cudyn compiles for shares; the most shared memory any of them gives.
        None => (
            DeviceLimits::of_compute_capability(9, 0).unwrap_or(DeviceLimits::SM_90),
            "any GPU".to_owned(),
        ),
    };
    let refuse = |violation: ConfigViolation, whose: &str| {
        Failure::new(
            Status::Mismatch,
            format!("kernel `{kernel}`: {violation} ({whose})"),
        )
    };
    cudyn::launch::check_config(config, &limits)
        .map_err(|violation| refuse(violation, &format!("checked against {named}'s limits")))?;
    if let Some((_, facts)) = found {
        check_kernel(&facts, &limits, config)
            .map_err(|violation| refuse(violation, "as its device code records the kernel"))?;
    }
    Ok(())
}

/// The architecture number and the facts of `kernel` from the first cubin that defines it, of
/// `arch` when one is named.
fn defining_cubin(
    modules: Vec<Module<'_>>,
    kernel: &str,
    arch: Option<Arch>,
) -> Option<(u32, CubinKernel)> {
    modules.into_iter().find_map(|module| match module {
        Module::Cubin(cubin) if arch.is_none_or(|arch| arch.number() == cubin.arch) => {
            Some((cubin.arch, cubin.kernel(kernel)?.clone()))
        }
        _ => None,
    })
}

/// The kernel's own limits: its launch bounds, the threads its registers allow, and its static
/// shared memory with the dynamic asked for, within `limits`.
fn check_kernel(
    kernel: &CubinKernel,
    limits: &DeviceLimits,
    config: &LaunchConfig<'_>,
) -> Result<(), ConfigViolation> {
    let threads = config.block.volume();
    let by_registers = kernel
        .registers
        .filter(|&registers| registers > 0)
        .map(|registers| REGISTERS_PER_BLOCK / u64::from(registers));
    let bounded = kernel
        .max_threads
        .map(|[x, y, z]| u64::from(x) * u64::from(y) * u64::from(z));
    if let Some(max) = [by_registers, bounded].into_iter().flatten().min() {
        if threads > max {
            return Err(ConfigViolation::BlockTooLargeForKernel {
                threads,
                max: u32::try_from(max).unwrap_or(u32::MAX),
            });
        }
    }
    let room = u64::from(limits.max_shared_per_block_optin).saturating_sub(kernel.shared_bytes);
    if u64::from(config.shared_mem_bytes) > room {
        return Err(ConfigViolation::SharedMemory {
            given: config.shared_mem_bytes,
            max: u32::try_from(room).unwrap_or(u32::MAX),
        });
    }
    Ok(())
}
