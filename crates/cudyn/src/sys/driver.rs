//! The CUDA driver API (`libcuda.so.1`).

use super::locate::Component;
use super::{call, static_c_str, ApiTable, Opened, Unversioned};
use crate::error::{CallError, Result};
use crate::version::Version;

super::bindings!("driver.rs");

/// The oldest driver cudyn supports: 12.0 introduced the context-independent `cuLibrary*` API.
pub const MIN_VERSION: Version = Version::new(12, 0);

/// The opened CUDA driver.
pub type Driver = Opened<DriverApi>;

impl ApiTable for DriverApi {
    const COMPONENT: Component = Component::Driver;
    const MIN_VERSION: Version = MIN_VERSION;
    type Status = CUresult;
    const SUCCESS: CUresult = CUDA_SUCCESS;

    fn read_version(driver: &Unversioned<'_, Self>) -> Result<Version> {
        let mut encoded = 0;
        // SAFETY: cuDriverGetVersion writes one int and needs no cuInit.
        unsafe { call!(driver, cuDriverGetVersion(&mut encoded)) }?;
        Ok(Version::from_cuda_int(encoded))
    }

    fn error(&self, call: &'static str, status: CUresult) -> CallError {
        let mut name = std::ptr::null();
        let mut message = std::ptr::null();
        // SAFETY: both functions write a pointer to a static string, or leave it null for an
        // unknown status.
        unsafe {
            if let Some(get_name) = self.cuGetErrorName {
                get_name(status, &mut name);
            }
            if let Some(get_string) = self.cuGetErrorString {
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
            hint: None,
        }
    }
}
