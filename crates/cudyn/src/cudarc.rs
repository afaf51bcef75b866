//! Interoperation with [cudarc](https://docs.rs/cudarc) (feature `cudarc` or
//! `cudarc-any-version`): cudarc's slices,
//! views and streams in cudyn's checked launch, and cudyn's buffers and streams in cudarc's
//! copies and launches.
//!
//! # One context
//!
//! cudyn works in each device's primary context, the one the CUDA runtime uses. cudarc's
//! `CudaContext::new(ordinal)` retains that same primary context, so memory, streams and kernels
//! pass between the two with no copy. A cudarc context made otherwise (`new_non_primary`,
//! `new_cig`, `from_raw_context`) is a different context, whose memory and streams cudyn's
//! kernels cannot use: every conversion here checks the context and refuses another one with
//! [`Error::NotPrimaryContext`].
//!
//! # cudarc's memory in a cudyn launch
//!
//! [`LaunchStream`] turns a cudarc stream into the launch stream, and its [`read`] and
//! [`write`] turn cudarc slices and views into kernel arguments, read-only from a shared borrow
//! and writable from a mutable one, as cudyn's own [`DeviceSlice`] and [`DeviceSliceMut`] are:
//!
//! ```no_run
//! use cudarc::driver::CudaContext;
//! use cudyn::cudarc::LaunchStream;
//! use cudyn::{LaunchConfig, Program};
//!
//! const SAXPY: &str = r#"
//! extern "C" __global__ void saxpy(float a, const float *x, float *y, size_t n) {
//!     size_t i = blockIdx.x * blockDim.x + threadIdx.x;
//!     if (i < n) y[i] = a * x[i] + y[i];
//! }"#;
//!
//! let context = CudaContext::new(0)?; // the primary context of device 0, cudyn's too
//! let stream = context.new_stream()?;
//! let x = stream.clone_htod(&[1.0f32; 1024])?;
//! let mut y = stream.clone_htod(&[2.0f32; 1024])?;
//!
//! let saxpy = Program::new(SAXPY).load()?.kernel("saxpy")?;
//! let launch = LaunchStream::new(&stream)?;
//! let config = LaunchConfig::for_elements(1024, 256).stream(&launch);
//! // SAFETY: saxpy reads x[i] and writes y[i] for i < 1024, and both hold 1024 floats; the
//! // launch is on `stream`, where cudarc orders the copy below after it.
//! unsafe { saxpy.launch(&config, (2.0f32, launch.read(&x), launch.write(&mut y), 1024u64)) }?;
//! assert!(stream.clone_dtoh(&y)?.iter().all(|&v| v == 4.0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # cudyn's memory in cudarc
//!
//! [`DeviceSlice::for_cudarc`] and [`DeviceSliceMut::for_cudarc`] present a view of a cudyn
//! buffer as cudarc's `DevicePtr` and `DevicePtrMut`, which cudarc's copies (`memcpy_htod`,
//! `memcpy_dtoh`, `memcpy_dtod`, `memset_zeros`, ...) and its launch builder take; and
//! [`Stream::to_cudarc`] hands a cudyn stream to cudarc.
//!
//! ```no_run
//! use cudarc::driver::CudaContext;
//! use cudyn::DeviceBuffer;
//!
//! let context = CudaContext::new(0)?;
//! let stream = context.default_stream();
//! let mut buffer = DeviceBuffer::<f32>::zeroed(4)?;
//! stream.memcpy_htod(&[1.0f32, 2.0, 3.0, 4.0], &mut buffer.as_slice_mut().for_cudarc(&stream)?)?;
//! assert_eq!(buffer.to_vec()?, [1.0, 2.0, 3.0, 4.0]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Ordering
//!
//! cudarc orders work on its slices across its streams with events it records on each slice.
//! The arguments made by [`LaunchStream::read`] and [`LaunchStream::write`] take part: the
//! launch waits for earlier cudarc work on the slice, and later cudarc work waits for the
//! launch, provided the launch goes to that same [`LaunchStream`] (the launch-safety contract
//! of [`crate::launch`] asks the caller to order everything else).
//!
//! cudyn's buffers carry no events, so a cudarc operation on a view made by `for_cudarc`
//! synchronizes the stream once the operation is queued: when cudarc's call returns, the device
//! is done with the cudyn memory, and the view's borrow of the buffer covers all of its use, as
//! with cudyn's own copies. A kernel launched by cudarc on such a view is not waited for
//! (cudarc's launch is `unsafe`, and its caller keeps the buffer alive and unused until the
//! kernel completes).
//!
//! # cudarc's version
//!
//! The `cudarc` feature builds cudarc 0.19 with `fallback-dynamic-loading` (libcuda is opened at
//! run time, unless the program chooses another way for cudarc) and the CUDA 13.0 driver API
//! (`cuda-13000`), so building needs no CUDA install. cudarc builds for one CUDA version: a
//! program whose own cudarc names another (`cuda-12080`, ...) enables `cudarc-any-version`
//! instead, the same module with the version left to the program.
//!
//! [`read`]: LaunchStream::read
//! [`write`]: LaunchStream::write

