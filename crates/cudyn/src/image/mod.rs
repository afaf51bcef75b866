//! Device code as bytes, which kind it is, and whether it is whole.
//!
//! Everything that hands device code to CUDA goes through here first. The driver's
//! `cuLibraryLoadData` takes no length: it believes the image's own headers, so a truncated or
//! damaged image makes it read past the buffer. [`Image::validate`] checks, before any CUDA call,
//! that every structure the headers describe lies inside the bytes given (the rules per kind are
//! listed there); garbage is a cudyn [`Error::NotDeviceCode`] that says what the bytes look
//! like, damage an [`Error::MalformedImage`] that says where, never a driver fault. Detection
//! reads only headers and is cheap; [`Image::inspect`] goes further (see [`crate::inspect`]).
//!
//! ```
//! use cudyn::{Image, ImageKind};
//! let ptx = b".version 9.0\n.target sm_90\n.address_size 64\n";
//! assert_eq!(Image::detect(ptx)?, ImageKind::Ptx);
//! assert!(Image::detect(b"hello").is_err());
//! # Ok::<(), cudyn::Error>(())
//! ```

use std::borrow::Cow;
use std::path::Path;

use crate::error::{Error, Result};
use crate::inspect::{self, archive, fatbin, host, ltoir, ptx, Inspection};
pub use crate::kinds::ImageKind;
use crate::param::ParamLayout;
use crate::symbols::KernelName;

mod validate;

pub(crate) use validate::Facts;

/// Device code as bytes, with its detected kind.
///
/// ```no_run
/// use cudyn::{Image, ImageKind};
///
/// let image = Image::from_file("kernels.fatbin")?;
/// assert_eq!(image.kind(), ImageKind::Fatbin);
/// image.validate()?; // what loading checks before the driver sees the bytes
/// let params = image.param_layout("saxpy")?; // no GPU needed
/// # Ok::<(), cudyn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Image<'a> {
    bytes: Cow<'a, [u8]>,
    kind: ImageKind,
}

impl<'a> Image<'a> {
    /// The kind of `bytes`, from their headers alone; [`Error::NotDeviceCode`] when they are none
    /// of the kinds cudyn knows.
    pub fn detect(bytes: &[u8]) -> Result<ImageKind> {
        detect(bytes).map_err(|reason| Error::NotDeviceCode {
            what: bytes_given(bytes),
            reason,
        })
    }

    /// Checks that the image is whole and loadable as it is, the check every load makes before
    /// any CUDA call: [`Error::MalformedImage`] when a structure its headers describe is damaged
    /// or lies outside the bytes, [`Error::NeedsLinking`] for relocatable device code,
    /// [`Error::NotLoadable`] for LTO-IR and host binaries.
    ///
    /// - A cubin must be a 64-bit little-endian CUDA ELF executable whose program and section
    ///   header tables, segments and sections lie inside the bytes; whose names, links, symbols,
    ///   relocations, notes and `.nv.info` attribute lists all resolve inside them.
    /// - A fatbin's header and every entry must lie inside the bytes, the entries filling the
    ///   length the header declares; every cubin and PTX entry is decompressed (zstd or LZ4,
    ///   bounded) and checked in turn. Entries that cannot be checked are refused: a stream that
    ///   does not decompress to its declared size, obfuscated code, an unknown kind holding
    ///   neither a cubin nor PTX. LTO-IR entries, which the driver does not load, are only
    ///   checked to lie inside.
    /// - PTX must be text that reads to its end (no comment, string, bracket or statement left
    ///   open) and declares its `.version` and `.target`.
    pub fn validate(&self) -> Result<()> {
        validate_loadable(&self.bytes, self.kind, &|| bytes_given(&self.bytes)).map(drop)
    }

    /// Wraps `bytes` (borrowed or owned) after detecting their kind.
    pub fn new(bytes: impl Into<Cow<'a, [u8]>>) -> Result<Self> {
        let bytes = bytes.into();
        let kind = Image::detect(&bytes)?;
        Ok(Image { bytes, kind })
    }

