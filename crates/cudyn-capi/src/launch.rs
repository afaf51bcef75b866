//! The checked launch from a C argument array: sizes checked always, types where the caller
//! states them (`cudyn_arg_type`) and the kernel's are known, and cooperative and cluster
//! launches.

use std::borrow::Cow;
use std::ffi::c_void;

use cudyn::{ArgType, KernelArgs, LaunchConfig, ParamLayout};

use crate::handles::null_argument;
use crate::kernel::{cudyn_kernel, KERNELS};
use crate::status::{cudyn_status, entry, Failure};
use crate::stream::{cudyn_stream, STREAMS};
use crate::types::{arg_types, cudyn_arg_type};

/// Grid or block dimensions.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct cudyn_dim3 {
    /// Extent in x.
    pub x: u32,
    /// Extent in y (1 for a one-dimensional launch).
    pub y: u32,
    /// Extent in z (1 for a one- or two-dimensional launch).
    pub z: u32,
}

/// How a kernel is launched.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct cudyn_launch_config {
    /// Blocks in the grid.
    pub grid: cudyn_dim3,
    /// Threads per block.
    pub block: cudyn_dim3,
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
    /// The stream, or null for the legacy default stream.
    pub stream: *const cudyn_stream,
}

/// A C argument array as cudyn's launch takes arguments: `layouts` describe what `pointers`
/// point at, and `types` what the values mean, when the caller said (else it is empty).
struct CArguments<'a> {
    layouts: Cow<'a, [ParamLayout]>,
    types: Vec<&'static ArgType>,
    pointers: *mut *mut c_void,
}

// SAFETY: `layouts` has one entry per pointer of `pointers` (both `arg_count` long), `types` one
// per pointer or none, and the caller of cudyn_launch vouches that pointer i points to parameter
// i's size in readable bytes for the duration of the launch call.
unsafe impl KernelArgs for CArguments<'_> {
    fn layouts(&self) -> &[ParamLayout] {
        &self.layouts
    }
    fn types(&self) -> &[&'static ArgType] {
        &self.types
    }
    fn with_pointers<R>(&self, launch: impl FnOnce(*mut *mut c_void) -> R) -> R {
        launch(self.pointers)
    }
}

/// The layouts the C arguments describe: the kernel's own offsets (C cannot say alignments),
/// with the sizes the caller gave or, without sizes, the kernel's own sizes. The launch compares
/// them with the kernel's, so a count or size that differs is refused there.
fn argument_layouts<'a>(
    params: &'a [ParamLayout],
    sizes: Option<&[usize]>,
    count: usize,
) -> Cow<'a, [ParamLayout]> {
    match sizes {
        None if count == params.len() => Cow::Borrowed(params),
        _ => Cow::Owned(
            (0..count)
                .map(|index| {
                    let param = params.get(index);
                    ParamLayout {
                        offset: param.map_or(0, |param| param.offset),
                        size: sizes
                            .map(|sizes| sizes[index])
                            .or(param.map(|param| param.size))
                            .unwrap_or(0),
                    }
                })
                .collect(),
        ),
    }
}

/// Launches the kernel with the argument array `args` after cudyn's checks; nothing reaches the
/// driver when one fails (`CUDYN_ERROR_LAUNCH`, the message naming the difference).
///
/// `args[i]` points to the value of parameter `i`, as for `cudaLaunchKernel`; a buffer is passed
/// as its device address (`cudyn_buffer_address`), a pointer to a `uint64_t` holding it.
///
/// Checked before the launch: the handles are live; `arg_count` equals the kernel's parameter
/// count; no `args[i]` is null; when `arg_sizes` is not null, `arg_sizes[i]` equals parameter
/// `i`'s size (pass `sizeof` of each argument: this catches a `double` for a `float` or an
/// `int` for a `size_t`); and the configuration is within the current device's limits (grid and
/// block extents, threads per block, shared memory). Without `arg_sizes` the sizes are taken
/// from the kernel's parameter layout (`cudyn_kernel_param`). To have the argument types
/// checked too, and for cooperative and cluster launches, use `cudyn_launch_ex`.
///
/// The launch is asynchronous: `cudyn_synchronize`, `cudyn_stream_synchronize` or a copy on the
/// default stream waits for it.
///
/// # Safety
/// `config` points to a launch configuration; `args` points to `arg_count` pointers (it may be
/// null when `arg_count` is 0), and `args[i]` to at least parameter `i`'s size in readable bytes
/// holding a value of the parameter's device type, for the duration of the call; `arg_sizes` is
/// null or points to `arg_count` sizes. And the launch-safety contract of cudyn's
/// `Kernel::launch`: every device address passed points to live device memory of the
/// parameter's pointee type, the kernel accesses memory only inside the buffers it is given
/// (the counts passed agree with their sizes), and until the kernel completes no memory it uses
/// is freed and no other work writes memory it reads or touches memory it writes.
#[no_mangle]
pub unsafe extern "C" fn cudyn_launch(
    kernel: *const cudyn_kernel,
    config: *const cudyn_launch_config,
    args: *mut *mut c_void,
    arg_count: usize,
    arg_sizes: *const usize,
) -> cudyn_status {
    entry(|| {
        // SAFETY: the caller's contract: null or a launch configuration.
        let config = unsafe { config.as_ref() }.ok_or_else(|| null_argument("config"))?;
        let request = Request {
            kernel,
            config,
            extra: None,
            args,
            arg_count,
            arg_sizes,
            arg_types: std::ptr::null(),
        };
        // SAFETY: the caller's contract, as `Request::run` needs it.
        unsafe { request.run(Action::Launch) }
    })
}

