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

/// The kind of `bytes`, or why they are none.
pub(crate) fn detect(bytes: &[u8]) -> Result<ImageKind, Unrecognized> {
    if bytes.is_empty() {
        return Err(Unrecognized::Empty);
    }
    if archive::has_magic(bytes) {
        return Ok(ImageKind::Archive);
    }
    if fatbin::has_magic(bytes) {
        return Ok(ImageKind::Fatbin);
    }
    if cubin::is_cuda_elf(bytes) {
        return Ok(ImageKind::Cubin);
    }
    if ltoir::format(bytes).is_some() {
        return Ok(ImageKind::LtoIr);
    }
    if ptx::looks_like_ptx(bytes) {
        return Ok(ImageKind::Ptx);
    }
    if let Some(found) = host::detect(bytes) {
        return found
            .map(|()| ImageKind::HostBinary)
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
