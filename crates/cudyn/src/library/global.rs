//! Device variables of a library: `__device__`, `__constant__` and `__managed__`.

use std::mem::MaybeUninit;

use super::Library;
use crate::context;
use crate::error::{Error, Result};
use crate::memory::{DeviceRepr, DeviceSlice, DeviceSliceMut};
use crate::raw::CUdeviceptr;

/// The variable `name` of `library` on the current device, as a `T` of exactly its size
/// (`managed`: a `__managed__` variable).
pub(super) fn variable<T: DeviceRepr>(
    library: &Library,
    name: &str,
    managed: bool,
) -> Result<Global<T>> {
    let c_name = crate::api::c_string("variable name", name)?;
    // Variables live in a context: the library is loaded into the current one if needed.
    context::current()?;
    // SAFETY: the library is loaded while `library` lives.
    let (ptr, bytes) = library
        .api()
        .and_then(|api| unsafe { api.variable(library.inner.raw, &c_name, managed) })
        .map_err(|error| library.inner.log.attach(error))?;
    if bytes != size_of::<T>() {
        return Err(Error::VariableSize {
            name: name.to_owned(),
            device_bytes: bytes,
            rust_type: std::any::type_name::<T>(),
            rust_bytes: size_of::<T>(),
        });
    }
    Ok(Global {
        ptr,
        managed,
        _library: library.clone(),
        _type: std::marker::PhantomData,
    })
}

/// A `__device__`, `__constant__` or `__managed__` variable of a [`Library`], typed as a `T` of
/// the variable's exact size. It keeps its library loaded.
///
/// ```no_run
/// use cudyn::Program;
///
/// let library = Program::new("__constant__ float scale; __device__ unsigned int calls;").load()?;
/// library.global::<f32>("scale")?.write(&2.5)?;
/// let calls = library.global::<u32>("calls")?.read()?;
/// # Ok::<(), cudyn::Error>(())
/// ```
#[derive(Debug)]
pub struct Global<T: DeviceRepr> {
    ptr: CUdeviceptr,
    managed: bool,
    _library: Library,
    _type: std::marker::PhantomData<T>,
}

impl<T: DeviceRepr> Global<T> {
    /// The variable's value, copied from the device once preceding work on the default stream is
    /// done.
    pub fn read(&self) -> Result<T> {
        let mut value = MaybeUninit::<T>::uninit();
        // SAFETY: the view covers exactly the variable (its size was checked against T); the
        // copy fills every byte of `value`, and any bytes are a valid T (DeviceRepr).
        unsafe {
            self.view().copy_to_raw(value.as_mut_ptr())?;
            Ok(value.assume_init())
        }
    }

    /// Sets the variable, copied to the device once preceding work on the default stream is done.
    pub fn write(&self, value: &T) -> Result<()> {
        // SAFETY: as in `view`.
        unsafe { DeviceSliceMut::from_raw_parts(self.ptr, 1) }
            .copy_from(std::slice::from_ref(value))
    }

    /// The variable's device address (for a managed variable, also valid on the host).
    pub fn as_raw(&self) -> CUdeviceptr {
        self.ptr
    }

    /// Whether this is a `__managed__` variable.
    pub fn is_managed(&self) -> bool {
        self.managed
    }

    fn view(&self) -> DeviceSlice<'_, T> {
        // SAFETY: the variable is one T (size checked) and lives while the library does, which
        // `self` keeps loaded.
        unsafe { DeviceSlice::from_raw_parts(self.ptr, 1) }
    }
}

// SAFETY: the variable's address is usable from any thread; copies are thread-safe driver calls.
unsafe impl<T: DeviceRepr> Send for Global<T> {}
// SAFETY: as above.
unsafe impl<T: DeviceRepr> Sync for Global<T> {}
