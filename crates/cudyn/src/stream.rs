//! Streams (queues of device work) and events (points in a stream that can be waited for and
//! timed). Launches without a stream go to the legacy default stream, as with the runtime.
//!
//! Both remember the context they were made in and are destroyed there, whichever thread drops
//! them; `destroy` returns the outcome, and a failure in `drop` goes to the hook of
//! [`set_drop_error_hook`](crate::context::set_drop_error_hook).

use std::mem::ManuallyDrop;
use std::time::Duration;

use crate::api::driver as api;
use crate::context::{self, Current};
use crate::device::Device;
use crate::error::Result;
use crate::raw::{CUcontext, CUevent, CUstream};

/// A stream on the current device of the thread that created it.
///
/// ```no_run
/// use cudyn::{DeviceBuffer, Event, LaunchConfig, Library, Stream};
///
/// let kernel = Library::from_file("kernels.cubin")?.kernel("fill")?;
/// let n = 1 << 20;
/// let mut out = DeviceBuffer::<u32>::zeroed(n)?;
/// let stream = Stream::new()?;
/// let (start, end) = (Event::new()?, Event::new()?);
/// start.record(Some(&stream))?;
/// // SAFETY: fill(out, n) writes out[i] for i < n, and `out` holds n values; the stream is
/// // synchronized before `out` is touched again.
/// unsafe {
///     kernel.launch(
///         &LaunchConfig::for_elements(n, 256).stream(&stream),
///         (&mut out, n as u64),
///     )
/// }?;
/// end.record(Some(&stream))?;
/// stream.synchronize()?;
/// println!("fill took {:?}", end.elapsed_since(&start)?);
/// # Ok::<(), cudyn::Error>(())
/// ```
#[derive(Debug)]
pub struct Stream {
    raw: CUstream,
    context: CUcontext,
    device: Device,
}

// SAFETY: a stream is not tied to a host thread; the driver's stream calls are thread-safe.
unsafe impl Send for Stream {}
// SAFETY: every method only hands the handle to thread-safe driver calls.
unsafe impl Sync for Stream {}

impl Stream {
    /// A new stream that, like `cudaStreamCreate`'s, synchronizes with the legacy default stream.
    pub fn new() -> Result<Stream> {
        let current = context::current()?;
        // Flags 0 are CU_STREAM_DEFAULT.
        let raw = api::stream_create(current.driver, 0)?;
        Ok(Stream {
            raw,
            context: current.context,
            device: current.device,
        })
    }

    /// Waits until all work in the stream is done.
    pub fn synchronize(&self) -> Result<()> {
        let Current { driver, .. } = context::current()?;
        // SAFETY: the stream is alive while `self` is.
        unsafe { api::stream_synchronize(driver, self.raw) }
    }

    /// Makes later work in this stream wait until `event` has happened.
    pub fn wait(&self, event: &Event) -> Result<()> {
        let Current { driver, .. } = context::current()?;
        // SAFETY: stream and event are alive while `self` and `event` are.
        unsafe { api::stream_wait_event(driver, self.raw, event.raw) }
    }

    /// The device the stream was made on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The driver's handle; the same value is a `cudaStream_t`.
    pub fn as_raw(&self) -> CUstream {
        self.raw
    }

    /// A `Stream` for a handle another library owns: the `ManuallyDrop` keeps cudyn from ever
    /// destroying it.
    ///
    /// # Safety
    /// `raw` is a stream of `context`, a context of `device` (or the null or per-thread default
    /// stream handle), and stays alive while the result is used.
    #[cfg(feature = "cudarc-any-version")]
    pub(crate) unsafe fn borrowed(
        raw: CUstream,
        context: CUcontext,
        device: Device,
    ) -> ManuallyDrop<Stream> {
        ManuallyDrop::new(Stream {
            raw,
            context,
            device,
        })
    }

    /// The context the stream was made in.
    #[cfg(feature = "cudarc-any-version")]
    pub(crate) fn context(&self) -> CUcontext {
        self.context
    }

    /// Destroys the stream now, in the context it was made in, and says whether that worked.
    /// Work already in the stream still completes, as the driver documents.
    pub fn destroy(self) -> Result<()> {
        ManuallyDrop::new(self).release()
    }

    /// Destroys the stream in its own context; called once, by `destroy` or `drop`.
    fn release(&self) -> Result<()> {
        // SAFETY: the stream is destroyed once: it is being consumed or dropped.
        context::in_home(self.context, |driver| unsafe {
            api::stream_destroy(driver, self.raw)
        })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Err(error) = self.release() {
            context::report_drop_error("Stream", &error);
        }
    }
}

/// An event: a marker recorded into a stream, used to wait for or time the work before it
/// ([`Stream`] shows both).
#[derive(Debug)]
pub struct Event {
    raw: CUevent,
    context: CUcontext,
}

// SAFETY: an event is not tied to a host thread; the driver's event calls are thread-safe.
unsafe impl Send for Event {}
// SAFETY: every method only hands the handle to thread-safe driver calls.
unsafe impl Sync for Event {}

impl Event {
    /// A new event that records timing.
    pub fn new() -> Result<Event> {
        let current = context::current()?;
        // Flags 0 are CU_EVENT_DEFAULT.
        let raw = api::event_create(current.driver, 0)?;
        Ok(Event {
            raw,
            context: current.context,
        })
    }

    /// Records the event at the current end of `stream` (the default stream when `None`).
    pub fn record(&self, stream: Option<&Stream>) -> Result<()> {
        let Current { driver, .. } = context::current()?;
        let stream = stream.map_or(std::ptr::null_mut(), Stream::as_raw);
        // SAFETY: event and stream are alive; a null stream is the default stream.
        unsafe { api::event_record(driver, self.raw, stream) }
    }

    /// Waits until the work before the event's last record is done.
    pub fn synchronize(&self) -> Result<()> {
        let Current { driver, .. } = context::current()?;
        // SAFETY: the event is alive while `self` is.
        unsafe { api::event_synchronize(driver, self.raw) }
    }

    /// The device time between `start` and this event, both recorded and completed.
    pub fn elapsed_since(&self, start: &Event) -> Result<Duration> {
        let Current { driver, .. } = context::current()?;
        // SAFETY: both events are alive while `self` and `start` are.
        let milliseconds = unsafe { api::event_elapsed_ms(driver, start.raw, self.raw) }?;
        Ok(Duration::from_secs_f64(
            f64::from(milliseconds.max(0.0)) / 1e3,
        ))
    }

    /// The driver's handle; the same value is a `cudaEvent_t`.
    pub fn as_raw(&self) -> CUevent {
        self.raw
    }

    /// Destroys the event now, in the context it was made in, and says whether that worked.
    pub fn destroy(self) -> Result<()> {
        ManuallyDrop::new(self).release()
    }

    /// Destroys the event in its own context; called once, by `destroy` or `drop`.
    fn release(&self) -> Result<()> {
        // SAFETY: the event is destroyed once: it is being consumed or dropped.
        context::in_home(self.context, |driver| unsafe {
            api::event_destroy(driver, self.raw)
        })
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if let Err(error) = self.release() {
            context::report_drop_error("Event", &error);
        }
    }
}