/// A launch configuration with what `cudyn_launch_config` cannot say: a cooperative launch (its
/// blocks may synchronize grid-wide; the grid must fit on the device at once, which is checked)
/// and thread block clusters.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct cudyn_launch_config_ex {
    /// Grid, block, shared memory and stream.
    pub base: cudyn_launch_config,
    /// Whether the launch is cooperative (`cudaLaunchCooperativeKernel`).
    pub cooperative: bool,
    /// Blocks per cluster; all zero for no clusters.
    pub cluster: cudyn_dim3,
}

/// `cudyn_launch` with the argument types checked and the launches it cannot make: each
/// `arg_types[i]` says what `args[i]` is (`CUDYN_TYPE_INT32`, a `CUDYN_POINTER` to
/// `CUDYN_TYPE_FLOAT`, ...), and where the kernel's parameter types are known (a C++ kernel's
/// mangled name, a kernel loaded from PTX; see `cudyn_kernel_param_type`), an argument of
/// another type is refused before the driver, the message naming both types: a `float` for an
/// `int`, an `unsigned int` for an `int`, a `CUDYN_CONST_POINTER` for a pointer the kernel may
/// write. `arg_types` may be null: the arguments are then checked by size only, as by
/// `cudyn_launch`. `config->cooperative` and `config->cluster` make a cooperative or cluster
/// launch.
///
/// # Safety
/// As `cudyn_launch`, with `config` pointing to a `cudyn_launch_config_ex` and `arg_types` null
/// or pointing to `arg_count` types.
#[no_mangle]
pub unsafe extern "C" fn cudyn_launch_ex(
    kernel: *const cudyn_kernel,
    config: *const cudyn_launch_config_ex,
    args: *mut *mut c_void,
    arg_count: usize,
    arg_sizes: *const usize,
    arg_types: *const cudyn_arg_type,
) -> cudyn_status {
    // SAFETY: the caller's contract, as `run_ex` needs it.
    unsafe {
        run_ex(
            Action::Launch,
            kernel,
            config,
            args,
            arg_count,
            arg_sizes,
            arg_types,
        )
    }
}

/// Runs every check `cudyn_launch_ex` makes with these arguments and launches nothing:
/// `CUDYN_SUCCESS` when the launch would reach the driver, else the status and message the
/// launch would give. `args` may be null (the values are not read).
///
/// # Safety
/// `config` points to a `cudyn_launch_config_ex`; `arg_sizes` and `arg_types` are null or point
/// to `arg_count` entries.
#[no_mangle]
pub unsafe extern "C" fn cudyn_launch_check(
    kernel: *const cudyn_kernel,
    config: *const cudyn_launch_config_ex,
    arg_count: usize,
    arg_sizes: *const usize,
    arg_types: *const cudyn_arg_type,
) -> cudyn_status {
    // SAFETY: the caller's contract; a check reads no argument value.
    unsafe {
        run_ex(
            Action::Check,
            kernel,
            config,
            std::ptr::null_mut(),
            arg_count,
            arg_sizes,
            arg_types,
        )
    }
}

/// `cudyn_launch_ex` or `cudyn_launch_check`, by `action`.
///
/// # Safety
/// `config` is null or points to a `cudyn_launch_config_ex`; the rest as `Request::run` needs.
unsafe fn run_ex(
    action: Action,
    kernel: *const cudyn_kernel,
    config: *const cudyn_launch_config_ex,
    args: *mut *mut c_void,
    arg_count: usize,
    arg_sizes: *const usize,
    arg_types: *const cudyn_arg_type,
) -> cudyn_status {
    entry(|| {
        // SAFETY: the caller's contract: null or a launch configuration.
        let config = unsafe { config.as_ref() }.ok_or_else(|| null_argument("config"))?;
        let request = Request {
            kernel,
            config: &config.base,
            extra: Some(config),
            args,
            arg_count,
            arg_sizes,
            arg_types,
        };
        // SAFETY: the caller's contract.
        unsafe { request.run(action) }
    })
}

/// Launch, or only check.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Action {
    Launch,
    Check,
}

