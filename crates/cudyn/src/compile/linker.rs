//! `Linker`: device code linked at run time by nvJitLink, with link-time optimization.

use std::ffi::CString;
use std::marker::PhantomData;
use std::path::Path;

use super::compiled::Output;
use super::link_thread::{self, Handle};
use super::target::{Arch, PtxVerdict};
use super::{c_strings, text_of};
use crate::api::c_string;
use crate::api::nvjitlink as api;
use crate::builder::setters;
use crate::cache::entry::{Entry, Listed, Listing};
use crate::cache::{Cache, KeyHasher};
use crate::error::{Error, Result};
use crate::image::ImageKind;
pub use crate::kinds::InputKind;
use crate::library::loader::Checks;
use crate::library::Library;
use crate::sys::locate::Component;
use crate::sys::{self, nvjitlink};

impl InputKind {
    /// The kind nvJitLink is told for `bytes` added as this kind, once they are checked to be
    /// that kind of device code, whole (see [`Linker::add`]).
    fn checked(self, bytes: &[u8], name: &str) -> Result<InputKind> {
        let what = || name.to_owned();
        let found = crate::image::detected(bytes, &what)?;
        if self.image_kind().is_some_and(|declared| declared != found) {
            return Err(Error::LinkInputKind {
                what: what(),
                declared: self,
                found,
                suggested: InputKind::of(found),
            });
        }
        crate::image::validate_link_input(bytes, found, &what)?;
        if found == ImageKind::Cubin && crate::image::is_executable_cubin(bytes) {
            return Err(Error::NotRelocatable { what: what() });
        }
        Ok(InputKind::of(found))
    }

    fn raw(self) -> nvjitlink::nvJitLinkInputType {
        match self {
            InputKind::Cubin => nvjitlink::NVJITLINK_INPUT_CUBIN,
            InputKind::Ptx => nvjitlink::NVJITLINK_INPUT_PTX,
            InputKind::LtoIr => nvjitlink::NVJITLINK_INPUT_LTOIR,
            InputKind::Fatbin => nvjitlink::NVJITLINK_INPUT_FATBIN,
            InputKind::Object => nvjitlink::NVJITLINK_INPUT_OBJECT,
            InputKind::Library => nvjitlink::NVJITLINK_INPUT_LIBRARY,
            InputKind::Any => nvjitlink::NVJITLINK_INPUT_ANY,
        }
    }
}

/// How to link; [`LinkOptions::linker`] starts a link with them ([`Linker`] shows one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkOptions {
    arch: Option<Arch>,
    lto: bool,
    optimization: Option<u8>,
    max_registers: Option<u32>,
    ptxas: Vec<String>,
    debug: bool,
    line_info: bool,
    verbose: bool,
    ptx: bool,
    allow_newer_ptx: bool,
    extra: Vec<String>,
    /// Set by `cache(false)`: the default (derived) is to use the cache.
    no_cache: bool,
}

impl LinkOptions {
    /// Links SASS for the calling thread's current device, without link-time optimization.
    pub fn new() -> Self {
        LinkOptions::default()
    }

    setters! {
        /// Links for this architecture instead of the current device's. Required where there is no
        /// GPU.
        arch(arch: Arch) => Some;

        /// Link-time optimization (`-lto`): LTO-IR inputs are optimized together, so calls across
        /// pieces can be inlined.
        lto(on: bool);

        /// The optimization level of link-time code generation (`-O0` to `-O3`).
        optimization(level: u8) => Some;

        /// The most registers a thread may use (`-maxrregcount`).
        max_registers(count: u32) => Some;

        /// Debug information (`-g`).
        debug(on: bool);

        /// Line information for profilers (`-lineinfo`).
        line_info(on: bool);

        /// Detailed information in the info log (`-verbose`).
        verbose(on: bool);

        /// Emits the linked program as PTX instead of a cubin (`-ptx`; needs [`lto`](Self::lto)).
        /// Refused when nvJitLink is newer than this machine's driver, unless
        /// [`allow_newer_ptx`](Self::allow_newer_ptx).
        ptx(on: bool);

        /// Emits PTX even when nvJitLink is newer than this machine's driver (the PTX is for another
        /// machine).
        allow_newer_ptx(allow: bool);
    }