    /// The kind detected.
    pub fn kind(&self) -> ImageKind {
        self.kind
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Everything cudyn can tell about these bytes without a GPU: kernels, their parameter
    /// layouts and resources, variables, fatbin entries.
    pub fn inspect(&self) -> Result<Inspection> {
        inspect::inspect_kind(&self.bytes, self.kind)
    }

    /// The parameter layout of `kernel` (its mangled name, as the driver knows it) from the
    /// compiled code: the first cubin (or, failing that, PTX) that defines it.
    ///
    /// This is the layout the driver's `cuKernelGetParamInfo` reports, available offline. Only
    /// what is needed is decoded: the modules up to the first that defines `kernel`, and of a
    /// cubin only that kernel's `.nv.info` section (its symbol table when it has none).
    /// [`Error::KernelNotInImage`] when no part of the image defines `kernel` with a known layout.
    pub fn param_layout(&self, kernel: &str) -> Result<Vec<ParamLayout>> {
        inspect::search::param_layout(&self.bytes, self.kind, kernel)
            .map_err(|error| self.malformed(error))?
            .ok_or_else(|| Error::KernelNotInImage {
                kind: self.kind,
                name: kernel.to_owned(),
            })
    }

    /// Every kernel the image defines, with its symbol, C++ name and signature (see
    /// [`KernelName`]), each once, sorted by C++ name, then signature, then symbol: the kernels
    /// of every cubin and PTX module in it (a fatbin's SASS for several architectures and its PTX
    /// define the same kernels), of every fatbin of a host binary, of every member of a static
    /// library. Read offline, from the symbol tables and `.entry` declarations only.
    ///
    /// A module that cannot be read is [`Error::MalformedImage`] naming it, never a shorter
    /// list; so is an image of LTO-IR alone, whose kernels cudyn cannot read (link it first).
    /// A loaded library's [`Library::kernel_list`](crate::Library::kernel_list) gives the kernels
    /// of the one module the driver chose.
    ///
    /// ```no_run
    /// use cudyn::{Image, Library};
    ///
    /// let image = Image::from_file("kernels.fatbin")?;
    /// let library = Library::load(image.bytes())?;
    /// for listed in image.kernel_list()? {
    ///     // `scale(float*, int)`, `axpy<double>(double, double const*, double*, int)`, `plain`
    ///     let kernel = library.kernel(&listed.to_string())?;
    ///     assert_eq!(kernel.name()?, listed.symbol);
    /// }
    /// # Ok::<(), cudyn::Error>(())
    /// ```
    pub fn kernel_list(&self) -> Result<Vec<KernelName>> {
        let symbols = inspect::search::kernel_symbols(&self.bytes, self.kind)
            .map_err(|error| self.malformed(error))?;
        Ok(crate::symbols::kernel_list(symbols))
    }

    /// [`Error::MalformedImage`] for `error`, found in these bytes.
    fn malformed(&self, error: inspect::ParseError) -> Error {
        Error::MalformedImage {
            what: bytes_given(&self.bytes),
            kind: self.kind,
            error,
        }
    }

    /// The fatbins embedded in a host binary, ready to load; the image itself when it is a
    /// fatbin; empty for other kinds.
    pub fn embedded_fatbins(&self) -> Result<Vec<&[u8]>> {
        match self.kind {
            ImageKind::Fatbin => Ok(vec![&self.bytes[..]]),
            ImageKind::HostBinary => host::embedded_fatbins(&self.bytes),
            _ => Ok(Vec::new()),
        }
    }
}

impl Image<'static> {
    /// Reads a file and detects its kind.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|error| Error::read_file(path, error))?;
        let kind = detect(&bytes).map_err(|reason| Error::NotDeviceCode {
            what: path.display().to_string(),
            reason,
        })?;
        Ok(Image {
            bytes: Cow::Owned(bytes),
            kind,
        })
    }
}

/// The blake3 hash of an image's bytes: what the process-wide library registry knows a load by.
pub(crate) type Digest = crate::Digest;

/// The [`Digest`] of `bytes`.
pub(crate) fn digest(bytes: &[u8]) -> Digest {
    Digest::of(bytes)
}

