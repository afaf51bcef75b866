//! One error type for everything cudyn does.
//!
//! Every failure says what was attempted and what to do about it: a library that was not found
//! lists every place searched, a failed CUDA call names the call, the CUDA error name and its text,
//! and carries the compiler's or JIT's log when there is one.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use crate::arch::Arch;
use crate::component::Component;
use crate::kinds::{ImageKind, InputKind};
use crate::version::Version;

mod call;
mod kind;
mod messages;
mod methods;

pub use call::CallError;
pub use kind::ErrorKind;
pub use messages::LinkStop;
use messages::{kernel_not_found_message, linked_kernel_message, not_found_message, nul_in};

/// The result type of every fallible cudyn call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in cudyn.
///
/// `Error` is `Clone` so that the outcome of opening a CUDA library, which happens once per
/// process, can be handed to every later caller. Its message says what failed and what to do;
/// the variants carry the same facts for a program to act on.
///
/// ```no_run
/// use cudyn::{Error, Library};
///
/// match Library::from_file("kernels.cubin") {
///     Ok(library) => println!("{} kernels", library.kernels()?.len()),
///     Err(Error::LibraryNotFound { component, .. }) => {
///         eprintln!("{component} is missing: {}", component.install_hint())
///     }
///     Err(error) if error.cuda_code().is_some() => eprintln!("CUDA refused it: {error}"),
///     Err(error) => eprintln!("{error}"),
/// }
/// # Ok::<(), cudyn::Error>(())
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A CUDA library was found in none of the places searched.
    #[error("{}", not_found_message(*component, searched))]
    LibraryNotFound {
        /// The library that was looked for.
        component: Component,
        /// Every place searched, in order, as "what: where".
        searched: Vec<String>,
    },

    /// A CUDA library was found but the system loader could not open it.
    #[error("{component}: cannot open {}: {reason}", path.display())]
    LibraryOpen {
        /// The library that was being opened.
        component: Component,
        /// The file (or soname) handed to the loader.
        path: PathBuf,
        /// What the loader said.
        reason: String,
    },

    /// An opened CUDA library lacks an entry point cudyn needs for the call being made.
    #[error(
        "{component} at {} has no entry point `{symbol}`: it is too old for this call; \
         install a newer one (cudyn is tested with CUDA 13.0)",
        path.display()
    )]
    MissingSymbol {
        /// The library that lacks the symbol.
        component: Component,
        /// Where that library was opened from.
        path: PathBuf,
        /// The missing entry point.
        symbol: &'static str,
    },

    /// An opened CUDA library is older than cudyn supports.
    #[error(
        "{component} at {} is version {found}, but cudyn needs {needed} or newer; \
         install a newer one or point CUDYN_LIBRARY_PATH at one",
        path.display()
    )]
    VersionTooOld {
        /// The library that is too old.
        component: Component,
        /// Where that library was opened from.
        path: PathBuf,
        /// The version found.
        found: Version,
        /// The oldest version cudyn accepts.
        needed: Version,
    },

    /// An opened CUDA library lacks the entry point that reports its version, which means it
    /// predates the oldest version cudyn supports.
    #[error(
        "{component} at {} is too old: it has no `{symbol}` entry point, so its version cannot be \
         read, and every {component} since {needed} has one; install {component} {needed} or \
         newer, or point CUDYN_LIBRARY_PATH at one",
        path.display()
    )]
    VersionUnreadable {
        /// The library whose version cannot be read.
        component: Component,
        /// Where that library was opened from.
        path: PathBuf,
        /// The missing version entry point.
        symbol: &'static str,
        /// The oldest version cudyn accepts.
        needed: Version,
    },

    /// A call into a CUDA library returned an error status.
    #[error(transparent)]
    Cuda(Box<CallError>),

    /// A header the source includes is in none of the folders NVRTC searched.
    #[error(
        "the header `{header}` was not found: {provider}\nsearched, in order:\n  {}\nlog:\n{}",
        searched.join("\n  "),
        log.trim_end()
    )]
    HeaderNotFound {
        /// The header as the source names it, e.g. `cuda/std/complex`.
        header: String,
        /// The folders searched and, when CUDA's own headers were not found, the places looked
        /// for them.
        searched: Vec<String>,
        /// Which package or toolkit provides the header, as the fix.
        provider: &'static str,
        /// NVRTC's log, annotated with the source lines it points at.
        log: String,
    },

    /// The CUDA library search path was changed after a library had been opened.
    #[error(
        "the CUDA library search path cannot change now: {opened} is already in use (opened, \
         or identified by the compile cache); call cudyn::set_library_path before the first \
         CUDA call or compile"
    )]
    SearchPathFrozen {
        /// The library that was already open.
        opened: Component,
    },

    /// Device code has no kernel of the name asked for whose parameter layout it records.
    #[error(
        "this {kind} defines no kernel named `{name}` with a known parameter layout (names are \
         the symbols as the driver knows them: mangled for kernels without C linkage)"
    )]
    KernelNotInImage {
        /// The kind of device code searched.
        kind: ImageKind,
        /// The name asked for.
        name: String,
    },

    /// A library has no kernel of the name asked for.
    #[error("{}", kernel_not_found_message(name, available, log.as_deref()))]
    KernelNotFound {
        /// The name asked for.
        name: String,
        /// The kernels the library has, nearest to `name` first.
        available: Vec<String>,
        /// The JIT log of the library's load, when it said anything.
        log: Option<String>,
    },

    /// `cudaGetKernel` in the CUDA runtime cudyn uses knows no kernel for a host entry function:
    /// the function was registered with another runtime instance (each program or shared library
    /// linked with `-cudart static` carries its own), or it is not a `__global__` function.
    #[error(
        "no kernel is registered for the host function at {entry:#x} in the CUDA runtime cudyn \
         uses ({}): take the handle where the kernel was registered (call cudaGetKernel in the \
         code linked with the kernel, as cudyn-build's kernel getters do, and pass it to \
         Kernel::from_raw or Kernel::from_getter), or link that code with `-cudart shared` so \
         that it shares this libcudart; {call}",
        runtime.display()
    )]
    KernelNotRegistered {
        /// The host entry function's address.
        entry: usize,
        /// The runtime cudyn asked, the file it was opened from.
        runtime: PathBuf,
        /// The failed `cudaGetKernel`.
        call: Box<CallError>,
    },

    /// A kernel getter (see `Kernel::from_getter`) of a kernel linked into this program failed.
    #[error("{}", linked_kernel_message(name, call))]
    LinkedKernel {
        /// The kernel's name, as the getter's caller gave it.
        name: String,
        /// The failed `cudaGetKernel`, run by the getter.
        call: Box<CallError>,
    },

    /// A kernel that a build script was to link into this program is not there: the build ran
    /// without nvcc (cudyn-build's `compile_or_stub`), so the program was built without it.
    #[error("the kernel `{name}` was not linked into this program: {reason}")]
    KernelNotLinked {
        /// The kernel's name.
        name: String,
        /// Why the build left it out, with what to do.
        reason: String,
    },

    /// A device variable's size differs from the size of the Rust type it is read or written as.
    #[error(
        "device variable `{name}` is {device_bytes} bytes, but the Rust type {rust_type} is \
         {rust_bytes} bytes: use a type of the variable's exact size"
    )]
    VariableSize {
        /// The variable's name.
        name: String,
        /// Its size on the device.
        device_bytes: usize,
        /// The Rust type asked for.
        rust_type: &'static str,
        /// That type's size.
        rust_bytes: usize,
    },

    /// The arguments of a launch do not match the kernel's parameters; nothing was launched.
    #[error("kernel `{kernel}`: {mismatch}")]
    LaunchArguments {
        /// The kernel's name.
        kernel: String,
        /// What does not match.
        mismatch: crate::mismatch::ArgumentMismatch,
    },

    /// A launch configuration exceeds what the device or the kernel allows; nothing was launched.
    #[error("kernel `{kernel}`: {violation}")]
    LaunchConfig {
        /// The kernel's name.
        kernel: String,
        /// Which limit is exceeded.
        violation: crate::mismatch::ConfigViolation,
    },

    /// Device code was to be compiled for the current GPU, but there is none to ask.
    #[error(
        "no target architecture: name one with Program::arch or LinkOptions::arch (`--arch sm_90` \
         on the command line). Without one cudyn compiles for the current GPU, but {reason}; \
         `cudyn doctor` shows what CUDA is installed"
    )]
    ArchRequired {
        /// Why the current GPU's architecture is unknown, in a few words ("no CUDA driver was
        /// found").
        reason: String,
        /// The failure behind it, with every detail (the places searched for the driver, ...).
        #[source]
        cause: Box<Error>,
    },

    /// A compiler was asked for an architecture it does not know.
    #[error(
        "{compiler} {version} cannot compile for {arch}; it supports {}",
        supported.iter().map(Arch::sm).collect::<Vec<_>>().join(", ")
    )]
    ArchUnsupported {
        /// The compiler (NVRTC).
        compiler: Component,
        /// Its version.
        version: Version,
        /// The architecture asked for.
        arch: Arch,
        /// The architectures it compiles for, oldest first.
        supported: Vec<Arch>,
    },

    /// Text that is not a GPU architecture was given as one.
    #[error(
        "`{text}` is not a GPU architecture: write it as sm_90, compute_90, 90 or 9.0 \
         (optionally with the suffix a or f, as in sm_90a)"
    )]
    InvalidArch {
        /// The text given.
        text: String,
    },

    /// A macro definition without a name ([`Program::define`](crate::Program::define) or
    /// `define_value` with an empty name, or one that is no C identifier): NVRTC would take the
    /// next option as the macro.
    #[error(
        "`-D{definition}` is not a macro definition: a macro needs a name, a C identifier \
         (Program::define(\"NAME\") or define_value(\"NAME\", \"VALUE\"))"
    )]
    InvalidMacro {
        /// The definition as it would reach NVRTC after `-D`.
        definition: String,
    },

    /// A string handed to a C API holds a NUL byte, which would cut it short. The message says
    /// where, with the text around it, not the whole text (a source may be megabytes long).
    #[error(
        "the {what} contains a NUL byte, which a C string cannot hold: {}",
        nul_in(text)
    )]
    NulByte {
        /// What the string is: "source", "link option", ...
        what: &'static str,
        /// The string.
        text: String,
    },

    /// A file name that nvJitLink cannot take: it accepts UTF-8 names only.
    #[error(
        "nvJitLink takes UTF-8 file names only: read {} yourself and add its bytes \
         (Linker::add)",
        path.display()
    )]
    NonUtf8Path {
        /// The file.
        path: PathBuf,
    },

    /// A compiler or linker reported success but produced nothing.
    #[error("{producer} reported success but produced no {what}; {hint}")]
    EmptyOutput {
        /// NVRTC or nvJitLink.
        producer: Component,
        /// What was expected: "cubin", "link handle", ...
        what: &'static str,
        /// What probably caused it.
        hint: &'static str,
    },

    /// PTX was asked for, but the driver here is older than the compiler that would emit it, so
    /// the driver would reject it (`CUDA_ERROR_UNSUPPORTED_PTX_VERSION`).
    #[error(
        "{producer} {producer_version} emits PTX that this driver (CUDA {driver}) cannot load \
         (it would fail with CUDA_ERROR_UNSUPPORTED_PTX_VERSION). Fixes: compile to SASS for the \
         GPU instead (Output::Cubin, the default; `cudyn compile --emit cubin`), or finish the PTX to a \
         cubin with an nvJitLink at least as new as {producer} (cudyn::compile::ptx_to_cubin; it \
         may be newer than the driver); \
         to write PTX meant for another machine's driver, allow it explicitly \
         (Program::allow_newer_ptx, `--allow-newer-ptx`)"
    )]
    PtxNewerThanDriver {
        /// The library that would emit the PTX (NVRTC or nvJitLink).
        producer: Component,
        /// Its version, which is also the PTX ISA generation it emits.
        producer_version: Version,
        /// The CUDA version the driver supports.
        driver: Version,
    },

    /// Bytes handed to cudyn as device code are none of the kinds it knows.
    #[error("{what} is not device code: {reason}")]
    NotDeviceCode {
        /// What was examined: a file name, or "the N-byte image given".
        what: String,
        /// Why it is not device code, e.g. what its first bytes are.
        reason: String,
    },

    /// Device code of a known kind is damaged or truncated: it was refused before any CUDA call,
    /// because the driver trusts an image's own headers and would read past its end.
    #[error(
        "{what} is a damaged {kind}: {error}; rebuild it, or check that the file was copied whole"
    )]
    MalformedImage {
        /// What was examined: a file name, or "the N-byte image given".
        what: String,
        /// The kind the bytes were detected as.
        kind: ImageKind,
        /// What is wrong and where.
        error: crate::parse_error::ParseError,
    },

    /// An input added to a link as one kind holds device code of another.
    #[error(
        "{what} was added to the link as InputKind::{declared:?} but holds {found}: add it as \
         InputKind::{suggested:?}, or as InputKind::Any to link whatever it holds"
    )]
    LinkInputKind {
        /// The input's name.
        what: String,
        /// The kind it was added as.
        declared: InputKind,
        /// The kind its bytes were detected as.
        found: ImageKind,
        /// The input kind of what was found.
        suggested: InputKind,
    },

    /// A cubin added to a link for another architecture: machine code links only into its own,
    /// and nvJitLink says no more than "bad input".
    #[error(
        "{what} is machine code (SASS) for {input}, and the link is for {link}: SASS links only \
         into its own architecture. Link for {input} (LinkOptions::arch, `--arch {input}` on the \
         command line), or compile the input for {link}, or to LTO-IR or PTX, which a link for \
         the same or a later architecture takes"
    )]
    LinkArchMismatch {
        /// The input's name.
        what: String,
        /// The architecture of its machine code (`sm_90`).
        input: String,
        /// The link's architecture.
        link: String,
    },

    /// An executable cubin (compiled without relocatable device code) added to a link, which
    /// would take no code from it.
    #[error(
        "{what} is an executable cubin (ELF type ET_EXEC, compiled without -rdc): a link takes no \
         code from it, and nvJitLink would give a cubin without its kernels. Load it as it is, or \
         compile it with relocatable device code (Program::relocatable(true), nvcc -rdc=true or \
         -dc, cudyn compile --rdc) to link it"
    )]
    NotRelocatable {
        /// The input's name.
        what: String,
    },

    /// Device code of a kind CUDA cannot load as it is (LTO-IR, a host binary).
    #[error("{what} is {kind}, which the CUDA driver cannot load as it is: {advice}")]
    NotLoadable {
        /// What was examined: a file name, or "the N-byte image given".
        what: String,
        /// The kind the bytes were detected as.
        kind: ImageKind,
        /// What to do instead.
        advice: &'static str,
    },

    /// Relocatable device code (`-rdc`, or a cubin that is an object file) that must be linked
    /// before the driver can load it.
    #[error(
        "{what} must be linked before it is loaded: {reason}. Link it first with cudyn::Linker \
         (Linker::add, then Linker::finish) together with the device code it calls, and load the \
         linked image"
    )]
    NeedsLinking {
        /// What was examined: a file name, or "the N-byte image given".
        what: String,
        /// Which part is relocatable, e.g. "it is a relocatable cubin (ELF type ET_REL)".
        reason: String,
    },

    /// A kernel name matches several kernels of a library (an overload set, or several template
    /// instantiations asked for by their template's name).
    #[error(
        "the kernel name `{name}` is ambiguous: ask for one of {} (its C++ signature or its \
         mangled name)",
        candidates.join(", ")
    )]
    AmbiguousKernel {
        /// The name asked for.
        name: String,
        /// The kernels it matches: their C++ signatures, each followed by its mangled name.
        candidates: Vec<String>,
    },

    /// A JIT option is outside the range the JIT accepts.
    #[error("JIT optimization level {level} is out of range: use 0 to 4")]
    JitOptimizationLevel {
        /// The level asked for.
        level: u32,
    },

    /// A range of elements reaches outside a device buffer.
    #[error(
        "range {start}..{end} is outside the buffer of {len} elements: keep it within 0..{len}"
    )]
    RangeOutsideBuffer {
        /// The first element asked for.
        start: usize,
        /// One past the last element asked for.
        end: usize,
        /// The buffer's length.
        len: usize,
    },

    /// A copy between device and host memory of different lengths.
    #[error(
        "copy between {device} device elements and {host} host elements: make the lengths equal"
    )]
    CopyLengthMismatch {
        /// Elements on the device side.
        device: usize,
        /// Elements on the host side.
        host: usize,
    },

    /// A buffer size in bytes does not fit the address space.
    #[error("{len} elements of {element_bytes} bytes overflow the address space: ask for fewer")]
    SizeOverflow {
        /// Elements asked for.
        len: usize,
        /// Bytes per element.
        element_bytes: usize,
    },

    /// A device ordinal names no device the driver reports.
    #[error(
        "device {ordinal} does not exist: the driver reports {count} device(s), 0 to count - 1"
    )]
    DeviceOutOfRange {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many devices the driver reports.
        count: usize,
    },

    /// A handle from another CUDA library (such as cudarc) lives in a context that is not its
    /// device's primary context, the one cudyn works in.
    #[error(
        "{what} belongs to a context that is not the primary context of device {device}: make it \
         in the primary context (cudarc: CudaContext::new({device}), not new_non_primary, new_cig \
         or from_raw_context), which cudyn and the CUDA runtime share"
    )]
    NotPrimaryContext {
        /// What was handed over, e.g. "the cudarc stream".
        what: &'static str,
        /// The device the context belongs to.
        device: usize,
    },

    /// Two handles used together belong to different devices.
    #[error(
        "{what} is on device {found}, not device {expected}: make both on the same device \
         (cudyn::set_device, cudarc's CudaContext::new(ordinal))"
    )]
    DeviceMismatch {
        /// What was handed over, e.g. "the cudarc context".
        what: &'static str,
        /// The device it is on.
        found: usize,
        /// The device it must be on.
        expected: usize,
    },

    /// The driver reported a device handle or context that cudyn cannot relate to a device.
    #[error("the driver returned {what}: reinstall or update the NVIDIA driver")]
    DriverInconsistent {
        /// What it returned, e.g. "device handle 7, which matches no device ordinal".
        what: String,
    },

    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// What the operating system said (shared, since `Error` is `Clone`).
        source: Arc<io::Error>,
    },

    /// The compile cache's folder is unsafe to trust: owned by another user, or writable by
    /// group or others, any of whom could plant device code cudyn would load.
    #[error(
        "the compile cache at {} is not used: {reason} (or turn the cache off with \
         CUDYN_CACHE=off)",
        path.display()
    )]
    CacheRefused {
        /// The folder.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// The compile cache's remote tier is not used: its URL does not parse, or its MAC key is
    /// missing or unusable (see [`crate::cache::remote`]). Compiles go on with the local tiers.
    #[error(
        "the remote compile cache {url} is not used: {reason} (compiles go on with the local \
         cache; unset CUDYN_CACHE_REMOTE to silence this)"
    )]
    CacheRemoteRefused {
        /// The remote's URL, its password hidden.
        url: String,
        /// What is wrong, and what to do.
        reason: String,
    },

    /// There is no process-wide compile cache: it is turned off, or no folder can be named for
    /// it ([`crate::Cache::try_global`]).
    #[error("there is no compile cache: {reason}")]
    CacheUnavailable {
        /// Why, and what to do.
        reason: String,
    },

    /// The compile cache's folder could not be created or written.
    #[error(
        "the compile cache at {} failed: {what}: {source}; check the folder's permissions and \
         free space, or turn the cache off with CUDYN_CACHE=off",
        path.display()
    )]
    CacheIo {
        /// The file or folder.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// What the operating system said.
        source: Arc<io::Error>,
    },

    /// A program of a batch ([`crate::compile::compile_all`]) that a compile worker process did
    /// not finish: the worker crashed or ran over the time limit, or the compile server ended.
    #[error(
        "`{program}` was not compiled: {what}; compile it again (later batches get new \
         workers), or compile it alone with Program::compile to see whether NVRTC itself fails \
         on it"
    )]
    CompileWorker {
        /// The program's name.
        program: String,
        /// What happened to its worker.
        what: String,
    },

    /// A link in a link worker process ([`crate::compile::LinkOptions::isolated`]) that did not
    /// finish: nvJitLink crashed, the link ran past its time or memory limit, or no worker could
    /// run it. The calling process is untouched.
    #[error("{}", stop.message(inputs))]
    LinkStopped {
        /// The names of the link's inputs, in the order they were added.
        inputs: Vec<String>,
        /// What stopped it.
        stop: LinkStop,
    },

    /// [`crate::cache::set_dir`] came after the process-wide cache was opened.
    #[error(
        "the compile cache is already open at {}: call cudyn::cache::set_dir before the first \
         compile, or set CUDYN_CACHE_DIR before the process starts",
        opened.display()
    )]
    CacheDirFrozen {
        /// Where the cache is open.
        opened: PathBuf,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nul_byte_is_shown_where_it_is_not_with_the_whole_text() {
        let short = Error::NulByte {
            what: "kernel name",
            text: "sax\0py".into(),
        };
        assert!(
            short.to_string().ends_with(r#"cannot hold: "sax\0py""#),
            "{short}"
        );
        let source = format!("{}\0{}", "a".repeat(1 << 20), "b".repeat(1 << 20));
        let long = Error::NulByte {
            what: "source",
            text: source,
        }
        .to_string();
        assert!(long.len() < 200, "{} bytes", long.len());
        assert!(long.contains("at byte 1048576 of 2097153 bytes"), "{long}");
        assert!(
            long.contains(&format!(
                "...\"{}\\0{}\"...",
                "a".repeat(32),
                "b".repeat(32)
            )),
            "{long}"
        );
    }
    use std::error::Error as _;

    #[test]
    fn a_read_failure_keeps_the_operating_system_error_as_its_source() {
        let error = Error::read_file(
            "/no/such/kernel.cubin",
            io::Error::from(io::ErrorKind::NotFound),
        );
        assert!(error
            .to_string()
            .starts_with("cannot read /no/such/kernel.cubin: "));
        let source = error.source().expect("the io::Error is kept");
        let io_error = source
            .downcast_ref::<Arc<io::Error>>()
            .expect("an io::Error");
        assert_eq!(io_error.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_failed_call_is_a_std_error_and_its_text_is_the_error_s() {
        let call = CallError {
            api: Component::Nvrtc,
            call: "nvrtcCompileProgram",
            code: 6,
            name: "NVRTC_ERROR_COMPILATION".to_owned(),
            message: "the source did not compile (see the log)".to_owned(),
            log: Some("kernel.cu(3): error: expected a \";\"".to_owned()),
            hint: None,
        };
        let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(call.clone());
        assert_eq!(boxed.to_string(), call.to_string());
        let error = Error::Cuda(Box::new(call.clone()));
        assert_eq!(error.to_string(), call.to_string());
        assert_eq!(error.log(), call.log.as_deref());
    }
}
