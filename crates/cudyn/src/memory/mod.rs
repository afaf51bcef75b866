//! Just enough device memory for kernels: a typed buffer, views of it, and copies to and from the
//! host. cudyn is not a memory library; this is what launching, testing and benchmarking need.

use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};

use crate::api::driver as api;
use crate::context::{self, Current};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::raw::{CUcontext, CUdeviceptr};

mod pack;
mod repr;

pub use pack::Pack;
#[doc(hidden)]
pub use repr::derive_support;
#[cfg(feature = "bytemuck")]
pub use repr::Bytemuck;
pub use repr::DeviceRepr;

/// A typed allocation in device memory of the current device.
///
/// Its contents after [`DeviceBuffer::alloc`] are unspecified but valid `T`s (see [`DeviceRepr`]).
/// Pass `&buffer` or `&mut buffer` to a kernel expecting a `T*`.
///
/// The buffer remembers the context it was allocated in (the current device's primary context)
/// and is freed there, whichever thread frees it and whatever that thread's current context is.
/// [`DeviceBuffer::free`] returns the outcome; dropping the buffer frees it too and hands a
/// failure to the hook of [`set_drop_error_hook`](crate::context::set_drop_error_hook).
///
/// ```no_run
/// use cudyn::DeviceBuffer;
///
/// let mut buffer = DeviceBuffer::from_slice(&[1.0f32, 2.0, 3.0, 4.0])?;
/// buffer.slice_mut(2..)?.copy_from(&[30.0, 40.0])?;
/// assert_eq!(buffer.to_vec()?, [1.0, 2.0, 30.0, 40.0]);
/// // Dropping frees it too; `free` reports a failure instead of handing it to the hook.
/// buffer.free()?;
/// # Ok::<(), cudyn::Error>(())
/// ```
#[derive(Debug)]
pub struct DeviceBuffer<T: DeviceRepr> {
    // The kernel argument is the address of this field, so it must stay a CUdeviceptr.
    pub(crate) ptr: CUdeviceptr,
    len: usize,
    /// The context and device of the allocation; `None` for an empty buffer, which has none.
    home: Option<(CUcontext, Device)>,
    _type: PhantomData<T>,
}

// SAFETY: device memory is not tied to a host thread; the driver calls on it are thread-safe.
unsafe impl<T: DeviceRepr> Send for DeviceBuffer<T> {}
// SAFETY: shared access only reads the pointer and length.
unsafe impl<T: DeviceRepr> Sync for DeviceBuffer<T> {}

impl<T: DeviceRepr> DeviceBuffer<T> {
    /// `len` elements of device memory on the current device, contents unspecified.
    pub fn alloc(len: usize) -> Result<Self> {
        let bytes = byte_len::<T>(len)?;
        let (mut ptr, mut home) = (0, None);
        // An empty buffer needs no device, so it can be made (and launched with) anywhere.
        if bytes > 0 {
            let Current {
                driver,
                context,
                device,
                ..
            } = context::current()?;
            ptr = api::mem_alloc(driver, bytes)?;
            home = Some((context, device));
        }
        Ok(DeviceBuffer {
            ptr,
            len,
            home,
            _type: PhantomData,
        })
    }

    /// `len` elements set to all-zero bytes.
    pub fn zeroed(len: usize) -> Result<Self> {
        let mut buffer = Self::alloc(len)?;
        buffer.fill_bytes(0)?;
        Ok(buffer)
    }

    /// A copy of `data` in device memory.
    pub fn from_slice(data: &[T]) -> Result<Self> {
        let mut buffer = Self::alloc(data.len())?;
        buffer.copy_from(data)?;
        Ok(buffer)
    }

    /// The device the buffer was allocated on; `None` for an empty buffer, which has no
    /// allocation.
    pub fn device(&self) -> Option<Device> {
        self.home.map(|(_, device)| device)
    }

    /// Frees the buffer now, in the context it was allocated in, and says whether that worked;
    /// dropping it does the same but can only report a failure to the drop-error hook.
    ///
    /// Like `cudaFree`, this does not wait for work still using the buffer: the memory is
    /// released once that work is done.
    pub fn free(self) -> Result<()> {
        let buffer = std::mem::ManuallyDrop::new(self);
        buffer.release()
    }

    /// Frees the allocation in its own context; called once, by `free` or `drop`.
    fn release(&self) -> Result<()> {
        let Some((home, _)) = self.home else {
            return Ok(());
        };
        // SAFETY: the pointer came from cuMemAlloc in `home` and is freed once (the buffer is
        // being dropped or consumed).
        context::in_home(home, |driver| unsafe { api::mem_free(driver, self.ptr) })
    }

