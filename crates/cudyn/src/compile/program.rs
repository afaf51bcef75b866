//! `Program`: CUDA C++ source compiled at run time by NVRTC.

use std::path::{Path, PathBuf};

use super::compiled::{CacheUse, Compiled, Output};
use super::includes::{self, CudaFolders, Dependencies, Discard, Request};
use super::nvrtc_program::{require_supported, NvrtcProgram};
use super::target::{Arch, PtxVerdict};
use super::{c_strings, diagnostic};
use crate::builder::setters;
use crate::cache::Cache;
use crate::error::{Error, Result};
use crate::library::Library;
use crate::sys;
use crate::sys::locate::{provider_of, Component, CudaHeaders};

/// A C++ language standard (`-std=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
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
/// CUDA's own headers need no `-I`: `<cuda_fp16.h>`, `<cuda_bf16.h>`, `<cooperative_groups.h>`,
/// `<cuda/std/...>`, `<cub/...>`, `<thrust/...>` and `<nv/target>` are found where cudyn finds
/// NVRTC ([`CudaHeaders`]) and their folders are searched after the program's own
/// [`include`](Self::include) folders. [`default_includes(false)`](Self::default_includes)
/// leaves them out. A header found nowhere is [`Error::HeaderNotFound`], which names it, the
/// folders searched and what provides it.
/// No `-default-device` is added: these headers mark their device functions themselves (the
/// cooperative-groups and CUB kernels of cudyn's tests compile without it).
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
    pub(crate) source: String,
    pub(crate) name: String,
    pub(crate) arch: Option<Arch>,
    pub(crate) output: Output,
    pub(crate) standard: Option<CppStandard>,
    pub(crate) defines: Vec<(String, Option<String>)>,
    pub(crate) include_folders: Vec<PathBuf>,
    pub(crate) default_includes: bool,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) fast_math: bool,
    pub(crate) ftz: Option<bool>,
    pub(crate) prec_div: Option<bool>,
    pub(crate) prec_sqrt: Option<bool>,
    pub(crate) fmad: Option<bool>,
    pub(crate) debug: bool,
    pub(crate) line_info: bool,
    pub(crate) relocatable: bool,
    pub(crate) extra: Vec<String>,
    pub(crate) name_expressions: Vec<String>,
    pub(crate) allow_newer_ptx: bool,
    pub(crate) cache: bool,
}

impl Program {
    /// A program of this source, named `program.cu`, compiled to a cubin for the calling thread's
    /// current device.
    pub fn new(source: impl Into<String>) -> Self {
        Program {
            source: source.into(),
            name: "program.cu".to_owned(),
            arch: None,
            output: Output::default(),
            standard: None,
            defines: Vec::new(),
            include_folders: Vec::new(),
            default_includes: true,
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
            cache: true,
        }
    }

    /// The name NVRTC reports the source under in its log (`saxpy.cu(12): error ...`), and the
    /// path its quoted includes are found from: NVRTC looks for `#include "x.h"` in the folder
    /// of this name first (for a bare name such as `kernel.cu`, the current folder), so a source
    /// read from a file is best named by that file's path, as NVIDIA's samples do. See
    /// [`dependencies`](Self::dependencies).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    setters! {
        /// Compiles for this architecture instead of the current device's. Required where there is
        /// no GPU.
        arch(arch: Arch) => Some;

        /// What to produce (a cubin by default).
        output(output: Output);
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

