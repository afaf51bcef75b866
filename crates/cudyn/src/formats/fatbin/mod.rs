//! Fatbins: NVIDIA's container of cubins (SASS), PTX and LTO-IR for several architectures.
//!
//! Layout (little-endian): a [`FatbinHeader`] (magic `0xBA55ED50`, version, header size, size of
//! the entries), then entries, each an [`EntryHeader`] of at least 64 bytes followed by its
//! payload. Compressed entries are decompressed and decoded: zstd (what CUDA 12.8+ writes by
//! default) and LZ4 (older toolkits, and `-compress-mode=speed`), both as one raw block or frame
//! whose decompressed size the entry header declares. Obfuscated entries are listed as such.
//!
//! This file reads the headers and finds the entries; `decompress` gives an entry's code, `read`
//! describes a fatbin for inspection ([`Fatbin`]) and `check` checks one before a load or link.

mod check;
mod decompress;
mod read;

use object::endian::{LittleEndian as LE, U16, U32, U64};
use object::pod::{self, Pod};

pub(crate) use check::{unread_contents, validate};
pub use read::{parse, Entry, EntryContents, Fatbin};

use super::ptx;
use crate::parse_error::{Fault, ParseError, Problem};

/// The fatbin container's magic number.
pub const MAGIC: u32 = 0xBA55_ED50;

/// The header at the start of a fatbin.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
#[non_exhaustive]
pub struct FatbinHeader {
    /// [`MAGIC`].
    pub magic: U32<LE>,
    /// The container version (1).
    pub version: U16<LE>,
    /// Bytes of header before the first entry (16).
    pub header_size: U16<LE>,
    /// Bytes of entries after the header.
    pub body_size: U64<LE>,
}

/// The header of one fatbin entry; its payload follows after `header_size` bytes.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
#[non_exhaustive]
pub struct EntryHeader {
    /// What the payload is: 1 PTX, 2 SASS (a cubin), 8 LTO-IR.
    pub kind: U16<LE>,
    /// Unknown (0x0101 in current fatbins).
    pub unknown: U16<LE>,
    /// Bytes of header before the payload (at least 64; the identifier may follow the fields).
    pub header_size: U32<LE>,
    /// Bytes the payload takes in the fatbin, padding included.
    pub payload_size: U64<LE>,
    /// Bytes of compressed stream at the start of the payload (0 when not compressed).
    pub compressed_size: U32<LE>,
    /// Where, from the start of this header, the (offset, length) pair locating the entry's
    /// ptxas options lies (in PTX entries); 0 when there is none.
    pub options_offset: U32<LE>,
    /// Format version, minor.
    pub minor: U16<LE>,
    /// Format version, major.
    pub major: U16<LE>,
    /// The SM (SASS) or virtual (PTX) architecture number.
    pub arch: U32<LE>,
    /// Where the identifier string starts, from the start of this header.
    pub identifier_offset: U32<LE>,
    /// The identifier's length in bytes.
    pub identifier_len: U32<LE>,
    /// Flags: 64-bit code, compression, obfuscation.
    pub flags: U64<LE>,
    /// Reserved.
    pub reserved1: U64<LE>,
    /// Bytes the payload decompresses to (0 when not compressed).
    pub decompressed_size: U64<LE>,
}

/// Where an entry's ptxas options lie, from the start of its header: what its
/// [`options_offset`](EntryHeader::options_offset) points at.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
struct OptionsLocation {
    offset: U32<LE>,
    len: U32<LE>,
}

// SAFETY: these are `repr(C)` structs of object's byte-array integers (alignment 1, the
// `unaligned` feature), so they have no padding and every bit pattern is a valid value.
unsafe impl Pod for FatbinHeader {}
// SAFETY: as above.
unsafe impl Pod for EntryHeader {}
// SAFETY: as above.
unsafe impl Pod for OptionsLocation {}

const HEADER_SIZE: usize = std::mem::size_of::<FatbinHeader>();
const ENTRY_HEADER_MIN: usize = std::mem::size_of::<EntryHeader>();

const KIND_PTX: u16 = 1;
const KIND_SASS: u16 = 2;
const KIND_LTOIR: u16 = 8;

const FLAG_64BIT: u64 = 0x1;
const FLAG_LZ4: u64 = 0x2000;
const FLAG_ZSTD: u64 = 0x8000;
const FLAG_OBFUSCATED: u64 = 0x1_0000;

/// What a fatbin entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum EntryKind {
    /// A cubin.
    Sass,
    /// PTX text.
    Ptx,
    /// LTO-IR.
    LtoIr,
    /// A kind this version of cudyn does not know.
    Unknown(u16),
}

