//! `Program`: CUDA C++ source compiled at run time by NVRTC.

use std::ffi::CString;
use std::path::PathBuf;

use super::diagnostic;
use super::target::{Arch, PtxVerdict};
use crate::error::{Error, Result};
use crate::library::Library;
use crate::sys::locate::Component;
use crate::sys::nvrtc::{self, Nvrtc};
use crate::sys::{self, call};

/// The kind of device code a [`Program`] produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Output {
    /// SASS for one real architecture, in an ELF cubin: loads on any driver that knows the GPU,
    /// whatever NVRTC's version. The default.
    #[default]
    Cubin,
    /// PTX for a virtual architecture, NUL-terminated, JIT-compiled by the driver when loaded;
    /// refused when NVRTC is newer than the driver (see [`super::target`]).
    Ptx,
    /// LTO-IR (`-dlto`), for [`Linker`](super::Linker) with link-time optimization. Pieces that call
    /// into each other also need [`Program::relocatable`].
    LtoIr,
}

impl Output {
    /// The usual file extension: `cubin`, `ptx` or `ltoir`.
    pub fn extension(&self) -> &'static str {
        match self {
            Output::Cubin => "cubin",
            Output::Ptx => "ptx",
            Output::LtoIr => "ltoir",
        }
    }
}

/// A C++ language standard (`-std=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CppStandard {
    /// C++11.
    Cpp11,
    /// C++14.
    Cpp14,
    /// C++17 (NVRTC's default).
    Cpp17,
    /// C++20.
    Cpp20,
}

impl CppStandard {
    fn flag(self) -> &'static str {
        match self {
            CppStandard::Cpp11 => "-std=c++11",
            CppStandard::Cpp14 => "-std=c++14",
            CppStandard::Cpp17 => "-std=c++17",
            CppStandard::Cpp20 => "-std=c++20",
        }
    }
}

/// CUDA C++ source to be compiled by NVRTC, with its options.
///
/// Built step by step, then compiled any number of times; a `Program` is plain data, so many can
/// be compiled at once ([`compile_all`](super::compile_all)).
///
/// ```no_run
/// use cudyn::compile::{Arch, Output, Program};
///
/// let compiled = Program::new("template <typename T> __global__ void fill(T *p, T v) { *p = v; }")
///     .name("fill.cu")
///     .arch(Arch::new(9, 0))
///     .name_expression("fill<float>")
///     .output(Output::Cubin)
///     .compile()?;
/// println!("{} bytes; fill<float> is {:?}", compiled.code().len(), compiled.lowered_name("fill<float>"));
/// # Ok::<(), cudyn::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    source: String,
    name: String,
    arch: Option<Arch>,
    output: Output,
    standard: Option<CppStandard>,
    defines: Vec<(String, Option<String>)>,
    include_folders: Vec<PathBuf>,
    headers: Vec<(String, String)>,
    fast_math: bool,
    ftz: Option<bool>,
    prec_div: Option<bool>,
    prec_sqrt: Option<bool>,
    fmad: Option<bool>,
    debug: bool,
    line_info: bool,
    relocatable: bool,
    extra: Vec<String>,
    name_expressions: Vec<String>,
    allow_newer_ptx: bool,
}

impl Program {
    /// A program of this source, named `program.cu`, compiled to a cubin for GPU 0.
    pub fn new(source: impl Into<String>) -> Self {
        Program {
            source: source.into(),
            name: "program.cu".to_owned(),
            arch: None,
            output: Output::default(),
            standard: None,
            defines: Vec::new(),
            include_folders: Vec::new(),
            headers: Vec::new(),
            fast_math: false,
            ftz: None,
            prec_div: None,
            prec_sqrt: None,
            fmad: None,
            debug: false,
            line_info: false,
            relocatable: false,
            extra: Vec::new(),
            name_expressions: Vec::new(),
            allow_newer_ptx: false,
        }
    }

    /// The name NVRTC reports the source under in its log (`saxpy.cu(12): error ...`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Compiles for this architecture instead of GPU 0's. Required where there is no GPU.
    pub fn arch(mut self, arch: Arch) -> Self {
        self.arch = Some(arch);
        self
    }

