//! nvJitLink, one function per C call. Link handles are raw `nvJitLinkHandle`s; [`Linker`] owns
//! them safely.
//!
//! [`Linker`]: crate::compile::Linker

use std::ffi::{CStr, CString};

use crate::error::Result;
use crate::sys::nvjitlink::{nvJitLinkHandle, nvJitLinkInputType};
use crate::sys::{self, call, sized_outputs};

/// `nvJitLinkCreate` with `options`, writing the new handle to `handle`.
///
/// The handle is an out-parameter because nvJitLink may hand one out even when it fails, with
/// the reason in its error log; the caller destroys any non-null handle with [`destroy`].
pub fn create(handle: &mut nvJitLinkHandle, options: &[CString]) -> Result<()> {
    let nvjitlink = sys::nvjitlink()?;
    let pointers: Vec<_> = options.iter().map(|option| option.as_ptr()).collect();
    // SAFETY: `pointers` holds `len` live C strings, which nvJitLink copies; `handle` is a
    // writable pointer.
    unsafe {
        call!(
            nvjitlink,
            nvJitLinkCreate(handle, pointers.len() as u32, pointers.as_ptr())
        )
    }
}

/// `nvJitLinkDestroy`; sets `handle` to null.
///
/// # Safety
/// `handle` is live and not used again.
pub unsafe fn destroy(handle: &mut nvJitLinkHandle) -> Result<()> {
    let nvjitlink = sys::nvjitlink()?;
    // SAFETY: the caller's contract.
    unsafe { call!(nvjitlink, nvJitLinkDestroy(handle)) }
}

/// `nvJitLinkAddData`: adds an input of `kind` from memory; `name` is what the logs call it.
///
/// # Safety
/// `handle` is live, and `data` and `name` stay alive and unchanged until the link is completed
/// or destroyed: nvJitLink may read them as late as [`complete`] (it keeps the name for its
/// logs).
pub unsafe fn add_data(
    handle: nvJitLinkHandle,
    kind: nvJitLinkInputType,
    data: &[u8],
    name: &CStr,
) -> Result<()> {
    let nvjitlink = sys::nvjitlink()?;
    // SAFETY: the caller's contract.
    unsafe {
        call!(
            nvjitlink,
            nvJitLinkAddData(
                handle,
                kind,
                data.as_ptr().cast(),
                data.len(),
                name.as_ptr()
            )
        )
    }
}

/// `nvJitLinkComplete`: links the inputs added. A failure leaves the reason in the error log.
///
/// # Safety
/// `handle` is live and every input added from memory is still alive.
pub unsafe fn complete(handle: nvJitLinkHandle) -> Result<()> {
    let nvjitlink = sys::nvjitlink()?;
    // SAFETY: the caller's contract.
    unsafe { call!(nvjitlink, nvJitLinkComplete(handle)) }
}

sized_outputs! {
    nvjitlink: nvJitLinkHandle;
    /// `nvJitLinkGetLinkedCubinSize` and `nvJitLinkGetLinkedCubin`: the linked cubin.
    get_linked_cubin(nvJitLinkGetLinkedCubinSize, nvJitLinkGetLinkedCubin);
    /// `nvJitLinkGetLinkedPtxSize` and `nvJitLinkGetLinkedPtx`: the linked PTX (`-ptx`),
    /// NUL-terminated.
    get_linked_ptx(nvJitLinkGetLinkedPtxSize, nvJitLinkGetLinkedPtx);
    /// `nvJitLinkGetErrorLogSize` and `nvJitLinkGetErrorLog`: the error log, NUL-terminated.
    get_error_log(nvJitLinkGetErrorLogSize, nvJitLinkGetErrorLog);
    /// `nvJitLinkGetInfoLogSize` and `nvJitLinkGetInfoLog`: the info log, NUL-terminated.
    get_info_log(nvJitLinkGetInfoLogSize, nvJitLinkGetInfoLog);
}
