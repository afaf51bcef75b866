//! Streams: queues of device work.

use std::ffi::c_void;
use std::sync::Arc;

use cudyn::Stream;

use crate::handles::{entry_returning, Registry};
use crate::status::{cudyn_status, entry};

/// A stream on the device that was current when it was made.
#[allow(non_camel_case_types)]
#[derive(Debug)]
pub struct cudyn_stream {
    _opaque: [u8; 0],
}

pub(crate) static STREAMS: Registry<cudyn_stream, Stream> = Registry::new("cudyn_stream");

/// A new stream on the calling thread's current device; like `cudaStreamCreate`'s, it
/// synchronizes with the legacy default stream. Destroy it with `cudyn_stream_destroy`.
///
/// # Safety
/// `stream` is valid for writing a pointer (null is refused).
#[no_mangle]
pub unsafe extern "C" fn cudyn_stream_create(stream: *mut *mut cudyn_stream) -> cudyn_status {
    let compute = || {
        let created = Stream::new()?;
        Ok(STREAMS.insert(created))
    };
    // SAFETY: the caller vouches that `stream` is null or writable.
    unsafe { entry_returning(stream, "stream", compute) }
}

/// Waits until all work in the stream is done.
#[no_mangle]
pub extern "C" fn cudyn_stream_synchronize(stream: *const cudyn_stream) -> cudyn_status {
    entry(|| Ok(STREAMS.get(stream)?.synchronize()?))
}

/// The stream's raw handle, a `CUstream` that is also a `cudaStream_t`. It stays valid until
/// the stream is destroyed.
///
/// # Safety
/// `raw` is valid for writing a pointer (null is refused).
#[no_mangle]
pub unsafe extern "C" fn cudyn_stream_raw(
    stream: *const cudyn_stream,
    raw: *mut *mut c_void,
) -> cudyn_status {
    let compute = || {
        let stream = STREAMS.get(stream)?;
        Ok(stream.as_raw().cast())
    };
    // SAFETY: the caller vouches that `raw` is null or writable.
    unsafe { entry_returning(raw, "raw", compute) }
}

/// Destroys the stream, in the context it was made in, whichever thread calls. Work already in
/// it still completes. Null does nothing; a stream destroyed already is
/// `CUDYN_ERROR_INVALID_ARGUMENT`.
#[no_mangle]
pub extern "C" fn cudyn_stream_destroy(stream: *mut cudyn_stream) -> cudyn_status {
    entry(|| {
        // A launch on another thread may still hold the stream: it is destroyed when that
        // launch returns, and only a destroy here can report its outcome.
        if let Some(stream) = STREAMS.remove(stream)?.and_then(Arc::into_inner) {
            stream.destroy()?;
        }
        Ok(())
    })
}
