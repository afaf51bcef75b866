//! Device code made at run time: CUDA C++ compiled by NVRTC ([`Program`]) and device code linked
//! by nvJitLink, with link-time optimization ([`Linker`]).
//!
//! By default a [`Program`] becomes SASS (a cubin) for the calling thread's current device, which
//! loads on any driver whatever
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
//! // SASS for the current device, ready for cudaLibraryLoadData.
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
//! [`link_lto_programs`] compiles the pieces (at the same time) and links them in one call.
//!
//! [`Program::load`] compiles and loads in one call, [`Linked::load`] and
//! [`Library::from_lto_ir`](crate::Library::from_lto_ir) load linked code; a library loaded from
//! NVRTC output finds kernels by their name expressions (`saxpy<float>`), whose mangled names are
//! also in [`Compiled::lowered_name`].

mod batch;
mod cached;
mod compiled;
mod diagnostic;
mod fatbin;
mod includes;
mod link_session;
mod link_thread;
mod linker;
mod nvrtc_program;
mod program;
pub mod target;

#[doc(hidden)]
pub use batch::workers;
pub use batch::{
    compile_all, compile_all_on, compile_batch, compile_batch_isolated, Batch, BatchRun,
};
pub use batch::{set_job_time_limit, set_workers, WorkerSetting};
pub use compiled::{CacheUse, Compiled, Output};
pub use fatbin::FatbinBuilder;
pub use includes::Dependencies;
pub(crate) use link_session::link_all;
pub use linker::DEFAULT_LINK_TIME_LIMIT;
pub use linker::{link_lto, ptx_to_cubin, InputKind, LinkOptions, Linked, Linker};
pub use nvrtc_program::supported_archs;
pub use program::{CppStandard, Program};
pub use target::{Arch, ArchVariant, PtxVerdict};

use std::ffi::CString;

use crate::error::Result;

/// Compiles every program to LTO-IR (relocatable device code, for `arch`: the current device's
/// when `None`) and links the pieces into one cubin with link-time optimization: a program of
/// several sources in one call.
///
/// The pieces are compiled at the same time, each on a thread of its own (a kept pool, as
/// [`compile_all_on`]'s: a thread's first NVRTC compile costs several times its later ones), so
/// the build takes about as long as its slowest piece plus the link, not the sum of the pieces. Each piece
/// goes through the compile cache on its own (unless it was made with
/// [`Program::cache(false)`](Program::cache)), and so does the link: after a change to one
/// piece only that piece is compiled again, and an unchanged program is not compiled or linked
/// at all. The first piece that fails to compile is the error, with NVRTC's log.
///
/// ```no_run
/// use cudyn::compile::{self, Arch, Program};
///
/// let kernel = Program::new("__device__ float f(float); extern \"C\" __global__ void k(float *p) { *p = f(*p); }");
/// let helper = Program::new("__device__ float f(float x) { return 2 * x; }");
/// let linked = compile::link_lto_programs(&[kernel, helper], Some(Arch::new(9, 0)))?;
/// # let _ = linked;
/// # Ok::<(), cudyn::Error>(())
/// ```
pub fn link_lto_programs(programs: &[Program], arch: Option<Arch>) -> Result<Linked> {
    let arch = match arch {
        Some(arch) => arch,
        None => Arch::current()?,
    };
    let pieces: Vec<Program> = programs
        .iter()
        .map(|program| {
            program
                .clone()
                .arch(arch)
                .output(Output::LtoIr)
                .relocatable(true)
        })
        .collect();
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let compiled = compile_all_on(&pieces, pieces.len().min(cores))
        .into_iter()
        .collect::<Result<Vec<Compiled>>>()?;
    let codes: Vec<&[u8]> = compiled.iter().map(Compiled::code).collect();
    link_lto(&codes, Some(arch))
}

/// Compiler or linker options as C strings, in order.
fn c_strings(what: &'static str, options: &[String]) -> Result<Vec<CString>> {
    options
        .iter()
        .map(|option| crate::api::c_string(what, option))
        .collect()
}

/// A log as NVRTC and nvJitLink write it: NUL-terminated bytes.
fn text_of(mut bytes: Vec<u8>) -> String {
    if let Some(end) = bytes.iter().position(|&b| b == 0) {
        bytes.truncate(end);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn logs_end_at_their_nul() {
        assert_eq!(text_of(b"warning\n\0\0".to_vec()), "warning\n");
        assert_eq!(text_of(Vec::new()), "");
    }

    #[test]
    fn a_nul_in_an_option_is_named() {
        let error = c_strings("NVRTC option", &["-DA".to_owned(), "-DB\0".to_owned()]).unwrap_err();
        assert!(
            matches!(&error, Error::NulByte { what: "NVRTC option", text } if text == "-DB\0"),
            "{error:?}"
        );
    }
}
