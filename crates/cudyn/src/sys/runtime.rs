//! The CUDA runtime API (`libcudart.so`).

use super::locate::{self, Component, OpenedLibrary, SearchPath};
use super::{call, static_c_str, Api};
use crate::error::{CallError, Result};
use crate::version::Version;

#[allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    missing_docs,
    dead_code,
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    missing_debug_implementations
)]
mod generated {
    include!("generated/runtime.rs");
}
pub use generated::*;

/// The oldest runtime cudyn opens.
pub const MIN_VERSION: Version = Version::new(12, 0);

/// The first runtime with the library API (`cudaLibraryLoadData`, `cudaGetKernel`, ...). With an
/// older runtime cudyn loads through the driver's `cuLibrary*` API instead.
pub const LIBRARY_API_VERSION: Version = Version::new(12, 8);

/// The opened CUDA runtime.
#[derive(Debug)]
pub struct Runtime {
    /// Where it was opened from.
    pub library: OpenedLibrary,
    /// Its entry points.
    pub api: RuntimeApi,
    /// Its version (`cudaRuntimeGetVersion`), e.g. 13.0.
    pub version: Version,
}

impl Runtime {
    pub(crate) fn open(search: &SearchPath) -> Result<Self> {
        let library = locate::open(search, Component::Runtime)?;
        let api = RuntimeApi::resolve(&library.library);
        let mut runtime = Runtime {
            library,
            api,
            version: Version::new(0, 0),
        };
        let mut encoded = 0;
        // SAFETY: cudaRuntimeGetVersion writes one int and needs neither a driver nor a device.
        unsafe { call!(&runtime, cudaRuntimeGetVersion(&mut encoded)) }?;
        runtime.version = Version::from_cuda_int(encoded);
        super::require_version(&runtime.library, runtime.version, MIN_VERSION)?;
        Ok(runtime)
    }

    /// Whether this runtime has the library API (`cudaLibrary*`, `cudaGetKernel`): 12.8 or newer.
    pub fn has_library_api(&self) -> bool {
        self.version >= LIBRARY_API_VERSION && self.api.cudaLibraryLoadData.is_some()
    }
}

impl Api for Runtime {
    type Status = cudaError_t;
    const SUCCESS: cudaError_t = cudaSuccess;

    fn library(&self) -> &OpenedLibrary {
        &self.library
    }

    fn error(&self, call: &'static str, status: cudaError_t) -> CallError {
        // SAFETY: both functions return static strings for any status.
        let (name, message) = unsafe {
            (
                self.api
                    .cudaGetErrorName
                    .and_then(|f| static_c_str(f(status))),
                self.api
                    .cudaGetErrorString
                    .and_then(|f| static_c_str(f(status))),
            )
        };
        CallError {
            api: Component::Runtime,
            call,
            code: status as i32,
            name: name.unwrap_or_else(|| "cudaErrorUnknown".into()),
            message: message.unwrap_or_else(|| "unknown runtime status".into()),
            log: None,
        }
    }
}
