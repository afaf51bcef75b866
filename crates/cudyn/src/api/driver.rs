//! The driver calls cudyn makes, one function each (`cu*`).
//!
//! Every function takes the opened driver first, so that a caller that already has it (the launch
//! path) pays for no lookup; [`initialized`] gives it, `cuInit` done.

use std::ffi::{c_char, c_void};
use std::num::NonZeroU64;
use std::sync::OnceLock;

use crate::error::Result;
use crate::sys::driver::{
    CUcontext, CUdevice, CUdevice_attribute, CUdeviceptr, CUevent, CUfunction,
    CUfunction_attribute, CUkernel, CUlaunchConfig, CUlibrary, CUmodule, CUstream, Driver,
    CUDA_SUCCESS,
};
use crate::sys::{self, call};

/// The driver, initialized once per process (`cuInit`).
pub(crate) fn initialized() -> Result<&'static Driver> {
    static INIT: OnceLock<Result<()>> = OnceLock::new();
    let driver = sys::driver()?;
    let init = INIT.get_or_init(|| {
        // SAFETY: cuInit takes flags, which must be 0.
        unsafe { call!(driver, cuInit(0)) }
    });
    // A failure is cloned (kept for the next caller); a success costs no clone.
    match init {
        Ok(()) => Ok(driver),
        Err(error) => Err(error.clone()),
    }
}

/// `cuDeviceGetCount`.
pub(crate) fn device_count(driver: &Driver) -> Result<i32> {
    let mut count = 0;
    // SAFETY: writes one int.
    unsafe { call!(driver, cuDeviceGetCount(&mut count)) }?;
    Ok(count)
}

/// `cuDeviceGet`: the handle of device `ordinal`; an out-of-range ordinal is an error status.
pub(crate) fn device_get(driver: &Driver, ordinal: i32) -> Result<CUdevice> {
    let mut device = 0;
    // SAFETY: writes one CUdevice.
    unsafe { call!(driver, cuDeviceGet(&mut device, ordinal)) }?;
    Ok(device)
}

