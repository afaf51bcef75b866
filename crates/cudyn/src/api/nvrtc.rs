//! NVRTC, one function per C call. Program handles are raw `nvrtcProgram`s; [`Program`] owns
//! them safely.
//!
//! [`Program`]: crate::compile::Program

use std::ffi::{CStr, CString};

use crate::error::{Error, Result};
use crate::sys::locate::Component;
use crate::sys::nvrtc::nvrtcProgram;
use crate::sys::{self, call, sized_outputs};

/// `nvrtcGetNumSupportedArchs` and `nvrtcGetSupportedArchs`: the architectures NVRTC compiles
/// for, as numbers (90 for sm_90), oldest first.
pub fn get_supported_archs() -> Result<Vec<i32>> {
    let nvrtc = sys::nvrtc()?;
    let mut count = 0;
    // SAFETY: writes one int.
    unsafe { call!(nvrtc, nvrtcGetNumSupportedArchs(&mut count)) }?;
    let mut numbers = vec![0; count.max(0) as usize];
    // SAFETY: the buffer holds the `count` ints NVRTC writes.
    unsafe { call!(nvrtc, nvrtcGetSupportedArchs(numbers.as_mut_ptr())) }?;
    Ok(numbers)
}

/// `nvrtcCreateProgram`: a program of `source`, reported as `name`, with in-memory `headers`
/// given as (include name, source) pairs. Destroy it with [`destroy_program`].
pub fn create_program(
    source: &CStr,
    name: &CStr,
    headers: &[(CString, CString)],
) -> Result<nvrtcProgram> {
    let nvrtc = sys::nvrtc()?;
    let names: Vec<_> = headers.iter().map(|(name, _)| name.as_ptr()).collect();
    let sources: Vec<_> = headers.iter().map(|(_, source)| source.as_ptr()).collect();
    let mut program = std::ptr::null_mut();
    // SAFETY: every pointer is a live NUL-terminated string, the two arrays hold `headers.len()`
    // of them, and NVRTC copies them all.
    unsafe {
        call!(
            nvrtc,
            nvrtcCreateProgram(
                &mut program,
                source.as_ptr(),
                name.as_ptr(),
                headers.len() as i32,
                sources.as_ptr(),
                names.as_ptr(),
            )
        )
    }?;
    Ok(program)
}

/// `nvrtcDestroyProgram`; sets `program` to null.
///
/// # Safety
/// `program` is live and not used again.
pub unsafe fn destroy_program(program: &mut nvrtcProgram) -> Result<()> {
    let nvrtc = sys::nvrtc()?;
    // SAFETY: the caller's contract.
    unsafe { call!(nvrtc, nvrtcDestroyProgram(program)) }
}

/// `nvrtcAddNameExpression`: asks for the lowered name of `expression` (NVRTC copies it).
///
/// # Safety
/// `program` is live and not compiled yet.
pub unsafe fn add_name_expression(program: nvrtcProgram, expression: &CStr) -> Result<()> {
    let nvrtc = sys::nvrtc()?;
    // SAFETY: the caller's contract; the string is live for the call.
    unsafe { call!(nvrtc, nvrtcAddNameExpression(program, expression.as_ptr())) }
}

/// `nvrtcCompileProgram` with `options`. A failure leaves the reason in the program's log.
///
/// # Safety
/// `program` is live.
pub unsafe fn compile_program(program: nvrtcProgram, options: &[CString]) -> Result<()> {
    let nvrtc = sys::nvrtc()?;
    let pointers: Vec<_> = options.iter().map(|option| option.as_ptr()).collect();
    // SAFETY: the caller's contract; `pointers` holds `len` live C strings.
    unsafe {
        call!(
            nvrtc,
            nvrtcCompileProgram(program, pointers.len() as i32, pointers.as_ptr())
        )
    }
}

/// `nvrtcGetLoweredName`: the mangled name of a name expression, copied out of the program.
///
/// # Safety
/// `program` is live and compiled, and `expression` was added before compiling.
pub unsafe fn get_lowered_name(program: nvrtcProgram, expression: &CStr) -> Result<String> {
    let nvrtc = sys::nvrtc()?;
    let mut lowered = std::ptr::null();
    // SAFETY: the caller's contract; NVRTC points `lowered` at a string the program owns.
    unsafe {
        call!(
            nvrtc,
            nvrtcGetLoweredName(program, expression.as_ptr(), &mut lowered)
        )
    }?;
    if lowered.is_null() {
        return Err(Error::EmptyOutput {
            producer: Component::Nvrtc,
            what: "lowered name",
            hint: "add the name expression before compiling (Program::name_expression)",
        });
    }
    // SAFETY: non-null, NUL-terminated and alive while the program is; copied here.
    Ok(unsafe { CStr::from_ptr(lowered) }
        .to_string_lossy()
        .into_owned())
}

sized_outputs! {
    nvrtc: nvrtcProgram;
    /// `nvrtcGetProgramLogSize` and `nvrtcGetProgramLog`: the compile log, NUL-terminated.
    get_program_log(nvrtcGetProgramLogSize, nvrtcGetProgramLog);
    /// `nvrtcGetPTXSize` and `nvrtcGetPTX`: the PTX, NUL-terminated.
    get_ptx(nvrtcGetPTXSize, nvrtcGetPTX);
    /// `nvrtcGetCUBINSize` and `nvrtcGetCUBIN`: the cubin (empty when PTX was compiled for a
    /// virtual architecture).
    get_cubin(nvrtcGetCUBINSize, nvrtcGetCUBIN);
    /// `nvrtcGetLTOIRSize` and `nvrtcGetLTOIR`: the LTO-IR of a program compiled with `-dlto`.
    get_lto_ir(nvrtcGetLTOIRSize, nvrtcGetLTOIR);
}
