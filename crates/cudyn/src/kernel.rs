//! [`Kernel`]: a kernel of a [`Library`]: its name, parameter layout and attributes, and its
//! raw handle, which the runtime and the driver share (`cudaKernel_t` is `CUkernel`).
//!
//! Launching is in [`crate::launch`].

use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

use crate::context;
use crate::device::{initialized_driver, Device};
use crate::error::Result;
use crate::image::Image;
use crate::library::Library;
use crate::sys::driver::{self, CUfunction, CUkernel};
use crate::sys::{call, runtime, static_c_str, Api};

/// A kernel handle, cheap to clone. It keeps the [`Library`] it came from loaded.
///
/// The handle is context-independent: the same `Kernel` launches on any device, from any thread.
#[derive(Debug, Clone)]
pub struct Kernel {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    raw: CUkernel,
    /// Keeps the library loaded; `None` for a handle from elsewhere (`Kernel::from_raw`).
    library: Option<Library>,
    name: OnceLock<Result<String>>,
    params: OnceLock<Result<Box<[Param]>>>,
}

// SAFETY: a kernel handle is context-independent and not tied to a host thread; the driver's
// kernel calls and launches are thread-safe.
unsafe impl Send for Inner {}
// SAFETY: shared access only reads the handle and the caches, which are OnceLocks.
unsafe impl Sync for Inner {}

/// Where one kernel parameter lies in the device-side parameter buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Param {
    /// Byte offset from the start of the parameter buffer.
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
}

/// A kernel attribute, read per device with [`Kernel::attribute`]; the ones the driver lets
/// change are set with [`Kernel::set_attribute`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KernelAttribute {
    /// Most threads per block this kernel can be launched with (registers limit it).
    MaxThreadsPerBlock,
    /// Statically allocated shared memory per block, in bytes.
    SharedSizeBytes,
    /// Constant memory used, in bytes.
    ConstSizeBytes,
    /// Local memory per thread, in bytes.
    LocalSizeBytes,
    /// Registers per thread.
    NumRegisters,
    /// PTX version the kernel was compiled from (e.g. 90 for 9.0).
    PtxVersion,
    /// SASS architecture of the binary (e.g. 90 for sm_90).
    BinaryVersion,
    /// Most dynamic shared memory a launch may ask for; settable, up to the device's opt-in limit.
    MaxDynamicSharedSizeBytes,
    /// Preferred shared memory carve-out, in percent of the L1/shared capacity; settable.
    PreferredSharedMemoryCarveout,
    /// Required cluster width, 0 when none; settable before first launch.
    RequiredClusterWidth,
    /// Required cluster height, 0 when none; settable before first launch.
    RequiredClusterHeight,
    /// Required cluster depth, 0 when none; settable before first launch.
    RequiredClusterDepth,
    /// Whether cluster sizes above the portable 8 blocks are allowed; settable.
    NonPortableClusterSizeAllowed,
}

impl KernelAttribute {
    /// The driver's attribute number (the runtime's `cudaFuncAttribute` uses the same numbers).
    pub fn as_raw(self) -> driver::CUfunction_attribute {
        match self {
            Self::MaxThreadsPerBlock => driver::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            Self::SharedSizeBytes => driver::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
            Self::ConstSizeBytes => driver::CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES,
            Self::LocalSizeBytes => driver::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
            Self::NumRegisters => driver::CU_FUNC_ATTRIBUTE_NUM_REGS,
            Self::PtxVersion => driver::CU_FUNC_ATTRIBUTE_PTX_VERSION,
            Self::BinaryVersion => driver::CU_FUNC_ATTRIBUTE_BINARY_VERSION,
            Self::MaxDynamicSharedSizeBytes => {
                driver::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            }
            Self::PreferredSharedMemoryCarveout => {
                driver::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
            }
            Self::RequiredClusterWidth => driver::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
            Self::RequiredClusterHeight => driver::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT,
            Self::RequiredClusterDepth => driver::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH,
            Self::NonPortableClusterSizeAllowed => {
                driver::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
            }
        }
    }
}

