//! The structural checks every image passes before the driver sees it (see [`Image::validate`]).
//!
//! [`Image::validate`]: super::Image::validate

mod cubin;
mod fatbin;
mod ptx;

use crate::error::Error;
use crate::image::ImageKind;
use crate::inspect::ParseError;

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
pub(crate) fn image(bytes: &[u8], kind: ImageKind) -> Result<(), Refusal> {
    match kind {
        ImageKind::Cubin => cubin::validate(bytes),
        ImageKind::Fatbin => fatbin::validate(bytes),
        ImageKind::Ptx => ptx::validate(bytes).map_err(Refusal::Malformed),
        ImageKind::LtoIr | ImageKind::HostBinary | ImageKind::Archive => Ok(()),
    }
}

/// The checks output of NVRTC or nvJitLink (a [`Compiled`](crate::compile::Compiled), fresh or
/// read back from the compile cache, whose checksum covers it) still needs before a load: a
/// cubin's ELF header saying it is executable rather than relocatable. Its structure was written
/// by the compiler, not by whoever handed cudyn the bytes, and the full walk of [`image`] costs
/// a new process tens of microseconds, as much as the load itself. Other kinds get the full
/// check.
pub(crate) fn compiler_output(bytes: &[u8], kind: ImageKind) -> Result<(), Refusal> {
    match kind {
        ImageKind::Cubin => cubin::check_executable(bytes),
        _ => image(bytes, kind),
    }
}