/// `cuDeviceGetName`: the device's name, up to the first NUL of what the driver wrote.
pub(crate) fn device_name(driver: &Driver, device: CUdevice) -> Result<String> {
    let mut buffer = [0 as c_char; 256];
    // SAFETY: the driver writes at most `len` bytes, NUL-terminated; a bad device is a status.
    unsafe {
        call!(
            driver,
            cuDeviceGetName(buffer.as_mut_ptr(), buffer.len() as i32, device)
        )
    }?;
    let bytes: Vec<u8> = buffer
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// `cuDeviceGetAttribute`.
pub(crate) fn device_attribute(
    driver: &Driver,
    attribute: CUdevice_attribute,
    device: CUdevice,
) -> Result<i32> {
    let mut value = 0;
    // SAFETY: writes one int; an unknown attribute or device is an error status.
    unsafe { call!(driver, cuDeviceGetAttribute(&mut value, attribute, device)) }?;
    Ok(value)
}

/// `cuDeviceTotalMem`.
pub(crate) fn device_total_memory(driver: &Driver, device: CUdevice) -> Result<usize> {
    let mut bytes = 0;
    // SAFETY: writes one size_t.
    unsafe { call!(driver, cuDeviceTotalMem_v2(&mut bytes, device)) }?;
    Ok(bytes)
}

/// `cuDevicePrimaryCtxRetain`: the device's primary context, its reference count raised.
pub(crate) fn primary_context_retain(driver: &Driver, device: CUdevice) -> Result<CUcontext> {
    let mut context = std::ptr::null_mut();
    // SAFETY: writes one context handle.
    unsafe { call!(driver, cuDevicePrimaryCtxRetain(&mut context, device)) }?;
    Ok(context)
}

/// `cuCtxGetCurrent`: the calling thread's current context, null when it has none.
#[inline]
pub(crate) fn context_get_current(driver: &Driver) -> Result<CUcontext> {
    let mut context = std::ptr::null_mut();
    // SAFETY: writes one pointer.
    unsafe { call!(driver, cuCtxGetCurrent(&mut context)) }?;
    Ok(context)
}

/// `cuCtxGetId` of the calling thread's current context: an id no other context of the process
/// ever has, so that a context destroyed and another made at the same address, or a primary
/// context reset and made again under the same handle, are told apart. `None` when no context is
/// current (or it was destroyed), or when the driver lacks the call (before CUDA 12.0).
#[inline]
pub(crate) fn current_context_id(driver: &Driver) -> Option<NonZeroU64> {
    let get_id = driver.api.cuCtxGetId?;
    let mut id = 0;
    // SAFETY: a null context asks for the current one; the call writes one integer.
    if unsafe { get_id(std::ptr::null_mut(), &mut id) } != CUDA_SUCCESS {
        return None;
    }
    NonZeroU64::new(id)
}

/// `cuCtxSetCurrent`: makes `context` current on the calling thread (null: none).
///
/// # Safety
/// `context` is null or a context that has not been destroyed.
pub(crate) unsafe fn context_set_current(driver: &Driver, context: CUcontext) -> Result<()> {
    // SAFETY: the caller vouches for the handle.
    unsafe { call!(driver, cuCtxSetCurrent(context)) }
}

/// `cuCtxPushCurrent`: makes `context` current, keeping the previous one to pop back to.
///
/// # Safety
/// `context` is a context that has not been destroyed.
pub(crate) unsafe fn context_push(driver: &Driver, context: CUcontext) -> Result<()> {
    // SAFETY: the caller vouches for the handle.
    unsafe { call!(driver, cuCtxPushCurrent_v2(context)) }
}

/// `cuCtxPopCurrent`: undoes the last push on this thread, returning the context it removed.
pub(crate) fn context_pop(driver: &Driver) -> Result<CUcontext> {
    let mut context = std::ptr::null_mut();
    // SAFETY: writes one pointer; with nothing pushed the status is an error.
    unsafe { call!(driver, cuCtxPopCurrent_v2(&mut context)) }?;
    Ok(context)
}

/// `cuCtxGetDevice`: the device of the current context.
pub(crate) fn context_device(driver: &Driver) -> Result<CUdevice> {
    let mut device = 0;
    // SAFETY: writes one CUdevice; with no current context the status is an error.
    unsafe { call!(driver, cuCtxGetDevice(&mut device)) }?;
    Ok(device)
}

/// `cuCtxSynchronize`: waits for all work of the current context.
pub(crate) fn context_synchronize(driver: &Driver) -> Result<()> {
    // SAFETY: takes no argument; with no current context the status is an error.
    unsafe { call!(driver, cuCtxSynchronize()) }
}

/// `cuMemGetInfo`: the free and total device memory of the current context's device, in bytes.
pub(crate) fn mem_get_info(driver: &Driver) -> Result<(usize, usize)> {
    let (mut free, mut total) = (0, 0);
    // SAFETY: writes two size_t; with no current context the status is an error.
    unsafe { call!(driver, cuMemGetInfo_v2(&mut free, &mut total)) }?;
    Ok((free, total))
}

/// `cuMemAlloc`: `bytes` of device memory in the current context.
pub(crate) fn mem_alloc(driver: &Driver, bytes: usize) -> Result<CUdeviceptr> {
    let mut ptr = 0;
    // SAFETY: writes one device pointer.
    unsafe { call!(driver, cuMemAlloc_v2(&mut ptr, bytes)) }?;
    Ok(ptr)
}

/// `cuMemFree`.
///
/// # Safety
/// `ptr` came from `cuMemAlloc`, is freed once, and no work still in flight uses it.
pub(crate) unsafe fn mem_free(driver: &Driver, ptr: CUdeviceptr) -> Result<()> {
    // SAFETY: the caller vouches for the pointer.
    unsafe { call!(driver, cuMemFree_v2(ptr)) }
}

/// `cuMemcpyHtoD`: copies `bytes` from the host to the device.
///
/// # Safety
/// `src` is readable for `bytes` bytes and `dst..dst + bytes` lies in one live allocation that
/// nothing else writes during the copy.
pub(crate) unsafe fn memcpy_htod(
    driver: &Driver,
    dst: CUdeviceptr,
    src: *const c_void,
    bytes: usize,
) -> Result<()> {
    // SAFETY: the caller vouches for both ranges.
    unsafe { call!(driver, cuMemcpyHtoD_v2(dst, src, bytes)) }
}

/// `cuMemcpyDtoH`: copies `bytes` from the device to the host.
///
/// # Safety
/// `dst` is writable for `bytes` bytes and `src..src + bytes` lies in one live allocation.
pub(crate) unsafe fn memcpy_dtoh(
    driver: &Driver,
    dst: *mut c_void,
    src: CUdeviceptr,
    bytes: usize,
) -> Result<()> {
    // SAFETY: the caller vouches for both ranges.
    unsafe { call!(driver, cuMemcpyDtoH_v2(dst, src, bytes)) }
}

/// `cuMemsetD8`: sets `bytes` bytes at `ptr` to `value`.
///
/// # Safety
/// `ptr..ptr + bytes` lies in one live allocation that nothing else uses during the call.
pub(crate) unsafe fn memset_d8(
    driver: &Driver,
    ptr: CUdeviceptr,
    value: u8,
    bytes: usize,
) -> Result<()> {
    // SAFETY: the caller vouches for the range.
    unsafe { call!(driver, cuMemsetD8_v2(ptr, value, bytes)) }
}

/// `cuStreamCreate`: a stream in the current context.
pub(crate) fn stream_create(driver: &Driver, flags: u32) -> Result<CUstream> {
    let mut stream = std::ptr::null_mut();
    // SAFETY: writes one stream handle; bad flags are an error status.
    unsafe { call!(driver, cuStreamCreate(&mut stream, flags)) }?;
    Ok(stream)
}

/// `cuStreamSynchronize`.
///
/// # Safety
/// `stream` is null (the default stream) or a stream not yet destroyed.
pub(crate) unsafe fn stream_synchronize(driver: &Driver, stream: CUstream) -> Result<()> {
    // SAFETY: the caller vouches for the handle.
    unsafe { call!(driver, cuStreamSynchronize(stream)) }
}

/// `cuStreamWaitEvent`: later work in `stream` waits for `event`.
///
/// # Safety
/// Both handles are alive (a null stream is the default stream).
pub(crate) unsafe fn stream_wait_event(
    driver: &Driver,
    stream: CUstream,
    event: CUevent,
) -> Result<()> {
    // SAFETY: the caller vouches for the handles; the flags must be 0.
    unsafe { call!(driver, cuStreamWaitEvent(stream, event, 0)) }
}

/// `cuStreamDestroy`; work already queued still completes.
///
/// # Safety
/// `stream` is alive and destroyed once; nobody uses it afterwards.
pub(crate) unsafe fn stream_destroy(driver: &Driver, stream: CUstream) -> Result<()> {
    // SAFETY: the caller vouches for the handle.
    unsafe { call!(driver, cuStreamDestroy_v2(stream)) }
}

/// `cuEventCreate`: an event in the current context.
pub(crate) fn event_create(driver: &Driver, flags: u32) -> Result<CUevent> {
    let mut event = std::ptr::null_mut();
    // SAFETY: writes one event handle; bad flags are an error status.
    unsafe { call!(driver, cuEventCreate(&mut event, flags)) }?;
    Ok(event)
}

/// `cuEventRecord`.
///
/// # Safety
/// Both handles are alive (a null stream is the default stream).
pub(crate) unsafe fn event_record(driver: &Driver, event: CUevent, stream: CUstream) -> Result<()> {
    // SAFETY: the caller vouches for the handles.
    unsafe { call!(driver, cuEventRecord(event, stream)) }
}

/// `cuEventSynchronize`.
///
/// # Safety
/// `event` is alive.
pub(crate) unsafe fn event_synchronize(driver: &Driver, event: CUevent) -> Result<()> {
    // SAFETY: the caller vouches for the handle.
    unsafe { call!(driver, cuEventSynchronize(event)) }
}

/// `cuEventElapsedTime`: milliseconds from `start` to `end`.
///
/// # Safety
/// Both events are alive.
pub(crate) unsafe fn event_elapsed_ms(
    driver: &Driver,
    start: CUevent,
    end: CUevent,
) -> Result<f32> {
    let mut milliseconds = 0f32;
    // SAFETY: writes one float; the caller vouches for the handles.
    unsafe { call!(driver, cuEventElapsedTime_v2(&mut milliseconds, start, end)) }?;
    Ok(milliseconds)
}

/// `cuEventDestroy`.
///
/// # Safety
/// `event` is alive and destroyed once; nobody uses it afterwards.
pub(crate) unsafe fn event_destroy(driver: &Driver, event: CUevent) -> Result<()> {
    // SAFETY: the caller vouches for the handle.
    unsafe { call!(driver, cuEventDestroy_v2(event)) }
}

/// `cuLibraryGetModule`: the library loaded into the current context (running the JIT for PTX).
///
/// # Safety
/// `library` is loaded.
pub(crate) unsafe fn library_module(driver: &Driver, library: CUlibrary) -> Result<CUmodule> {
    let mut module = std::ptr::null_mut();
    // SAFETY: writes one module handle; the caller vouches for the library.
    unsafe { call!(driver, cuLibraryGetModule(&mut module, library)) }?;
    Ok(module)
}

/// `cuKernelGetFunction`: the kernel's function in the current context, its code loaded there if
/// it was not yet. The function stays valid while the kernel's library stays loaded and that
/// context lives.
///
/// # Safety
/// `kernel` belongs to a loaded library; a context is current.
pub(crate) unsafe fn kernel_function(driver: &Driver, kernel: CUkernel) -> Result<CUfunction> {
    let mut function = std::ptr::null_mut();
    // SAFETY: writes one function handle; the caller vouches for the kernel.
    unsafe { call!(driver, cuKernelGetFunction(&mut function, kernel)) }?;
    Ok(function)
}

/// `cuKernelGetName`: the kernel's name, owned by the driver while its library is loaded.
///
/// # Safety
/// `kernel` belongs to a loaded library; the returned string is valid only while it stays loaded.
pub(crate) unsafe fn kernel_name(driver: &Driver, kernel: CUkernel) -> Result<*const c_char> {
    let mut name = std::ptr::null();
    // SAFETY: writes one pointer; the caller vouches for the kernel.
    unsafe { call!(driver, cuKernelGetName(&mut name, kernel)) }?;
    Ok(name)
}

/// `cuKernelGetParamInfo`: `(offset, size)` of parameter `index`; past the last parameter the
/// status is `CUDA_ERROR_INVALID_VALUE`.
///
/// # Safety
/// `kernel` belongs to a loaded library.
pub(crate) unsafe fn kernel_param_info(
    driver: &Driver,
    kernel: CUkernel,
    index: usize,
) -> Result<(usize, usize)> {
    let (mut offset, mut size) = (0, 0);
    // SAFETY: writes two size_t; the caller vouches for the kernel.
    unsafe {
        call!(
            driver,
            cuKernelGetParamInfo(kernel, index, &mut offset, &mut size)
        )
    }?;
    Ok((offset, size))
}

/// `cuKernelGetAttribute` on `device`.
///
/// # Safety
/// `kernel` belongs to a loaded library.
pub(crate) unsafe fn kernel_attribute(
    driver: &Driver,
    attribute: CUfunction_attribute,
    kernel: CUkernel,
    device: CUdevice,
) -> Result<i32> {
    let mut value = 0;
    // SAFETY: writes one int; the caller vouches for the kernel.
    unsafe {
        call!(
            driver,
            cuKernelGetAttribute(&mut value, attribute, kernel, device)
        )
    }?;
    Ok(value)
}

/// `cuKernelSetAttribute` on `device`.
///
/// # Safety
/// `kernel` belongs to a loaded library.
pub(crate) unsafe fn kernel_set_attribute(
    driver: &Driver,
    attribute: CUfunction_attribute,
    value: i32,
    kernel: CUkernel,
    device: CUdevice,
) -> Result<()> {
    // SAFETY: the caller vouches for the kernel; a bad attribute or value is an error status.
    unsafe {
        call!(
            driver,
            cuKernelSetAttribute(attribute, value, kernel, device)
        )
    }
}

/// The grid of a launch, its block and its dynamic shared memory, as `cuLaunchKernel` takes them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LaunchShape {
    pub(crate) grid: [u32; 3],
    pub(crate) block: [u32; 3],
    pub(crate) shared_mem_bytes: u32,
}

