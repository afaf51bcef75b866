//! `Linker`: device code linked at run time by nvJitLink, with link-time optimization, in this
//! process or, isolated, in a link worker process.

use std::borrow::Cow;
use std::path::Path;
use std::time::Duration;

use super::compiled::Output;
use super::link_session::Session;
use super::target::{Arch, PtxVerdict};
use crate::api::c_string;
use crate::builder::setters;
use crate::cache::entry::{Entry, Listed, Listing};
use crate::cache::{Cache, KeyHasher};
use crate::error::{Error, Result};
use crate::image::ImageKind;
pub use crate::kinds::InputKind;
use crate::library::loader::Checks;
use crate::library::Library;
use crate::sys;
use crate::sys::locate::Component;
use crate::workers::{self, Limits};

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
    isolated: bool,
    time_limit: Option<Duration>,
    memory_limit: Option<u64>,
}

/// How long an isolated link may run unless [`LinkOptions::time_limit`] says otherwise.
pub const DEFAULT_LINK_TIME_LIMIT: Duration = Duration::from_secs(600);

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

    /// Links in a link worker process instead of this one: the way to link input this process
    /// did not produce itself ([`Linker`] states the trust model). nvJitLink crashing on a
    /// damaged input then ends the worker, and the link fails with [`Error::LinkStopped`] naming
    /// the inputs and the signal; the link can be stopped at a [time](Self::time_limit) and a
    /// [memory](Self::memory_limit) limit. Off by default.
    ///
    /// The worker is the `cudyn` executable found as the compile workers' is
    /// ([`crate::workers`]: [`set_workers`](crate::compile::set_workers), `CUDYN_WORKER`, or
    /// `cudyn` beside the program); without one the link fails, saying so, rather than run
    /// here. Workers are kept for later links: a link costs one message each way, the first
    /// also the worker's start.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use cudyn::compile::{Arch, InputKind, LinkOptions};
    /// use cudyn::error::LinkStop;
    /// use cudyn::Error;
    ///
    /// # let plugin: Vec<u8> = Vec::new();
    /// let options = LinkOptions::new()
    ///     .arch(Arch::new(9, 0))
    ///     .lto(true)
    ///     .isolated(true)
    ///     .time_limit(Duration::from_secs(30))
    ///     .memory_limit(2 << 30);
    /// let mut linker = options.linker()?;
    /// linker.add(InputKind::LtoIr, &plugin, "plugin.ltoir")?;
    /// match linker.finish() {
    ///     Ok(linked) => std::fs::write("plugin.cubin", linked.code()).expect("write"),
    ///     Err(Error::LinkStopped { stop: LinkStop::Signal(signal), .. }) => {
    ///         eprintln!("the plugin crashed nvJitLink (signal {signal}); this program goes on")
    ///     }
    ///     Err(error) => eprintln!("{error}"),
    /// }
    /// # Ok::<(), cudyn::Error>(())
    /// ```
    pub fn isolated(mut self, on: bool) -> Self {
        self.isolated = on;
        self
    }

    /// Stops a link that runs longer than `limit` (killing its worker), failing it with
    /// [`Error::LinkStopped`]; [`DEFAULT_LINK_TIME_LIMIT`] otherwise. Only a link in another
    /// process can be stopped, so this makes the link [isolated](Self::isolated).
    pub fn time_limit(mut self, limit: Duration) -> Self {
        self.time_limit = Some(limit);
        self.isolated = true;
        self
    }

    /// Stops a link whose worker's resident memory grows past `bytes` (killing the worker),
    /// failing it with [`Error::LinkStopped`]; no limit otherwise. A worker holds about 60 MiB
    /// before it links. This makes the link [isolated](Self::isolated).
    pub fn memory_limit(mut self, bytes: u64) -> Self {
        self.memory_limit = Some(bytes);
        self.isolated = true;
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
///
/// # Trust
///
/// nvJitLink believes what its inputs say of themselves, and a damaged input can crash it, keep
/// it busy for minutes or make it take gigabytes. cudyn **checks** every input before nvJitLink
/// sees it ([`add`](Self::add)): its kind, and every header, table and index the format's check
/// reads (cubins, fatbins, PTX, host objects and archives, as a load checks them), so that
/// truncated and most damaged code is refused with an error saying where. What the checks
/// cannot see, nvJitLink reads: the contents of LTO-IR (NVIDIA's own encoding, checked by its
/// header alone; two bytes changed in NVRTC's LTO-IR have crashed nvJitLink 13.0 with SIGSEGV)
/// and values that are well-formed but wrong (a relocation changed to another valid type,
/// several bytes changed at once), which nvJitLink 13.0 survived in every case measured but
/// which no check can prove harmless. A link
/// [**isolated**](LinkOptions::isolated) runs nvJitLink in a worker process, so such an input
/// ends the worker, not the caller: the link fails with [`Error::LinkStopped`], and so does a
/// link past its [time](LinkOptions::time_limit) or [memory](LinkOptions::memory_limit) limit.
/// **Left to the caller**: choosing isolation for input it did not produce itself (in-process
/// linking is the default, for code the program compiled), limits that suit its inputs, and what
/// it does with the linked code, which is as trustworthy as its inputs (load it, and the load
/// checks it again).
#[derive(Debug)]
pub struct Linker<'a> {
    arch: Arch,
    ptx: bool,
    mode: Mode<'a>,
    /// The cache key so far (options, then each input); `None` when not cached.
    key: Option<KeyHasher>,
}