/// How a fatbin entry's payload is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Compression {
    /// Stored as is.
    None,
    /// LZ4 (older toolkits, and `-compress-mode=speed`); decoded.
    Lz4,
    /// Zstandard (CUDA 12.8+); decoded.
    Zstd,
}

impl EntryHeader {
    /// What the entry holds.
    pub fn entry_kind(&self) -> EntryKind {
        match self.kind.get(LE) {
            KIND_PTX => EntryKind::Ptx,
            KIND_SASS => EntryKind::Sass,
            KIND_LTOIR => EntryKind::LtoIr,
            other => EntryKind::Unknown(other),
        }
    }

    /// How the payload is compressed; [`Problem::Damaged`] when the flags name two ways at
    /// once.
    pub fn compression(&self) -> Result<Compression, ParseError> {
        let flags = self.flags.get(LE);
        match (flags & FLAG_ZSTD != 0, flags & FLAG_LZ4 != 0) {
            (false, false) => Ok(Compression::None),
            (true, false) => Ok(Compression::Zstd),
            (false, true) => Ok(Compression::Lz4),
            (true, true) => Err(ParseError::new(
                "fatbin entry header",
                Problem::Damaged,
                format!("its flags {flags:#x} name both zstd and LZ4"),
            )),
        }
    }

    /// Whether the payload is obfuscated.
    pub fn obfuscated(&self) -> bool {
        self.flags.get(LE) & FLAG_OBFUSCATED != 0
    }

    /// Whether the code is for a 64-bit address space.
    fn address_64bit(&self) -> bool {
        self.flags.get(LE) & FLAG_64BIT != 0
    }
}

/// One entry found in a fatbin: its header, its whole header bytes and its payload.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawEntry<'a> {
    /// Where the entry starts in the fatbin.
    pub(crate) offset: usize,
    pub(crate) header: &'a EntryHeader,
    /// The header's `header_size` bytes (the identifier lives there).
    pub(crate) header_bytes: &'a [u8],
    pub(crate) payload: &'a [u8],
}

impl<'a> RawEntry<'a> {
    /// Where the payload starts in the fatbin: right after the entry's header.
    pub(crate) fn payload_offset(&self) -> usize {
        self.offset + self.header_bytes.len()
    }

    /// Names the entry in errors.
    pub(crate) fn place(&self, index: usize) -> String {
        format!("fatbin entry {index} (at byte {})", self.offset)
    }

    /// The bytes `len` long at `offset` of the entry header, `None` when they do not lie inside
    /// it.
    fn header_span(&self, offset: u32, len: u32) -> Option<&'a [u8]> {
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        self.header_bytes.get(start..end)
    }

    /// The identifier's bytes, `None` when they do not lie inside the entry header.
    pub(crate) fn identifier(&self) -> Option<&'a [u8]> {
        let header = self.header;
        self.header_span(
            header.identifier_offset.get(LE),
            header.identifier_len.get(LE),
        )
    }

    /// The ptxas options' bytes: `Ok(None)` when the entry records none, an error when the
    /// header points outside itself.
    pub(crate) fn options(&self) -> Result<Option<&'a [u8]>, Fault> {
        let at = self.header.options_offset.get(LE);
        if at == 0 {
            return Ok(None);
        }
        let outside = || {
            Fault::new(
                Problem::Damaged,
                format!("its ptxas options at byte {at} lie outside its header"),
            )
        };
        let (location, _) = usize::try_from(at)
            .ok()
            .and_then(|at| self.header_bytes.get(at..))
            .and_then(|rest| pod::from_bytes::<OptionsLocation>(rest).ok())
            .ok_or_else(outside)?;
        if location.len.get(LE) == 0 {
            return Ok(None);
        }
        self.header_span(location.offset.get(LE), location.len.get(LE))
            .map(Some)
            .ok_or_else(outside)
    }
}

/// The module an entry's code is: by the entry's kind, or for a kind cudyn does not know by
/// what the code holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CodeKind {
    /// A cubin.
    Cubin,
    /// PTX text.
    Ptx,
}

impl CodeKind {
    /// What `code`, of an entry of `kind` (not LTO-IR), is: `None` for a kind cudyn does not
    /// know holding neither a cubin nor PTX.
    pub(crate) fn of(kind: EntryKind, code: &[u8]) -> Option<CodeKind> {
        match kind {
            EntryKind::Sass => Some(CodeKind::Cubin),
            EntryKind::Ptx => Some(CodeKind::Ptx),
            _ if code.starts_with(b"\x7fELF") => Some(CodeKind::Cubin),
            _ if ptx::looks_like_ptx(code) => Some(CodeKind::Ptx),
            _ => None,
        }
    }
}

