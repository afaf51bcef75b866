//! One error type for everything cudyn does.
//!
//! Every failure says what was attempted and what to do about it: a library that was not found
//! lists every place searched, a failed CUDA call names the call, the CUDA error name and its text,
//! and carries the compiler's or JIT's log when there is one.

use std::fmt;
use std::path::PathBuf;

use crate::image::ImageKind;
use crate::sys::locate::Component;
use crate::version::Version;

/// The result type of every fallible cudyn call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in cudyn.
///
/// `Error` is `Clone` so that the outcome of opening a CUDA library, which happens once per
/// process, can be handed to every later caller.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A CUDA library was found in none of the places searched.
    #[error("{}", not_found_message(*component, searched))]
    LibraryNotFound {
        /// The library that was looked for.
        component: Component,
        /// Every place searched, in order, as "what: where".
        searched: Vec<String>,
    },

    /// A CUDA library was found but the system loader could not open it.
    #[error("{component}: cannot open {}: {reason}", path.display())]
    LibraryOpen {
        /// The library that was being opened.
        component: Component,
        /// The file (or soname) handed to the loader.
        path: PathBuf,
        /// What the loader said.
        reason: String,
    },

    /// An opened CUDA library lacks an entry point cudyn needs for the call being made.
    #[error(
        "{component} at {} has no entry point `{symbol}`: it is too old for this call; \
         install a newer one (cudyn is tested with CUDA 13.0)",
        path.display()
    )]
    MissingSymbol {
        /// The library that lacks the symbol.
        component: Component,
        /// Where that library was opened from.
        path: PathBuf,
        /// The missing entry point.
        symbol: &'static str,
    },

    /// An opened CUDA library is older than cudyn supports.
    #[error(
        "{component} at {} is version {found}, but cudyn needs {needed} or newer; \
         install a newer one or point CUDYN_LIBRARY_PATH at one",
        path.display()
    )]
    VersionTooOld {
        /// The library that is too old.
        component: Component,
        /// Where that library was opened from.
        path: PathBuf,
        /// The version found.
        found: Version,
        /// The oldest version cudyn accepts.
        needed: Version,
    },

    /// A call into a CUDA library returned an error status.
    #[error("{0}")]
    Cuda(Box<CallError>),

    /// The CUDA library search path was changed after a library had been opened.
    #[error(
        "the CUDA library search path cannot change now: {opened} is already open; \
         call cudyn::set_library_path before the first CUDA call"
    )]
    SearchPathFrozen {
        /// The library that was already open.
        opened: Component,
    },

    /// An argument given to cudyn is invalid; the message says which and why.
    #[error("{0}")]
    InvalidArgument(String),

    /// A library has no kernel of the name asked for.
    #[error("{}", kernel_not_found_message(name, available, log.as_deref()))]
    KernelNotFound {
        /// The name asked for.
        name: String,
        /// The kernels the library has, nearest to `name` first.
        available: Vec<String>,
        /// The JIT log of the library's load, when it said anything.
        log: Option<String>,
    },

    /// A device variable's size differs from the size of the Rust type it is read or written as.
    #[error(
        "device variable `{name}` is {device_bytes} bytes, but the Rust type {rust_type} is \
         {rust_bytes} bytes: use a type of the variable's exact size"
    )]
    VariableSize {
        /// The variable's name.
        name: String,
        /// Its size on the device.
        device_bytes: usize,
        /// The Rust type asked for.
        rust_type: &'static str,
        /// That type's size.
        rust_bytes: usize,
    },

    /// The arguments of a launch do not match the kernel's parameters; nothing was launched.
    #[error("kernel `{kernel}`: {mismatch}")]
    LaunchArguments {
        /// The kernel's name.
        kernel: String,
        /// What does not match.
        mismatch: crate::launch::ArgumentMismatch,
    },

    /// A launch configuration exceeds what the device or the kernel allows; nothing was launched.
    #[error("kernel `{kernel}`: {violation}")]
    LaunchConfig {
        /// The kernel's name.
        kernel: String,
        /// Which limit is exceeded.
        violation: crate::launch::ConfigViolation,
    },

    /// Device code was to be compiled for "this machine's GPU", but there is none to ask.
    #[error(
        "no target architecture: {reason}. Name one explicitly (Program::arch, \
         LinkOptions::arch, or `--arch sm_90` on the command line); without one cudyn compiles \
         SASS for GPU 0, which needs a driver and a GPU"
    )]
    ArchRequired {
        /// Why the current GPU's architecture could not be found.
        reason: String,
    },

    /// PTX was asked for, but the driver here is older than the compiler that would emit it, so
    /// the driver would reject it (`CUDA_ERROR_UNSUPPORTED_PTX_VERSION`).
    #[error(
        "{producer} {producer_version} emits PTX that this driver (CUDA {driver}) cannot load \
         (it would fail with CUDA_ERROR_UNSUPPORTED_PTX_VERSION). Fixes: compile to SASS for the \
         GPU instead (Output::Cubin, the default; `cudyn compile --cubin`), or finish the PTX to a \
         cubin with an nvJitLink at least as new as {producer} (cudyn::compile::ptx_to_cubin; it \
         may be newer than the driver); \
         to write PTX meant for another machine's driver, allow it explicitly \
         (Program::allow_newer_ptx, `--allow-newer-ptx`)"
    )]
    PtxNewerThanDriver {
        /// The library that would emit the PTX (NVRTC or nvJitLink).
        producer: Component,
        /// Its version, which is also the PTX ISA generation it emits.
        producer_version: Version,
        /// The CUDA version the driver supports.
        driver: Version,
    },

    /// Bytes handed to cudyn as device code are none of the kinds it knows.
    #[error("{what} is not device code: {reason}")]
    NotDeviceCode {
        /// What was examined: a file name, or "the N-byte image given".
        what: String,
        /// Why it is not device code, e.g. what its first bytes are.
        reason: String,
    },

    /// Device code of a known kind is damaged or truncated: it was refused before any CUDA call,
    /// because the driver trusts an image's own headers and would read past its end.
    #[error(
        "{what} is a damaged {kind}: {error}; rebuild it, or check that the file was copied whole"
    )]
    MalformedImage {
        /// What was examined: a file name, or "the N-byte image given".
        what: String,
        /// The kind the bytes were detected as.
        kind: ImageKind,
        /// What is wrong and where.
        error: crate::inspect::ParseError,
    },

    /// Device code of a kind CUDA cannot load as it is (LTO-IR, a host binary).
    #[error("{what} is {kind}, which the CUDA driver cannot load as it is: {advice}")]
    NotLoadable {
        /// What was examined: a file name, or "the N-byte image given".
        what: String,
        /// The kind the bytes were detected as.
        kind: ImageKind,
        /// What to do instead.
        advice: &'static str,
    },

    /// Relocatable device code (`-rdc`, or a cubin that is an object file) that must be linked
    /// before the driver can load it.
    #[error(
        "{what} must be linked before it is loaded: {reason}. Link it first with cudyn::Linker \
         (Linker::add, then Linker::finish) together with the device code it calls, and load the \
         linked image"
    )]
    NeedsLinking {
        /// What was examined: a file name, or "the N-byte image given".
        what: String,
        /// Which part is relocatable, e.g. "it is a relocatable cubin (ELF type ET_REL)".
        reason: String,
    },

    /// A file could not be read.
    #[error("cannot read {}: {reason}", path.display())]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        reason: String,
    },
}