    /// What to produce (a cubin by default).
    pub fn output(mut self, output: Output) -> Self {
        self.output = output;
        self
    }

    /// The C++ standard (`-std=`).
    pub fn std(mut self, standard: CppStandard) -> Self {
        self.standard = Some(standard);
        self
    }

    /// Defines a macro as 1 (`-DNAME`).
    pub fn define(mut self, name: impl Into<String>) -> Self {
        self.defines.push((name.into(), None));
        self
    }

    /// Defines a macro with a value (`-DNAME=VALUE`).
    pub fn define_value(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.defines.push((name.into(), Some(value.into())));
        self
    }

    /// Adds a folder to search for `#include` files (`-I`).
    pub fn include(mut self, folder: impl Into<PathBuf>) -> Self {
        self.include_folders.push(folder.into());
        self
    }

    /// Adds a header that exists only in memory, found by `#include "name"`.
    pub fn header(mut self, name: impl Into<String>, source: impl Into<String>) -> Self {
        self.headers.push((name.into(), source.into()));
        self
    }

    /// Fast, less precise math (`--use_fast_math`; implies ftz, approximate division and square
    /// root, and fused multiply-add).
    pub fn fast_math(mut self, on: bool) -> Self {
        self.fast_math = on;
        self
    }

    /// Flushes single-precision denormals to zero (`--ftz`); NVRTC's default when unset.
    pub fn ftz(mut self, on: bool) -> Self {
        self.ftz = Some(on);
        self
    }

    /// IEEE round-to-nearest single-precision division (`--prec-div`); NVRTC's default when unset.
    pub fn prec_div(mut self, on: bool) -> Self {
        self.prec_div = Some(on);
        self
    }

    /// IEEE round-to-nearest single-precision square root (`--prec-sqrt`); NVRTC's default when
    /// unset.
    pub fn prec_sqrt(mut self, on: bool) -> Self {
        self.prec_sqrt = Some(on);
        self
    }

    /// Contracts multiplies and adds into fused multiply-adds (`--fmad`); NVRTC's default when
    /// unset.
    pub fn fmad(mut self, on: bool) -> Self {
        self.fmad = Some(on);
        self
    }

    /// Device debug information, optimizations off (`-G`).
    pub fn debug(mut self, on: bool) -> Self {
        self.debug = on;
        self
    }

    /// Line information for profilers (`-lineinfo`).
    pub fn line_info(mut self, on: bool) -> Self {
        self.line_info = on;
        self
    }

    /// Relocatable device code (`-rdc=true`): functions callable from other pieces at link time.
    pub fn relocatable(mut self, on: bool) -> Self {
        self.relocatable = on;
        self
    }

    /// Passes an NVRTC option cudyn has no typed setter for, as is.
    pub fn option(mut self, option: impl Into<String>) -> Self {
        self.extra.push(option.into());
        self
    }

    /// Asks for the lowered (mangled) name of a C++ name, such as a template instantiation
    /// (`saxpy<float>`), which also instantiates it. See [`Compiled::lowered_name`].
    pub fn name_expression(mut self, expression: impl Into<String>) -> Self {
        self.name_expressions.push(expression.into());
        self
    }

    /// Emits PTX even when NVRTC is newer than this machine's driver, because it is meant for
    /// another machine. Without this, such a request is [`Error::PtxNewerThanDriver`].
    pub fn allow_newer_ptx(mut self, allow: bool) -> Self {
        self.allow_newer_ptx = allow;
        self
    }

