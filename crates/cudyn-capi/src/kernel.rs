//! Kernels: by name from a library, or wrapped from a foreign handle; their parameter layout;
//! and the checked launch from a C argument array.

use std::borrow::Cow;
use std::ffi::{c_char, c_void};

use cudyn::{Kernel, KernelArgs, LaunchConfig, ParamLayout};

use crate::handles::{entry_returning, null_argument, text_arg, Registry};
use crate::info::give_string;
use crate::library::{cudyn_library, LIBRARIES};
use crate::status::{cudyn_status, entry, Failure};
use crate::stream::{cudyn_stream, STREAMS};

/// A kernel handle. One taken from a library keeps that library loaded until it is released;
/// one wrapped from a foreign handle (`cudyn_kernel_from_raw`) borrows it.
#[allow(non_camel_case_types)]
#[derive(Debug)]
pub struct cudyn_kernel {
    _opaque: [u8; 0],
}

static KERNELS: Registry<cudyn_kernel, Kernel> = Registry::new("cudyn_kernel");

/// The kernel named `name` in `library` (`cudaLibraryGetKernel`): its symbol (the plain name of
/// an `extern "C"` kernel), a name expression it was compiled with, or its C++ name
/// (`"axpy<float>"`, `"scale(float*, int)"`). A name that fits no kernel is
/// `CUDYN_ERROR_KERNEL_NOT_FOUND`, listing the library's kernels nearest first.
///
/// On success `*kernel` is a new handle; release it with `cudyn_kernel_release`. It keeps the
/// library loaded even after `cudyn_library_unload`.
///
/// # Safety
/// `name` is a NUL-terminated UTF-8 string; `kernel` is valid for writing a pointer. Null `name`
/// or `kernel` is refused.
#[no_mangle]
pub unsafe extern "C" fn cudyn_library_kernel(
    library: *const cudyn_library,
    name: *const c_char,
    kernel: *mut *mut cudyn_kernel,
) -> cudyn_status {
    let compute = || {
        let library = LIBRARIES.get(library)?;
        // SAFETY: the caller's contract.
        let name = unsafe { text_arg(name, "name")? };
        let found = library.kernel(name)?;
        Ok(KERNELS.insert(found))
    };
    // SAFETY: the caller vouches that `kernel` is null or writable.
    unsafe { entry_returning(kernel, "kernel", compute) }
}

/// Wraps a kernel handle made elsewhere: a `cudaKernel_t` (from `cudaGetKernel` on a
/// `__global__` function of the program, or `cudaLibraryGetKernel`) or a `CUkernel`, which are
/// the same handle, possibly from another library with its own CUDA runtime.
///
/// The handle is borrowed: cudyn never unloads what it belongs to, and releasing the
/// `cudyn_kernel` leaves it as it is. Its parameter layout is read from the driver
/// (`cuKernelGetParamInfo`, CUDA 12.4+), so the checked launch works for it too.
///
/// On success `*kernel` is a new handle; release it with `cudyn_kernel_release`.
///
/// # Safety
/// `raw` is a valid kernel handle, and the library or program it belongs to stays loaded while
/// the returned handle lives (a `cudaGetKernel` handle lives as long as the program's CUDA
/// runtime); `kernel` is valid for writing a pointer. Null `raw` or `kernel` is refused.
#[no_mangle]
pub unsafe extern "C" fn cudyn_kernel_from_raw(
    raw: *mut c_void,
    kernel: *mut *mut cudyn_kernel,
) -> cudyn_status {
    let compute = || {
        if raw.is_null() {
            return Err(null_argument("raw"));
        }
        // SAFETY: the caller vouches that it is a valid kernel handle that stays loaded.
        let wrapped = unsafe { Kernel::from_raw(raw.cast()) };
        Ok(KERNELS.insert(wrapped))
    };
    // SAFETY: the caller vouches that `kernel` is null or writable.
    unsafe { entry_returning(kernel, "kernel", compute) }
}

/// The kernel's raw handle, a `CUkernel` that is also a `cudaKernel_t`: pass it to another
/// library, which may launch it with `cudaLaunchKernel((const void*)raw, ...)` or
/// `cuLaunchKernel`. It stays valid while this `cudyn_kernel` lives.
///
/// # Safety
/// `raw` is valid for writing a pointer (null is refused).
#[no_mangle]
pub unsafe extern "C" fn cudyn_kernel_raw(
    kernel: *const cudyn_kernel,
    raw: *mut *mut c_void,
) -> cudyn_status {
    let compute = || {
        let kernel = KERNELS.get(kernel)?;
        Ok(kernel.as_raw().cast())
    };
    // SAFETY: the caller vouches that `raw` is null or writable.
    unsafe { entry_returning(raw, "raw", compute) }
}

/// The kernel's name (its symbol: mangled for kernels without C linkage). On success `*name` is
/// a new string the caller frees with `cudyn_string_free`.
///
/// # Safety
/// `name` is valid for writing a pointer (null is refused).
#[no_mangle]
pub unsafe extern "C" fn cudyn_kernel_name(
    kernel: *const cudyn_kernel,
    name: *mut *mut c_char,
) -> cudyn_status {
    let compute = || {
        let kernel = KERNELS.get(kernel)?;
        let text = give_string(kernel.name()?);
        Ok(text)
    };
    // SAFETY: the caller vouches that `name` is null or writable.
    unsafe { entry_returning(name, "name", compute) }
}

