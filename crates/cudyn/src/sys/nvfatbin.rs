//! nvFatbin (`libnvfatbin.so`): builds fat binaries from cubins, PTX and LTO-IR.

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
    include!("generated/nvfatbin.rs");
}
pub use generated::*;

/// The oldest nvFatbin cudyn opens (the first release of the library).
pub const MIN_VERSION: Version = Version::new(12, 4);

/// The opened nvFatbin library.
#[derive(Debug)]
pub struct NvFatbin {
    /// Where it was opened from.
    pub library: OpenedLibrary,
    /// Its entry points.
    pub api: NvFatbinApi,
    /// Its version (`nvFatbinVersion`).
    pub version: Version,
}

impl NvFatbin {
    pub(crate) fn open(search: &SearchPath) -> Result<Self> {
        let library = locate::open(search, Component::NvFatbin)?;
        let api = NvFatbinApi::resolve(&library.library);
        let mut nvfatbin = NvFatbin {
            library,
            api,
            version: Version::new(0, 0),
        };
        let (mut major, mut minor) = (0, 0);
        // SAFETY: nvFatbinVersion writes two unsigned ints.
        unsafe { call!(&nvfatbin, nvFatbinVersion(&mut major, &mut minor)) }?;
        nvfatbin.version = Version::new(major, minor);
        super::require_version(&nvfatbin.library, nvfatbin.version, MIN_VERSION)?;
        Ok(nvfatbin)
    }
}

impl Api for NvFatbin {
    type Status = nvFatbinResult;
    const SUCCESS: nvFatbinResult = NVFATBIN_SUCCESS;

    fn library(&self) -> &OpenedLibrary {
        &self.library
    }

    fn error(&self, call: &'static str, status: nvFatbinResult) -> CallError {
        // SAFETY: nvFatbinGetErrorString returns a static string for any status.
        let message = unsafe {
            self.api
                .nvFatbinGetErrorString
                .and_then(|f| static_c_str(f(status)))
        };
        CallError {
            api: Component::NvFatbin,
            call,
            code: status as i32,
            name: status_name(status)
                .map_or_else(|| format!("NVFATBIN_STATUS_{status}"), str::to_owned),
            message: message.unwrap_or_else(|| "unknown nvFatbin status".into()),
            log: None,
        }
    }
}
