//! The library API (`cudaLibrary*` / `cuLibrary*`): the one place that picks the runtime or the
//! driver for a library call.
//!
//! Both APIs take and return the same handles (a `cudaLibrary_t` is a `CUlibrary`, a
//! `cudaKernel_t` a `CUkernel`), and the runtime's JIT and library option numbers are the
//! driver's, so callers deal in driver types only and name the API once, as a [`Backend`].

use std::ffi::{c_void, CStr};

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::sys::driver::{CUdeviceptr, CUjit_option, CUkernel, CUlibrary, CUlibraryOption, Driver};
use crate::sys::runtime::{self, Runtime};
use crate::sys::{self, call};

/// The API that serves a library's calls.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LibraryApi {
    Runtime(&'static Runtime),
    Driver(&'static Driver),
}

/// The backend to use when none is asked for: the runtime when one with the library API is
/// found, else the driver.
impl Backend {
    /// The runtime when one with the library API is found, else the driver.
    pub fn preferred() -> Backend {
        preferred_backend()
    }
}

pub(crate) fn preferred_backend() -> Backend {
    match sys::runtime_if_found() {
        Some(runtime) if runtime.has_library_api() => Backend::Runtime,
        _ => Backend::Driver,
    }
}

/// Option arrays of a load call: JIT options and library options, each as the parallel arrays of
/// option numbers and values the C API takes.
#[derive(Debug)]
pub(crate) struct LoadOptions<'a> {
    pub(crate) jit: &'a mut [CUjit_option],
    pub(crate) jit_values: &'a mut [*mut c_void],
    pub(crate) library: &'a mut [CUlibraryOption],
    pub(crate) library_values: &'a mut [*mut c_void],
}

impl LibraryApi {
    /// The API for `backend`. The driver is required either way, and asked for first: every
    /// library lives in driver contexts, and a runtime without a driver would only report
    /// `cudaErrorInsufficientDriver` instead of where the driver was looked for.
    pub(crate) fn new(backend: Backend) -> Result<LibraryApi> {
        let driver = super::driver::initialized()?;
        match backend {
            Backend::Driver => Ok(LibraryApi::Driver(driver)),
            Backend::Runtime => {
                let runtime = sys::runtime()?;
                if runtime.has_library_api() {
                    Ok(LibraryApi::Runtime(runtime))
                } else {
                    Err(Error::VersionTooOld {
                        component: sys::locate::Component::Runtime,
                        path: runtime.library.path.clone(),
                        found: runtime.version,
                        needed: runtime::LIBRARY_API_VERSION,
                    })
                }
            }
        }
    }

    /// The backend this API is.
    pub(crate) fn backend(self) -> Backend {
        match self {
            LibraryApi::Runtime(_) => Backend::Runtime,
            LibraryApi::Driver(_) => Backend::Driver,
        }
    }

    /// `cudaLibraryLoadData` / `cuLibraryLoadData`.
    ///
    /// # Safety
    /// `image` is a whole, valid cubin, fatbin or NUL-terminated PTX that stays readable for the
    /// call (for the library's life when `CU_LIBRARY_BINARY_IS_PRESERVED` is set); every value in
    /// `options` is what its option number says (a log buffer of the size given next to it, ...)
    /// and stays valid as long as the driver may write it (log buffers: the library's life).
    pub(crate) unsafe fn load_data(
        self,
        image: *const c_void,
        options: LoadOptions<'_>,
    ) -> Result<CUlibrary> {
        let jit_count = options.jit.len().min(options.jit_values.len()) as u32;
        let library_count = options.library.len().min(options.library_values.len()) as u32;
        let (jit, jit_values) = (options.jit.as_mut_ptr(), options.jit_values.as_mut_ptr());
        let (library, library_values) = (
            options.library.as_mut_ptr(),
            options.library_values.as_mut_ptr(),
        );
        let mut raw: CUlibrary = std::ptr::null_mut();
        let out = &mut raw as *mut CUlibrary;
        // Both load calls take the same arguments after the handle slot.
        macro_rules! load {
            ($api:expr, $function:ident, $out:expr) => {
                call!(
                    $api,
                    $function(
                        $out,
                        image,
                        jit,
                        jit_values,
                        jit_count,
                        library,
                        library_values,
                        library_count
                    )
                )
            };
        }
        // SAFETY: one handle slot (the runtime's handle is the driver's pointer); the arrays hold
        // the counts given; the caller vouches for the image and the option values.
        unsafe {
            match self {
                LibraryApi::Runtime(rt) => load!(rt, cudaLibraryLoadData, out.cast()),
                LibraryApi::Driver(driver) => load!(driver, cuLibraryLoadData, out),
            }
        }?;
        Ok(raw)
    }

