//! An NVRTC program handle owned safely, and what this NVRTC can compile for.

use std::ffi::CString;

use super::compiled::Output;
use super::target::Arch;
use super::text_of;
use crate::api::c_string;
use crate::api::nvrtc as api;
use crate::error::{Error, Result};
use crate::sys::locate::Component;
use crate::sys::nvrtc::nvrtcProgram;

/// The architectures this NVRTC compiles for, oldest first.
pub fn supported_archs() -> Result<Vec<Arch>> {
    Ok(api::get_supported_archs()?
        .into_iter()
        .map(|number| Arch::new(number.max(0) as u32 / 10, number.max(0) as u32 % 10))
        .collect())
}

/// NVRTC's own answer to an unknown architecture is a bare "invalid option"; this one names what
/// would work.
pub(super) fn require_supported(arch: Arch) -> Result<()> {
    let supported = supported_archs()?;
    if supported
        .iter()
        .any(|known| known.number() == arch.number())
    {
        return Ok(());
    }
    Err(Error::ArchUnsupported {
        compiler: Component::Nvrtc,
        version: crate::sys::nvrtc()?.version,
        arch,
        supported,
    })
}

/// An NVRTC program handle, destroyed on drop.
pub(super) struct NvrtcProgram {
    raw: nvrtcProgram,
}

impl NvrtcProgram {
    /// A program of `source` reported as `name`, with in-memory headers as (name, source).
    pub(super) fn create(source: &str, name: &str, headers: &[(String, String)]) -> Result<Self> {
        let source = c_string("source", source)?;
        let name = c_string("program name", name)?;
        let headers = headers
            .iter()
            .map(|(name, source)| Ok((c_string("header name", name)?, c_string("header", source)?)))
            .collect::<Result<Vec<_>>>()?;
        let raw = api::create_program(&source, &name, &headers)?;
        Ok(NvrtcProgram { raw })
    }

    pub(super) fn add_name_expression(&self, expression: &str) -> Result<()> {
        let expression = c_string("name expression", expression)?;
        // SAFETY: the handle is live and not compiled yet (Program::compile adds every
        // expression before compiling).
        unsafe { api::add_name_expression(self.raw, &expression) }
    }

    pub(super) fn compile(&self, options: &[CString]) -> Result<()> {
        // SAFETY: the handle is live.
        unsafe { api::compile_program(self.raw, options) }
    }

    pub(super) fn log(&self) -> Result<String> {
        // SAFETY: the handle is live.
        Ok(text_of(unsafe { api::get_program_log(self.raw) }?))
    }

    pub(super) fn code(&self, output: Output) -> Result<Vec<u8>> {
        // SAFETY: the handle is live and compiled.
        let code = unsafe {
            match output {
                Output::Cubin => api::get_cubin(self.raw),
                Output::Ptx => api::get_ptx(self.raw),
                Output::LtoIr => api::get_lto_ir(self.raw),
            }
        }?;
        if code.is_empty() {
            // NVRTC returns success and nothing when an option contradicts the output asked for.
            return Err(Error::EmptyOutput {
                producer: Component::Nvrtc,
                what: output.extension(),
                hint: "an option given through Program::option probably asks for another kind \
                       of output",
            });
        }
        Ok(code)
    }

    pub(super) fn lowered_name(&self, expression: &str) -> Result<String> {
        let expression = c_string("name expression", expression)?;
        // SAFETY: the handle is live and compiled, and Program::compile added the expression.
        unsafe { api::get_lowered_name(self.raw, &expression) }
    }
}

impl Drop for NvrtcProgram {
    fn drop(&mut self) {
        // SAFETY: the handle is live and destroyed once; a failure leaks it, nothing more.
        let _ = unsafe { api::destroy_program(&mut self.raw) };
    }
}
