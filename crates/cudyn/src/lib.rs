//! # cudyn
//!
//! Load GPU device code at run time the way the CUDA runtime does since 12.8
//! (`cudaLibraryLoadData`, `cudaLibraryGetKernel`, `cudaLaunchKernel` on a kernel handle), compile it
//! with NVRTC, link it with nvJitLink, and share kernel handles between the runtime and the driver.
//!
//! cudyn needs no CUDA at build time. Every CUDA library is found and opened at run time, on first
//! use, following one documented search order ([`locate`]); a missing library is an
//! [`Error`] that lists every place searched, never a panic.
//!
//! Runnable programs for each use case are in the crate's `examples/` folder
//! (`cargo run -p cudyn --example saxpy_nvrtc`).
//!
//! ## Loading device code and launching a kernel
//!
//! As the first example of "Dynamic Loading in the CUDA Runtime" (NVIDIA): read a fatbin, look
//! the kernel up and launch the handle. `cudyn compile device.cu --emit fatbin --arch sm_90 -o
//! device.fatbin` makes the file; [`Library::load`] takes the bytes from memory instead.
//!
//! ```no_run
//! use cudyn::{LaunchConfig, Library};
//!
//! let library = Library::from_file("device.fatbin")?; // validated, then cudaLibraryLoadData
//! let hello = library.kernel("helloWorld")?; // cudaLibraryGetKernel
//! // SAFETY: helloWorld takes no parameters and touches no memory of this program.
//! unsafe { hello.launch(&LaunchConfig::new(1, 1), ()) }?; // cudaLaunchKernel
//! cudyn::synchronize()?;
//! # Ok::<(), cudyn::Error>(())
//! ```
//!
//! ## Compiling with NVRTC, with checked arguments
//!
//! A [`Program`] compiles to SASS for the current GPU (name an [`Arch`] where there is none);
//! [`Kernel::launch`] checks the arguments against the kernel's real parameters and the
//! configuration against the device's limits before anything reaches the driver.
//!
//! ```no_run
//! use cudyn::{DeviceBuffer, LaunchConfig, Program};
//!
//! const SAXPY: &str = r#"
//! extern "C" __global__ void saxpy(float a, const float *x, const float *y, float *out, size_t n) {
//!     size_t i = blockIdx.x * blockDim.x + threadIdx.x;
//!     if (i < n) out[i] = a * x[i] + y[i];
//! }"#;
//!
//! let n = 1 << 20;
//! let saxpy = Program::new(SAXPY).load()?.kernel("saxpy")?;
//! let x = DeviceBuffer::from_slice(&vec![1.0f32; n])?;
//! let y = DeviceBuffer::from_slice(&vec![2.0f32; n])?;
//! let mut out = DeviceBuffer::<f32>::zeroed(n)?;
//! // SAFETY: saxpy reads x[i] and y[i] and writes out[i] for i < n, and each buffer holds n
//! // floats; the buffers outlive the kernel, and `out` is read only after it.
//! unsafe {
//!     saxpy.launch(
//!         &LaunchConfig::for_elements(n, 256),
//!         (2.0f32, &x, &y, &mut out, n as u64),
//!     )
//! }?;
//! assert!(out.to_vec()?.iter().all(|&v| v == 4.0));
//! # Ok::<(), cudyn::Error>(())
//! ```
//!
//! ## Compiling without a GPU
//!
//! Compiling, linking and inspecting need no GPU and no driver: only the target must be named.
//!
//! ```no_run
//! use cudyn::{Arch, Output, Program};
//!
//! let compiled = Program::new("extern \"C\" __global__ void k(int *p) { *p = 1; }")
//!     .arch("sm_90".parse::<Arch>()?)
//!     .output(Output::Cubin)
//!     .compile()?;
//! let inspection = cudyn::Image::new(compiled.code())?.inspect()?;
//! println!("{} bytes of {:?} for {}", inspection.size, inspection.kind, compiled.arch());
//! # Ok::<(), cudyn::Error>(())
//! ```
//!
//! ## The compile cache
//!
//! Compiles and links are cached on disk (`~/.cache/cudyn/kernels`) and in memory: a second start
//! reads a verified file instead of running NVRTC, and never even opens NVRTC. `CUDYN_CACHE=off`
//! turns it off, `CUDYN_CACHE_DIR` moves it; [`cache`] says what the key covers and what the
//! cache assumes of the file system.
//!
//! ## What CUDA is here
//!
//! ```no_run
//! // What was found where, and which GPUs there are: what `cudyn doctor` prints.
//! let report = cudyn::ToolchainReport::probe();
//! for component in &report.components {
//!     println!("{}: {}", component.component, component.summary());
//! }
//! ```
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The leaves: value types every layer names, importing nothing above them.
mod arch;
mod backend;
mod builder;
mod component;
pub mod ctype;
mod kinds;
mod mismatch;
mod parse_error;
mod symbols;

mod api;
pub mod cache;
mod codec;
pub mod compile;
pub mod context;
#[cfg(feature = "cudarc-any-version")]
#[cfg_attr(
    docsrs,
    doc(cfg(any(feature = "cudarc", feature = "cudarc-any-version")))
)]
pub mod cudarc;
pub mod device;
mod digest;
mod digits;
pub mod error;
mod formats;
pub mod image;
pub mod inspect;
pub mod launch;
pub mod library;
pub mod locate;
pub mod memory;
pub mod param;
pub mod raw;
mod shared_bytes;
pub mod stream;
#[doc(hidden)]
pub mod sys;
pub mod toolchain;
pub mod version;
mod warn;
pub mod workers;

pub use cache::Cache;
pub use compile::{
    Arch, ArchVariant, Compiled, CppStandard, InputKind, LinkOptions, Linked, Linker, Output,
    Program,
};
pub use context::{current_device, set_device, synchronize};
pub use ctype::{ArgType, CType, Scalar};
pub use device::{Device, DeviceAttribute, DeviceLimits, MemoryInfo};
pub use digest::Digest;
pub use error::{CallError, Error, ErrorKind, Result};
pub use image::{Image, ImageKind};
pub use inspect::{Inspection, ParseError};
pub use launch::{
    ArgList, ArgumentMismatch, ConfigViolation, Dim3, KernelArg, KernelArgs, LaunchConfig, ListArg,
    Reinterpret, StaticArgs,
};
pub use library::kernel;
pub use library::kernel::{Kernel, KernelAttribute, KernelGetter};
pub use library::{
    Backend, Global, JitLog, JitOptions, KernelName, Library, LibraryLoader, LibraryOptions,
    Sharing,
};
pub use locate::Component;
#[cfg(feature = "bytemuck")]
pub use memory::Bytemuck;
pub use memory::{DeviceBuffer, DeviceRepr, DeviceSlice, DeviceSliceMut, Pack};
pub use param::ParamLayout;
pub use stream::{Event, Stream};
pub use sys::set_library_path;
pub use toolchain::ToolchainReport;
pub use version::Version;

/// The README's Rust example, compiled with the documentation tests so that it keeps up with the
/// API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;
