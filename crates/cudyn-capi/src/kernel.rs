//! Kernels: by name from a library, or wrapped from a foreign handle; their parameter layout
//! and types. Launching is in `launch`.

use std::ffi::{c_char, c_void};

use cudyn::Kernel;

use crate::handles::{entry_returning, null_argument, text_arg, Registry};
use crate::info::give_string;
use crate::library::{cudyn_library, LIBRARIES};
use crate::status::{cudyn_status, entry, Failure};

/// A kernel handle. One taken from a library keeps that library loaded until it is released;
/// one wrapped from a foreign handle (`cudyn_kernel_from_raw`) borrows it.
#[allow(non_camel_case_types)]
#[derive(Debug)]
pub struct cudyn_kernel {
    _opaque: [u8; 0],
}

pub(crate) static KERNELS: Registry<cudyn_kernel, Kernel> = Registry::new("cudyn_kernel");

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