use std::alloc::Layout;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::Arc;

use ::cudarc::driver::{
    sys as cudarc_sys, CudaContext, CudaStream, DevicePtr, DevicePtrMut,
    DeviceSlice as CudarcDeviceSlice, LaunchArgs, PushKernelArg, SyncOnDrop,
};

use crate::context::{self, primary_context};
use crate::ctype::ArgType;
use crate::device::{initialized_driver, Device};
use crate::error::{Error, Result};
use crate::launch::KernelArg;
use crate::memory::{DeviceRepr, DeviceSlice, DeviceSliceMut};
use crate::stream::Stream;
use crate::sys::driver::{CUcontext, CUdeviceptr};

/// The device of `context` after checking that `context` is that device's primary context, the
/// one cudyn works in; `what` names the handle in the error.
fn primary_device(context: &CudaContext, what: &'static str) -> Result<Device> {
    let device = Device::get(context.ordinal())?;
    let primary = primary_context(initialized_driver()?, device)?;
    if context.cu_ctx().cast::<c_void>() == primary.cast::<c_void>() {
        Ok(device)
    } else {
        Err(Error::NotPrimaryContext {
            what,
            device: device.ordinal(),
        })
    }
}

/// A cudarc stream as the stream of a cudyn launch: it dereferences to a [`Stream`], so
/// [`LaunchConfig::stream`](crate::LaunchConfig::stream) takes it, and it makes kernel
/// arguments of cudarc's slices and views ([`LaunchStream::read`], [`LaunchStream::write`])
/// that take part in cudarc's ordering on this stream.
///
/// It borrows the cudarc stream and never destroys it.
#[derive(Debug)]
pub struct LaunchStream<'a> {
    stream: ManuallyDrop<Stream>,
    cudarc: &'a CudaStream,
}

impl<'a> LaunchStream<'a> {
    /// The launch stream for `stream`, after checking that its context is its device's primary
    /// context ([`Error::NotPrimaryContext`] otherwise). That device becomes the calling thread's
    /// current device ([`crate::set_device`]), as cudarc's own calls bind their context, so that
    /// launches from this thread run in the stream's context.
    pub fn new(stream: &'a CudaStream) -> Result<Self> {
        let device = primary_device(stream.context(), "the cudarc stream")?;
        context::set_device(device.ordinal())?;
        let raw = stream.cu_stream().cast();
        let home: CUcontext = stream.context().cu_ctx().cast();
        // SAFETY: the handle is a stream of `home`, the primary context of `device` (checked),
        // or the null or per-thread default stream; cudarc keeps it alive while `stream` is
        // borrowed, which is as long as the result lives.
        let stream_view = unsafe { Stream::borrowed(raw, home, device) };
        Ok(LaunchStream {
            stream: stream_view,
            cudarc: stream,
        })
    }

    /// The cudarc stream.
    pub fn cudarc(&self) -> &'a CudaStream {
        self.cudarc
    }

    /// `slice` (a `CudaSlice`, `CudaView` or `CudaViewMut`) as a kernel argument the kernel only
    /// reads, a `const T*` on the device. The launch on this stream waits for cudarc's earlier
    /// writes of the slice, and cudarc's later writes wait for the launch.
    pub fn read<'b, T, S>(&'b self, slice: &'b S) -> CudarcArg<'b>
    where
        S: DevicePtr<T> + ?Sized,
    {
        let (ptr, order) = slice.device_ptr(self.cudarc);
        CudarcArg { ptr, _order: order }
    }

    /// `slice` (a `CudaSlice` or `CudaViewMut`) as a kernel argument the kernel may write, a
    /// `T*` on the device. The launch on this stream waits for cudarc's earlier reads and
    /// writes of the slice, and cudarc's later work on it waits for the launch.
    pub fn write<'b, T, S>(&'b self, slice: &'b mut S) -> CudarcArg<'b>
    where
        S: DevicePtrMut<T> + ?Sized,
    {
        let (ptr, order) = slice.device_ptr_mut(self.cudarc);
        CudarcArg { ptr, _order: order }
    }
}

