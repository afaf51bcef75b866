//! The current device of each thread and its primary context, managed the way the CUDA runtime
//! does: nobody creates, pushes or pops a context.
//!
//! Every thread has a current device (device 0 until [`set_device`] says otherwise). The first
//! cudyn call on a thread that needs a context retains that device's *primary* context and makes it
//! current. The primary context is the one the CUDA runtime uses, so memory, libraries and kernels
//! are shared with any runtime user in the process (a `cudaMalloc`'d pointer works in a cudyn
//! launch and the reverse). A context made current by someone else (the runtime's `cudaSetDevice`,
//! or the driver's `cuCtxSetCurrent`) is respected, as the runtime respects it.
//!
//! Primary contexts are retained once and never released: like the runtime, cudyn keeps them for
//! the life of the process, so handles never dangle because a count dropped to zero.

use std::cell::Cell;
use std::ffi::c_void;

use crate::device::{initialized_driver, Device, DeviceLimits, PerDevice};
use crate::error::{Error, Result};
use crate::sys::call;
use crate::sys::driver::{CUcontext, Driver};

thread_local! {
    /// The device chosen with `set_device` on this thread, used when no context is current.
    static THREAD_DEVICE: Cell<usize> = const { Cell::new(0) };
    /// The last context seen current on this thread and its device, so that the launch path
    /// asks the driver only for the current context, not for its device and limits.
    static SEEN: Cell<Option<(usize, Device, &'static DeviceLimits)>> = const { Cell::new(None) };
}

/// The primary contexts retained by cudyn, as addresses (a raw pointer is not `Sync`).
static PRIMARY: PerDevice<usize> = PerDevice::new();

/// What a call that needs a context gets: the driver, and the device of the current context.
#[derive(Clone, Copy)]
pub(crate) struct Current {
    pub(crate) driver: &'static Driver,
    pub(crate) device: Device,
    pub(crate) limits: &'static DeviceLimits,
}

/// Makes `ordinal` this thread's current device, as `cudaSetDevice` does: its primary context is
/// retained (once per process) and made current on this thread.
pub fn set_device(ordinal: usize) -> Result<Device> {
    let driver = initialized_driver()?;
    let device = Device::get(ordinal)?;
    let context = primary_context(driver, device)?;
    // SAFETY: a retained primary context stays valid for the life of the process.
    unsafe { call!(driver, cuCtxSetCurrent(context)) }?;
    THREAD_DEVICE.with(|slot| slot.set(ordinal));
    Ok(device)
}

/// This thread's current device: the device of the current context, or the device chosen with
/// [`set_device`] (device 0 by default) when no context is current yet.
pub fn current_device() -> Result<Device> {
    Ok(current()?.device)
}

/// Waits until all work submitted to this thread's current device is done (`cudaDeviceSynchronize`).
pub fn synchronize() -> Result<()> {
    let driver = current()?.driver;
    // SAFETY: a context is current (current() made sure).
    unsafe { call!(driver, cuCtxSynchronize()) }
}

/// Makes sure a context is current on this thread and says which device it belongs to.
///
/// This is on the launch path: when the current context is the one seen last on this thread, it
/// costs one `cuCtxGetCurrent`, which reads a thread-local in the driver.
pub(crate) fn current() -> Result<Current> {
    let driver = initialized_driver()?;
    let mut context: CUcontext = std::ptr::null_mut();
    // SAFETY: writes one pointer.
    unsafe { call!(driver, cuCtxGetCurrent(&mut context)) }?;
    if context.is_null() {
        let device = Device::get(THREAD_DEVICE.with(Cell::get))?;
        context = primary_context(driver, device)?;
        // SAFETY: a retained primary context stays valid for the life of the process.
        unsafe { call!(driver, cuCtxSetCurrent(context)) }?;
    }
    if let Some((seen, device, limits)) = SEEN.with(Cell::get) {
        if seen == context as usize {
            return Ok(Current {
                driver,
                device,
                limits,
            });
        }
    }
    let mut raw = 0;
    // SAFETY: writes one CUdevice; a context is current.
    unsafe { call!(driver, cuCtxGetDevice(&mut raw)) }?;
    let device = Device::from_raw(raw)?;
    let limits = device.limits()?;
    SEEN.with(|slot| slot.set(Some((context as usize, device, limits))));
    Ok(Current {
        driver,
        device,
        limits,
    })
}

/// The primary context of `device`, retained on first use and kept for the life of the process.
fn primary_context(driver: &'static Driver, device: Device) -> Result<CUcontext> {
    let address = PRIMARY.get_or_init(device, || {
        let mut context: CUcontext = std::ptr::null_mut();
        // SAFETY: writes one context handle; the retain is never released on purpose (see the
        // module documentation).
        unsafe {
            call!(
                driver,
                cuDevicePrimaryCtxRetain(&mut context, device.as_raw())
            )
        }?;
        if context.is_null() {
            return Err(Error::InvalidArgument(format!(
                "the driver returned no primary context for device {}",
                device.ordinal()
            )));
        }
        Ok(context as usize)
    })?;
    Ok(*address as *mut c_void as CUcontext)
}
