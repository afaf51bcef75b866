//! The runtime calls cudyn makes outside the library API, one function each (`cuda*`).

use std::ffi::c_void;

use crate::error::Result;
use crate::sys::call;
use crate::sys::driver::CUkernel;
use crate::sys::runtime::Runtime;

/// `cudaGetKernel`: the kernel handle of the `__global__` function whose host entry function
/// (the stub nvcc generates, whose address C++ code writes as `vectorAdd`) is `entry`, as
/// registered with this runtime instance.
///
/// # Safety
/// `entry` is an address in this process; the runtime only compares it with the entry functions
/// registered with it, and an unknown one is an error status.
pub(crate) unsafe fn get_kernel(runtime: &Runtime, entry: *const c_void) -> Result<CUkernel> {
    let mut raw: CUkernel = std::ptr::null_mut();
    // SAFETY: writes one kernel handle (a cudaKernel_t is a CUkernel); the caller vouches for
    // the address.
    unsafe {
        call!(
            runtime,
            cudaGetKernel((&mut raw as *mut CUkernel).cast(), entry)
        )
    }?;
    Ok(raw)
}
