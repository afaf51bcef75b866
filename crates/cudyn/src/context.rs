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
//!
//! Handles ([`DeviceBuffer`](crate::DeviceBuffer), [`Stream`](crate::Stream),
//! [`Event`](crate::Event)) remember the context they were made in and are released there, on
//! whichever thread drops them, without changing that thread's current context; a buffer's copies
//! run there too. A release that fails in `drop` is handed to the hook set with
//! [`set_drop_error_hook`].
//!
//! # Which device each operation uses
//!
//! - **The thread's current device**: allocating a [`DeviceBuffer`](crate::DeviceBuffer),
//!   creating a [`Stream`](crate::Stream) or an [`Event`](crate::Event), launching a kernel (its
//!   configuration is checked against that device's limits), compiling for "this GPU"
//!   ([`Program::compile`](crate::Program::compile) or `load` without an explicit architecture),
//!   loading PTX (the JIT runs for that device during the load), looking up a library's
//!   variables ([`Library::global`](crate::Library::global)), occupancy queries, [`synchronize`].
//! - **The handle's own device**, whatever the current one is: a buffer's copies, fills and free;
//!   destroying a stream or an event.
//! - **The device named in the call**: [`Kernel::attribute`](crate::Kernel::attribute) and
//!   [`Kernel::set_attribute`](crate::Kernel::set_attribute) (each device keeps its own values),
//!   [`Device::memory_info`] and the other [`Device`] queries.
//! - **No device**: loading a cubin or a fatbin and looking up its kernels. A library is
//!   context-independent: one `Library` and its `Kernel`s serve every device, and the driver loads
//!   the code into a device's context the first time it is used there.

use std::cell::Cell;
use std::num::NonZeroU64;
use std::sync::RwLock;

use crate::api::driver as api;
use crate::device::{initialized_driver, Device, DeviceLimits, MemoryInfo, PerDevice};
use crate::error::{Error, Result};
use crate::sys::driver::{CUcontext, Driver};

thread_local! {
    /// The device chosen with `set_device` on this thread, used when no context is current.
    static THREAD_DEVICE: Cell<usize> = const { Cell::new(0) };
    /// The last context seen current on this thread, with the driver, its id, device and
    /// limits: while it stays current, a call that needs a context (every launch) asks the
    /// driver for the current context's id alone, and reads nothing else but this thread-local.
    static SEEN: Cell<Option<Current>> = const { Cell::new(None) };
}

/// The primary contexts retained by cudyn, as addresses (a raw pointer is not `Sync`).
static PRIMARY: PerDevice<usize> = PerDevice::new();

/// What a call that needs a context gets: the driver, the current context and its device.
#[derive(Clone, Copy)]
pub(crate) struct Current {
    pub(crate) driver: &'static Driver,
    pub(crate) context: CUcontext,
    /// The context's id (`cuCtxGetId`), unique in the process, unlike its handle: a context
    /// destroyed and another made at the same address, or a primary context reset, get a new
    /// one. `None` where the driver has no ids (before CUDA 12.0).
    pub(crate) id: Option<NonZeroU64>,
    pub(crate) device: Device,
    pub(crate) limits: &'static DeviceLimits,
}

impl Current {
    /// Whether this context is still the current one of the calling thread: the same context
    /// instance by its id where the driver has ids, else the same handle.
    #[inline]
    fn is_still_current(&self) -> Result<bool> {
        match self.id {
            Some(id) => Ok(api::current_context_id(self.driver) == Some(id)),
            None => Ok(api::context_get_current(self.driver)? == self.context),
        }
    }
}