    setters! {
        /// Fast, less precise math (`--use_fast_math`; implies ftz, approximate division and square
        /// root, and fused multiply-add).
        fast_math(on: bool);

        /// Flushes single-precision denormals to zero (`--ftz`); NVRTC's default when unset.
        ftz(on: bool) => Some;

        /// IEEE round-to-nearest single-precision division (`--prec-div`); NVRTC's default when unset.
        prec_div(on: bool) => Some;

        /// IEEE round-to-nearest single-precision square root (`--prec-sqrt`); NVRTC's default when
        /// unset.
        prec_sqrt(on: bool) => Some;

        /// Contracts multiplies and adds into fused multiply-adds (`--fmad`); NVRTC's default when
        /// unset.
        fmad(on: bool) => Some;

        /// Device debug information, optimizations off (`-G`).
        debug(on: bool);

        /// Whether CUDA's own header folders ([`CudaHeaders`]) are searched after the program's
        /// own; on by default. Off, NVRTC sees only the folders given with
        /// [`include`](Self::include), as with a bare `nvrtcCompileProgram`.
        default_includes(on: bool);

        /// Line information for profilers (`-lineinfo`).
        line_info(on: bool);

        /// Relocatable device code (`-rdc=true`): functions callable from other pieces at link time.
        relocatable(on: bool);

        /// Emits PTX even when NVRTC is newer than this machine's driver, because it is meant for
        /// another machine. Without this, such a request is [`Error::PtxNewerThanDriver`].
        allow_newer_ptx(allow: bool);

        /// Whether the result goes through the process-wide compile cache ([`Cache::global`]);
        /// on by default. Off, every compile runs NVRTC.
        cache(on: bool);
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

    /// The source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The files compiling this program reads besides its source, found as NVRTC finds them:
    /// its header files on disk, the headers it takes from CUDA's own folders, the in-memory
    /// headers it includes, the names it looks for in vain, and why the list may be incomplete.
    /// Like a compiler's `-M`, which NVRTC lacks: for build systems, and what the compile cache
    /// keys on (a program whose [`unknown`](Dependencies::unknown) is set is never answered
    /// from the cache).
    ///
    /// Every directive counts, whatever conditional compilation would skip, so the list may
    /// hold more than a compile reads, never less; CUDA's headers are not followed into what
    /// they include. Relative names and folders are taken from the current folder, as the
    /// compile takes them. Finding CUDA's header folders may open NVRTC.
    ///
    /// ```no_run
    /// use cudyn::compile::Program;
    ///
    /// let source = std::fs::read_to_string("src/kernel.cu")?;
    /// let program = Program::new(source).name("src/kernel.cu").include("include");
    /// for file in program.dependencies().files {
    ///     println!("depends on {}", file.display());
    /// }
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn dependencies(&self) -> Dependencies {
        let cuda = self.default_folders();
        let request = self.include_request(CudaFolders::Known(&cuda));
        includes::resolve(&request, &mut Discard)
    }

    /// What the include search reads of this program, CUDA's folders as `cuda` says.
    pub(super) fn include_request<'a>(&'a self, cuda: CudaFolders<'a>) -> Request<'a> {
        Request {
            source: &self.source,
            name: &self.name,
            headers: &self.headers,
            folders: &self.include_folders,
            cuda,
            options: &self.extra,
        }
    }

    /// The architecture named with [`arch`](Self::arch), if any.
    pub(super) fn named_arch(&self) -> Option<Arch> {
        self.arch
    }

    /// The options handed to NVRTC when compiling for `arch`, in order, CUDA's header folders
    /// included (unless [`default_includes(false)`](Self::default_includes)). Finding them opens
    /// NVRTC when it is not open yet, since the headers beside it come first.
    pub fn nvrtc_options(&self, arch: Arch) -> Vec<String> {
        self.options_with(arch, &self.default_folders())
    }

    /// CUDA's header folders this program searches after its own (none when turned off).
    pub(super) fn default_folders(&self) -> Vec<PathBuf> {
        if !self.default_includes {
            return Vec::new();
        }
        let headers = CudaHeaders::for_this_process();
        headers
            .include_folders()
            .into_iter()
            .map(Path::to_path_buf)
            .collect()
    }

    /// The folders NVRTC searched, for [`Error::HeaderNotFound`]: the program's own, then CUDA's
    /// (or why there were none).
    fn searched_for_headers(&self, header: &str, defaults: &[PathBuf]) -> Vec<String> {
        let mut searched = Vec::new();
        if includes::quotes(&self.source, header) {
            let beside = match Path::new(&self.name).parent() {
                Some(folder) if !folder.as_os_str().is_empty() => folder.display().to_string(),
                _ => "the current folder".to_owned(),
            };
            searched.push(format!(
                "{beside} (the folder of the program's name, {}, where NVRTC looks for \
                 \"quoted\" names first: name the program by its file's path to find the \
                 headers beside it)",
                self.name
            ));
        }
        searched.extend(
            self.include_folders
                .iter()
                .map(|folder| format!("{} (Program::include)", folder.display())),
        );
        if !self.default_includes {
            searched.push(
                "not CUDA's own header folders: Program::default_includes(false) (on \
                 `cudyn compile`: --no-default-includes) leaves them out"
                    .to_owned(),
            );
        } else if defaults.is_empty() {
            searched.push("CUDA's own headers, found in none of these places:".to_owned());
            let headers = CudaHeaders::for_this_process();
            searched.extend(headers.searched.iter().map(|line| format!("  {line}")));
        } else {
            searched.extend(
                defaults
                    .iter()
                    .map(|folder| format!("{} (CUDA's headers, found by cudyn)", folder.display())),
            );
        }
        searched
    }

    /// The options, with `defaults` searched after the program's own include folders.
    ///
    /// Built from [`each_option`](Program::each_option)'s pieces, not with `format!`: the
    /// compile cache keys on the same pieces on the path of a warm start, where the formatting
    /// machinery would be code run for the first time in the process.
    pub(super) fn options_with(&self, arch: Arch, defaults: &[PathBuf]) -> Vec<String> {
        let mut options = Vec::new();
        self.each_option(arch, defaults, |pieces| options.push(pieces.concat()));
        options
    }

    /// Hands each of [`options_with`](Program::options_with)'s options to `option` as the
    /// pieces it is made of, end to end: the compile cache's key takes them so, without building
    /// a text of each on the path of a warm start.
    pub(super) fn each_option(
        &self,
        arch: Arch,
        defaults: &[PathBuf],
        mut option: impl FnMut(&[&str]),
    ) {
        let number = crate::digits::Decimal::of(u64::from(arch.number()));
        let prefix = match self.output {
            Output::Cubin | Output::LtoIr => "-arch=sm_",
            // A virtual architecture: NVRTC then skips generating SASS nobody asked for.
            Output::Ptx => "-arch=compute_",
        };
        option(&[prefix, number.as_str(), arch.suffix()]);
        if self.output == Output::LtoIr {
            option(&["-dlto"]);
        }
        if let Some(standard) = self.standard {
            option(&[standard.flag()]);
        }
        for (name, value) in &self.defines {
            match value {
                Some(value) => option(&["-D", name, "=", value]),
                None => option(&["-D", name]),
            }
        }
        for folder in self.include_folders.iter().chain(defaults) {
            option(&["-I", &folder.to_string_lossy()]);
        }
        if self.fast_math {
            option(&["--use_fast_math"]);
        }
        let switches = [
            ("--ftz", self.ftz),
            ("--prec-div", self.prec_div),
            ("--prec-sqrt", self.prec_sqrt),
            ("--fmad", self.fmad),
        ];
        for (flag, value) in switches {
            if let Some(on) = value {
                option(&[flag, "=", if on { "true" } else { "false" }]);
            }
        }
        for (flag, on) in [
            ("-G", self.debug),
            ("-lineinfo", self.line_info),
            ("-rdc=true", self.relocatable),
        ] {
            if on {
                option(&[flag]);
            }
        }
        for extra in &self.extra {
            option(&[extra]);
        }
    }

    /// Refuses a macro definition with no name, which would reach NVRTC as a bare `-D` that
    /// takes the next option as the macro.
    fn check_defines(&self) -> Result<()> {
        let nameless = self.defines.iter().find(|(name, _)| {
            let identifier = name.split(['=', '(']).next().unwrap_or_default();
            !identifier.starts_with(|c: char| c == '_' || c.is_ascii_alphabetic())
        });
        match nameless {
            Some((name, value)) => Err(Error::InvalidMacro {
                definition: match value {
                    Some(value) => format!("{name}={value}"),
                    None => name.clone(),
                },
            }),
            None => Ok(()),
        }
    }

    /// Compiles and loads the result (with [`Library::loader`]'s defaults) in one call; the
    /// name expressions work as kernel names of the library.
    pub fn load(&self) -> Result<Library> {
        Library::loader().load_compiled(&self.compile()?)
    }

    /// Compiles with NVRTC, or takes the result of the same compile from the compile cache
    /// ([`crate::cache`]) without opening NVRTC; [`cache(false)`](Self::cache) always compiles.
    ///
    /// A source that does not compile is [`Error::Cuda`] whose [`log`](Error::log) holds NVRTC's
    /// log followed by the source lines it points at. Without an explicit architecture and without
    /// a GPU: [`Error::ArchRequired`]. PTX that this machine's driver could not load:
    /// [`Error::PtxNewerThanDriver`].
    pub fn compile(&self) -> Result<Compiled> {
        self.compile_or(Arch::current)
    }

    /// Compiles through `cache` instead of the process-wide [`Cache::global`]: a cache of the
    /// program's own, e.g. in a folder shipped with an application.
    pub fn compile_in(&self, cache: &Cache) -> Result<Compiled> {
        let arch = match self.arch {
            Some(arch) => arch,
            None => Arch::current()?,
        };
        super::cached::compile(self, cache, arch)
    }

    /// Compiles for the architecture named, else for `default()`'s, through the cache when it is
    /// on.
    pub(super) fn compile_or(&self, default: impl FnOnce() -> Result<Arch>) -> Result<Compiled> {
        let arch = match self.arch {
            Some(arch) => Ok(arch),
            None => default(),
        };
        if let (Some(cache), Ok(arch)) = (self.cache.then(Cache::global).flatten(), &arch) {
            return super::cached::compile(self, cache, *arch);
        }
        self.compile_uncached(arch, &self.default_folders())
    }

    /// The compile, with NVRTC, for `arch` (or its error), CUDA's header folders `defaults`
    /// searched after the program's own.
    pub(crate) fn compile_uncached(
        &self,
        arch: Result<Arch>,
        defaults: &[PathBuf],
    ) -> Result<Compiled> {
        let nvrtc = sys::nvrtc()?;
        let arch = arch?;
        require_supported(arch)?;
        self.check_defines()?;
        if self.output == Output::Ptx {
            PtxVerdict::here(nvrtc.version)
                .require_loadable(Component::Nvrtc, self.allow_newer_ptx)?;
        }
        let program = NvrtcProgram::create(&self.source, &self.name, &self.headers)?;
        for expression in &self.name_expressions {
            program.add_name_expression(expression)?;
        }
        let options = c_strings("NVRTC option", &self.options_with(arch, defaults))?;
        let compiled = program.compile(&options);
        let log = program.log()?;
        if let Err(Error::Cuda(mut failure)) = compiled {
            let mut files = vec![(self.name.as_str(), self.source.as_str())];
            files.extend(self.headers.iter().map(|(n, s)| (n.as_str(), s.as_str())));
            let annotated = diagnostic::annotate(&log, &files);
            if let Some(header) = diagnostic::missing_header(&log) {
                return Err(Error::HeaderNotFound {
                    provider: provider_of(&header),
                    searched: self.searched_for_headers(&header, defaults),
                    header,
                    log: annotated,
                });
            }
            failure.log = Some(annotated);
            return Err(Error::Cuda(failure));
        }
        compiled?;
        let code = program.code(self.output)?;
        let lowered_names = self
            .name_expressions
            .iter()
            .map(|expression| Ok((expression.clone(), program.lowered_name(expression)?)))
            .collect::<Result<_>>()?;
        Ok(Compiled {
            name: self.name.clone(),
            output: self.output,
            arch,
            code: code.into(),
            log,
            lowered_names,
            checked: None,
            cache_use: CacheUse::Off,
        })
    }
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
            .default_includes(false)
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
    fn the_cache_key_takes_the_options_as_pieces_in_the_encoding_of_the_texts() {
        use crate::cache::key::{FieldSink, Fields};
        let arch: Arch = "sm_90a".parse().unwrap();
        for program in [
            Program::new(""),
            Program::new("").output(Output::Ptx),
            Program::new("")
                .output(Output::LtoIr)
                .std(CppStandard::Cpp17)
                .define("A")
                .define_value("B", "two words")
                .include("/opt/include")
                .prec_div(false)
                .line_info(true)
                .option("--extra-device-vectorization"),
        ] {
            let mut texts = Fields::default();
            texts.fields(&program.options_with(arch, &[]));
            let mut pieces = Fields::default();
            pieces.texts_of_pieces(|option| program.each_option(arch, &[], option));
            assert_eq!(pieces, texts);
        }
    }

    #[test]
    fn the_output_decides_the_architecture_flag() {
        let arch = Arch::new(9, 0);
        let options = |output| {
            Program::new("")
                .output(output)
                .default_includes(false)
                .nvrtc_options(arch)
        };
        assert_eq!(options(Output::Cubin), ["-arch=sm_90"]);
        assert_eq!(options(Output::Ptx), ["-arch=compute_90"]);
        assert_eq!(options(Output::LtoIr), ["-arch=sm_90", "-dlto"]);
    }

    #[test]
    fn cuda_header_folders_come_after_the_programs_own() {
        let program = Program::new("").include("/mine").define("X");
        let defaults = [
            PathBuf::from("/cuda/include/cccl"),
            PathBuf::from("/cuda/include"),
        ];
        assert_eq!(
            program.options_with(Arch::new(9, 0), &defaults),
            [
                "-arch=sm_90",
                "-DX",
                "-I/mine",
                "-I/cuda/include/cccl",
                "-I/cuda/include"
            ]
        );
    }

    #[test]
    fn the_opt_out_adds_no_folder_and_says_so_when_a_header_is_missing() {
        let program = Program::new("").include("/mine").default_includes(false);
        assert_eq!(program.default_folders(), Vec::<PathBuf>::new());
        let searched = program.searched_for_headers("h.h", &[]);
        assert_eq!(searched[0], "/mine (Program::include)");
        assert!(
            searched[1].contains("default_includes(false)"),
            "{searched:?}"
        );
        for (name, folder) in [("k.cu", "the current folder"), ("src/k.cu", "src")] {
            let quoted = Program::new("#include \"h.h\"\n").name(name);
            let searched = quoted.searched_for_headers("h.h", &[]);
            assert!(
                searched[0].starts_with(&format!("{folder} (the folder of the program's name")),
                "{searched:?}"
            );
            let angled = quoted.searched_for_headers("other.h", &[]);
            assert!(
                angled.iter().all(|line| !line.contains("program's name")),
                "{angled:?}"
            );
        }
    }
}