/// What the check before a load found in code cudyn made itself, with the code's digest.
///
/// Remembered with the code, in a compile-cache entry and the [`Compiled`](crate::compile::Compiled)
/// it gives, so that loading those bytes again needs no second walk of them and no second hash:
/// in a new process whose disk cache holds the code, that walk and that hash touched as much code
/// for the first time as the rest of the load. It is trusted because the bytes it describes are
/// the ones it was found in: an entry whose checksum fails is never read, and a `Compiled` hands
/// out no mutable access to its code; and an entry's is trusted only by the cudyn version that
/// wrote it, so that a release whose check changes checks older entries' code again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Checked {
    pub(crate) facts: Facts,
    pub(crate) digest: Digest,
}

impl Checked {
    /// `bytes` of `output`, checked as compiler output; `None` when the check refuses them
    /// (a relocatable cubin, LTO-IR): a load then checks them again and says why.
    pub(crate) fn compiler_output(bytes: &[u8], kind: ImageKind) -> Option<Checked> {
        let facts = validate_compiler_output(bytes, kind, &String::new).ok()?;
        Some(Checked {
            facts,
            digest: digest(bytes),
        })
    }
}

/// Names bytes that came without a file name in errors.
pub(crate) fn bytes_given(bytes: &[u8]) -> String {
    format!("the {}-byte image given", bytes.len())
}

/// What was found of `bytes`, of `kind` (from [`detected`]), once they are checked whole and
/// loadable as they are (see [`Image::validate`]); `what` names them in errors (a file name, or
/// "the N-byte image given").
///
/// Library loading calls this before any CUDA call: the driver trusts an image's own headers.
pub(crate) fn validate_loadable(
    bytes: &[u8],
    kind: ImageKind,
    what: &dyn Fn() -> String,
) -> Result<Facts> {
    require_loadable(kind, what)?;
    validate::image(bytes, kind).map_err(|refusal| refusal.into_error(what(), kind))
}

/// Checks an input of kind `kind` before nvJitLink reads it (see `validate::link_input`).
pub(crate) fn validate_link_input(
    bytes: &[u8],
    kind: ImageKind,
    what: &dyn Fn() -> String,
) -> Result<()> {
    validate::link_input(bytes, kind).map_err(|error| Error::MalformedImage {
        what: what(),
        kind,
        error,
    })
}

/// Whether `bytes`, a cubin that passed its check, is an executable one (`ET_EXEC`) rather than
/// relocatable code.
pub(crate) fn is_executable_cubin(bytes: &[u8]) -> bool {
    validate::cubin_is_executable(bytes)
}

/// [`validate_loadable`] for output of NVRTC or nvJitLink, which needs less checking (see
/// `validate::compiler_output`).
pub(crate) fn validate_compiler_output(
    bytes: &[u8],
    kind: ImageKind,
    what: &dyn Fn() -> String,
) -> Result<Facts> {
    require_loadable(kind, what)?;
    validate::compiler_output(bytes, kind).map_err(|refusal| refusal.into_error(what(), kind))
}

/// The kind of `bytes`, or [`Error::NotDeviceCode`].
pub(crate) fn detected(bytes: &[u8], what: &dyn Fn() -> String) -> Result<ImageKind> {
    detect(bytes).map_err(|reason| Error::NotDeviceCode {
        what: what(),
        reason,
    })
}

/// [`Error::NotLoadable`] for a kind the driver cannot load.
fn require_loadable(kind: ImageKind, what: &dyn Fn() -> String) -> Result<()> {
    match kind.unloadable_advice() {
        Some(advice) => Err(Error::NotLoadable {
            what: what(),
            kind,
            advice,
        }),
        None => Ok(()),
    }
}

const ELF_MAGIC: &[u8] = b"\x7fELF";

/// The kind of `bytes`, or why they are none.
pub(crate) fn detect(bytes: &[u8]) -> std::result::Result<ImageKind, String> {
    if bytes.is_empty() {
        return Err("it is empty".into());
    }
    if bytes.starts_with(archive::MAGIC) {
        return Ok(ImageKind::Archive);
    }
    if fatbin::has_magic(bytes) {
        return Ok(ImageKind::Fatbin);
    }
    if bytes.starts_with(ELF_MAGIC) && elf_machine(bytes) == Some(object::elf::EM_CUDA) {
        return Ok(ImageKind::Cubin);
    }
    if ltoir::format(bytes).is_some() {
        return Ok(ImageKind::LtoIr);
    }
    if ptx::looks_like_ptx(bytes) {
        return Ok(ImageKind::Ptx);
    }
    if let Some(found) = host::detect(bytes) {
        return found.map(|()| ImageKind::HostBinary);
    }
    if let Some(nul) = nul_inside_ptx(bytes) {
        return Err(format!(
            "it is PTX text with a NUL byte inside it, at byte {nul}: the driver reads PTX only \
             up to its first NUL, so the text after it would be lost"
        ));
    }
    let head: Vec<String> = bytes.iter().take(8).map(|b| format!("{b:02x}")).collect();
    Err(format!(
        "it starts with the bytes {}, the header of none of the kinds cudyn knows (PTX, a \
         cubin, a fatbin, LTO-IR, a host binary with embedded device code built by nvcc, or a \
         static library)",
        head.join(" ")
    ))
}

