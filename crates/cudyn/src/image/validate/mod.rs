//! The structural checks every image passes before the driver sees it (see [`Image::validate`]).
//!
//! [`Image::validate`]: super::Image::validate

mod cubin;
mod fatbin;
mod ptx;

use crate::error::Error;
use crate::image::ImageKind;
use crate::inspect::{archive, host, ParseError};

/// What an image is checked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// A load by the driver: relocatable code must be linked first.
    Load,
    /// An input of a link by nvJitLink, which takes relocatable code.
    Link,
}

/// What the check of an image found out on the way, for the loader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Facts {
    /// Whether the code defines device variables (`__device__`, `__constant__`, `__managed__`),
    /// which loads sharing a library would share.
    pub(crate) defines_variables: bool,
    /// The device memory its variables take beyond the image's own bytes (uninitialized ones),
    /// when known: always for a cubin, 0 for code without variables, unknown for PTX variables.
    pub(crate) uninitialized_bytes: Option<usize>,
}

impl Facts {
    /// Code without variables.
    pub(crate) const NO_VARIABLES: Facts = Facts {
        defines_variables: false,
        uninitialized_bytes: Some(0),
    };

    /// What is known of code that may define variables of unknown size.
    pub(crate) const UNKNOWN: Facts = Facts {
        defines_variables: true,
        uninitialized_bytes: None,
    };

    /// The facts of an image of which one of two parts is loaded (the entries of a fatbin): the
    /// variables of either, at most the larger size.
    fn either(self, other: Facts) -> Facts {
        Facts {
            defines_variables: self.defines_variables || other.defines_variables,
            uninitialized_bytes: self
                .uninitialized_bytes
                .zip(other.uninitialized_bytes)
                .map(|(one, other)| one.max(other)),
        }
    }
}

/// Why an image of a loadable kind is refused.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// It is damaged or truncated.
    Malformed(ParseError),
    /// It is relocatable device code; the text says which part.
    NeedsLinking(String),
}

impl From<ParseError> for Refusal {
    fn from(error: ParseError) -> Self {
        Refusal::Malformed(error)
    }
}

impl Refusal {
    /// This refusal, found inside `outer` (a fatbin entry).
    fn inside(self, outer: &str) -> Self {
        match self {
            Refusal::Malformed(error) => Refusal::Malformed(error.inside(outer)),
            Refusal::NeedsLinking(reason) => Refusal::NeedsLinking(format!("{outer}: {reason}")),
        }
    }

    pub(crate) fn into_error(self, what: String, kind: ImageKind) -> Error {
        match self {
            Refusal::Malformed(error) => Error::MalformedImage { what, kind, error },
            Refusal::NeedsLinking(reason) => Error::NeedsLinking { what, reason },
        }
    }
}

/// Checks `bytes` of a loadable `kind`; kinds the driver cannot load are refused before this.
pub(crate) fn image(bytes: &[u8], kind: ImageKind) -> Result<Facts, Refusal> {
    match kind {
        ImageKind::Cubin => cubin::validate(bytes, Purpose::Load),
        ImageKind::Fatbin => fatbin::validate(bytes, Purpose::Load),
        ImageKind::Ptx => ptx::validate(bytes).map_err(Refusal::Malformed),
        ImageKind::LtoIr | ImageKind::HostBinary | ImageKind::Archive => Ok(Facts::UNKNOWN),
    }
}

/// Checks `bytes` of `kind` before nvJitLink reads them. nvJitLink trusts its inputs' headers as
/// the driver does (a truncated fatbin has made it loop forever, a cubin with a damaged section
/// header crash), so every input gets the check a load would give it, relocatable code included:
/// a host object's embedded fatbins, and each member of a static library that holds device code
/// (its other members are host code nvJitLink passes over). LTO-IR is known by its magic number
/// alone: its contents are NVIDIA's own encoding, which only nvJitLink reads.
pub(crate) fn link_input(bytes: &[u8], kind: ImageKind) -> Result<(), ParseError> {
    let malformed = |refusal: Refusal| match refusal {
        Refusal::Malformed(error) => error,
        Refusal::NeedsLinking(reason) => ParseError::new("relocatable code", reason),
    };
    match kind {
        ImageKind::Cubin => cubin::validate(bytes, Purpose::Link)
            .map(drop)
            .map_err(malformed),
        ImageKind::Fatbin => fatbin::validate(bytes, Purpose::Link)
            .map(drop)
            .map_err(malformed),
        ImageKind::Ptx => ptx::validate(bytes).map(drop),
        ImageKind::LtoIr => Ok(()),
        ImageKind::HostBinary => host_object(bytes),
        ImageKind::Archive => static_library(bytes),
    }
}

/// Whether `bytes` is an executable cubin, not relocatable code (see `cubin::is_executable`).
pub(crate) fn cubin_is_executable(bytes: &[u8]) -> bool {
    cubin::is_executable(bytes)
}

/// The fatbins a host object embeds; none is no damage (an object of host code only).
fn host_object(bytes: &[u8]) -> Result<(), ParseError> {
    for (index, fatbin) in host::fatbin_slices(bytes)?.into_iter().enumerate() {
        link_input(fatbin, ImageKind::Fatbin)
            .map_err(|error| error.inside(&format!("embedded fatbin {index}")))?;
    }
    Ok(())
}

/// Every member holding device code. An archive inside the archive is refused rather than
/// checked: no tool writes one, and following them would let nesting decide the depth of
/// the check's recursion.
fn static_library(bytes: &[u8]) -> Result<(), ParseError> {
    for (name, member) in archive::members(bytes)? {
        let checked = match crate::image::detect(member) {
            Ok(ImageKind::Archive) => Err(ParseError::new(
                "its contents",
                "it is an archive inside the archive, which no tool writes",
            )),
            Ok(kind) => link_input(member, kind),
            // An object file that is not device code: readable, it is host code.
            Err(_) if host::detect(member).is_some() => host_object(member),
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
pub(crate) fn compiler_output(bytes: &[u8], kind: ImageKind) -> Result<Facts, Refusal> {
    match kind {
        ImageKind::Cubin => cubin::compiler_output(bytes),
        _ => image(bytes, kind),
    }
}
