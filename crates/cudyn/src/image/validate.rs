//! The check every image passes before the driver or nvJitLink sees it (see
//! [`Image::validate`]): by its kind, through the check of its format, with the verdict as a
//! cudyn [`Error`].
//!
//! [`Image::validate`]: super::Image::validate

use super::detect::{detect, Detected, Unrecognized};
use crate::digest::Digest;
use crate::error::{Error, Result};
use crate::formats::{archive, cubin, fatbin, host, ptx, Facts, Purpose, Refusal};
use crate::kinds::ImageKind;
use crate::parse_error::{ParseError, Problem};

/// What was found of `bytes`, `detected` as they were (by [`detected`](super::detected), or of
/// a kind known otherwise), once they are checked whole and loadable as they are (see
/// [`Image::validate`](super::Image::validate)); `what` names them in errors (a file name, or
/// "the N-byte image given").
///
/// Library loading calls this before any CUDA call: the driver trusts an image's own headers.
///
/// `digest`, when the caller hashed the bytes already, spares the check hashing a fatbin's
/// compressed entries to recall them (see `formats::fatbin`).
pub(crate) fn validate_loadable(
    bytes: &[u8],
    detected: Detected<'_>,
    digest: Option<&Digest>,
    what: &dyn Fn() -> String,
) -> Result<Facts> {
    let kind = detected.kind;
    require_loadable(kind, what)?;
    image(bytes, detected, digest).map_err(|refusal| refused(refusal, what(), kind))
}

/// Checks an input of kind `kind` before nvJitLink reads it (see [`link_input`]).
pub(crate) fn validate_link_input(
    bytes: &[u8],
    kind: ImageKind,
    what: &dyn Fn() -> String,
) -> Result<()> {
    link_input(bytes, kind).map_err(|error| Error::MalformedImage {
        what: what(),
        kind,
        error,
    })
}

/// Whether `bytes`, a cubin that passed its check, is an executable one (`ET_EXEC`) rather than
/// relocatable code.
pub(crate) fn is_executable_cubin(bytes: &[u8]) -> bool {
    cubin::is_executable(bytes)
}

/// [`validate_loadable`] for output of NVRTC or nvJitLink, which needs less checking (see
/// [`compiler_output`]).
pub(crate) fn validate_compiler_output(
    bytes: &[u8],
    detected: Detected<'_>,
    what: &dyn Fn() -> String,
) -> Result<Facts> {
    let kind = detected.kind;
    require_loadable(kind, what)?;
    compiler_output(bytes, detected).map_err(|refusal| refused(refusal, what(), kind))
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

/// The error of `refusal`, of `what`, an image of `kind`.
fn refused(refusal: Refusal, what: String, kind: ImageKind) -> Error {
    match refusal {
        Refusal::Malformed(error) => Error::MalformedImage { what, kind, error },
        Refusal::NeedsLinking(reason) => Error::NeedsLinking { what, reason },
    }
}

/// Checks `bytes` of a loadable kind, as `detected`; kinds the driver cannot load are refused
/// before this. PTX already read as text by detection is not read so again.
fn image(
    bytes: &[u8],
    detected: Detected<'_>,
    digest: Option<&Digest>,
) -> std::result::Result<Facts, Refusal> {
    match detected.kind {
        ImageKind::Cubin => cubin::validate(bytes, Purpose::Load),
        ImageKind::Fatbin => fatbin::validate(bytes, Purpose::Load, digest),
        ImageKind::Ptx => match detected.ptx_text {
            Some(text) => ptx::validate_text(text),
            None => ptx::validate(bytes),
        }
        .map_err(Refusal::Malformed),
        ImageKind::LtoIr | ImageKind::HostBinary | ImageKind::Archive => Ok(Facts::UNKNOWN),
    }
}

/// Checks `bytes` of `kind` before nvJitLink reads them. nvJitLink trusts its inputs' headers as
/// the driver does (a truncated fatbin has made it loop forever, a cubin with a damaged section
/// header crash), so every input gets the check a load would give it, relocatable code included:
/// a host object's embedded fatbins, and each member of a static library that holds device code
/// (its other members are host code nvJitLink passes over). LTO-IR is known by its magic number
/// alone: its contents are NVIDIA's own encoding, which only nvJitLink reads.
fn link_input(bytes: &[u8], kind: ImageKind) -> std::result::Result<(), ParseError> {
    let malformed = |refusal: Refusal| match refusal {
        Refusal::Malformed(error) => error,
        Refusal::NeedsLinking(reason) => {
            ParseError::new("relocatable code", Problem::Unsupported, reason)
        }
    };
    match kind {
        ImageKind::Cubin => cubin::validate(bytes, Purpose::Link)
            .map(drop)
            .map_err(malformed),
        ImageKind::Fatbin => fatbin::validate(bytes, Purpose::Link, None)
            .map(drop)
            .map_err(malformed),
        ImageKind::Ptx => ptx::validate(bytes).map(drop),
        ImageKind::LtoIr => Ok(()),
        ImageKind::HostBinary => host_object(bytes),
        ImageKind::Archive => static_library(bytes),
    }
}

/// The fatbins a host object embeds; none is no damage (an object of host code only).
fn host_object(bytes: &[u8]) -> std::result::Result<(), ParseError> {
    host::check_section_extents(bytes)?;
    for (index, fatbin) in host::fatbin_slices(bytes)?.into_iter().enumerate() {
        link_input(fatbin, ImageKind::Fatbin)
            .map_err(|error| error.inside(&format!("embedded fatbin {index}")))?;
    }
    Ok(())
}

/// Every member holding device code. An archive inside the archive is refused rather than
/// checked: no tool writes one, and following them would let nesting decide the depth of
/// the check's recursion.
fn static_library(bytes: &[u8]) -> std::result::Result<(), ParseError> {
    for (name, member) in archive::members(bytes)? {
        let checked = match detect(member) {
            Ok(ImageKind::Archive) => Err(ParseError::new(
                "its contents",
                Problem::Unsupported,
                "it is an archive inside the archive, which no tool writes",
            )),
            Ok(kind) => link_input(member, kind),
            // An object file that is not device code: readable, it is host code.
            Err(Unrecognized::Host(_)) => host_object(member),
            Err(_) => Ok(()),
        };
        checked.map_err(|error| error.inside(&format!("member {name}")))?;
    }
    Ok(())
}

/// The checks output of NVRTC or nvJitLink (a [`Compiled`](crate::compile::Compiled), fresh or
/// read back from the compile cache, whose checksum covers it) still needs before a load: a
/// cubin's ELF header saying it is executable rather than relocatable. Its structure was written
/// by the compiler, not by whoever handed cudyn the bytes, and the full walk of [`image`] costs
/// a new process tens of microseconds, as much as the load itself. Other kinds get the full
/// check.
fn compiler_output(bytes: &[u8], detected: Detected<'_>) -> std::result::Result<Facts, Refusal> {
    match detected.kind {
        ImageKind::Cubin => cubin::compiler_output(bytes),
        _ => image(bytes, detected, None),
    }
}