/// Where one kernel parameter lies in the kernel's parameter buffer. The driver reports offset
/// and size only; a parameter's alignment is at most the largest power of two dividing its
/// offset (and is the C alignment of its device type).
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct cudyn_param_layout {
    /// Byte offset from the start of the parameter buffer.
    pub offset: usize,
    /// Size in bytes: what `args[i]` of `cudyn_launch` must point to.
    pub size: usize,
}

/// The number of parameters of the kernel (read from the driver once per kernel, in the current
/// device's context).
///
/// # Safety
/// `count` is valid for writing a `size_t` (null is refused).
#[no_mangle]
pub unsafe extern "C" fn cudyn_kernel_param_count(
    kernel: *const cudyn_kernel,
    count: *mut usize,
) -> cudyn_status {
    let compute = || {
        let kernel = KERNELS.get(kernel)?;
        let params = kernel.params()?.len();
        Ok(params)
    };
    // SAFETY: the caller vouches that `count` is null or writable.
    unsafe { entry_returning(count, "count", compute) }
}

/// The layout of parameter `index` (from 0) of the kernel; an index past the last parameter is
/// `CUDYN_ERROR_INVALID_ARGUMENT`.
///
/// # Safety
/// `layout` is valid for writing a `cudyn_param_layout` (null is refused).
#[no_mangle]
pub unsafe extern "C" fn cudyn_kernel_param(
    kernel: *const cudyn_kernel,
    index: usize,
    layout: *mut cudyn_param_layout,
) -> cudyn_status {
    let compute = || {
        let kernel = KERNELS.get(kernel)?;
        let params = kernel.params()?;
        let param = params.get(index).ok_or_else(|| {
            Failure::invalid_argument(format!(
                "parameter {index} does not exist: the kernel takes {} parameters",
                params.len()
            ))
        })?;
        let param = cudyn_param_layout {
            offset: param.offset,
            size: param.size,
        };
        Ok(param)
    };
    // SAFETY: the caller vouches that `layout` is null or writable.
    unsafe { entry_returning(layout, "layout", compute) }
}

/// Gives up this kernel handle. A kernel from a library lets that library be unloaded once
/// nothing else holds it; a wrapped foreign handle is left as it is. Null does nothing; a
/// handle released already is `CUDYN_ERROR_INVALID_ARGUMENT`.
#[no_mangle]
pub extern "C" fn cudyn_kernel_release(kernel: *mut cudyn_kernel) -> cudyn_status {
    entry(|| {
        KERNELS.remove(kernel)?;
        Ok(())
    })
}

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
/// point at.
struct CArguments<'a> {
    layouts: Cow<'a, [ParamLayout]>,
    pointers: *mut *mut c_void,
}

// SAFETY: `layouts` has one entry per pointer of `pointers` (both `arg_count` long), and the
// caller of cudyn_launch vouches that pointer i points to parameter i's size in readable bytes
// for the duration of the launch call.
unsafe impl KernelArgs for CArguments<'_> {
    fn layouts(&self) -> &[ParamLayout] {
        &self.layouts
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
/// block extents, threads per block, shared memory). C cannot say argument types, so without
/// `arg_sizes` the sizes are taken from the kernel's parameter layout (`cudyn_kernel_param`).
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
        let kernel = KERNELS.get(kernel)?;
        // SAFETY: the caller's contract: null or a launch configuration.
        let config = unsafe { config.as_ref() }.ok_or_else(|| null_argument("config"))?;
        if arg_count != 0 && args.is_null() {
            return Err(Failure::invalid_argument(format!(
                "`args` is a null pointer but `arg_count` is {arg_count}"
            )));
        }
        let pointers: &[*mut c_void] = if arg_count == 0 {
            &[]
        } else {
            // SAFETY: not null, and the caller vouches for `arg_count` pointers.
            unsafe { std::slice::from_raw_parts(args, arg_count) }
        };
        if let Some(index) = pointers.iter().position(|pointer| pointer.is_null()) {
            return Err(Failure::invalid_argument(format!(
                "`args[{index}]` is a null pointer: it must point to the value of parameter \
                 {index}"
            )));
        }
        let sizes = (!arg_sizes.is_null() && arg_count != 0)
            // SAFETY: not null, and the caller vouches for `arg_count` sizes.
            .then(|| unsafe { std::slice::from_raw_parts(arg_sizes, arg_count) });
        let arguments = CArguments {
            layouts: argument_layouts(kernel.params()?, sizes, arg_count),
            pointers: args,
        };
        let stream = (!config.stream.is_null())
            .then(|| STREAMS.get(config.stream))
            .transpose()?;
        let mut launch_config = LaunchConfig::new(
            (config.grid.x, config.grid.y, config.grid.z),
            (config.block.x, config.block.y, config.block.z),
        )
        .shared_mem(config.shared_mem_bytes);
        if let Some(stream) = &stream {
            launch_config = launch_config.stream(stream);
        }
        // SAFETY: the arguments' layouts are compared with the kernel's by `launch`; the caller
        // vouches for the values behind the pointers and keeps the launch-safety contract.
        unsafe { kernel.launch(&launch_config, arguments) }?;
        Ok(())
    })
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
