//! The raw CUDA handle and number types of cudyn's public API, for interop with code that calls
//! the driver or the runtime itself.
//!
//! Every `as_raw` and `from_raw` of cudyn speaks in these types; they are the C types of the
//! CUDA headers, under their C names. The runtime's handles are the driver's under another name
//! (`cudaKernel_t` is `CUkernel`, `cudaLibrary_t` is `CUlibrary`, `cudaStream_t` is `CUstream`):
//! the same pointer, to an opaque type each header declares for itself, so a handle passes
//! between the two APIs with a pointer cast.
//!
//! These names are covered by cudyn's semantic versioning. The rest of the generated bindings
//! and the opened libraries' entry points (the hidden `cudyn::sys` module) are not: they follow
//! the CUDA headers cudyn is built from and may change in any release.
//!
//! ```no_run
//! use cudyn::raw::{cudaKernel_t, CUkernel};
//!
//! let library = cudyn::Library::from_file("device.fatbin")?;
//! let kernel = library.kernel("helloWorld")?;
//! let for_the_driver: CUkernel = kernel.as_raw();
//! let for_the_runtime: cudaKernel_t = kernel.as_runtime_raw();
//! assert_eq!(for_the_driver, for_the_runtime.cast());
//! # Ok::<(), cudyn::Error>(())
//! ```

#![allow(non_camel_case_types)]

pub use crate::sys::driver::{
    CUcontext, CUdevice, CUdevice_attribute, CUdeviceptr, CUevent, CUfunction,
    CUfunction_attribute, CUkernel, CUlibrary, CUstream,
};
pub use crate::sys::runtime::{cudaError_t, cudaKernel_t, cudaLibrary_t, cudaStream_t};