impl Error {
    /// The failed CUDA call, when this error is one.
    pub fn call(&self) -> Option<&CallError> {
        match self {
            Error::Cuda(call) => Some(call),
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
            _ => None,
        }
    }
}

/// A call into a CUDA library that returned an error status.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} failed ({}): {} ({}): {}",
            self.call, self.api, self.name, self.code, self.message
        )?;
        if let Some(log) = &self.log {
            write!(f, "\nlog:\n{}", log.trim_end())?;
        }
        Ok(())
    }
}

fn not_found_message(component: Component, searched: &[String]) -> String {
    let mut text = format!(
        "{component} was not found (looked for {}).\nSearched, in order:\n",
        component.sonames().join(" or ")
    );
    for place in searched {
        text.push_str("  - ");
        text.push_str(place);
        text.push('\n');
    }
    text.push_str(component.install_hint());
    text
}

fn kernel_not_found_message(name: &str, available: &[String], log: Option<&str>) -> String {
    let mut text = format!("the library has no kernel named `{name}`");
    if available.is_empty() {
        text.push_str(" (it has no kernels)");
    } else {
        text.push_str("; it has, nearest first: ");
        text.push_str(&available.join(", "));
    }
    text.push_str(
        ". Declare the kernel extern \"C\" or ask for its mangled name (see Library::kernels)",
    );
    if let Some(log) = log {
        text.push_str("\nJIT log:\n");
        text.push_str(log.trim_end());
    }
    text
}
