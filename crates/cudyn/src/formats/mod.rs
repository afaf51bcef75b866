//! The binary formats of device code, one module each: cubins, fatbins, PTX, LTO-IR, static
//! libraries (`ar` archives) and host binaries with embedded fatbins.
//!
//! A format's module holds its structures, typed and `#[repr(C)]` (the `object` crate's ELF and
//! archive types, or its own built from `object`'s byte-order integers, as `object`'s `read/elf`
//! keeps a format's structures and their reading together), its reader and its checks. Nothing
//! outside a format's module takes its bytes apart: [`crate::image`] detects the kind of an
//! image and checks it through the formats before the driver or nvJitLink sees it, and
//! [`crate::inspect`] presents what the readers here find.
//!
//! Every reader takes untrusted bytes: offsets, counts and sizes are checked before use, nothing
//! is allocated in proportion to a number read from the input rather than to the input's own
//! size (decompressed fatbin entries are bounded likewise), and damage is a [`ParseError`]
//! saying where and what, never a panic.
//!
//! [`ParseError`]: crate::parse_error::ParseError

pub(crate) mod archive;
pub(crate) mod cubin;
pub(crate) mod fatbin;
pub(crate) mod host;
pub(crate) mod ltoir;
pub(crate) mod ptx;
pub(crate) mod remembered;
mod verdict;

pub(crate) use verdict::{Facts, Purpose, Refusal};

use crate::parse_error::{ParseError, Problem};

/// An error of the `object` crate reading the structure at `place` (see [`object_problem`]).
fn object_error(place: impl Into<String>, error: object::read::Error) -> ParseError {
    let message = error.to_string();
    ParseError::new(place, object_problem(&message), message)
}

/// The kind of problem an error of the `object` crate, worded `message`, reports: of a structure
/// that does not fit in the bytes (an offset, a size or alignment, too short)
/// [`Problem::Truncated`], of a header of a kind it does not read [`Problem::WrongFormat`], of
/// anything else [`Problem::Damaged`].
fn object_problem(message: &str) -> Problem {
    if ["offset", "size or alignment", "too short"]
        .iter()
        .any(|words| message.contains(words))
    {
        Problem::Truncated
    } else if message.starts_with("Unsupported") || message.starts_with("Unknown") {
        Problem::WrongFormat
    } else {
        Problem::Damaged
    }
}