/// `cuLaunchKernel` with no `extra`.
///
/// # Safety
/// `function` is a live function or kernel handle (a `CUkernel` is accepted), `stream` is null or
/// alive, and `params` points to one pointer per kernel parameter, each to a value of the
/// parameter's size and layout, alive until the call returns. The kernel may write through any
/// pointer among its arguments.
#[inline]
pub(crate) unsafe fn launch_kernel(
    driver: &Driver,
    function: CUfunction,
    shape: LaunchShape,
    stream: CUstream,
    params: *mut *mut c_void,
) -> Result<()> {
    let ([gx, gy, gz], [bx, by, bz]) = (shape.grid, shape.block);
    // SAFETY: the caller vouches for every handle and pointer; `extra` is null.
    unsafe {
        call!(
            driver,
            cuLaunchKernel(
                function,
                gx,
                gy,
                gz,
                bx,
                by,
                bz,
                shape.shared_mem_bytes,
                stream,
                params,
                std::ptr::null_mut()
            )
        )
    }
}

/// `cuLaunchKernelEx` with no `extra`.
///
/// # Safety
/// As [`launch_kernel`]; `config.attrs` points to `config.numAttrs` attributes alive until the
/// call returns.
pub(crate) unsafe fn launch_kernel_ex(
    driver: &Driver,
    config: &CUlaunchConfig,
    function: CUfunction,
    params: *mut *mut c_void,
) -> Result<()> {
    // SAFETY: the caller vouches for every handle and pointer; `extra` is null.
    unsafe {
        call!(
            driver,
            cuLaunchKernelEx(config, function, params, std::ptr::null_mut())
        )
    }
}

/// `cuOccupancyMaxActiveBlocksPerMultiprocessor`: how many blocks of `block_threads` threads
/// and `shared_mem_bytes` of dynamic shared memory can be resident on one multiprocessor of the
/// current context's device at once.
///
/// # Safety
/// `function` is a live function or kernel handle (a `CUkernel` is accepted, and the current
/// context is the one the calculation is made for); a context is current.
pub(crate) unsafe fn occupancy_max_active_blocks(
    driver: &Driver,
    function: CUfunction,
    block_threads: i32,
    shared_mem_bytes: usize,
) -> Result<i32> {
    let mut blocks = 0;
    // SAFETY: writes one int; the caller vouches for the handle and the context.
    unsafe {
        call!(
            driver,
            cuOccupancyMaxActiveBlocksPerMultiprocessor(
                &mut blocks,
                function,
                block_threads,
                shared_mem_bytes
            )
        )
    }?;
    Ok(blocks)
}