    /// Passes an option to ptxas (`-Xptxas=`).
    pub fn ptxas(mut self, option: impl Into<String>) -> Self {
        self.ptxas.push(option.into());
        self
    }

    /// Whether the link's result goes through the process-wide compile cache
    /// ([`Cache::global`]); on by default. A hit skips `nvJitLinkComplete`, the link's costly
    /// step; nvJitLink is still opened and given the inputs, which is cheap.
    pub fn cache(mut self, on: bool) -> Self {
        self.no_cache = !on;
        self
    }

    /// Passes an nvJitLink option cudyn has no typed setter for, as is.
    pub fn option(mut self, option: impl Into<String>) -> Self {
        self.extra.push(option.into());
        self
    }

    /// The options handed to nvJitLink when linking for `arch`, in order.
    pub fn nvjitlink_options(&self, arch: Arch) -> Vec<String> {
        let mut options = vec![format!("-arch={}", arch.sm())];
        if self.lto {
            options.push("-lto".to_owned());
        }
        if self.ptx {
            options.push("-ptx".to_owned());
        }
        if let Some(level) = self.optimization {
            options.push(format!("-O{level}"));
        }
        if let Some(count) = self.max_registers {
            options.push(format!("-maxrregcount={count}"));
        }
        options.extend(self.ptxas.iter().map(|option| format!("-Xptxas={option}")));
        for (flag, on) in [
            ("-g", self.debug),
            ("-lineinfo", self.line_info),
            ("-verbose", self.verbose),
        ] {
            if on {
                options.push(flag.to_owned());
            }
        }
        options.extend(self.extra.iter().cloned());
        options
    }

    /// Starts a link with these options.
    pub fn linker<'a>(&self) -> Result<Linker<'a>> {
        Linker::new(self)
    }
}

/// A link in progress: add inputs, then [`finish`](Linker::finish).
///
/// ```no_run
/// use cudyn::compile::{Arch, InputKind, LinkOptions};
///
/// # let (kernel, helper): (Vec<u8>, Vec<u8>) = (Vec::new(), Vec::new());
/// let mut linker = LinkOptions::new().arch(Arch::new(9, 0)).lto(true).linker()?;
/// linker.add(InputKind::LtoIr, &kernel, "kernel.ltoir")?;
/// linker.add(InputKind::LtoIr, &helper, "helper.ltoir")?;
/// let linked = linker.finish()?;
/// std::fs::write("linked.cubin", linked.code()).expect("write");
/// # Ok::<(), cudyn::Error>(())
/// ```
///
/// Inputs given as bytes are borrowed until the link finishes: nvJitLink may read them as late as
/// that.
#[derive(Debug)]
pub struct Linker<'a> {
    /// Used on the link thread only (see [`link_thread`]).
    raw: Handle,
    arch: Arch,
    ptx: bool,
    /// The inputs' names: nvJitLink keeps the pointers and reads them when it writes its logs
    /// (measured with nvJitLink 13.0: a name freed after `nvJitLinkAddData` came out as garbage
    /// in an undefined-reference error).
    names: Vec<CString>,
    inputs: PhantomData<&'a [u8]>,
    /// The bytes of the inputs read from files, kept as the borrowed inputs are (`'a`): until
    /// the handle is destroyed.
    files: Vec<Box<[u8]>>,
    /// The cache key so far (options, then each input); `None` when not cached.
    key: Option<KeyHasher>,
}

impl<'a> Linker<'a> {
    /// Starts a link (`nvJitLinkCreate`).
    ///
    /// Without an architecture and without a GPU: [`Error::ArchRequired`].
    pub fn new(options: &LinkOptions) -> Result<Self> {
        let nvjitlink = sys::nvjitlink()?;
        let arch = match options.arch {
            Some(arch) => arch,
            None => Arch::current()?,
        };
        if options.ptx {
            PtxVerdict::here(nvjitlink.version)
                .require_loadable(Component::NvJitLink, options.allow_newer_ptx)?;
        }
        let option_strings = options.nvjitlink_options(arch);
        let strings = c_strings("link option", &option_strings)?;
        let (raw, created) = link_thread::run(|| {
            let mut raw = std::ptr::null_mut();
            let created = api::create(&mut raw, &strings);
            (Handle::new(raw), created)
        });
        if raw.get().is_null() {
            // nvJitLink keeps no handle, and so no log, when it rejects an option.
            return Err(created.err().unwrap_or(Error::EmptyOutput {
                producer: Component::NvJitLink,
                what: "link handle",
                hint: "the nvJitLink library is probably damaged; reinstall it",
            }));
        }
        let linker = Linker {
            raw,
            arch,
            ptx: options.ptx,
            names: Vec::new(),
            inputs: PhantomData,
            files: Vec::new(),
            key: (!options.no_cache)
                .then(|| super::cached::link_hasher(&option_strings, options.ptx))
                .flatten(),
        };
        linker.with_logs(created)?;
        Ok(linker)
    }