    /// Sets every byte to `value`, e.g. `0xff` to poison a float buffer with NaNs.
    pub fn fill_bytes(&mut self, value: u8) -> Result<()> {
        at_home(self.home, || self.as_slice_mut().fill_bytes(value))
    }

    /// Copies `data` (exactly `len` elements) from the host into the buffer.
    pub fn copy_from(&mut self, data: &[T]) -> Result<()> {
        at_home(self.home, || self.as_slice_mut().copy_from(data))
    }

    /// Copies the buffer into `out` (exactly `len` elements).
    pub fn copy_to(&self, out: &mut [T]) -> Result<()> {
        at_home(self.home, || self.as_slice().copy_to(out))
    }

    /// The contents, copied to the host.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        at_home(self.home, || self.as_slice().to_vec())
    }

    /// A view of the whole buffer.
    pub fn as_slice(&self) -> DeviceSlice<'_, T> {
        // SAFETY: the whole allocation, borrowed from the buffer.
        unsafe { DeviceSlice::from_raw_parts(self.ptr, self.len) }
    }

    /// A mutable view of the whole buffer.
    pub fn as_slice_mut(&mut self) -> DeviceSliceMut<'_, T> {
        // SAFETY: the whole allocation, borrowed mutably from the buffer.
        unsafe { DeviceSliceMut::from_raw_parts(self.ptr, self.len) }
    }

    /// A view of the elements in `range`.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceSlice<'_, T>> {
        let (start, len) = sub_range(self.len, range)?;
        // SAFETY: `sub_range` keeps the view inside the allocation, borrowed from the buffer.
        Ok(unsafe { DeviceSlice::from_raw_parts(self.element(start), len) })
    }

    /// A mutable view of the elements in `range`.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<DeviceSliceMut<'_, T>> {
        let (start, len) = sub_range(self.len, range)?;
        // SAFETY: `sub_range` keeps the view inside the allocation, borrowed mutably.
        Ok(unsafe { DeviceSliceMut::from_raw_parts(self.element(start), len) })
    }

    /// The device address of element `index` (at most `len`).
    fn element(&self, index: usize) -> CUdeviceptr {
        self.ptr + (index * size_of::<T>()) as CUdeviceptr
    }
}

impl<T: DeviceRepr> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if let Err(error) = self.release() {
            context::report_drop_error("DeviceBuffer", &error);
        }
    }
}

/// A view of part of a [`DeviceBuffer`]; pass it by value to a kernel expecting a `const T*`.
#[derive(Debug, Clone, Copy)]
pub struct DeviceSlice<'a, T: DeviceRepr> {
    // The kernel argument is the address of this field, so it must stay a CUdeviceptr.
    pub(crate) ptr: CUdeviceptr,
    len: usize,
    _buffer: PhantomData<&'a DeviceBuffer<T>>,
}

/// A mutable view of part of a [`DeviceBuffer`]; pass it by value to a kernel expecting a `T*`.
#[derive(Debug)]
pub struct DeviceSliceMut<'a, T: DeviceRepr> {
    // The kernel argument is the address of this field, so it must stay a CUdeviceptr.
    pub(crate) ptr: CUdeviceptr,
    len: usize,
    _buffer: PhantomData<&'a mut DeviceBuffer<T>>,
}

/// What a buffer and both views have: a length and a device address (0 for an empty buffer).
macro_rules! extent {
    ($($holder:ty),*) => { $(
        impl<T: DeviceRepr> $holder {
            /// The number of elements.
            pub fn len(&self) -> usize {
                self.len
            }

            /// Whether it holds no element.
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }

            /// The device address of the first element.
            pub fn as_raw(&self) -> CUdeviceptr {
                self.ptr
            }
        }
    )* };
}
extent!(DeviceBuffer<T>, DeviceSlice<'_, T>, DeviceSliceMut<'_, T>);

/// What both views have: construction from raw parts.
macro_rules! view_basics {
    ($($view:ident),*) => { $(
        impl<T: DeviceRepr> $view<'_, T> {
            /// A view of `len` elements at `ptr`.
            ///
            /// # Safety
            /// The `len` elements at `ptr` are device memory that outlives the view.
            pub(crate) unsafe fn from_raw_parts(ptr: CUdeviceptr, len: usize) -> Self {
                $view {
                    ptr,
                    len,
                    _buffer: PhantomData,
                }
            }
        }
    )* };
}
view_basics!(DeviceSlice, DeviceSliceMut);

