//! The smallest loading path there is: the CUDA runtime's library API called directly
//! (`cudaLibraryLoadData`, `cudaLibraryGetKernel`, `cudaLaunchKernel`), with just enough device
//! memory and timing for the compile tests and the compile benchmark.
//!
//! It stands in for cudyn's `Library` and `Kernel` until those are merged; it is also the "raw"
//! side the benchmarks compare cudyn with. Shared by tests/compile_gpu.rs and the programs of
//! `crates/cudyn-bench` (through `#[path]`), so not every item is used by each.
#![allow(dead_code)]

use std::ffi::{c_void, CString};

use cudyn::sys::runtime::{self, cudaEvent_t, cudaKernel_t, cudaLibrary_t, dim3};
use cudyn::sys::{self, Api};
use cudyn::{Error, Result};

/// Calls an entry point of an opened CUDA library (`$library`: a `sys::*()` opener) and turns its
/// status into a `Result`, like cudyn's internal `call!`.
macro_rules! raw_call {
    ($library:expr, $name:ident ( $($arg:expr),* $(,)? )) => {{
        match $library {
            Ok(library) => match library.api.$name {
                Some(function) => library.check(stringify!($name), function($($arg),*)),
                None => Err(library.missing(stringify!($name))),
            },
            Err(error) => Err(error),
        }
    }};
}

/// A runtime call through [`raw_call!`].
macro_rules! rt {
    ($($call:tt)*) => {
        raw_call!(sys::runtime(), $($call)*)
    };
}

/// A cubin of `source` for `arch` (e.g. `sm_90`), straight from NVRTC: the raw side of the
/// benchmark's comparison.
pub fn raw_nvrtc_cubin(source: &str, arch: &str) -> Result<Vec<u8>> {
    let source = CString::new(source).map_err(|_| Error::NulByte {
        what: "source",
        text: source.into(),
    })?;
    let option = CString::new(format!("-arch={arch}")).map_err(|_| Error::NulByte {
        what: "arch",
        text: arch.into(),
    })?;
    let options = [option.as_ptr()];
    let mut program = std::ptr::null_mut();
    // SAFETY: live C strings; the program is destroyed below whatever happens in between.
    unsafe {
        raw_call!(
            sys::nvrtc(),
            nvrtcCreateProgram(
                &mut program,
                source.as_ptr(),
                c"raw.cu".as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null()
            )
        )?;
        let cubin = (|| {
            raw_call!(
                sys::nvrtc(),
                nvrtcCompileProgram(program, 1, options.as_ptr())
            )?;
            let mut size = 0;
            raw_call!(sys::nvrtc(), nvrtcGetCUBINSize(program, &mut size))?;
            let mut cubin = vec![0u8; size];
            raw_call!(
                sys::nvrtc(),
                nvrtcGetCUBIN(program, cubin.as_mut_ptr().cast())
            )?;
            Ok(cubin)
        })();
        raw_call!(sys::nvrtc(), nvrtcDestroyProgram(&mut program))?;
        cubin
    }
}

/// A library loaded from memory, unloaded on drop.
pub struct RawLibrary {
    raw: cudaLibrary_t,
}

impl RawLibrary {
    /// `cudaLibraryLoadData` of a cubin, fatbin or NUL-terminated PTX, with no options.
    pub fn load(image: &[u8]) -> Result<RawLibrary> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: `image` is a complete image; the runtime copies what it keeps.
        unsafe {
            rt!(cudaLibraryLoadData(
                &mut raw,
                image.as_ptr().cast(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            ))
        }?;
        Ok(RawLibrary { raw })
    }

    /// The library handle, which the driver's library calls take as a `CUlibrary`.
    pub fn as_raw(&self) -> cudaLibrary_t {
        self.raw
    }

    /// `cudaLibraryGetKernel`.
    pub fn kernel(&self, name: &str) -> Result<cudaKernel_t> {
        let name = CString::new(name).map_err(|_| Error::NulByte {
            what: "kernel name",
            text: name.into(),
        })?;
        let mut kernel = std::ptr::null_mut();
        // SAFETY: the library is loaded and the name is a C string.
        unsafe { rt!(cudaLibraryGetKernel(&mut kernel, self.raw, name.as_ptr())) }?;
        Ok(kernel)
    }
}

