//! Device code made at run time: CUDA C++ compiled by NVRTC ([`Program`]) and device code linked
//! by nvJitLink, with link-time optimization ([`Linker`]).
//!
//! By default a [`Program`] becomes SASS (a cubin) for GPU 0, which loads on any driver whatever
//! NVRTC's version; PTX is produced only on request, and refused when this machine's driver could
//! not load it. [`target`] states the rule.
//!
//! ```no_run
//! use cudyn::compile::{Arch, Output, Program};
//!
//! const SAXPY: &str = r#"
//! extern "C" __global__ void saxpy(float a, float *x, float *y, float *out, size_t n) {
//!     size_t tid = blockIdx.x * blockDim.x + threadIdx.x;
//!     if (tid < n) out[tid] = a * x[tid] + y[tid];
//! }"#;
//!
//! // SASS for GPU 0, ready for cudaLibraryLoadData.
//! let cubin = Program::new(SAXPY).name("saxpy.cu").compile()?;
//!
//! // Two pieces optimized together at link time.
//! let piece = |source: &str| {
//!     Program::new(source).arch(Arch::new(9, 0)).output(Output::LtoIr).relocatable(true).compile()
//! };
//! let kernel = piece("__device__ float f(float); extern \"C\" __global__ void k(float *p) { *p = f(*p); }")?;
//! let helper = piece("__device__ float f(float x) { return 2 * x; }")?;
//! let linked = cudyn::compile::link_lto(&[kernel.code(), helper.code()], Some(Arch::new(9, 0)))?;
//! # let _ = (cubin, linked);
//! # Ok::<(), cudyn::Error>(())
//! ```
//!
//! [`Program::load`] compiles and loads in one call, [`Linked::load`] and
//! [`Library::from_lto_ir`](crate::Library::from_lto_ir) load linked code; a library loaded from
//! NVRTC output finds kernels by their name expressions (`saxpy<float>`), whose mangled names are
//! also in [`Compiled::lowered_name`].

/// Reads a byte output of NVRTC or nvJitLink (code or log) through its size and copy entry points:
/// `read_sized!(library, handle, SizeFn, CopyFn)` inside a function returning `Result`.
macro_rules! read_sized {
    ($library:expr, $handle:expr, $size:ident, $copy:ident) => {{
        let (library, handle) = ($library, $handle);
        let mut size = 0;
        // SAFETY: the handle is live; writes one size_t.
        unsafe { call!(library, $size(handle, &mut size)) }?;
        // One byte more than asked for: a log's size may or may not count its NUL, which is
        // written either way (nvJitLink reports an empty log as 0 bytes and writes the NUL).
        let mut bytes = vec![0u8; size + 1];
        // SAFETY: the buffer holds the `size` bytes the library copies into it, and a NUL.
        unsafe { call!(library, $copy(handle, bytes.as_mut_ptr().cast())) }?;
        bytes.truncate(size);
        bytes
    }};
}

mod batch;
mod diagnostic;
mod linker;
mod program;
pub mod target;

pub use batch::{compile_all, compile_all_on};
pub use linker::{InputKind, LinkOptions, Linked, Linker};
pub use program::{supported_archs, Compiled, CppStandard, Output, Program};
pub use target::{Arch, ArchVariant, PtxVerdict};

use crate::error::Result;

/// Links several LTO-IR pieces into one cubin with link-time optimization, for `arch` (GPU 0's
/// when `None`).
pub fn link_lto(pieces: &[&[u8]], arch: Option<Arch>) -> Result<Linked> {
    let mut linker = options_for(arch).lto(true).linker()?;
    for (index, piece) in pieces.iter().enumerate() {
        linker.add(InputKind::LtoIr, piece, &format!("piece{index}.ltoir"))?;
    }
    linker.finish()
}

/// Compiles PTX to a cubin with nvJitLink, for `arch` (GPU 0's when `None`).
///
/// This is the way out of the PTX trap: nvJitLink may be newer than the driver, and the cubin it
/// makes loads on any driver that knows the GPU, while the PTX itself would be rejected by an
/// older driver. nvJitLink must be at least as new as the PTX's producer: an older one rejects it
/// (`NVJITLINK_ERROR_PTX_COMPILE`, "Unsupported .version" in the log).
pub fn ptx_to_cubin(ptx: &[u8], arch: Option<Arch>) -> Result<Linked> {
    let mut linker = options_for(arch).linker()?;
    linker.add(InputKind::Ptx, ptx, "input.ptx")?;
    linker.finish()
}

fn options_for(arch: Option<Arch>) -> LinkOptions {
    match arch {
        Some(arch) => LinkOptions::new().arch(arch),
        None => LinkOptions::new(),
    }
}