    /// Adds an input from memory; `name` is what the logs call it.
    ///
    /// The bytes are checked first, as a load checks them ([`crate::Image::validate`]), since
    /// nvJitLink reads its inputs' headers without checking them: device code that is not of
    /// `kind` is [`Error::LinkInputKind`], damaged or truncated code [`Error::MalformedImage`],
    /// an executable cubin (compiled without relocatable device code, of which a link takes
    /// nothing) [`Error::NotRelocatable`].
    /// nvJitLink is told the kind found ([`InputKind::Any`] is resolved here). LTO-IR is checked
    /// by its header alone: its contents are NVIDIA's own encoding, and nvJitLink has aborted the
    /// process on a damaged one ("LLVM ERROR"), so link LTO-IR from an untrusted source in a
    /// process of its own (`cudyn link`, say).
    pub fn add(&mut self, kind: InputKind, bytes: &'a [u8], name: &str) -> Result<&mut Self> {
        let kind = kind.checked(bytes, name)?;
        self.check_arch(kind, bytes, name)?;
        let name = c_string("input name", name)?;
        // SAFETY: `bytes` stays borrowed for the linker's life ('a), which outlasts the handle.
        let added = unsafe { self.add_checked(kind, bytes, name) };
        self.with_logs(added)?;
        Ok(self)
    }

    /// Adds an input from a file, checked as [`add`](Self::add) checks bytes.
    ///
    /// The file is read once, and the bytes checked are the bytes nvJitLink links: it is not
    /// handed the path to read the file again, which could find it changed in between.
    pub fn add_file(&mut self, kind: InputKind, path: impl AsRef<Path>) -> Result<&mut Self> {
        let path = path.as_ref();
        let Some(text) = path.to_str() else {
            return Err(Error::NonUtf8Path {
                path: path.to_owned(),
            });
        };
        let bytes = std::fs::read(path).map_err(|error| Error::read_file(path, error))?;
        let bytes = bytes.into_boxed_slice();
        let kind = kind.checked(&bytes, text)?;
        self.check_arch(kind, &bytes, text)?;
        let name = c_string("file name", text)?;
        // SAFETY: the bytes move into `self.files` right after, whatever nvJitLink answered;
        // moving the box does not move its heap bytes, which stay there until the handle is
        // destroyed (`Drop` destroys it before the fields are dropped).
        let added = unsafe { self.add_checked(kind, &bytes, name) };
        self.files.push(bytes);
        self.with_logs(added)?;
        Ok(self)
    }

    /// Refuses a cubin, of `bytes` (checked), whose machine code is for another architecture than
    /// the link's: [`Error::LinkArchMismatch`], where nvJitLink would say only "bad input".
    fn check_arch(&self, kind: InputKind, bytes: &[u8], name: &str) -> Result<()> {
        if kind != InputKind::Cubin {
            return Ok(());
        }
        let Ok(cubin) = crate::inspect::cubin::parse(bytes) else {
            return Ok(());
        };
        if cubin.arch == self.arch.number() {
            return Ok(());
        }
        Err(Error::LinkArchMismatch {
            what: name.to_owned(),
            input: cubin.arch_name(),
            link: self.arch.sm(),
        })
    }