/// The arguments of a C launch entry point, as given.
struct Request<'a> {
    kernel: *const cudyn_kernel,
    config: &'a cudyn_launch_config,
    extra: Option<&'a cudyn_launch_config_ex>,
    args: *mut *mut c_void,
    arg_count: usize,
    arg_sizes: *const usize,
    arg_types: *const cudyn_arg_type,
}

impl Request<'_> {
    /// # Safety
    /// `args` points to `arg_count` pointers (null when `arg_count` is 0, or for a check), each
    /// to its parameter's value; `arg_sizes` and `arg_types` are null or point to `arg_count`
    /// entries; for a launch, the launch-safety contract holds.
    unsafe fn run(self, action: Action) -> Result<(), Failure> {
        let kernel = KERNELS.get(self.kernel)?;
        let arg_count = self.arg_count;
        if action == Action::Launch {
            if arg_count != 0 && self.args.is_null() {
                return Err(Failure::invalid_argument(format!(
                    "`args` is a null pointer but `arg_count` is {arg_count}"
                )));
            }
            let pointers: &[*mut c_void] = if arg_count == 0 {
                &[]
            } else {
                // SAFETY: not null, and the caller vouches for `arg_count` pointers.
                unsafe { std::slice::from_raw_parts(self.args, arg_count) }
            };
            if let Some(index) = pointers.iter().position(|pointer| pointer.is_null()) {
                return Err(Failure::invalid_argument(format!(
                    "`args[{index}]` is a null pointer: it must point to the value of parameter \
                     {index}"
                )));
            }
        }
        let sizes = (!self.arg_sizes.is_null() && arg_count != 0)
            // SAFETY: not null, and the caller vouches for `arg_count` sizes.
            .then(|| unsafe { std::slice::from_raw_parts(self.arg_sizes, arg_count) });
        let types = if self.arg_types.is_null() || arg_count == 0 {
            Vec::new()
        } else {
            // SAFETY: not null, and the caller vouches for `arg_count` types.
            let given = unsafe { std::slice::from_raw_parts(self.arg_types, arg_count) };
            arg_types(given)?
        };
        let arguments = CArguments {
            layouts: argument_layouts(kernel.params()?, sizes, arg_count),
            types,
            pointers: self.args,
        };
        let stream = (!self.config.stream.is_null())
            .then(|| STREAMS.get(self.config.stream))
            .transpose()?;
        let (grid, block) = (self.config.grid, self.config.block);
        let mut launch_config =
            LaunchConfig::new((grid.x, grid.y, grid.z), (block.x, block.y, block.z))
                .shared_mem(self.config.shared_mem_bytes);
        if let Some(stream) = &stream {
            launch_config = launch_config.stream(stream);
        }
        if let Some(extra) = self.extra {
            launch_config = launch_config.cooperative(extra.cooperative);
            let cluster = extra.cluster;
            if (cluster.x, cluster.y, cluster.z) != (0, 0, 0) {
                launch_config = launch_config.cluster((cluster.x, cluster.y, cluster.z));
            }
        }
        match action {
            Action::Check => kernel.check(&launch_config, &arguments)?,
            // SAFETY: the arguments' layouts and types are compared with the kernel's by
            // `launch`; the caller vouches for the values behind the pointers and keeps the
            // launch-safety contract.
            Action::Launch => unsafe { kernel.launch(&launch_config, arguments) }?,
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAXPY: [ParamLayout; 3] = [
        ParamLayout { offset: 0, size: 4 },
        ParamLayout { offset: 8, size: 8 },
        ParamLayout {
            offset: 16,
            size: 8,
        },
    ];

    fn check(sizes: Option<&[usize]>, count: usize) -> Result<(), cudyn::ArgumentMismatch> {
        cudyn::launch::check_arguments(&SAXPY, &argument_layouts(&SAXPY, sizes, count))
    }

    #[test]
    fn without_sizes_only_the_count_is_checked() {
        assert_eq!(check(None, 3), Ok(()));
        assert_eq!(
            check(None, 2),
            Err(cudyn::ArgumentMismatch::Count {
                expected: 3,
                given: 2
            })
        );
        assert_eq!(
            check(None, 4),
            Err(cudyn::ArgumentMismatch::Count {
                expected: 3,
                given: 4
            })
        );
    }

    #[test]
    fn given_sizes_are_compared_with_the_parameters() {
        assert_eq!(check(Some(&[4, 8, 8]), 3), Ok(()));
        assert_eq!(
            check(Some(&[8, 8, 8]), 3),
            Err(cudyn::ArgumentMismatch::Size {
                index: 0,
                expected: 4,
                given: 8
            })
        );
        assert_eq!(
            check(Some(&[4, 8, 4]), 3),
            Err(cudyn::ArgumentMismatch::Size {
                index: 2,
                expected: 8,
                given: 4
            })
        );
        assert_eq!(
            check(Some(&[4, 8]), 2),
            Err(cudyn::ArgumentMismatch::Count {
                expected: 3,
                given: 2
            })
        );
    }
}