    /// `cudaLibraryGetKernel` / `cuLibraryGetKernel`.
    ///
    /// # Safety
    /// `library` is loaded.
    pub(crate) unsafe fn kernel(self, library: CUlibrary, name: &CStr) -> Result<CUkernel> {
        let mut raw: CUkernel = std::ptr::null_mut();
        // SAFETY: writes one kernel handle (a cudaKernel_t is a CUkernel); the name is
        // NUL-terminated; the caller vouches for the library.
        unsafe {
            match self {
                LibraryApi::Runtime(rt) => call!(
                    rt,
                    cudaLibraryGetKernel(
                        (&mut raw as *mut CUkernel).cast(),
                        library.cast(),
                        name.as_ptr()
                    )
                ),
                LibraryApi::Driver(driver) => {
                    call!(driver, cuLibraryGetKernel(&mut raw, library, name.as_ptr()))
                }
            }
        }?;
        Ok(raw)
    }

    /// `cudaLibraryGetKernelCount` / `cuLibraryGetKernelCount`.
    ///
    /// # Safety
    /// `library` is loaded.
    pub(crate) unsafe fn kernel_count(self, library: CUlibrary) -> Result<u32> {
        let mut count = 0;
        // SAFETY: writes one unsigned int; the caller vouches for the library.
        unsafe {
            match self {
                LibraryApi::Runtime(rt) => {
                    call!(rt, cudaLibraryGetKernelCount(&mut count, library.cast()))
                }
                LibraryApi::Driver(driver) => {
                    call!(driver, cuLibraryGetKernelCount(&mut count, library))
                }
            }
        }?;
        Ok(count)
    }

    /// `cudaLibraryEnumerateKernels` / `cuLibraryEnumerateKernels`: fills `kernels` (at most
    /// `u32::MAX` of them) with the library's first kernels.
    ///
    /// # Safety
    /// `library` is loaded.
    pub(crate) unsafe fn enumerate_kernels(
        self,
        library: CUlibrary,
        kernels: &mut [CUkernel],
    ) -> Result<()> {
        let count = u32::try_from(kernels.len()).unwrap_or(u32::MAX);
        let out = kernels.as_mut_ptr();
        // SAFETY: the slice has room for `count` handles; the caller vouches for the library.
        unsafe {
            match self {
                LibraryApi::Runtime(rt) => call!(
                    rt,
                    cudaLibraryEnumerateKernels(out.cast(), count, library.cast())
                ),
                LibraryApi::Driver(driver) => {
                    call!(driver, cuLibraryEnumerateKernels(out, count, library))
                }
            }
        }
    }

    /// `cudaLibraryGetGlobal` / `cuLibraryGetGlobal` (or the `Managed` calls when `managed`):
    /// the variable's address and size in the current context, loading the library there.
    ///
    /// # Safety
    /// `library` is loaded.
    pub(crate) unsafe fn variable(
        self,
        library: CUlibrary,
        name: &CStr,
        managed: bool,
    ) -> Result<(CUdeviceptr, usize)> {
        let mut ptr: CUdeviceptr = 0;
        let mut bytes = 0usize;
        let name = name.as_ptr();
        // SAFETY: writes one address (a CUdeviceptr is pointer-sized on the 64-bit hosts cudyn
        // supports) and one size; the name is NUL-terminated; the caller vouches for the library.
        unsafe {
            match self {
                LibraryApi::Runtime(rt) => {
                    let out = (&mut ptr as *mut CUdeviceptr).cast::<*mut c_void>();
                    if managed {
                        call!(
                            rt,
                            cudaLibraryGetManaged(out, &mut bytes, library.cast(), name)
                        )
                    } else {
                        call!(
                            rt,
                            cudaLibraryGetGlobal(out, &mut bytes, library.cast(), name)
                        )
                    }
                }
                LibraryApi::Driver(driver) => {
                    if managed {
                        call!(
                            driver,
                            cuLibraryGetManaged(&mut ptr, &mut bytes, library, name)
                        )
                    } else {
                        call!(
                            driver,
                            cuLibraryGetGlobal(&mut ptr, &mut bytes, library, name)
                        )
                    }
                }
            }
        }?;
        Ok((ptr, bytes))
    }

    /// `cudaLibraryUnload` / `cuLibraryUnload`.
    ///
    /// # Safety
    /// `library` was loaded through this API, is unloaded once, and nothing uses it afterwards.
    pub(crate) unsafe fn unload(self, library: CUlibrary) -> Result<()> {
        // SAFETY: the caller vouches for the handle.
        unsafe {
            match self {
                LibraryApi::Runtime(rt) => call!(rt, cudaLibraryUnload(library.cast())),
                LibraryApi::Driver(driver) => call!(driver, cuLibraryUnload(library)),
            }
        }
    }
}
