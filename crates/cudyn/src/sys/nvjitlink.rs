//! nvJitLink (`libnvJitLink.so`): links device code at run time, with link-time optimization.

use super::locate::Component;
use super::{call, ApiTable, Opened, Unversioned};
use crate::error::{CallError, Result};
use crate::version::Version;

super::bindings!("nvjitlink.rs");

/// The oldest nvJitLink cudyn opens: 12.3 added `nvJitLinkVersion`, without which cudyn cannot
/// tell which PTX and LTO-IR a library accepts.
pub const MIN_VERSION: Version = Version::new(12, 3);

/// The opened nvJitLink library.
pub type NvJitLink = Opened<NvJitLinkApi>;

impl ApiTable for NvJitLinkApi {
    const COMPONENT: Component = Component::NvJitLink;
    const MIN_VERSION: Version = MIN_VERSION;
    type Status = nvJitLinkResult;
    const SUCCESS: nvJitLinkResult = NVJITLINK_SUCCESS;

    fn read_version(nvjitlink: &Unversioned<'_, Self>) -> Result<Version> {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: nvJitLinkVersion writes two unsigned ints.
        unsafe { call!(nvjitlink, nvJitLinkVersion(&mut major, &mut minor)) }?;
        Ok(Version::new(major, minor))
    }

    fn error(&self, call: &'static str, status: nvJitLinkResult) -> CallError {
        let name = status_name(status);
        CallError {
            api: Component::NvJitLink,
            call,
            code: status as i32,
            name: name.map_or_else(|| format!("NVJITLINK_STATUS_{status}"), str::to_owned),
            message: describe(status).to_owned(),
            log: None,
            hint: None,
        }
    }
}

/// nvJitLink has no function describing its statuses; these are the header's descriptions.
fn describe(status: nvJitLinkResult) -> &'static str {
    match status {
        NVJITLINK_ERROR_UNRECOGNIZED_OPTION => "an option was not recognized",
        NVJITLINK_ERROR_MISSING_ARCH => "no -arch option was given",
        NVJITLINK_ERROR_INVALID_INPUT => "an input is invalid",
        NVJITLINK_ERROR_PTX_COMPILE => "compiling PTX failed (see the error log)",
        NVJITLINK_ERROR_NVVM_COMPILE => "compiling LTO-IR failed (see the error log)",
        NVJITLINK_ERROR_INTERNAL => "internal nvJitLink error",
        NVJITLINK_ERROR_THREADPOOL => "nvJitLink's thread pool failed",
        NVJITLINK_ERROR_UNRECOGNIZED_INPUT => "an input is of an unrecognized kind",
        NVJITLINK_ERROR_FINALIZE => "finalizing the link failed",
        NVJITLINK_ERROR_NULL_INPUT => "an input is null",
        NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS => "options are incompatible",
        NVJITLINK_ERROR_INCORRECT_INPUT_TYPE => "an input does not match its declared type",
        NVJITLINK_ERROR_ARCH_MISMATCH => "an input was built for another architecture",
        NVJITLINK_ERROR_OUTDATED_LIBRARY => "an input is newer than this nvJitLink",
        NVJITLINK_ERROR_MISSING_FATBIN => "a fatbin input is missing",
        NVJITLINK_ERROR_UNRECOGNIZED_ARCH => "the architecture is not recognized",
        NVJITLINK_ERROR_UNSUPPORTED_ARCH => "the architecture is not supported",
        NVJITLINK_ERROR_LTO_NOT_ENABLED => "link-time optimization is not enabled (-lto)",
        _ => "unknown nvJitLink status",
    }
}