/// The parameter-info query stops at the first index the driver refuses; a kernel's parameter
/// buffer is at most 32 764 bytes, so no kernel has more parameters than this.
const MAX_PARAMS: usize = 32_768;

impl Kernel {
    pub(crate) fn new(raw: CUkernel, library: Option<Library>) -> Kernel {
        Kernel {
            inner: Arc::new(Inner {
                raw,
                library,
                name: OnceLock::new(),
                params: OnceLock::new(),
            }),
        }
    }

    /// A kernel of `library` looked up by its exact symbol `name`.
    pub(crate) fn named(raw: CUkernel, library: Library, name: &str) -> Kernel {
        let kernel = Kernel::new(raw, Some(library));
        // Known from the lookup: this saves a cuKernelGetName call, which drivers before 12.3
        // lack, and lets offline parameter layouts find the kernel there.
        let _ = kernel.inner.name.set(Ok(name.to_owned()));
        kernel
    }

    /// Wraps a kernel handle obtained elsewhere: from the runtime (`cudaLibraryGetKernel`,
    /// `cudaGetKernel`, cast to `CUkernel`), the driver, or another library or language.
    ///
    /// # Safety
    /// `raw` is a valid kernel handle, and the library (or, for `cudaGetKernel`, the module of
    /// the program) it belongs to stays loaded as long as the returned `Kernel` and its clones
    /// live. cudyn never unloads it.
    pub unsafe fn from_raw(raw: CUkernel) -> Kernel {
        Kernel::new(raw, None)
    }

    /// The handle, as the driver types it. It stays valid while this `Kernel` lives.
    pub fn as_raw(&self) -> CUkernel {
        self.inner.raw
    }

    /// The handle, as the runtime types it: the same pointer as [`Kernel::as_raw`].
    pub fn as_runtime_raw(&self) -> runtime::cudaKernel_t {
        self.inner.raw.cast()
    }

    /// The handle cast to `CUfunction`, as `cuLaunchKernel` and `cuFuncGetAttribute` accept it
    /// (they then act on the kernel in the current context).
    pub fn as_function(&self) -> CUfunction {
        self.inner.raw.cast()
    }

    /// The handle as the `const void*` "function" the runtime's `cudaLaunchKernel` and
    /// `cudaFuncGetAttributes` accept for a kernel handle.
    pub fn as_function_ptr(&self) -> *const c_void {
        self.inner.raw.cast_const().cast()
    }

    /// The library this kernel came from; `None` for [`Kernel::from_raw`].
    pub fn library(&self) -> Option<&Library> {
        self.inner.library.as_ref()
    }

    /// The kernel's name (`cuKernelGetName`), mangled if it lacks C linkage.
    pub fn name(&self) -> Result<&str> {
        self.inner
            .name
            .get_or_init(|| {
                let driver = initialized_driver()?;
                let mut name = std::ptr::null();
                // SAFETY: writes one pointer to a string the driver owns while the kernel's
                // library is loaded, which `self` guarantees; it is copied at once.
                unsafe { call!(driver, cuKernelGetName(&mut name, self.inner.raw)) }?;
                // SAFETY: null or a NUL-terminated string, valid now (see above).
                Ok(unsafe { static_c_str(name) }.unwrap_or_default())
            })
            .as_deref()
            .map_err(Clone::clone)
    }

    /// The kernel's name for messages, even when it cannot be read.
    pub(crate) fn display_name(&self) -> String {
        self.name()
            .map_or_else(|_| format!("{:p}", self.inner.raw), str::to_owned)
    }

    /// The parameter layout (`cuKernelGetParamInfo`): offset and size of every parameter, in
    /// order. Read from the driver once per kernel handle; with a driver older than 12.4, which
    /// lacks that query, read offline from the device code the library was loaded from.
    pub fn params(&self) -> Result<&[Param]> {
        self.inner
            .params
            .get_or_init(|| self.query_params())
            .as_deref()
            .map_err(Clone::clone)
    }