impl Drop for RawLibrary {
    fn drop(&mut self) {
        // SAFETY: loaded once, unloaded once.
        let _ = unsafe { rt!(cudaLibraryUnload(self.raw)) };
    }
}

/// `cudaLaunchKernel` on a kernel handle, on the default stream. `args` points at each argument.
pub fn launch(kernel: cudaKernel_t, grid: u32, block: u32, args: &mut [*mut c_void]) -> Result<()> {
    let dim = |x| dim3 { x, y: 1, z: 1 };
    // SAFETY: the caller passes one pointer per kernel parameter, of the parameter's type.
    unsafe {
        rt!(cudaLaunchKernel(
            kernel as *const c_void,
            dim(grid),
            dim(block),
            args.as_mut_ptr(),
            0,
            std::ptr::null_mut(),
        ))
    }
}

/// `cudaDeviceSynchronize`.
pub fn synchronize() -> Result<()> {
    // SAFETY: no arguments.
    unsafe { rt!(cudaDeviceSynchronize()) }
}

/// Device memory holding `len` values of `T`, freed on drop.
pub struct DeviceBuffer<T: Copy> {
    pointer: *mut c_void,
    len: usize,
    marker: std::marker::PhantomData<T>,
}

impl<T: Copy> DeviceBuffer<T> {
    /// A copy of `values` on the device.
    pub fn from_slice(values: &[T]) -> Result<Self> {
        let bytes = std::mem::size_of_val(values);
        let mut pointer = std::ptr::null_mut();
        // SAFETY: allocates `bytes`, then copies exactly `bytes` from the host slice into them.
        unsafe {
            rt!(cudaMalloc(&mut pointer, bytes))?;
            rt!(cudaMemcpy(
                pointer,
                values.as_ptr().cast(),
                bytes,
                runtime::cudaMemcpyHostToDevice
            ))?;
        }
        Ok(DeviceBuffer {
            pointer,
            len: values.len(),
            marker: std::marker::PhantomData,
        })
    }

    /// The values, copied back to the host.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut values: Vec<T> = Vec::with_capacity(self.len);
        // SAFETY: copies `len` values into the vector's capacity, then sets its length.
        unsafe {
            rt!(cudaMemcpy(
                values.as_mut_ptr().cast(),
                self.pointer,
                self.len * std::mem::size_of::<T>(),
                runtime::cudaMemcpyDeviceToHost
            ))?;
            values.set_len(self.len);
        }
        Ok(values)
    }

    /// The device pointer, to pass by address as a kernel argument.
    pub fn pointer(&mut self) -> &mut *mut c_void {
        &mut self.pointer
    }
}

impl<T: Copy> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        // SAFETY: allocated once, freed once.
        let _ = unsafe { rt!(cudaFree(self.pointer)) };
    }
}

/// A CUDA event, destroyed on drop, for timing kernels on the GPU.
pub struct Event {
    raw: cudaEvent_t,
}

impl Event {
    /// `cudaEventCreate`.
    pub fn new() -> Result<Event> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: writes one event handle.
        unsafe { rt!(cudaEventCreate(&mut raw)) }?;
        Ok(Event { raw })
    }

    /// Records the event on the default stream.
    pub fn record(&self) -> Result<()> {
        // SAFETY: a live event, the default stream.
        unsafe { rt!(cudaEventRecord(self.raw, std::ptr::null_mut())) }
    }

    /// Milliseconds from `start` to this event, once this event has completed.
    pub fn elapsed_since(&self, start: &Event) -> Result<f32> {
        let mut milliseconds = 0.0;
        // SAFETY: two live events; waits for this one first.
        unsafe {
            rt!(cudaEventSynchronize(self.raw))?;
            rt!(cudaEventElapsedTime(&mut milliseconds, start.raw, self.raw))?;
        }
        Ok(milliseconds)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created once, destroyed once.
        let _ = unsafe { rt!(cudaEventDestroy(self.raw)) };
    }
}