    /// Hands nvJitLink `bytes`, of `kind` (checked), under `name`, and adds them to the key;
    /// returns nvJitLink's answer, whose logs the caller reads.
    ///
    /// # Safety
    /// `bytes` stay alive and unchanged until the handle is destroyed: nvJitLink may read them
    /// until the link.
    unsafe fn add_checked(&mut self, kind: InputKind, bytes: &[u8], name: CString) -> Result<()> {
        let raw = self.raw;
        let added = link_thread::run(|| {
            // SAFETY: the handle is live; the caller keeps `bytes` alive for the handle's life,
            // and the name is kept in `self.names` until the handle is destroyed.
            unsafe { api::add_data(raw.get(), kind.raw(), bytes, &name) }
        });
        self.add_to_key(kind, name.as_bytes(), Some(bytes));
        // The heap bytes of a CString do not move with it.
        self.names.push(name);
        added
    }

    /// Links (`nvJitLinkComplete`) and returns the cubin (or the PTX, when
    /// [`LinkOptions::ptx`] asked for it) and the info log. A failure carries nvJitLink's error and
    /// info logs in [`Error::log`].
    pub fn finish(self) -> Result<Linked> {
        let cached = self
            .key
            .as_ref()
            .map(KeyHasher::finish)
            .and_then(|key| Some((Cache::global()?, key)));
        if let Some(entry) = cached.and_then(|(cache, key)| cache.lookup(&key)) {
            return Ok(Linked {
                arch: entry.arch,
                output: entry.output,
                code: entry.code.to_vec(),
                info_log: entry.log.clone(),
            });
        }
        let raw = self.raw;
        let completed = link_thread::run(|| {
            // SAFETY: the handle is live and the inputs are borrowed for 'a, which `self` is
            // within.
            unsafe { api::complete(raw.get()) }
        });
        self.with_logs(completed)?;
        let ptx = self.ptx;
        let (output, code) = link_thread::run(|| {
            // SAFETY: the handle is live and the link completed.
            unsafe {
                Ok::<_, Error>(if ptx {
                    (Output::Ptx, api::get_linked_ptx(raw.get())?)
                } else {
                    (Output::Cubin, api::get_linked_cubin(raw.get())?)
                })
            }
        })?;
        let linked = Linked {
            arch: self.arch,
            output,
            code,
            info_log: self.info_log(),
        };
        if let Some((cache, key)) = cached {
            cache.store(Entry {
                key,
                output,
                arch: linked.arch,
                log: linked.info_log.clone(),
                lowered_names: Vec::new(),
                listing: Listing::of(&Listed {
                    name: String::new(),
                    toolchain: vec![format!("nvJitLink {}", sys::nvjitlink()?.version)],
                    kernels: Entry::kernels_of(&linked.code),
                    created: std::time::SystemTime::now(),
                }),
                code: linked.code.as_slice().into(),
                checked: None,
                toolchain: Vec::new().into(),
                inputs: Vec::new().into(),
            });
        }
        Ok(linked)
    }

    /// Adds an input to the key; an input whose bytes cannot be read makes the link uncached.
    fn add_to_key(&mut self, kind: InputKind, name: &[u8], bytes: Option<&[u8]>) {
        match bytes {
            Some(bytes) => {
                if let Some(key) = &mut self.key {
                    key.field(&[kind as u8]).field(name).field(bytes);
                }
            }
            None => self.key = None,
        }
    }

    /// nvJitLink's info log so far.
    pub fn info_log(&self) -> String {
        let raw = self.raw;
        readable_log(link_thread::run(|| {
            // SAFETY: the handle is live.
            unsafe { api::get_info_log(raw.get()) }
        }))
    }

    /// nvJitLink's error log so far.
    pub fn error_log(&self) -> String {
        let raw = self.raw;
        readable_log(link_thread::run(|| {
            // SAFETY: the handle is live.
            unsafe { api::get_error_log(raw.get()) }
        }))
    }

    /// Attaches the logs to a failed call's error.
    fn with_logs(&self, outcome: Result<()>) -> Result<()> {
        outcome.map_err(|error| match error {
            Error::Cuda(mut failure) => {
                let mut log = self.error_log();
                if log.contains(UNDEFINED_REFERENCE) {
                    failure.hint = Some(UNDEFINED_HINT.to_owned());
                }
                let info = self.info_log();
                if !info.trim().is_empty() {
                    log.push_str("\ninfo log:\n");
                    log.push_str(&info);
                }
                failure.log = Some(log);
                Error::Cuda(failure)
            }
            other => other,
        })
    }
}