impl Deref for LaunchStream<'_> {
    type Target = Stream;

    fn deref(&self) -> &Stream {
        &self.stream
    }
}

/// A cudarc slice or view as a kernel argument, made by [`LaunchStream::read`] or
/// [`LaunchStream::write`]: the kernel receives its device address. When the argument is
/// dropped (after the launch is queued), cudarc records that the launch used the slice.
#[derive(Debug)]
pub struct CudarcArg<'a> {
    // The kernel argument is the address of this field, so it must stay a CUdeviceptr.
    ptr: CUdeviceptr,
    _order: SyncOnDrop<'a>,
}

// SAFETY: the kernel receives the device address, which is the `ptr` field, a CUdeviceptr.
unsafe impl KernelArg for CudarcArg<'_> {
    const LAYOUT: Layout = Layout::new::<CUdeviceptr>();
    /// A pointer, its elements' type unseen (cudarc's slices do not say it in C terms): it
    /// passes any pointer parameter, and is refused for a number.
    const C_TYPE: ArgType = ArgType::Pointer {
        pointee: &ArgType::Unknown,
        read_only: false,
    };
    fn param(&self) -> *mut c_void {
        (&self.ptr as *const CUdeviceptr).cast_mut().cast()
    }
}

/// A view of a cudyn buffer as cudarc's `DevicePtr`, for cudarc's copies and launch builder;
/// made by [`DeviceSlice::for_cudarc`]. A cudarc copy from it has completed when cudarc's call
/// returns (see the [module documentation](self)).
#[derive(Debug)]
pub struct CudarcView<'a, T> {
    ptr: cudarc_sys::CUdeviceptr,
    len: usize,
    stream: &'a Arc<CudaStream>,
    _view: PhantomData<&'a [T]>,
}

/// A mutable view of a cudyn buffer as cudarc's `DevicePtrMut`, for cudarc's copies, fills and
/// launch builder; made by [`DeviceSliceMut::for_cudarc`]. A cudarc copy into it has completed
/// when cudarc's call returns (see the [module documentation](self)).
#[derive(Debug)]
pub struct CudarcViewMut<'a, T> {
    ptr: cudarc_sys::CUdeviceptr,
    len: usize,
    stream: &'a Arc<CudaStream>,
    _view: PhantomData<&'a mut [T]>,
}

impl<'a, T: DeviceRepr> DeviceSlice<'a, T> {
    /// This view as cudarc's `DevicePtr`, used with `stream` (whose context must be its
    /// device's primary context: [`Error::NotPrimaryContext`] otherwise).
    pub fn for_cudarc(self, stream: &'a Arc<CudaStream>) -> Result<CudarcView<'a, T>> {
        primary_device(stream.context(), "the cudarc stream")?;
        Ok(CudarcView {
            ptr: self.as_raw(),
            len: self.len(),
            stream,
            _view: PhantomData,
        })
    }
}

impl<'a, T: DeviceRepr> DeviceSliceMut<'a, T> {
    /// This view as cudarc's `DevicePtrMut`, used with `stream` (whose context must be its
    /// device's primary context: [`Error::NotPrimaryContext`] otherwise).
    pub fn for_cudarc(self, stream: &'a Arc<CudaStream>) -> Result<CudarcViewMut<'a, T>> {
        primary_device(stream.context(), "the cudarc stream")?;
        Ok(CudarcViewMut {
            ptr: self.as_raw(),
            len: self.len(),
            stream,
            _view: PhantomData,
        })
    }
}

/// cudarc's view of device memory, for both view types: its length and stream, and the device
/// address for reading; the operation is waited for when the `SyncOnDrop` drops, since cudyn's
/// memory carries no events that cudarc could order later work by.
macro_rules! cudarc_view {
    ($($view:ident),*) => { $(
        impl<T> CudarcDeviceSlice<T> for $view<'_, T> {
            fn len(&self) -> usize {
                self.len
            }
            fn stream(&self) -> &Arc<CudaStream> {
                self.stream
            }
        }

        impl<T> DevicePtr<T> for $view<'_, T> {
            fn device_ptr<'b>(
                &'b self,
                stream: &'b CudaStream,
            ) -> (cudarc_sys::CUdeviceptr, SyncOnDrop<'b>) {
                (self.ptr, SyncOnDrop::sync_stream(stream))
            }
        }
    )* };
}
cudarc_view!(CudarcView, CudarcViewMut);