/// Makes `ordinal` this thread's current device, as `cudaSetDevice` does: its primary context is
/// retained (once per process) and made current on this thread.
///
/// ```no_run
/// use cudyn::DeviceBuffer;
///
/// // One thread per GPU, each allocating on its own device.
/// let count = cudyn::Device::count()?;
/// std::thread::scope(|scope| {
///     let threads: Vec<_> = (0..count)
///         .map(|ordinal| {
///             scope.spawn(move || -> cudyn::Result<Option<usize>> {
///                 cudyn::set_device(ordinal)?;
///                 let buffer = DeviceBuffer::<f32>::zeroed(1024)?;
///                 Ok(buffer.device().map(|device| device.ordinal()))
///             })
///         })
///         .collect();
///     for (ordinal, thread) in threads.into_iter().enumerate() {
///         assert_eq!(thread.join().expect("the thread ran to its end")?, Some(ordinal));
///     }
///     Ok::<(), cudyn::Error>(())
/// })?;
/// # Ok::<(), cudyn::Error>(())
/// ```
pub fn set_device(ordinal: usize) -> Result<Device> {
    let driver = initialized_driver()?;
    let device = Device::get(ordinal)?;
    let context = primary_context(driver, device)?;
    // SAFETY: a retained primary context stays valid for the life of the process.
    unsafe { api::context_set_current(driver, context) }?;
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
    api::context_synchronize(current()?.driver)
}

/// Makes sure a context is current on this thread and says which device it belongs to.
///
/// This is on the launch path: when the current context is the one seen last on this thread, it
/// costs one `cuCtxGetId`, which reads a thread-local in the driver, and the read of one
/// thread-local here; the driver was initialized when that context was first seen.
#[inline]
pub(crate) fn current() -> Result<Current> {
    if let Some(seen) = SEEN.with(Cell::get) {
        if seen.is_still_current()? {
            return Ok(seen);
        }
    }
    current_from_driver()
}

/// [`current`] when the current context is not the one seen last on this thread (or none was
/// seen yet): makes the thread's device's primary context current if none is, and asks the
/// driver for the context's device and limits.
#[cold]
#[inline(never)]
fn current_from_driver() -> Result<Current> {
    let driver = initialized_driver()?;
    let mut context = api::context_get_current(driver)?;
    if context.is_null() {
        let device = Device::get(THREAD_DEVICE.with(Cell::get))?;
        context = primary_context(driver, device)?;
        // SAFETY: a retained primary context stays valid for the life of the process.
        unsafe { api::context_set_current(driver, context) }?;
    }
    let id = api::current_context_id(driver);
    if let Some(seen) = SEEN.with(Cell::get) {
        if seen.context == context && seen.id == id {
            return Ok(seen);
        }
    }
    let device = Device::from_raw(api::context_device(driver)?)?;
    let current = Current {
        driver,
        context,
        id,
        device,
        limits: device.limits()?,
    };
    SEEN.with(|slot| slot.set(Some(current)));
    Ok(current)
}

/// Runs `call` with `context` current on this thread, then restores the thread's previous
/// context (none, if it had none): a handle is released in the context it was made in, and a
/// thread that drops it is left as it was.
///
/// # Safety
/// `context` has not been destroyed (cudyn's primary contexts never are).
pub(crate) unsafe fn in_context<T>(
    driver: &Driver,
    context: CUcontext,
    call: impl FnOnce() -> Result<T>,
) -> Result<T> {
    if api::context_get_current(driver)? == context {
        return call();
    }
    // SAFETY: the caller vouches for the context.
    unsafe { api::context_push(driver, context) }?;
    let result = call();
    let restored = api::context_pop(driver);
    let value = result?;
    restored?;
    Ok(value)
}

/// Runs `call` with `home`, the context a handle was made in, current: a handle is released,
/// and a buffer copied, in its own context, whichever thread does it and whatever that thread's
/// current context is (which is left as it was).
pub(crate) fn in_home<T>(home: CUcontext, call: impl FnOnce(&Driver) -> Result<T>) -> Result<T> {
    let driver = initialized_driver()?;
    // SAFETY: `home` is the context the handle was made in: a primary context cudyn retained for
    // the life of the process (or one the caller made current and keeps alive, as with any CUDA
    // handle).
    unsafe { in_context(driver, home, || call(driver)) }
}

