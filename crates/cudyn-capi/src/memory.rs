//! Device memory: allocation, copies to and from the host, fills.

use std::ffi::c_void;
use std::sync::{Arc, Mutex, PoisonError};

use cudyn::DeviceBuffer;

use crate::handles::{bytes_arg, entry_returning, Registry};
use crate::status::{cudyn_status, entry, Failure};

/// Device memory on the device that was current when it was allocated.
#[allow(non_camel_case_types)]
#[derive(Debug)]
pub struct cudyn_buffer {
    _opaque: [u8; 0],
}

/// The buffers; a copy into one holds its lock, so two threads writing one buffer take turns.
static BUFFERS: Registry<cudyn_buffer, Mutex<DeviceBuffer<u8>>> = Registry::new("cudyn_buffer");

/// The buffer behind `buffer`, locked for the duration of `work`.
fn with_buffer<R>(
    buffer: *const cudyn_buffer,
    work: impl FnOnce(&mut DeviceBuffer<u8>) -> Result<R, Failure>,
) -> Result<R, Failure> {
    let buffer = BUFFERS.get(buffer)?;
    let mut locked = buffer.lock().unwrap_or_else(PoisonError::into_inner);
    work(&mut locked)
}

/// The byte range `offset..offset + bytes`, refused when it overflows.
fn byte_range(offset: usize, bytes: usize) -> Result<std::ops::Range<usize>, Failure> {
    let end = offset.checked_add(bytes).ok_or_else(|| {
        Failure::invalid_argument(format!(
            "offset {offset} plus {bytes} bytes overflows the address space"
        ))
    })?;
    Ok(offset..end)
}

/// `bytes` bytes of device memory on the calling thread's current device, contents
/// unspecified. A buffer of 0 bytes allocates nothing (its address is 0). Free it with
/// `cudyn_buffer_free`.
///
/// # Safety
/// `buffer` is valid for writing a pointer (null is refused).
#[no_mangle]
pub unsafe extern "C" fn cudyn_buffer_alloc(
    bytes: usize,
    buffer: *mut *mut cudyn_buffer,
) -> cudyn_status {
    let compute = || {
        let allocated = DeviceBuffer::<u8>::alloc(bytes)?;
        Ok(BUFFERS.insert(Mutex::new(allocated)))
    };
    // SAFETY: the caller vouches that `buffer` is null or writable.
    unsafe { entry_returning(buffer, "buffer", compute) }
}

/// The buffer's device address (a `CUdeviceptr`): what a kernel's pointer parameter receives.
/// Pass a pointer to a `uint64_t` holding it in the argument array of `cudyn_launch`.
///
/// # Safety
/// `address` is valid for writing a `uint64_t` (null is refused).
#[no_mangle]
pub unsafe extern "C" fn cudyn_buffer_address(
    buffer: *const cudyn_buffer,
    address: *mut u64,
) -> cudyn_status {
    let compute = || {
        let device_address = with_buffer(buffer, |buffer| Ok(buffer.as_slice().as_raw()))?;
        Ok(device_address)
    };
    // SAFETY: the caller vouches that `address` is null or writable.
    unsafe { entry_returning(address, "address", compute) }
}

/// The buffer's size in bytes.
///
/// # Safety
/// `bytes` is valid for writing a `size_t` (null is refused).
#[no_mangle]
pub unsafe extern "C" fn cudyn_buffer_size(
    buffer: *const cudyn_buffer,
    bytes: *mut usize,
) -> cudyn_status {
    let compute = || {
        let size = with_buffer(buffer, |buffer| Ok(buffer.as_slice().len()))?;
        Ok(size)
    };
    // SAFETY: the caller vouches that `bytes` is null or writable.
    unsafe { entry_returning(bytes, "bytes", compute) }
}

/// Copies `bytes` bytes from host memory at `source` into the buffer at byte `offset`. The
/// range must lie inside the buffer. Like `cudaMemcpy`, it returns when the copy is done and
/// runs after earlier work on the legacy default stream.
///
/// # Safety
/// `source` points to `bytes` readable bytes (it may be null when `bytes` is 0).
#[no_mangle]
pub unsafe extern "C" fn cudyn_buffer_copy_from_host(
    buffer: *mut cudyn_buffer,
    offset: usize,
    source: *const c_void,
    bytes: usize,
) -> cudyn_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let data = unsafe { bytes_arg(source, bytes, "source")? };
        let range = byte_range(offset, bytes)?;
        with_buffer(buffer, |buffer| {
            Ok(buffer.slice_mut(range)?.copy_from(data)?)
        })
    })
}

/// Copies `bytes` bytes of the buffer from byte `offset` into host memory at `destination`.
/// The range must lie inside the buffer. Like `cudaMemcpy`, it waits for earlier work on the
/// legacy default stream (a kernel launched without a stream) and returns when the copy is done.
///
/// # Safety
/// `destination` points to `bytes` writable bytes (it may be null when `bytes` is 0).
#[no_mangle]
pub unsafe extern "C" fn cudyn_buffer_copy_to_host(
    buffer: *const cudyn_buffer,
    offset: usize,
    destination: *mut c_void,
    bytes: usize,
) -> cudyn_status {
    entry(|| {
        let range = byte_range(offset, bytes)?;
        if bytes == 0 {
            return with_buffer(buffer, |buffer| Ok(buffer.slice(range).map(drop)?));
        }
        if destination.is_null() {
            return Err(Failure::invalid_argument(format!(
                "`destination` is a null pointer but {bytes} bytes are to be copied"
            )));
        }
        // SAFETY: not null, and the caller vouches for `bytes` writable bytes.
        let out = unsafe { std::slice::from_raw_parts_mut(destination.cast::<u8>(), bytes) };
        with_buffer(buffer, |buffer| Ok(buffer.slice(range)?.copy_to(out)?))
    })
}

/// Sets `bytes` bytes of the buffer from byte `offset` to `value` (`cudaMemset`). The range
/// must lie inside the buffer.
#[no_mangle]
pub extern "C" fn cudyn_buffer_fill(
    buffer: *mut cudyn_buffer,
    offset: usize,
    value: u8,
    bytes: usize,
) -> cudyn_status {
    entry(|| {
        let range = byte_range(offset, bytes)?;
        with_buffer(buffer, |buffer| {
            Ok(buffer.slice_mut(range)?.fill_bytes(value)?)
        })
    })
}

/// Frees the buffer, in the context it was allocated in, whichever thread calls. Like
/// `cudaFree`, it does not wait for kernels still using it: free it only after they completed.
/// Null does nothing; a buffer freed already is `CUDYN_ERROR_INVALID_ARGUMENT`.
#[no_mangle]
pub extern "C" fn cudyn_buffer_free(buffer: *mut cudyn_buffer) -> cudyn_status {
    entry(|| {
        // A copy on another thread may still hold the buffer: it is freed when that copy
        // returns, and only a free here can report its outcome.
        if let Some(buffer) = BUFFERS.remove(buffer)?.and_then(Arc::into_inner) {
            buffer
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner)
                .free()?;
        }
        Ok(())
    })
}
