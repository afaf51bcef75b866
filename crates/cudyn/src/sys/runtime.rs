//! The CUDA runtime API (`libcudart.so`).

use super::locate::Component;
use super::{call, static_c_str, ApiTable, Opened, Unversioned};
use crate::error::{CallError, Result};
use crate::version::Version;

super::bindings!("runtime.rs");

/// The oldest runtime cudyn opens.
pub const MIN_VERSION: Version = Version::new(12, 0);

/// The first runtime with the library API (`cudaLibraryLoadData`, `cudaGetKernel`, ...). With an
/// older runtime cudyn loads through the driver's `cuLibrary*` API instead.
pub const LIBRARY_API_VERSION: Version = Version::new(12, 8);

/// The opened CUDA runtime.
pub type Runtime = Opened<RuntimeApi>;

impl Runtime {
    /// Whether this runtime has the library API (`cudaLibrary*`, `cudaGetKernel`): 12.8 or newer.
    pub fn has_library_api(&self) -> bool {
        self.version >= LIBRARY_API_VERSION && self.api.cudaLibraryLoadData.is_some()
    }
}

impl ApiTable for RuntimeApi {
    const COMPONENT: Component = Component::Runtime;
    const MIN_VERSION: Version = MIN_VERSION;
    type Status = cudaError_t;
    const SUCCESS: cudaError_t = cudaSuccess;

    fn read_version(runtime: &Unversioned<'_, Self>) -> Result<Version> {
        let mut encoded = 0;
        // SAFETY: cudaRuntimeGetVersion writes one int and needs neither a driver nor a device.
        unsafe { call!(runtime, cudaRuntimeGetVersion(&mut encoded)) }?;
        Ok(Version::from_cuda_int(encoded))
    }

    fn error(&self, call: &'static str, status: cudaError_t) -> CallError {
        // SAFETY: both functions return static strings for any status.
        let (name, message) = unsafe {
            (
                self.cudaGetErrorName.and_then(|f| static_c_str(f(status))),
                self.cudaGetErrorString
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
            hint: None,
        }
    }
}
