//! The CUDA driver API (`libcuda.so.1`).

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
    include!("generated/driver.rs");
}
pub use generated::*;

/// The oldest driver cudyn supports: 12.0 introduced the context-independent `cuLibrary*` API.
pub const MIN_VERSION: Version = Version::new(12, 0);

/// The opened CUDA driver.
#[derive(Debug)]
pub struct Driver {
    /// Where it was opened from.
    pub library: OpenedLibrary,
    /// Its entry points.
    pub api: DriverApi,
    /// The CUDA version it supports (`cuDriverGetVersion`), e.g. 13.0.
    pub version: Version,
}

impl Driver {
    pub(crate) fn open(search: &SearchPath) -> Result<Self> {
        let library = locate::open(search, Component::Driver)?;
        let api = DriverApi::resolve(&library.library);
        let mut driver = Driver {
            library,
            api,
            version: Version::new(0, 0),
        };
        let mut encoded = 0;
        // SAFETY: cuDriverGetVersion writes one int and needs no cuInit.
        unsafe { call!(&driver, cuDriverGetVersion(&mut encoded)) }?;
        driver.version = Version::from_cuda_int(encoded);
        super::require_version(&driver.library, driver.version, MIN_VERSION)?;
        Ok(driver)
    }
}

impl Api for Driver {
    type Status = CUresult;
    const SUCCESS: CUresult = CUDA_SUCCESS;

    fn library(&self) -> &OpenedLibrary {
        &self.library
    }

    fn error(&self, call: &'static str, status: CUresult) -> CallError {
        let mut name = std::ptr::null();
        let mut message = std::ptr::null();
        // SAFETY: both functions write a pointer to a static string, or leave it null for an
        // unknown status.
        unsafe {
            if let Some(get_name) = self.api.cuGetErrorName {
                get_name(status, &mut name);
            }
            if let Some(get_string) = self.api.cuGetErrorString {
                get_string(status, &mut message);
            }
        }
        CallError {
            api: Component::Driver,
            call,
            code: status as i32,
            // SAFETY: null or the driver's static strings.
            name: unsafe { static_c_str(name) }.unwrap_or_else(|| "CUDA_ERROR_UNKNOWN".into()),
            // SAFETY: as above.
            message: unsafe { static_c_str(message) }
                .unwrap_or_else(|| "unknown driver status".into()),
            log: None,
        }
    }
}