/// What nvJitLink's error log says of a symbol an input uses and no input defines, a failure it
/// reports with the status of an internal error.
const UNDEFINED_REFERENCE: &str = "Undefined reference";

/// What a link that failed on an undefined reference needs.
const UNDEFINED_HINT: &str = "The link is missing a definition (the log names the symbol and \
    the input that uses it): add the input that defines it, such as the piece compiled from its \
    source, or libcudadevrt.a for kernels that launch kernels.";

/// A log as text. A log that cannot be read is reported as its reason: it is read only to
/// explain something else.
fn readable_log(bytes: Result<Vec<u8>>) -> String {
    bytes.map_or_else(|error| format!("(log unavailable: {error})"), text_of)
}

impl Drop for Linker<'_> {
    fn drop(&mut self) {
        let raw = self.raw;
        let _ = link_thread::run(|| {
            // SAFETY: the handle is live and destroyed once; a failure leaks it, nothing more.
            unsafe { api::destroy(&mut raw.get()) }
        });
    }
}

/// What a finished link produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Linked {
    arch: Arch,
    output: Output,
    code: Vec<u8>,
    info_log: String,
}

impl Linked {
    /// The architecture linked for.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// What the code is: a cubin, or PTX when [`LinkOptions::ptx`] asked for it.
    pub fn output(&self) -> Output {
        self.output
    }

    /// The linked code, ready for `cudaLibraryLoadData` (PTX includes its terminating NUL).
    pub fn code(&self) -> &[u8] {
        &self.code
    }

    /// The linked code, owned.
    pub fn into_code(self) -> Vec<u8> {
        self.code
    }

    /// Loads the linked cubin (with [`Library::loader`]'s defaults), checked as compiler output
    /// (its kind, and that it is not relocatable): its bytes are nvJitLink's, made in this
    /// process or read back from the compile cache under their checksum, and cannot have been
    /// changed since (this type gives them out only to read or to keep).
    pub fn load(&self) -> Result<Library> {
        Library::loader().load_checked(
            &[],
            &self.code,
            &|| crate::image::bytes_given(&self.code),
            Checks::CompilerOutput,
        )
    }

    /// nvJitLink's info log.
    pub fn info_log(&self) -> &str {
        &self.info_log
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_options_become_nvjitlink_flags() {
        let options = LinkOptions::new()
            .lto(true)
            .ptx(true)
            .optimization(3)
            .max_registers(64)
            .ptxas("-v")
            .ptxas("--warn-on-spills")
            .debug(true)
            .line_info(true)
            .verbose(true)
            .option("-time");
        assert_eq!(
            options.nvjitlink_options(Arch::new(9, 0)),
            [
                "-arch=sm_90",
                "-lto",
                "-ptx",
                "-O3",
                "-maxrregcount=64",
                "-Xptxas=-v",
                "-Xptxas=--warn-on-spills",
                "-g",
                "-lineinfo",
                "-verbose",
                "-time",
            ]
        );
        assert_eq!(
            LinkOptions::new().nvjitlink_options(Arch::new(8, 6)),
            ["-arch=sm_86"]
        );
    }

    #[test]
    fn an_undefined_reference_names_the_input_it_is_in() {
        let piece = crate::compile::Program::new(
            "__device__ float step(float);\n\
             extern \"C\" __global__ void k(float *p) { *p = step(*p); }",
        )
        .arch(Arch::new(9, 0))
        .relocatable(true)
        .compile()
        .unwrap();
        let mut linker = LinkOptions::new().arch(Arch::new(9, 0)).linker().unwrap();
        linker
            .add(InputKind::Cubin, piece.code(), "kernel_piece.cubin")
            .unwrap();
        let error = linker.finish().unwrap_err();
        let log = error.log().unwrap_or_default();
        assert!(log.contains("Undefined reference"), "{log}");
        assert!(log.contains("'kernel_piece.cubin'"), "{log}");
        // nvJitLink calls it an internal error: the message says what it is.
        let Error::Cuda(failure) = &error else {
            panic!("{error:?}");
        };
        assert_eq!(failure.hint.as_deref(), Some(UNDEFINED_HINT));
        assert!(
            error.to_string().contains("missing a definition"),
            "{error}"
        );
    }
}
