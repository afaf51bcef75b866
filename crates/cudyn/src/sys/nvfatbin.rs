//! nvFatbin (`libnvfatbin.so`): builds fat binaries from cubins, PTX and LTO-IR.

use super::locate::Component;
use super::{call, static_c_str, ApiTable, Opened, Unversioned};
use crate::error::{CallError, Result};
use crate::version::Version;

super::bindings!("nvfatbin.rs");

/// The oldest nvFatbin cudyn opens (the first release of the library).
pub const MIN_VERSION: Version = Version::new(12, 4);

/// The opened nvFatbin library.
pub type NvFatbin = Opened<NvFatbinApi>;

impl ApiTable for NvFatbinApi {
    const COMPONENT: Component = Component::NvFatbin;
    const MIN_VERSION: Version = MIN_VERSION;
    type Status = nvFatbinResult;
    const SUCCESS: nvFatbinResult = NVFATBIN_SUCCESS;

    fn read_version(nvfatbin: &Unversioned<'_, Self>) -> Result<Version> {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: nvFatbinVersion writes two unsigned ints.
        unsafe { call!(nvfatbin, nvFatbinVersion(&mut major, &mut minor)) }?;
        Ok(Version::new(major, minor))
    }

    fn error(&self, call: &'static str, status: nvFatbinResult) -> CallError {
        // SAFETY: nvFatbinGetErrorString returns a static string for any status.
        let message = unsafe {
            self.nvFatbinGetErrorString
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
            hint: None,
        }
    }
}