/// Runs `call` with the primary context of `device` current on this thread (retaining it if
/// cudyn had not yet), then restores the thread's previous context: for calls that act on "the
/// current context" but are asked about a given device.
pub(crate) fn in_device<T>(device: Device, call: impl FnOnce(&Driver) -> Result<T>) -> Result<T> {
    let driver = initialized_driver()?;
    let context = primary_context(driver, device)?;
    // SAFETY: a retained primary context stays valid for the life of the process.
    unsafe { in_context(driver, context, || call(driver)) }
}

/// The primary context of `device`, retained on first use and kept for the life of the process.
pub(crate) fn primary_context(driver: &'static Driver, device: Device) -> Result<CUcontext> {
    let address = PRIMARY.get_or_init(device, || {
        // The retain is never released on purpose (see the module documentation).
        let context = api::primary_context_retain(driver, device.as_raw())?;
        if context.is_null() {
            return Err(Error::DriverInconsistent {
                what: format!("no primary context for device {}", device.ordinal()),
            });
        }
        Ok(context as usize)
    })?;
    Ok(*address as CUcontext)
}

/// A function that receives the failures of releases done by `drop`: the kind of handle
/// (`"DeviceBuffer"`, `"Stream"`, `"Event"`, `"Library"`) and the error.
pub type DropErrorHook = fn(handle: &'static str, error: &Error);

/// The hook set by [`set_drop_error_hook`]; `None` is the default.
static DROP_ERROR_HOOK: RwLock<Option<DropErrorHook>> = RwLock::new(None);

/// Sets what happens when a handle fails to release itself in `drop` (`cuMemFree`,
/// `cuStreamDestroy`, `cuEventDestroy`, unloading a library), where no `Result` can be returned.
/// By default cudyn writes one line to stderr naming the handle and the error.
///
/// This is the one place such failures go. To handle a failure in code instead, release the
/// handle explicitly: [`DeviceBuffer::free`](crate::DeviceBuffer::free),
/// [`Stream::destroy`](crate::Stream::destroy), [`Event::destroy`](crate::Event::destroy) return
/// the `Result`.
pub fn set_drop_error_hook(hook: DropErrorHook) {
    let mut slot = DROP_ERROR_HOOK
        .write()
        .unwrap_or_else(|poison| poison.into_inner());
    *slot = Some(hook);
}

/// Reports a failed release in `drop` to the hook (see [`set_drop_error_hook`]).
pub(crate) fn report_drop_error(handle: &'static str, error: &Error) {
    let hook = *DROP_ERROR_HOOK
        .read()
        .unwrap_or_else(|poison| poison.into_inner());
    match hook {
        Some(hook) => hook(handle, error),
        None => crate::warn::warning!(
            "cudyn: dropping a {handle} failed, so it may leak: {error} (release it explicitly \
             to handle the error, or see cudyn::context::set_drop_error_hook)"
        ),
    }
}

/// What needs a primary context of a device: asked in the device's own, whatever the calling
/// thread's current device is.
impl Device {
    /// How much of the GPU's memory is free and how much there is (`cuMemGetInfo`, as
    /// `cudaMemGetInfo` reports it), asked in this GPU's primary context whatever the calling
    /// thread's current device is. Like the runtime, this creates the primary context if no one
    /// has yet, which itself takes device memory.
    ///
    /// Free memory is the whole GPU's: other processes' allocations count too.
    pub fn memory_info(&self) -> Result<MemoryInfo> {
        let (free, total) = in_device(*self, api::mem_get_info)?;
        Ok(MemoryInfo {
            free: free as u64,
            total: total as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    static REPORTED: Mutex<Vec<String>> = Mutex::new(Vec::new());

    #[test]
    fn drop_failures_go_to_the_hook_that_is_set() {
        set_drop_error_hook(|handle, error| {
            REPORTED.lock().unwrap().push(format!("{handle}: {error}"));
        });
        let error = Error::DriverInconsistent {
            what: "a context that is gone".into(),
        };
        report_drop_error("Stream", &error);
        let reported = REPORTED.lock().unwrap();
        assert_eq!(reported.len(), 1);
        assert!(reported[0].starts_with("Stream: the driver returned a context that is gone"));
    }
}