    fn query_params(&self) -> Result<Box<[Param]>> {
        let driver = context::current()?.driver;
        if driver.api.cuKernelGetParamInfo.is_none() {
            let missing = || Api::missing(driver, "cuKernelGetParamInfo");
            let (Some(library), Ok(name)) = (self.library(), self.name()) else {
                return Err(missing());
            };
            return library
                .offline_params(name)
                .unwrap_or_else(|| Err(missing()));
        }
        let mut params = Vec::new();
        for index in 0..MAX_PARAMS {
            let (mut offset, mut size) = (0usize, 0usize);
            // SAFETY: writes two size_t; an index past the last parameter is an error status.
            let status = unsafe {
                call!(
                    driver,
                    cuKernelGetParamInfo(self.inner.raw, index, &mut offset, &mut size)
                )
            };
            match status {
                Ok(()) => params.push(Param { offset, size }),
                Err(error)
                    if error.cuda_code() == Some(driver::CUDA_ERROR_INVALID_VALUE as i32) =>
                {
                    break
                }
                Err(error) => return Err(self.with_library_log(error)),
            }
        }
        Ok(params.into_boxed_slice())
    }

    /// An attribute of the kernel on `device` (`cuKernelGetAttribute`).
    pub fn attribute(&self, attribute: KernelAttribute, device: Device) -> Result<i32> {
        let driver = initialized_driver()?;
        let mut value = 0;
        // SAFETY: writes one int; kernel and device handles are valid.
        unsafe {
            call!(
                driver,
                cuKernelGetAttribute(
                    &mut value,
                    attribute.as_raw(),
                    self.inner.raw,
                    device.as_raw()
                )
            )
        }
        .map_err(|error| self.with_library_log(error))?;
        Ok(value)
    }

    /// Sets an attribute of the kernel on `device` (`cuKernelSetAttribute`), e.g.
    /// [`KernelAttribute::MaxDynamicSharedSizeBytes`] before a launch with more than 48 KiB of
    /// dynamic shared memory.
    pub fn set_attribute(
        &self,
        attribute: KernelAttribute,
        value: i32,
        device: Device,
    ) -> Result<()> {
        let driver = initialized_driver()?;
        // SAFETY: kernel and device handles are valid; a bad attribute or value is an error status.
        unsafe {
            call!(
                driver,
                cuKernelSetAttribute(attribute.as_raw(), value, self.inner.raw, device.as_raw())
            )
        }
        .map_err(|error| self.with_library_log(error))
    }

    /// `error` with the JIT logs of the kernel's library attached.
    pub(crate) fn with_library_log(&self, error: crate::Error) -> crate::Error {
        match &self.inner.library {
            Some(library) => library.jit_log().attach(error),
            None => error,
        }
    }
}

/// The parameter layout of `kernel` read offline from device code (a cubin's `.nv.info`, or PTX):
/// what [`Kernel::params`] uses when the driver cannot be asked.
pub(crate) fn params_from_image(image: &[u8], kernel: &str) -> Result<Box<[Param]>> {
    let layout = Image::new(image)?.param_layout(kernel)?;
    Ok(layout
        .into_iter()
        .map(|param| Param {
            offset: param.offset,
            size: param.size,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::{Arch, Output, Program};

    const SAXPY: &str = r#"
        extern "C" __global__ void saxpy(float a, const float *x, const float *y, float *out,
                                         size_t n) {
            size_t i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) out[i] = a * x[i] + y[i];
        }"#;

    #[test]
    fn offline_layouts_follow_the_c_abi_of_the_signature() {
        // float at 0; three pointers and a size_t, 8-byte aligned, at 8, 16, 24 and 32.
        let expected = [(0, 4), (8, 8), (16, 8), (24, 8), (32, 8)];
        for output in [Output::Cubin, Output::Ptx] {
            let compiled = Program::new(SAXPY)
                .arch(Arch::new(9, 0))
                .output(output)
                .compile()
                .expect("NVRTC compiles (run scripts/cuda-wheels and activate its venv)");
            let params = params_from_image(compiled.code(), "saxpy").unwrap();
            let layout: Vec<(usize, usize)> = params.iter().map(|p| (p.offset, p.size)).collect();
            assert_eq!(layout, expected, "{output:?}");
        }
        assert!(params_from_image(b"garbage", "saxpy").is_err());
    }
}