    /// The source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The options handed to NVRTC when compiling for `arch`, in order.
    pub fn nvrtc_options(&self, arch: Arch) -> Vec<String> {
        let mut options = vec![match self.output {
            Output::Cubin | Output::LtoIr => format!("-arch={}", arch.sm()),
            // A virtual architecture: NVRTC then skips generating SASS nobody asked for.
            Output::Ptx => format!("-arch={}", arch.compute()),
        }];
        if self.output == Output::LtoIr {
            options.push("-dlto".to_owned());
        }
        if let Some(standard) = self.standard {
            options.push(standard.flag().to_owned());
        }
        for (name, value) in &self.defines {
            options.push(match value {
                Some(value) => format!("-D{name}={value}"),
                None => format!("-D{name}"),
            });
        }
        for folder in &self.include_folders {
            options.push(format!("-I{}", folder.display()));
        }
        if self.fast_math {
            options.push("--use_fast_math".to_owned());
        }
        let switches = [
            ("--ftz", self.ftz),
            ("--prec-div", self.prec_div),
            ("--prec-sqrt", self.prec_sqrt),
            ("--fmad", self.fmad),
        ];
        for (flag, value) in switches {
            if let Some(on) = value {
                options.push(format!("{flag}={on}"));
            }
        }
        for (flag, on) in [
            ("-G", self.debug),
            ("-lineinfo", self.line_info),
            ("-rdc=true", self.relocatable),
        ] {
            if on {
                options.push(flag.to_owned());
            }
        }
        options.extend(self.extra.iter().cloned());
        options
    }

    /// Compiles and loads the result (with [`Library::loader`]'s defaults) in one call; the
    /// name expressions work as kernel names of the library.
    pub fn load(&self) -> Result<Library> {
        Library::loader().load_compiled(&self.compile()?)
    }

    /// Compiles with NVRTC.
    ///
    /// A source that does not compile is [`Error::Cuda`] whose [`log`](Error::log) holds NVRTC's
    /// log followed by the source lines it points at. Without an explicit architecture and without
    /// a GPU: [`Error::ArchRequired`]. PTX that this machine's driver could not load:
    /// [`Error::PtxNewerThanDriver`].
    pub fn compile(&self) -> Result<Compiled> {
        let nvrtc = sys::nvrtc()?;
        let arch = match self.arch {
            Some(arch) => arch,
            None => Arch::current()?,
        };
        require_supported(nvrtc, arch)?;
        if self.output == Output::Ptx {
            PtxVerdict::here(nvrtc.version)
                .require_loadable(Component::Nvrtc, self.allow_newer_ptx)?;
        }
        let handle = NvrtcProgram::create(nvrtc, self)?;
        for expression in &self.name_expressions {
            let expression = c_string("name expression", expression)?;
            // SAFETY: the handle is live; NVRTC copies the string.
            unsafe {
                call!(
                    nvrtc,
                    nvrtcAddNameExpression(handle.raw, expression.as_ptr())
                )
            }?;
        }
        let options = self.nvrtc_options(arch);
        let compiled = handle.compile(&options);
        let log = handle.log()?;
        if let Err(Error::Cuda(mut failure)) = compiled {
            let mut files = vec![(self.name.as_str(), self.source.as_str())];
            files.extend(self.headers.iter().map(|(n, s)| (n.as_str(), s.as_str())));
            failure.log = Some(diagnostic::annotate(&log, &files));
            return Err(Error::Cuda(failure));
        }
        compiled?;
        let code = handle.code(self.output)?;
        let lowered_names = self
            .name_expressions
            .iter()
            .map(|expression| Ok((expression.clone(), handle.lowered_name(expression)?)))
            .collect::<Result<_>>()?;
        Ok(Compiled {
            name: self.name.clone(),
            output: self.output,
            arch,
            code,
            log,
            lowered_names,
        })
    }
}

/// What compiling a [`Program`] produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    name: String,
    output: Output,
    arch: Arch,
    code: Vec<u8>,
    log: String,
    lowered_names: Vec<(String, String)>,
}

impl Compiled {
    /// The program's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The kind of code.
    pub fn output(&self) -> Output {
        self.output
    }

    /// The architecture it was compiled for.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// The device code, ready for `cudaLibraryLoadData` (PTX includes its terminating NUL).
    pub fn code(&self) -> &[u8] {
        &self.code
    }

    /// The device code, owned.
    pub fn into_code(self) -> Vec<u8> {
        self.code
    }

    /// NVRTC's log: warnings and remarks; empty when it had nothing to say.
    pub fn log(&self) -> &str {
        &self.log
    }

