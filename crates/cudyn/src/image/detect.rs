//! Which kind of device code bytes are, from their headers alone, asked of each format in turn.

use std::fmt;

use crate::formats::host::NoDeviceCode;
use crate::formats::{archive, cubin, fatbin, host, ltoir, ptx};
use crate::kinds::ImageKind;

/// Why bytes are none of the kinds of device code cudyn knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unrecognized {
    /// There are no bytes.
    Empty,
    /// A host object file without device code, or one that cannot be read.
    Host(NoDeviceCode),
    /// PTX text cut by a NUL byte at `at`, with more than NULs after it.
    NulInsidePtx { at: usize },
    /// The bytes start with `head` (up to 8 bytes), the header of no known kind.
    UnknownHeader { head: Vec<u8> },
}

impl fmt::Display for Unrecognized {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unrecognized::Empty => f.write_str("it is empty"),
            Unrecognized::Host(reason) => reason.fmt(f),
            Unrecognized::NulInsidePtx { at } => write!(
                f,
                "it is PTX text with a NUL byte inside it, at byte {at}: the driver reads PTX \
                 only up to its first NUL, so the text after it would be lost"
            ),
            Unrecognized::UnknownHeader { head } => {
                let head: Vec<String> = head.iter().map(|b| format!("{b:02x}")).collect();
                write!(
                    f,
                    "it starts with the bytes {}, the header of none of the kinds cudyn knows \
                     (PTX, a cubin, a fatbin, LTO-IR, a host binary with embedded device code \
                     built by nvcc, or a static library)",
                    head.join(" ")
                )
            }
        }
    }
}

/// What detection found of some bytes: their kind, and for PTX the text it read them as (valid
/// UTF-8 without a NUL, trailing NULs cut), so that the check reads them as text only once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Detected<'a> {
    pub(crate) kind: ImageKind,
    pub(crate) ptx_text: Option<&'a str>,
}

impl From<ImageKind> for Detected<'static> {
    /// A kind known otherwise (compiler output, say): the check reads PTX as text itself.
    fn from(kind: ImageKind) -> Self {
        Detected {
            kind,
            ptx_text: None,
        }
    }
}

/// The kind of `bytes`, or why they are none.
pub(crate) fn detect(bytes: &[u8]) -> Result<ImageKind, Unrecognized> {
    detect_with_text(bytes).map(|detected| detected.kind)
}

/// [`detect`], with PTX's text.
pub(crate) fn detect_with_text(bytes: &[u8]) -> Result<Detected<'_>, Unrecognized> {
    let kind = |kind: ImageKind| Ok(kind.into());
    if bytes.is_empty() {
        return Err(Unrecognized::Empty);
    }
    if archive::has_magic(bytes) {
        return kind(ImageKind::Archive);
    }
    if fatbin::has_magic(bytes) {
        return kind(ImageKind::Fatbin);
    }
    if cubin::is_cuda_elf(bytes) {
        return kind(ImageKind::Cubin);
    }
    if ltoir::format(bytes).is_some() {
        return kind(ImageKind::LtoIr);
    }
    if let Some(text) = ptx::recognized_text(bytes) {
        return Ok(Detected {
            kind: ImageKind::Ptx,
            ptx_text: Some(text),
        });
    }
    if let Some(found) = host::detect(bytes) {
        return found
            .map(|()| ImageKind::HostBinary.into())
            .map_err(Unrecognized::Host);
    }
    if let Some(at) = nul_inside_ptx(bytes) {
        return Err(Unrecognized::NulInsidePtx { at });
    }
    Err(Unrecognized::UnknownHeader {
        head: bytes.iter().take(8).copied().collect(),
    })
}

/// Where the first NUL is in `bytes` when the text before it is PTX and other bytes than NULs
/// follow it: PTX cut by a stray NUL rather than a file of no known kind.
fn nul_inside_ptx(bytes: &[u8]) -> Option<usize> {
    let nul = bytes.iter().position(|&b| b == 0)?;
    let after = &bytes[nul..];
    (after.iter().any(|&b| b != 0) && ptx::looks_like_ptx(&bytes[..nul])).then_some(nul)
}