/// Whether `bytes` start with the fatbin magic.
pub(crate) fn has_magic(bytes: &[u8]) -> bool {
    pod::from_bytes::<U32<LE>>(bytes).is_ok_and(|(magic, _)| magic.get(LE) == MAGIC)
}

/// The header of the fatbin at the start of `bytes` and the fatbin's length (header and
/// entries), checked to lie inside `bytes`.
pub(crate) fn read_header(bytes: &[u8]) -> Result<(&FatbinHeader, usize), ParseError> {
    let place = "fatbin header";
    let (header, _) = pod::from_bytes::<FatbinHeader>(bytes).map_err(|()| {
        ParseError::new(
            place,
            Problem::Truncated,
            format!("{} bytes, fewer than its {HEADER_SIZE}", bytes.len()),
        )
    })?;
    if header.magic.get(LE) != MAGIC {
        return Err(ParseError::new(
            place,
            Problem::WrongFormat,
            "no fatbin magic number",
        ));
    }
    let header_size = header.header_size.get(LE);
    if usize::from(header_size) < HEADER_SIZE {
        return Err(ParseError::new(
            place,
            Problem::Damaged,
            format!("the header size {header_size} is below {HEADER_SIZE}"),
        ));
    }
    let body = header.body_size.get(LE);
    let total = usize::try_from(body)
        .ok()
        .and_then(|body| body.checked_add(usize::from(header_size)))
        .filter(|&total| total <= bytes.len())
        .ok_or_else(|| {
            ParseError::new(
                place,
                Problem::Truncated,
                format!(
                    "it claims {body} bytes of entries after {header_size} bytes of header, but \
                     only {} bytes are there",
                    bytes.len()
                ),
            )
        })?;
    Ok((header, total))
}

/// The length of the fatbin at the start of `bytes`, as its header says.
pub(crate) fn declared_len(bytes: &[u8]) -> Result<usize, ParseError> {
    read_header(bytes).map(|(_, total)| total)
}

/// The entries of the fatbin at the start of `bytes`, in order, each checked to lie inside the
/// length the header declares; stops after the first that does not.
pub(crate) fn entries(
    bytes: &[u8],
) -> Result<impl Iterator<Item = Result<RawEntry<'_>, ParseError>>, ParseError> {
    let (header, total) = read_header(bytes)?;
    let mut at = usize::from(header.header_size.get(LE));
    let mut index = 0;
    let mut failed = false;
    Ok(std::iter::from_fn(move || {
        if at >= total || failed {
            return None;
        }
        let result = read_entry(&bytes[at..total], at)
            .map_err(|fault| fault.at(format!("fatbin entry {index} (at byte {at})")));
        match &result {
            Ok((_, len)) => at += len,
            Err(_) => failed = true,
        }
        index += 1;
        Some(result.map(|(entry, _)| entry))
    }))
}

/// The entry at the start of `bytes` (which start at `offset` in the fatbin) and the bytes it
/// spans.
fn read_entry(bytes: &[u8], offset: usize) -> Result<(RawEntry<'_>, usize), Fault> {
    let (header, _) = pod::from_bytes::<EntryHeader>(bytes).map_err(|()| {
        Fault::new(
            Problem::Truncated,
            format!(
                "{} bytes remain, fewer than an entry header's {ENTRY_HEADER_MIN}",
                bytes.len()
            ),
        )
    })?;
    let header_size = header.header_size.get(LE);
    let header_len = usize::try_from(header_size)
        .ok()
        .filter(|&size| (ENTRY_HEADER_MIN..=bytes.len()).contains(&size))
        .ok_or_else(|| {
            let below = u64::from(header_size) < ENTRY_HEADER_MIN as u64;
            Fault::new(
                if below {
                    Problem::Damaged
                } else {
                    Problem::Truncated
                },
                format!(
                    "its header size {header_size} is below {ENTRY_HEADER_MIN} or runs past the \
                     fatbin's end"
                ),
            )
        })?;
    let payload_size = header.payload_size.get(LE);
    let len = usize::try_from(payload_size)
        .ok()
        .and_then(|size| size.checked_add(header_len))
        .filter(|&len| len <= bytes.len())
        .ok_or_else(|| {
            Fault::new(
                Problem::Truncated,
                format!("its payload of {payload_size} bytes runs past the fatbin's end"),
            )
        })?;
    let entry = RawEntry {
        offset,
        header,
        header_bytes: &bytes[..header_len],
        payload: &bytes[header_len..len],
    };
    Ok((entry, len))
}
