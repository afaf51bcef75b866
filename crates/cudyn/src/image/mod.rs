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
//! This is the front of the formats (`crate::formats`, one module per kind of device code, its
//! structures, reader and checks together): it asks them which kind bytes are and whether they
//! are whole, and hands the loader what the checks found. [`Image::inspect`],
//! [`Image::param_layout`] and [`Image::kernel_list`], which present what the readers find, are
//! defined by [`crate::inspect`].
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
use crate::formats::host;
pub(crate) use crate::formats::Facts;
pub use crate::kinds::ImageKind;

mod detect;
mod validate;

pub(crate) use detect::{detect, Detected};
pub(crate) use validate::{
    is_executable_cubin, validate_compiler_output, validate_link_input, validate_loadable,
};

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
        detected(bytes, &|| bytes_given(bytes))
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
    ///
    /// An image found whole a second time is remembered for the life of the process with a copy
    /// of every byte the check reads (a cubin's headers and tables, not the contents of its code
    /// and data sections; PTX whole), when those are at most 32 KiB (64 images and 2 MiB at
    /// most): later checks of the same bytes, by this or by a load, compare them with the copy
    /// rather than walk them again. A change to any byte the check reads makes a new image,
    /// checked in full; a refusal is never remembered.
    pub fn validate(&self) -> Result<()> {
        let what = || bytes_given(&self.bytes);
        validate_loadable(&self.bytes, self.kind.into(), None, &what).map(drop)
    }

    /// The kind of `bytes` once they are checked whole and loadable: [`Image::detect`] and
    /// [`Image::validate`] in one call, exactly the check a load makes before the driver sees
    /// the bytes, which reads PTX as text once where the two calls read it twice.
    ///
    /// ```
    /// use cudyn::{Image, ImageKind};
    /// let ptx = b".version 9.0\n.target sm_90\n.address_size 64\n";
    /// assert_eq!(Image::check(ptx)?, ImageKind::Ptx);
    /// assert!(Image::check(b".version 9.0\n.target sm_90\n.entry k(").is_err());
    /// # Ok::<(), cudyn::Error>(())
    /// ```
    pub fn check(bytes: &[u8]) -> Result<ImageKind> {
        let what = || bytes_given(bytes);
        let detected = detected_with_text(bytes, &what)?;
        validate_loadable(bytes, detected, None, &what)?;
        Ok(detected.kind)
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

    /// The fatbins embedded in a host binary, ready to load; the image itself when it is a
    /// fatbin; empty for other kinds.
    pub fn embedded_fatbins(&self) -> Result<Vec<&[u8]>> {
        match self.kind {
            ImageKind::Fatbin => Ok(vec![&self.bytes[..]]),
            ImageKind::HostBinary => embedded_fatbins(&self.bytes),
            _ => Ok(Vec::new()),
        }
    }
}

impl Image<'static> {
    /// Reads a file and detects its kind.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|error| Error::read_file(path, error))?;
        let kind = detected(&bytes, &|| path.display().to_string())?;
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
        let facts = validate_compiler_output(bytes, kind.into(), &String::new).ok()?;
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

/// The fatbins embedded in the host binary `bytes`, as byte slices ready to load.
pub(crate) fn embedded_fatbins(bytes: &[u8]) -> Result<Vec<&[u8]>> {
    host::fatbin_slices(bytes).map_err(|error| Error::MalformedImage {
        what: bytes_given(bytes),
        kind: ImageKind::HostBinary,
        error,
    })
}

/// The kind of `bytes`, or [`Error::NotDeviceCode`]; `what` names them in the error.
pub(crate) fn detected(bytes: &[u8], what: &dyn Fn() -> String) -> Result<ImageKind> {
    detected_with_text(bytes, what).map(|detected| detected.kind)
}

/// [`detected`], with PTX's text for the check (see [`Detected`]).
pub(crate) fn detected_with_text<'a>(
    bytes: &'a [u8],
    what: &dyn Fn() -> String,
) -> Result<Detected<'a>> {
    detect::detect_with_text(bytes).map_err(|reason| Error::NotDeviceCode {
        what: what(),
        reason: reason.to_string(),
    })
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
