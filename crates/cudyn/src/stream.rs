//! Streams (queues of device work) and events (points in a stream that can be waited for and
//! timed). Launches without a stream go to the legacy default stream, as with the runtime.

use std::time::Duration;

use crate::context::{self, Current};
use crate::error::Result;
use crate::sys::call;
use crate::sys::driver::{CUevent, CUstream};

/// A stream on the current device of the thread that created it; destroyed on drop.
#[derive(Debug)]
pub struct Stream {
    raw: CUstream,
}

// SAFETY: a stream is not tied to a host thread; the driver's stream calls are thread-safe.
unsafe impl Send for Stream {}
// SAFETY: every method only hands the handle to thread-safe driver calls.
unsafe impl Sync for Stream {}

impl Stream {
    /// A new stream that, like `cudaStreamCreate`'s, synchronizes with the legacy default stream.
    pub fn new() -> Result<Stream> {
        let Current { driver, .. } = context::current()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: writes one stream handle; a context is current. Flags 0 are CU_STREAM_DEFAULT.
        unsafe { call!(driver, cuStreamCreate(&mut raw, 0)) }?;
        Ok(Stream { raw })
    }

    /// Waits until all work in the stream is done.
    pub fn synchronize(&self) -> Result<()> {
        let Current { driver, .. } = context::current()?;
        // SAFETY: the stream is alive while `self` is.
        unsafe { call!(driver, cuStreamSynchronize(self.raw)) }
    }

    /// Makes later work in this stream wait until `event` has happened.
    pub fn wait(&self, event: &Event) -> Result<()> {
        let Current { driver, .. } = context::current()?;
        // SAFETY: stream and event are alive; flags must be 0.
        unsafe { call!(driver, cuStreamWaitEvent(self.raw, event.raw, 0)) }
    }

    /// The driver's handle; the same value is a `cudaStream_t`.
    pub fn as_raw(&self) -> CUstream {
        self.raw
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Ok(Current { driver, .. }) = context::current() {
            // SAFETY: destroyed once; pending work still completes, as the driver documents.
            let _ = unsafe { call!(driver, cuStreamDestroy_v2(self.raw)) };
        }
    }
}

/// An event: a marker recorded into a stream, used to wait for or time the work before it.
#[derive(Debug)]
pub struct Event {
    raw: CUevent,
}

// SAFETY: an event is not tied to a host thread; the driver's event calls are thread-safe.
unsafe impl Send for Event {}
// SAFETY: every method only hands the handle to thread-safe driver calls.
unsafe impl Sync for Event {}

impl Event {
    /// A new event that records timing.
    pub fn new() -> Result<Event> {
        let Current { driver, .. } = context::current()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: writes one event handle; a context is current. Flags 0 are CU_EVENT_DEFAULT.
        unsafe { call!(driver, cuEventCreate(&mut raw, 0)) }?;
        Ok(Event { raw })
    }

    /// Records the event at the current end of `stream` (the default stream when `None`).
    pub fn record(&self, stream: Option<&Stream>) -> Result<()> {
        let Current { driver, .. } = context::current()?;
        let stream = stream.map_or(std::ptr::null_mut(), Stream::as_raw);
        // SAFETY: event and stream are alive; a null stream is the default stream.
        unsafe { call!(driver, cuEventRecord(self.raw, stream)) }
    }

    /// Waits until the work before the event's last record is done.
    pub fn synchronize(&self) -> Result<()> {
        let Current { driver, .. } = context::current()?;
        // SAFETY: the event is alive.
        unsafe { call!(driver, cuEventSynchronize(self.raw)) }
    }

    /// The device time between `start` and this event, both recorded and completed.
    pub fn elapsed_since(&self, start: &Event) -> Result<Duration> {
        let Current { driver, .. } = context::current()?;
        let mut milliseconds = 0f32;
        // SAFETY: writes one float; both events are alive.
        unsafe {
            call!(
                driver,
                cuEventElapsedTime_v2(&mut milliseconds, start.raw, self.raw)
            )
        }?;
        Ok(Duration::from_secs_f64(
            f64::from(milliseconds.max(0.0)) / 1e3,
        ))
    }

    /// The driver's handle; the same value is a `cudaEvent_t`.
    pub fn as_raw(&self) -> CUevent {
        self.raw
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if let Ok(Current { driver, .. }) = context::current() {
            // SAFETY: destroyed once.
            let _ = unsafe { call!(driver, cuEventDestroy_v2(self.raw)) };
        }
    }
}
