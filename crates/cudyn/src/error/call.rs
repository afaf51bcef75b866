//! A failed call into a CUDA library, as [`Error::Cuda`](super::Error::Cuda) and others carry it.

use std::fmt;

use crate::component::Component;

/// A call into a CUDA library that returned an error status.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallError {
    /// The library whose call failed.
    pub api: Component,
    /// The C function that failed, e.g. `cuLibraryLoadData`.
    pub call: &'static str,
    /// The numeric status it returned.
    pub code: i32,
    /// The status' symbolic name, e.g. `CUDA_ERROR_INVALID_PTX`.
    pub name: String,
    /// The library's description of the status.
    pub message: String,
    /// The compiler, linker or JIT log, when the call produces one.
    pub log: Option<String>,
    /// What the failure means and what to do, when cudyn can tell more than the status says
    /// (nvJitLink, for one, reports a missing definition as an internal error).
    pub hint: Option<String>,
}

impl std::error::Error for CallError {}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} failed ({}): {} ({}): {}",
            self.call, self.api, self.name, self.code, self.message
        )?;
        if let Some(hint) = &self.hint {
            write!(f, "\n{hint}")?;
        }
        if let Some(log) = &self.log {
            write!(f, "\nlog:\n{}", log.trim_end())?;
        }
        Ok(())
    }
}