/// Where the link runs.
#[derive(Debug)]
enum Mode<'a> {
    /// In this process: each input is handed to nvJitLink as it is added.
    InProcess(Session<'a>),
    /// In a link worker: the inputs are kept (borrowed where given as bytes) and sent with
    /// nvJitLink's options when the link finishes.
    Isolated {
        options: Vec<String>,
        limits: Limits,
        inputs: Vec<(InputKind, String, Cow<'a, [u8]>)>,
    },
}

impl<'a> Linker<'a> {
    /// Starts a link (`nvJitLinkCreate`; for an [isolated](LinkOptions::isolated) link, in the
    /// worker when it finishes, where an option nvJitLink refuses fails the link).
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
        let key = (!options.no_cache)
            .then(|| super::cached::link_hasher(&option_strings, options.ptx))
            .flatten();
        let mode = match options.isolated {
            false => Mode::InProcess(Session::create(&option_strings)?),
            true => {
                super::c_strings("link option", &option_strings)?;
                Mode::Isolated {
                    options: option_strings,
                    limits: Limits {
                        time: options.time_limit.unwrap_or(DEFAULT_LINK_TIME_LIMIT),
                        memory: options.memory_limit,
                    },
                    inputs: Vec::new(),
                }
            }
        };
        Ok(Linker {
            arch,
            ptx: options.ptx,
            mode,
            key,
        })
    }

    /// Adds an input from memory; `name` is what the logs call it.
    ///
    /// The bytes are checked first, as a load checks them ([`crate::Image::validate`]), since
    /// nvJitLink reads its inputs' headers without checking them: device code that is not of
    /// `kind` is [`Error::LinkInputKind`], damaged or truncated code [`Error::MalformedImage`],
    /// an executable cubin (compiled without relocatable device code, of which a link takes
    /// nothing) [`Error::NotRelocatable`].
    /// nvJitLink is told the kind found ([`InputKind::Any`] is resolved here). LTO-IR is checked
    /// by its header alone: its contents are NVIDIA's own encoding, and nvJitLink has crashed on
    /// damaged ones, so link LTO-IR from an untrusted source [isolated](LinkOptions::isolated)
    /// (see [Trust](Linker#trust)).
    pub fn add(&mut self, kind: InputKind, bytes: &'a [u8], name: &str) -> Result<&mut Self> {
        let kind = kind.checked(bytes, name)?;
        self.check_arch(kind, bytes, name)?;
        self.add_to_key(kind, name, bytes);
        match &mut self.mode {
            Mode::InProcess(session) => session.add(kind, bytes, name)?,
            Mode::Isolated { inputs, .. } => {
                c_string("input name", name)?;
                inputs.push((kind, name.to_owned(), Cow::Borrowed(bytes)));
            }
        }
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
        let kind = kind.checked(&bytes, text)?;
        self.check_arch(kind, &bytes, text)?;
        self.add_to_key(kind, text, &bytes);
        match &mut self.mode {
            Mode::InProcess(session) => session.add_owned(kind, bytes.into_boxed_slice(), text)?,
            Mode::Isolated { inputs, .. } => {
                c_string("file name", text)?;
                inputs.push((kind, text.to_owned(), Cow::Owned(bytes)));
            }
        }
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

    /// Links (`nvJitLinkComplete`) and returns the cubin (or the PTX, when
    /// [`LinkOptions::ptx`] asked for it) and the info log. A failure carries nvJitLink's error and
    /// info logs in [`Error::log`]; an isolated link stopped by a crash or a limit is
    /// [`Error::LinkStopped`].
    pub fn finish(self) -> Result<Linked> {
        let cached = self
            .key
            .as_ref()
            .map(KeyHasher::finish)
            .and_then(|key| Some((Cache::global()?, key)));
        if let Some(entry) = cached.as_ref().and_then(|(cache, key)| cache.lookup(key)) {
            return Ok(Linked {
                arch: entry.arch,
                output: entry.output,
                code: entry.code.to_vec(),
                info_log: entry.log.clone(),
            });
        }
        let (output, code, info_log) = match &self.mode {
            Mode::InProcess(session) => {
                let (output, code) = session.complete(self.ptx)?;
                (output, code, session.info_log())
            }
            Mode::Isolated {
                options,
                limits,
                inputs,
            } => {
                let inputs: Vec<workers::LinkInput> = inputs
                    .iter()
                    .map(|(kind, name, bytes)| (*kind, name.as_str(), &bytes[..]))
                    .collect();
                workers::link(options, self.ptx, &inputs, *limits)?
            }
        };
        let linked = Linked {
            arch: self.arch,
            output,
            code,
            info_log,
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

    /// Adds an input to the key.
    fn add_to_key(&mut self, kind: InputKind, name: &str, bytes: &[u8]) {
        if let Some(key) = &mut self.key {
            key.field(&[kind as u8]).field(name.as_bytes()).field(bytes);
        }
    }

    /// nvJitLink's info log so far; empty for an [isolated](LinkOptions::isolated) link, whose
    /// log comes with its result ([`Linked::info_log`], [`Error::log`]).
    pub fn info_log(&self) -> String {
        match &self.mode {
            Mode::InProcess(session) => session.info_log(),
            Mode::Isolated { .. } => String::new(),
        }
    }

    /// nvJitLink's error log so far; empty for an [isolated](LinkOptions::isolated) link.
    pub fn error_log(&self) -> String {
        match &self.mode {
            Mode::InProcess(session) => session.error_log(),
            Mode::Isolated { .. } => String::new(),
        }
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

/// Links several LTO-IR pieces into one cubin with link-time optimization, for `arch` (the
/// current device's when `None`).
pub fn link_lto(pieces: &[&[u8]], arch: Option<Arch>) -> Result<Linked> {
    let mut linker = options_for(arch).lto(true).linker()?;
    for (index, piece) in pieces.iter().enumerate() {
        linker.add(InputKind::LtoIr, piece, &format!("piece{index}.ltoir"))?;
    }
    linker.finish()
}

/// What the compile layer adds to the library below it: loading LTO-IR in one call.
impl Library {
    /// Links LTO-IR pieces for this GPU with link-time optimization (nvJitLink) and loads the
    /// result: the pieces of a program compiled with `Program::output(Output::LtoIr)` and
    /// `relocatable(true)`, in one call.
    pub fn from_lto_ir(pieces: &[&[u8]]) -> Result<Library> {
        link_lto(pieces, None)?.load()
    }
}

/// Compiles PTX to a cubin with nvJitLink, for `arch` (the current device's when `None`).
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
        assert_eq!(
            failure.hint.as_deref(),
            Some(crate::compile::link_session::UNDEFINED_HINT)
        );
        assert!(
            error.to_string().contains("missing a definition"),
            "{error}"
        );
    }
}
