//! nvFatbin, one function per C call. Handles are raw `nvFatbinHandle`s; [`FatbinBuilder`] owns
//! them safely.
//!
//! [`FatbinBuilder`]: crate::compile::FatbinBuilder

use std::ffi::{CStr, CString};

use crate::error::Result;
use crate::sys::nvfatbin::nvFatbinHandle;
use crate::sys::{self, call, sized_outputs};

/// `nvFatbinCreate` with `options`, writing the new handle to `handle`; the caller destroys any
/// non-null handle with [`destroy`].
pub fn create(handle: &mut nvFatbinHandle, options: &[CString]) -> Result<()> {
    let nvfatbin = sys::nvfatbin()?;
    let mut pointers: Vec<_> = options.iter().map(|option| option.as_ptr()).collect();
    // SAFETY: `pointers` holds `len` live C strings, which nvFatbin copies; `handle` is a
    // writable pointer.
    unsafe {
        call!(
            nvfatbin,
            nvFatbinCreate(handle, pointers.as_mut_ptr(), pointers.len())
        )
    }
}

/// `nvFatbinDestroy`; sets `handle` to null.
///
/// # Safety
/// `handle` is live and not used again.
pub unsafe fn destroy(handle: &mut nvFatbinHandle) -> Result<()> {
    let nvfatbin = sys::nvfatbin()?;
    // SAFETY: the caller's contract.
    unsafe { call!(nvfatbin, nvFatbinDestroy(handle)) }
}

/// `nvFatbinAddCubin`: adds SASS for `arch` (the digits of `sm_XX`, `90a`).
///
/// # Safety
/// `handle` is live. nvFatbin copies `code` during the call.
pub unsafe fn add_cubin(
    handle: nvFatbinHandle,
    code: &[u8],
    arch: &CStr,
    identifier: &CStr,
) -> Result<()> {
    let nvfatbin = sys::nvfatbin()?;
    // SAFETY: the caller's contract; the slices and strings are live for the call.
    unsafe {
        call!(
            nvfatbin,
            nvFatbinAddCubin(
                handle,
                code.as_ptr().cast(),
                code.len(),
                arch.as_ptr(),
                identifier.as_ptr()
            )
        )
    }
}

/// `nvFatbinAddPTX`: adds PTX for the virtual `arch`, JIT-compiled with `ptxas_options` when
/// loaded.
///
/// # Safety
/// `handle` is live. nvFatbin copies `code` during the call.
pub unsafe fn add_ptx(
    handle: nvFatbinHandle,
    code: &[u8],
    arch: &CStr,
    identifier: &CStr,
    ptxas_options: &CStr,
) -> Result<()> {
    let nvfatbin = sys::nvfatbin()?;
    // SAFETY: the caller's contract; the slices and strings are live for the call.
    unsafe {
        call!(
            nvfatbin,
            nvFatbinAddPTX(
                handle,
                code.as_ptr().cast(),
                code.len(),
                arch.as_ptr(),
                identifier.as_ptr(),
                ptxas_options.as_ptr()
            )
        )
    }
}

/// `nvFatbinAddLTOIR`: adds LTO-IR for `arch`.
///
/// # Safety
/// `handle` is live. nvFatbin copies `code` during the call.
pub unsafe fn add_ltoir(
    handle: nvFatbinHandle,
    code: &[u8],
    arch: &CStr,
    identifier: &CStr,
    options: &CStr,
) -> Result<()> {
    let nvfatbin = sys::nvfatbin()?;
    // SAFETY: the caller's contract; the slices and strings are live for the call.
    unsafe {
        call!(
            nvfatbin,
            nvFatbinAddLTOIR(
                handle,
                code.as_ptr().cast(),
                code.len(),
                arch.as_ptr(),
                identifier.as_ptr(),
                options.as_ptr()
            )
        )
    }
}

sized_outputs! {
    nvfatbin: nvFatbinHandle;
    /// `nvFatbinSize` and `nvFatbinGet`: the fat binary built from the entries added.
    get(nvFatbinSize, nvFatbinGet);
}