impl<T> DevicePtrMut<T> for CudarcViewMut<'_, T> {
    fn device_ptr_mut<'b>(
        &'b mut self,
        stream: &'b CudaStream,
    ) -> (cudarc_sys::CUdeviceptr, SyncOnDrop<'b>) {
        (self.ptr, SyncOnDrop::sync_stream(stream))
    }
}

// SAFETY: the kernel receives the device address, the `ptr` field, borrowed for as long as the
// launch builder lives; cudarc's launch is `unsafe`, and its caller vouches for what the kernel
// does with the memory.
unsafe impl<'a, 'b: 'a, 'c: 'b, T> PushKernelArg<&'b CudarcView<'c, T>> for LaunchArgs<'a> {
    #[inline(always)]
    fn arg(&mut self, arg: &'b CudarcView<'c, T>) -> &mut Self {
        <Self as PushKernelArg<&'b u64>>::arg(self, &arg.ptr)
    }
}

// SAFETY: as for `CudarcView`; the view is borrowed mutably, so the kernel may write it.
unsafe impl<'a, 'b: 'a, 'c: 'b, T> PushKernelArg<&'b mut CudarcViewMut<'c, T>> for LaunchArgs<'a> {
    #[inline(always)]
    fn arg(&mut self, arg: &'b mut CudarcViewMut<'c, T>) -> &mut Self {
        <Self as PushKernelArg<&'b u64>>::arg(self, &arg.ptr)
    }
}

impl Stream {
    /// This stream as a cudarc stream of `context`, which must be the primary context of the
    /// stream's device ([`Error::NotPrimaryContext`], [`Error::DeviceMismatch`] otherwise).
    /// cudarc does not destroy it; cudyn still does, when `self` is dropped.
    ///
    /// # Safety
    /// The returned stream, and every clone of the `Arc`, is used only while `self` is alive
    /// (cudarc cannot know when cudyn destroys the stream), and work queued through it is
    /// ordered with work queued through `self` by the caller, as for any stream shared by two
    /// libraries.
    pub unsafe fn to_cudarc(&self, context: &Arc<CudaContext>) -> Result<Arc<CudaStream>> {
        let device = primary_device(context, "the cudarc context")?;
        if device != self.device() {
            return Err(Error::DeviceMismatch {
                what: "the cudarc context",
                found: device.ordinal(),
                expected: self.device().ordinal(),
            });
        }
        if self.context().cast::<c_void>() != context.cu_ctx().cast::<c_void>() {
            return Err(Error::NotPrimaryContext {
                what: "the cudyn stream",
                device: device.ordinal(),
            });
        }
        // SAFETY: the stream belongs to `context` (checked); the caller keeps it alive while the
        // result is used and orders the work on it.
        Ok(unsafe { context.wrap_borrowed_stream(self.as_raw().cast()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::param::ParamLayout;
    use crate::KernelArgs;

    #[test]
    fn a_cudarc_argument_is_passed_as_a_device_address() {
        assert_eq!(CudarcArg::LAYOUT, Layout::new::<u64>());
        let arg = CudarcArg {
            ptr: 0xdead_0000,
            _order: SyncOnDrop::Record(None),
        };
        let args = (1.0f32, arg, 7u32);
        assert_eq!(
            args.layouts(),
            [
                ParamLayout { offset: 0, size: 4 },
                ParamLayout { offset: 8, size: 8 },
                ParamLayout {
                    offset: 16,
                    size: 4
                },
            ]
        );
        args.with_pointers(|pointers| {
            // SAFETY: three pointers into `args`, alive here; the second at the device address.
            assert_eq!(unsafe { *(*pointers.add(1)).cast::<u64>() }, 0xdead_0000);
        });
    }
}