impl<T: DeviceRepr> DeviceSlice<'_, T> {
    /// Copies the view into `out` (exactly `len` elements).
    pub fn copy_to(&self, out: &mut [T]) -> Result<()> {
        check_len(self.len, out.len())?;
        // SAFETY: `out` has room for exactly `len` elements.
        unsafe { self.copy_to_raw(out.as_mut_ptr()) }
    }

    /// The contents, copied to the host.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut out = Vec::with_capacity(self.len);
        // SAFETY: the vector has room for `len` elements; the copy writes every byte of them
        // before the length is set, and any bytes are a valid T (DeviceRepr).
        unsafe {
            self.copy_to_raw(out.as_mut_ptr())?;
            out.set_len(self.len);
        }
        Ok(out)
    }

    /// Copies the view to `out`.
    ///
    /// # Safety
    /// `out` has room for `len` elements.
    pub(crate) unsafe fn copy_to_raw(&self, out: *mut T) -> Result<()> {
        let bytes = byte_len::<T>(self.len)?;
        if bytes == 0 {
            return Ok(());
        }
        let driver = context::current()?.driver;
        // SAFETY: the source bytes lie inside the allocation; the caller vouches for `out`.
        unsafe { api::memcpy_dtoh(driver, out.cast(), self.ptr, bytes) }
    }
}

impl<T: DeviceRepr> DeviceSliceMut<'_, T> {
    /// Sets every byte to `value`.
    pub fn fill_bytes(&mut self, value: u8) -> Result<()> {
        let bytes = byte_len::<T>(self.len)?;
        if bytes == 0 {
            return Ok(());
        }
        let driver = context::current()?.driver;
        // SAFETY: the bytes set lie inside the allocation, borrowed mutably; any bytes are a
        // valid T (DeviceRepr).
        unsafe { api::memset_d8(driver, self.ptr, value, bytes) }
    }

    /// Copies `data` (exactly `len` elements) from the host into the view.
    pub fn copy_from(&mut self, data: &[T]) -> Result<()> {
        check_len(self.len, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        let driver = context::current()?.driver;
        // SAFETY: the destination bytes lie inside the allocation, borrowed mutably; the source
        // is `data`, of the same length.
        unsafe { api::memcpy_htod(driver, self.ptr, data.as_ptr().cast(), size_of_val(data)) }
    }
}

/// Runs `copy`, a copy or fill of a buffer allocated in `home`, with that context current. A
/// synchronous copy is ordered on the default stream of the current context: in the buffer's
/// own, it waits for the work launched on the buffer's device before it, as `cudaMemcpy` on that
/// device would, even when the thread has another device current.
fn at_home<R>(home: Option<(CUcontext, Device)>, copy: impl FnOnce() -> Result<R>) -> Result<R> {
    match home {
        Some((context, _)) => context::in_home(context, |_| copy()),
        None => copy(),
    }
}

fn byte_len<T>(len: usize) -> Result<usize> {
    len.checked_mul(size_of::<T>()).ok_or(Error::SizeOverflow {
        len,
        element_bytes: size_of::<T>(),
    })
}

fn check_len(device: usize, host: usize) -> Result<()> {
    if device == host {
        Ok(())
    } else {
        Err(Error::CopyLengthMismatch { device, host })
    }
}

/// `(start, len)` of `range` within `0..len`.
fn sub_range(len: usize, range: impl RangeBounds<usize>) -> Result<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.saturating_add(1),
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    if start <= end && end <= len {
        Ok((start, end - start))
    } else {
        Err(Error::RangeOutsideBuffer { start, end, len })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ops::Bound;

    #[test]
    fn sub_ranges_are_bounded_by_the_buffer() {
        assert_eq!(sub_range(10, ..).unwrap(), (0, 10));
        assert_eq!(sub_range(10, 2..5).unwrap(), (2, 3));
        assert_eq!(sub_range(10, 2..=5).unwrap(), (2, 4));
        assert_eq!(sub_range(10, 10..).unwrap(), (10, 0));
        assert!(matches!(
            sub_range(10, 5..11),
            Err(Error::RangeOutsideBuffer {
                start: 5,
                end: 11,
                len: 10
            })
        ));
        assert!(sub_range(10, (Bound::Included(6), Bound::Excluded(5))).is_err());
        assert!(sub_range(10, ..=10).is_err());
    }

    #[test]
    fn copies_need_equal_lengths_and_sizes_that_fit() {
        assert!(check_len(3, 3).is_ok());
        assert!(matches!(
            check_len(3, 4),
            Err(Error::CopyLengthMismatch { device: 3, host: 4 })
        ));
        assert!(matches!(
            byte_len::<u64>(usize::MAX / 4),
            Err(Error::SizeOverflow {
                element_bytes: 8,
                ..
            })
        ));
        assert_eq!(byte_len::<u64>(4).unwrap(), 32);
    }
}