/// Where the first NUL is in `bytes` when the text before it is PTX and other bytes than NULs
/// follow it: PTX cut by a stray NUL rather than a file of no known kind.
fn nul_inside_ptx(bytes: &[u8]) -> Option<usize> {
    let nul = bytes.iter().position(|&b| b == 0)?;
    let after = &bytes[nul..];
    (after.iter().any(|&b| b != 0) && ptx::looks_like_ptx(&bytes[..nul])).then_some(nul)
}

/// `e_machine` of an ELF header, read with the file's own byte order.
fn elf_machine(bytes: &[u8]) -> Option<u16> {
    let raw: [u8; 2] = bytes.get(18..20)?.try_into().ok()?;
    match bytes.get(5)? {
        1 => Some(u16::from_le_bytes(raw)),
        2 => Some(u16::from_be_bytes(raw)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_without_ptx_directives_is_not_device_code() {
        let error = Image::detect(b"// just a comment\nint main() {}\n").unwrap_err();
        assert!(matches!(error, Error::NotDeviceCode { .. }), "{error}");
        assert!(error.to_string().contains("2f 2f 20 6a"), "{error}");
    }

    #[test]
    fn ptx_with_a_nul_inside_is_said_to_be_cut_by_it() {
        let ptx = b".version 9.0\n.target sm_90\n.address_size 64\n";
        let mut stray = ptx.to_vec();
        stray.insert(30, 0);
        let error = Image::detect(&stray).unwrap_err();
        assert!(
            error.to_string().contains("NUL byte inside it, at byte 30"),
            "{error}"
        );
        // NULs that end the text are its terminator.
        let mut terminated = ptx.to_vec();
        terminated.extend_from_slice(&[0, 0]);
        assert_eq!(Image::detect(&terminated).unwrap(), ImageKind::Ptx);
        // Nor is any text before a NUL PTX.
        let error = Image::detect(b"int x;\0.version 9.0\n.target sm_90\n").unwrap_err();
        assert!(!error.to_string().contains("NUL byte"), "{error}");
    }

    #[test]
    fn empty_bytes_say_so() {
        let error = Image::detect(b"").unwrap_err();
        assert!(error.to_string().contains("it is empty"), "{error}");
    }

    #[test]
    fn host_elf_without_device_code_is_refused() {
        // This test binary is an ELF host executable built by rustc: no embedded fatbin.
        let exe = std::env::current_exe().unwrap();
        let error = Image::from_file(&exe).unwrap_err();
        assert!(
            error.to_string().contains("no embedded device code"),
            "{error}"
        );
    }

    #[test]
    fn a_kernel_without_parameters_has_an_empty_layout() {
        use crate::compile::{Arch, Output, Program};
        for output in [Output::Cubin, Output::Ptx] {
            let compiled = Program::new(r#"extern "C" __global__ void helloWorld() {}"#)
                .arch(Arch::new(9, 0))
                .output(output)
                .compile()
                .expect("NVRTC compiles (run scripts/cuda-wheels and activate its venv)");
            let image = Image::new(compiled.code()).unwrap();
            image.validate().unwrap();
            assert_eq!(image.param_layout("helloWorld").unwrap(), [], "{output:?}");
            assert!(image.param_layout("goodbye").is_err(), "{output:?}");
        }
    }

    #[test]
    fn missing_file_is_a_read_error() {
        let error = Image::from_file("/nonexistent/cudyn.cubin").unwrap_err();
        assert!(matches!(error, Error::ReadFile { .. }), "{error}");
    }
}
