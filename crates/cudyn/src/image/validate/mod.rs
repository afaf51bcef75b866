//! The structural checks every image passes before the driver sees it (see [`Image::validate`]).
//!
//! [`Image::validate`]: super::Image::validate

mod cubin;
mod fatbin;
mod ptx;

use crate::error::Error;
use crate::image::ImageKind;
use crate::inspect::ParseError;

/// What the check of an image found out on the way, for the loader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Facts {
    /// Whether the code defines device variables (`__device__`, `__constant__`, `__managed__`),
    /// which loads sharing a library would share.
    pub(crate) defines_variables: bool,
}

impl Facts {
    /// The facts of two parts of one image together.
    fn and(self, other: Facts) -> Facts {
        Facts {
            defines_variables: self.defines_variables || other.defines_variables,
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
        ImageKind::Cubin => cubin::validate(bytes),
        ImageKind::Fatbin => fatbin::validate(bytes),
        ImageKind::Ptx => ptx::validate(bytes).map_err(Refusal::Malformed),
        ImageKind::LtoIr | ImageKind::HostBinary | ImageKind::Archive => Ok(Facts {
            defines_variables: true,
        }),
    }
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
