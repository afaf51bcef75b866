//! What an [`Error`] tells beyond its message: its CUDA call, status and log, and the
//! constructors that keep a cause.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use super::{CallError, Error};

impl Error {
    /// [`Error::ReadFile`] for `path`, keeping the operating system's error as its source.
    pub fn read_file(path: impl Into<PathBuf>, error: io::Error) -> Error {
        Error::ReadFile {
            path: path.into(),
            source: Arc::new(error),
        }
    }

    /// [`Error::ArchRequired`] for code to be compiled for the current GPU, whose architecture
    /// could not be found because of `cause`.
    pub fn arch_required(cause: Error) -> Error {
        Error::ArchRequired {
            reason: cause.short_reason(),
            cause: Box::new(cause),
        }
    }

    /// A few words on why a CUDA library or the GPU could not be used, for messages whose fix is
    /// elsewhere: the full text of a [`Error::LibraryNotFound`] lists every place searched.
    fn short_reason(&self) -> String {
        match self {
            Error::LibraryNotFound { component, .. } => format!("no {component} was found"),
            Error::LibraryOpen { component, .. } => format!("the {component} could not be opened"),
            Error::VersionTooOld { component, .. } | Error::VersionUnreadable { component, .. } => {
                format!("the {component} is too old")
            }
            Error::Cuda(call) => format!("{} failed with {}", call.call, call.name),
            other => other
                .to_string()
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned(),
        }
    }

    /// The failed CUDA call, when this error is one.
    pub fn call(&self) -> Option<&CallError> {
        match self {
            Error::Cuda(call)
            | Error::KernelNotRegistered { call, .. }
            | Error::LinkedKernel { call, .. } => Some(call),
            _ => None,
        }
    }

    /// The CUDA status code, when this error is a failed CUDA call.
    pub fn cuda_code(&self) -> Option<i32> {
        self.call().map(|call| call.code)
    }

    /// The compiler, linker or JIT log attached to this error, if any.
    pub fn log(&self) -> Option<&str> {
        match self {
            Error::Cuda(call) => call.log.as_deref(),
            Error::KernelNotFound { log, .. } => log.as_deref(),
            Error::HeaderNotFound { log, .. } => Some(log),
            _ => None,
        }
    }
}