    /// The lowered (mangled) name of a name expression given to
    /// [`Program::name_expression`]: `_Z5saxpyIfEvT_PS0_S1_S1_m` for `saxpy<float>`. This is the
    /// name to look the kernel up by in the loaded code.
    pub fn lowered_name(&self, expression: &str) -> Option<&str> {
        self.lowered_names
            .iter()
            .find(|(given, _)| given == expression)
            .map(|(_, lowered)| lowered.as_str())
    }

    /// Every name expression with its lowered name, in the order given.
    pub fn lowered_names(&self) -> impl Iterator<Item = (&str, &str)> {
        self.lowered_names
            .iter()
            .map(|(given, lowered)| (given.as_str(), lowered.as_str()))
    }
}

/// The architectures this NVRTC compiles for, oldest first.
pub fn supported_archs() -> Result<Vec<Arch>> {
    supported_by(sys::nvrtc()?)
}

fn supported_by(nvrtc: &Nvrtc) -> Result<Vec<Arch>> {
    let mut count = 0;
    // SAFETY: writes one int.
    unsafe { call!(nvrtc, nvrtcGetNumSupportedArchs(&mut count)) }?;
    let mut numbers = vec![0; count.max(0) as usize];
    // SAFETY: the buffer holds the `count` ints NVRTC writes.
    unsafe { call!(nvrtc, nvrtcGetSupportedArchs(numbers.as_mut_ptr())) }?;
    Ok(numbers
        .into_iter()
        .map(|number| Arch::new(number.max(0) as u32 / 10, number.max(0) as u32 % 10))
        .collect())
}

/// NVRTC's own answer to an unknown architecture is a bare "invalid option"; this one names what
/// would work.
fn require_supported(nvrtc: &Nvrtc, arch: Arch) -> Result<()> {
    let supported = supported_by(nvrtc)?;
    if supported
        .iter()
        .any(|known| known.number() == arch.number())
    {
        return Ok(());
    }
    let names: Vec<String> = supported.iter().map(Arch::sm).collect();
    Err(Error::InvalidArgument(format!(
        "NVRTC {} cannot compile for {arch}; it supports {}",
        nvrtc.version,
        names.join(", ")
    )))
}

fn c_string(what: &str, text: &str) -> Result<CString> {
    CString::new(text)
        .map_err(|_| Error::InvalidArgument(format!("the {what} contains a NUL byte: {text:?}")))
}

/// An NVRTC program handle, destroyed on drop.
struct NvrtcProgram {
    nvrtc: &'static Nvrtc,
    raw: nvrtc::nvrtcProgram,
}

impl NvrtcProgram {
    fn create(nvrtc: &'static Nvrtc, program: &Program) -> Result<Self> {
        let source = c_string("source", &program.source)?;
        let name = c_string("program name", &program.name)?;
        let mut header_sources = Vec::with_capacity(program.headers.len());
        let mut header_names = Vec::with_capacity(program.headers.len());
        for (header_name, header_source) in &program.headers {
            header_names.push(c_string("header name", header_name)?);
            header_sources.push(c_string("header", header_source)?);
        }
        let source_pointers: Vec<_> = header_sources.iter().map(|s| s.as_ptr()).collect();
        let name_pointers: Vec<_> = header_names.iter().map(|s| s.as_ptr()).collect();
        let mut raw = std::ptr::null_mut();
        // SAFETY: every pointer is a live NUL-terminated string, the two arrays hold
        // `headers.len()` of them, and NVRTC copies them all.
        unsafe {
            call!(
                nvrtc,
                nvrtcCreateProgram(
                    &mut raw,
                    source.as_ptr(),
                    name.as_ptr(),
                    source_pointers.len() as i32,
                    source_pointers.as_ptr(),
                    name_pointers.as_ptr(),
                )
            )
        }?;
        Ok(NvrtcProgram { nvrtc, raw })
    }

    fn compile(&self, options: &[String]) -> Result<()> {
        let options = options
            .iter()
            .map(|option| c_string("option", option))
            .collect::<Result<Vec<_>>>()?;
        let pointers: Vec<_> = options.iter().map(|o| o.as_ptr()).collect();
        // SAFETY: the handle is live and `pointers` holds `len` live C strings.
        unsafe {
            call!(
                self.nvrtc,
                nvrtcCompileProgram(self.raw, pointers.len() as i32, pointers.as_ptr())
            )
        }
    }

