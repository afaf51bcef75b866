//! # cudyn
//!
//! Load GPU device code at run time the way the CUDA runtime does since 12.8
//! (`cudaLibraryLoadData`, `cudaLibraryGetKernel`, `cudaLaunchKernel` on a kernel handle), compile it
//! with NVRTC, link it with nvJitLink, and share kernel handles between the runtime and the driver.
//!
//! cudyn needs no CUDA at build time. Every CUDA library is found and opened at run time, on first
//! use, following one documented search order ([`sys::locate`]); a missing library is an
//! [`Error`] that lists every place searched, never a panic.
//!
//! ```no_run
//! // What was found where, and which GPUs there are: what `cudyn doctor` prints.
//! let report = cudyn::ToolchainReport::probe();
//! for component in &report.components {
//!     println!("{}: {}", component.component, component.summary());
//! }
//! ```
#![warn(missing_docs)]

mod api;
pub mod compile;
pub mod context;
pub mod device;
pub mod error;
pub mod image;
pub mod inspect;
pub mod kernel;
pub mod launch;
pub mod library;
pub mod memory;
pub mod param;
pub mod stream;
pub mod sys;
pub mod toolchain;
pub mod version;

pub use compile::{Compiled, Linker, Program};
pub use context::{current_device, set_device, synchronize};
pub use device::{Device, DeviceLimits};
pub use error::{CallError, Error, Result};
pub use image::{Image, ImageKind};
pub use inspect::{Inspection, ParseError};
pub use kernel::{Kernel, KernelAttribute};
pub use launch::{
    ArgList, ArgumentMismatch, ConfigViolation, Dim3, KernelArg, KernelArgs, LaunchConfig,
};
pub use library::{Backend, Global, JitLog, JitOptions, Library, LibraryLoader, LibraryOptions};
pub use memory::{DeviceBuffer, DeviceRepr, DeviceSlice, DeviceSliceMut};
pub use param::ParamLayout;
pub use stream::{Event, Stream};
pub use sys::locate::Component;
pub use sys::set_library_path;
pub use toolchain::ToolchainReport;
pub use version::Version;