    fn log(&self) -> Result<String> {
        Ok(text_of(read_sized!(
            self.nvrtc,
            self.raw,
            nvrtcGetProgramLogSize,
            nvrtcGetProgramLog
        )))
    }

    fn code(&self, output: Output) -> Result<Vec<u8>> {
        let code = match output {
            Output::Cubin => read_sized!(self.nvrtc, self.raw, nvrtcGetCUBINSize, nvrtcGetCUBIN),
            Output::Ptx => read_sized!(self.nvrtc, self.raw, nvrtcGetPTXSize, nvrtcGetPTX),
            Output::LtoIr => read_sized!(self.nvrtc, self.raw, nvrtcGetLTOIRSize, nvrtcGetLTOIR),
        };
        if code.is_empty() {
            // NVRTC returns success and nothing when an option contradicts the output asked for.
            return Err(Error::InvalidArgument(format!(
                "NVRTC produced no {} with these options; an option given through \
                 Program::option probably asks for another kind of output",
                output.extension()
            )));
        }
        Ok(code)
    }

    fn lowered_name(&self, expression: &str) -> Result<String> {
        let expression = c_string("name expression", expression)?;
        let mut lowered = std::ptr::null();
        // SAFETY: the handle is live; NVRTC points `lowered` at a string the program owns, copied
        // below before the program is destroyed.
        unsafe {
            call!(
                self.nvrtc,
                nvrtcGetLoweredName(self.raw, expression.as_ptr(), &mut lowered)
            )
        }?;
        // SAFETY: non-null, NUL-terminated, alive while the program is.
        Ok(unsafe { std::ffi::CStr::from_ptr(lowered) }
            .to_string_lossy()
            .into_owned())
    }
}

impl Drop for NvrtcProgram {
    fn drop(&mut self) {
        // SAFETY: the handle is live and destroyed once; a failure leaks it, nothing more.
        let _ = unsafe { call!(self.nvrtc, nvrtcDestroyProgram(&mut self.raw)) };
    }
}

/// A log as NVRTC and nvJitLink write it: NUL-terminated bytes.
pub(super) fn text_of(mut bytes: Vec<u8>) -> String {
    if let Some(end) = bytes.iter().position(|&b| b == 0) {
        bytes.truncate(end);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_options_become_nvrtc_flags() {
        let program = Program::new("")
            .std(CppStandard::Cpp20)
            .define("USE_FAST")
            .define_value("N", "4")
            .include("/opt/include")
            .fast_math(true)
            .ftz(false)
            .prec_div(true)
            .prec_sqrt(false)
            .fmad(true)
            .debug(true)
            .line_info(true)
            .relocatable(true)
            .option("--extra-device-vectorization");
        assert_eq!(
            program.nvrtc_options(Arch::new(8, 0)),
            [
                "-arch=sm_80",
                "-std=c++20",
                "-DUSE_FAST",
                "-DN=4",
                "-I/opt/include",
                "--use_fast_math",
                "--ftz=false",
                "--prec-div=true",
                "--prec-sqrt=false",
                "--fmad=true",
                "-G",
                "-lineinfo",
                "-rdc=true",
                "--extra-device-vectorization",
            ]
        );
    }

    #[test]
    fn the_output_decides_the_architecture_flag() {
        let arch = Arch::new(9, 0);
        let options = |output| Program::new("").output(output).nvrtc_options(arch);
        assert_eq!(options(Output::Cubin), ["-arch=sm_90"]);
        assert_eq!(options(Output::Ptx), ["-arch=compute_90"]);
        assert_eq!(options(Output::LtoIr), ["-arch=sm_90", "-dlto"]);
    }

    #[test]
    fn logs_end_at_their_nul() {
        assert_eq!(text_of(b"warning\n\0\0".to_vec()), "warning\n");
        assert_eq!(text_of(Vec::new()), "");
    }
}
