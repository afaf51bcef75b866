//! Fatbins: NVIDIA's container of cubins (SASS), PTX and LTO-IR for several architectures.
//!
//! Layout (little-endian): a [`FatbinHeader`] (magic `0xBA55ED50`, version, header size, size of
//! the entries), then entries, each an [`EntryHeader`] of at least 64 bytes followed by its
//! payload. Compressed entries are decompressed and decoded: zstd (what CUDA 12.8+ writes by
//! default) and LZ4 (older toolkits, and `-compress-mode=speed`), both as one raw block or frame
//! whose decompressed size the entry header declares. Obfuscated entries are listed as such.

use std::borrow::Cow;
use std::io::Read;

use object::endian::{LittleEndian as LE, U16, U32, U64};
use object::pod::{self, Pod};

use super::cubin::{self, Cubin};
use super::ltoir::{self, LtoIr};
use super::ptx::{self, PtxModule};
use super::{Module, ParseError};

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

// SAFETY: both are `repr(C)` structs of object's byte-array integers (alignment 1, the `unaligned`
// feature), so they have no padding and every bit pattern is a valid value.
unsafe impl Pod for FatbinHeader {}
// SAFETY: as above.
unsafe impl Pod for EntryHeader {}

const HEADER_SIZE: usize = std::mem::size_of::<FatbinHeader>();
const ENTRY_HEADER_MIN: usize = std::mem::size_of::<EntryHeader>();

const KIND_PTX: u16 = 1;
const KIND_SASS: u16 = 2;
const KIND_LTOIR: u16 = 8;

const FLAG_64BIT: u64 = 0x1;
const FLAG_LZ4: u64 = 0x2000;
const FLAG_ZSTD: u64 = 0x8000;
const FLAG_OBFUSCATED: u64 = 0x1_0000;

/// Most bytes one zstd entry may decompress to per compressed byte. zstd reaches about 20x on
/// real device code; the cap keeps a hostile "compression bomb" from exhausting memory.
const MAX_RATIO: u64 = 1024;

/// LZ4 cannot do better than about 255 to 1 (a match length grows by 255 per byte).
const MAX_LZ4_RATIO: u64 = 256;

/// A zstd window this small is accepted whatever the content size.
const MIN_WINDOW: u64 = 1 << 17;

/// A fatbin's contents.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Fatbin {
    /// The container version.
    pub version: u16,
    /// Its entries, in order.
    pub entries: Vec<Entry>,
    /// Damage found while reading, e.g. an entry that runs past the end.
    pub notes: Vec<String>,
}

/// One entry of a fatbin.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Entry {
    /// What the entry holds.
    pub kind: EntryKind,
    /// The architecture: the SM number for SASS (90 for sm_90), the virtual one for PTX
    /// (90 for compute_90).
    pub arch: u32,
    /// The entry's format version (major, minor).
    pub version: (u16, u16),
    /// The identifier given when the entry was added (often the source file name).
    pub identifier: Option<String>,
    /// The ptxas options recorded with a PTX entry, used when the driver compiles it.
    pub ptxas_options: Option<String>,
    /// Whether the code is for a 64-bit address space.
    pub address_64bit: bool,
    /// How the payload is compressed.
    pub compression: Compression,
    /// Whether the payload is obfuscated (LTO-IR in CUDA 13 fatbins); it is then not decoded.
    pub obfuscated: bool,
    /// The raw flags word.
    pub flags: u64,
    /// Bytes the payload takes in the fatbin.
    pub stored_size: u64,
    /// Bytes it has decompressed, when compressed.
    pub decompressed_size: Option<u64>,
    /// The decoded payload, when it could be read.
    pub contents: Option<EntryContents>,
    /// Why the payload was not decoded, when it was not.
    pub note: Option<String>,
}

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

/// The decoded payload of an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum EntryContents {
    /// A cubin.
    Cubin(Cubin),
    /// PTX.
    Ptx(PtxModule),
    /// LTO-IR.
    LtoIr(LtoIr),
}

impl Fatbin {
    /// The first part of the fatbin that may hold a module but was not decoded: an entry other
    /// than LTO-IR whose code could not be read (see [`Entry::note`]), or entries passed over
    /// after damage (see [`Fatbin::notes`]); `None` when every one was.
    pub(crate) fn undecoded(&self) -> Option<ParseError> {
        let entry = self.entries.iter().enumerate().find_map(|(index, entry)| {
            let note = entry
                .note
                .as_ref()
                .filter(|_| entry.kind != EntryKind::LtoIr)?;
            Some(ParseError::new(
                format!("fatbin entry {index}"),
                note.clone(),
            ))
        });
        entry.or_else(|| {
            let note = self.notes.first()?;
            Some(ParseError::new("fatbin", note.clone()))
        })
    }

    pub(crate) fn collect_modules<'a>(&'a self, out: &mut Vec<Module<'a>>) {
        for entry in &self.entries {
            match &entry.contents {
                Some(EntryContents::Cubin(cubin)) => out.push(Module::Cubin(cubin)),
                Some(EntryContents::Ptx(ptx)) => out.push(Module::Ptx(ptx)),
                Some(EntryContents::LtoIr(_)) | None => {}
            }
        }
    }
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

    /// How the payload is compressed; an error when the flags name two ways at once.
    pub fn compression(&self) -> Result<Compression, String> {
        let flags = self.flags.get(LE);
        match (flags & FLAG_ZSTD != 0, flags & FLAG_LZ4 != 0) {
            (false, false) => Ok(Compression::None),
            (true, false) => Ok(Compression::Zstd),
            (false, true) => Ok(Compression::Lz4),
            (true, true) => Err(format!("its flags {flags:#x} name both zstd and LZ4")),
        }
    }

    /// Whether the payload is obfuscated.
    pub fn obfuscated(&self) -> bool {
        self.flags.get(LE) & FLAG_OBFUSCATED != 0
    }
}

/// One entry found in a fatbin: its header, its whole header bytes and its payload.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawEntry<'a> {
    /// Where the entry starts in the fatbin.
    pub offset: usize,
    pub header: &'a EntryHeader,
    /// The header's `header_size` bytes (the identifier lives there).
    pub header_bytes: &'a [u8],
    pub payload: &'a [u8],
}

impl RawEntry<'_> {
    /// Names the entry in errors.
    pub(crate) fn place(&self, index: usize) -> String {
        format!("fatbin entry {index} (at byte {})", self.offset)
    }

    /// The payload as the code it holds: decompressed (bounded) when compressed.
    pub(crate) fn code(&self) -> Result<Cow<'_, [u8]>, String> {
        let expected = self.header.decompressed_size.get(LE);
        let stream = || {
            // The payload is padded; the compressed stream is the first `compressed_size` bytes.
            let size = self.header.compressed_size.get(LE);
            usize::try_from(size)
                .ok()
                .filter(|&size| size > 0 && size <= self.payload.len())
                .map(|size| &self.payload[..size])
                .ok_or_else(|| {
                    format!(
                        "its compressed size {size} does not fit its {}-byte payload",
                        self.payload.len()
                    )
                })
        };
        match self.header.compression()? {
            Compression::None => Ok(Cow::Borrowed(self.payload)),
            Compression::Zstd => zstd(stream()?, expected).map(Cow::Owned),
            Compression::Lz4 => lz4(stream()?, expected).map(Cow::Owned),
        }
    }
}

/// Whether `bytes` start with the fatbin magic.
pub(crate) fn has_magic(bytes: &[u8]) -> bool {
    bytes.get(..4) == Some(&MAGIC.to_le_bytes()[..])
}

/// The header of the fatbin at the start of `bytes` and the fatbin's length (header and
/// entries), checked to lie inside `bytes`.
pub(crate) fn read_header(bytes: &[u8]) -> Result<(&FatbinHeader, usize), ParseError> {
    let place = "fatbin header";
    let (header, _) = pod::from_bytes::<FatbinHeader>(bytes).map_err(|()| {
        ParseError::new(
            place,
            format!("{} bytes, fewer than its {HEADER_SIZE}", bytes.len()),
        )
    })?;
    if header.magic.get(LE) != MAGIC {
        return Err(ParseError::new(place, "no fatbin magic number"));
    }
    let header_size = header.header_size.get(LE);
    if usize::from(header_size) < HEADER_SIZE {
        return Err(ParseError::new(
            place,
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
        let result = read_entry(&bytes[at..total], at).map_err(|problem| {
            ParseError::new(format!("fatbin entry {index} (at byte {at})"), problem)
        });
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
fn read_entry(bytes: &[u8], offset: usize) -> Result<(RawEntry<'_>, usize), String> {
    let (header, _) = pod::from_bytes::<EntryHeader>(bytes).map_err(|()| {
        format!(
            "{} bytes remain, fewer than an entry header's {ENTRY_HEADER_MIN}",
            bytes.len()
        )
    })?;
    let header_size = header.header_size.get(LE);
    let header_len = usize::try_from(header_size)
        .ok()
        .filter(|&size| (ENTRY_HEADER_MIN..=bytes.len()).contains(&size))
        .ok_or_else(|| {
            format!(
                "its header size {header_size} is below {ENTRY_HEADER_MIN} or runs past the \
                 fatbin's end"
            )
        })?;
    let payload_size = header.payload_size.get(LE);
    let len = usize::try_from(payload_size)
        .ok()
        .and_then(|size| size.checked_add(header_len))
        .filter(|&len| len <= bytes.len())
        .ok_or_else(|| format!("its payload of {payload_size} bytes runs past the fatbin's end"))?;
    let entry = RawEntry {
        offset,
        header,
        header_bytes: &bytes[..header_len],
        payload: &bytes[header_len..len],
    };
    Ok((entry, len))
}

/// Reads a fatbin; bytes after the length its header declares are ignored.
pub fn parse(bytes: &[u8]) -> Result<Fatbin, ParseError> {
    let (header, _) = read_header(bytes)?;
    let mut fatbin = Fatbin {
        version: header.version.get(LE),
        entries: Vec::new(),
        notes: Vec::new(),
    };
    for raw in entries(bytes)? {
        match raw {
            Ok(raw) => fatbin.entries.push(describe(&raw)),
            Err(error) => fatbin.notes.push(format!("{error}; the rest was skipped")),
        }
    }
    Ok(fatbin)
}

fn describe(raw: &RawEntry<'_>) -> Entry {
    let header = raw.header;
    let flags = header.flags.get(LE);
    let compression = header.compression().unwrap_or(Compression::Zstd);
    let mut entry = Entry {
        kind: header.entry_kind(),
        arch: header.arch.get(LE),
        version: (header.major.get(LE), header.minor.get(LE)),
        identifier: text_in_header(identifier_bytes(raw)),
        ptxas_options: text_in_header(options_bytes(raw).ok().flatten()),
        address_64bit: flags & FLAG_64BIT != 0,
        compression,
        obfuscated: header.obfuscated(),
        flags,
        stored_size: header.payload_size.get(LE),
        decompressed_size: (compression != Compression::None)
            .then(|| header.decompressed_size.get(LE)),
        contents: None,
        note: None,
    };
    match decode(raw) {
        Ok(contents) => entry.contents = Some(contents),
        Err(note) => entry.note = Some(note),
    }
    entry
}

/// A string stored in an entry header, up to its first NUL; `None` when empty or absent.
fn text_in_header(raw: Option<&[u8]>) -> Option<String> {
    let raw = raw?.split(|&b| b == 0).next().unwrap_or_default();
    (!raw.is_empty()).then(|| String::from_utf8_lossy(raw).into_owned())
}

/// The bytes `len` long at `offset` of the entry header, `None` when they do not lie inside it.
fn header_span<'a>(raw: &RawEntry<'a>, offset: u32, len: u32) -> Option<&'a [u8]> {
    let start = usize::try_from(offset).ok()?;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    raw.header_bytes.get(start..end)
}

/// The identifier's bytes, `None` when they do not lie inside the entry header.
pub(crate) fn identifier_bytes<'a>(raw: &RawEntry<'a>) -> Option<&'a [u8]> {
    let header = raw.header;
    header_span(
        raw,
        header.identifier_offset.get(LE),
        header.identifier_len.get(LE),
    )
}

/// The ptxas options' bytes: `Ok(None)` when the entry records none, an error when the header
/// points outside itself.
pub(crate) fn options_bytes<'a>(raw: &RawEntry<'a>) -> Result<Option<&'a [u8]>, String> {
    let at = raw.header.options_offset.get(LE);
    if at == 0 {
        return Ok(None);
    }
    let outside = || format!("its ptxas options at byte {at} lie outside its header");
    let pair = header_span(raw, at, 8).ok_or_else(outside)?;
    let (offset, len) = pair.split_at(4);
    let word = |bytes: &[u8]| u32::from_le_bytes(bytes.try_into().unwrap_or_default());
    if word(len) == 0 {
        return Ok(None);
    }
    header_span(raw, word(offset), word(len))
        .map(Some)
        .ok_or_else(outside)
}

fn decode(raw: &RawEntry<'_>) -> Result<EntryContents, String> {
    if raw.header.obfuscated() {
        return Err("obfuscated; only NVIDIA's tools can read it".into());
    }
    let code = raw.code()?;
    let decoded = match raw.header.entry_kind() {
        EntryKind::Sass => cubin::parse(&code).map(EntryContents::Cubin),
        EntryKind::Ptx => ptx::parse(&code).map(EntryContents::Ptx),
        EntryKind::LtoIr => ltoir::parse(&code).map(EntryContents::LtoIr),
        EntryKind::Unknown(kind) => return Err(format!("unknown entry kind {kind}")),
    };
    decoded.map_err(|error| error.to_string())
}

/// Refuses to decompress `stream` to `expected` bytes when that is more than `ratio` times its
/// size.
fn check_ratio(stream: &[u8], expected: u64, ratio: u64) -> Result<(), String> {
    let limit = (stream.len() as u64).saturating_mul(ratio);
    if expected > limit {
        return Err(format!(
            "declares {expected} decompressed bytes from {} compressed ones, more than cudyn \
             believes",
            stream.len()
        ));
    }
    Ok(())
}

/// Decompresses a zstd stream that should give `expected` bytes, refusing to produce more than
/// [`MAX_RATIO`] times the stream's size.
fn zstd(stream: &[u8], expected: u64) -> Result<Vec<u8>, String> {
    check_ratio(stream, expected, MAX_RATIO)?;
    // The decoder allocates the window the frame header asks for; a real frame's window is no
    // bigger than its content, so a larger one is damage, refused before it costs memory.
    let (frame, _) = ruzstd::frame::read_frame_header(stream)
        .map_err(|error| format!("zstd frame header is damaged: {error}"))?;
    let window = frame
        .header
        .window_size()
        .map_err(|error| format!("zstd frame header is damaged: {error}"))?;
    if window > expected.max(MIN_WINDOW) {
        return Err(format!(
            "zstd window of {window} bytes is larger than the {expected} bytes it should give"
        ));
    }
    let mut source = stream;
    let decoder = ruzstd::StreamingDecoder::new(&mut source)
        .map_err(|error| format!("zstd stream is damaged: {error}"))?;
    let mut out = Vec::new();
    decoder
        .take(expected.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|error| format!("zstd stream is damaged: {error}"))?;
    expect_len(out, expected)
}

/// Decompresses an LZ4 block (the framing of nvcc's `fatbinary` and of nvFatbin: one raw block,
/// no frame header) that should give `expected` bytes. The output is allocated whole before
/// decoding, so the bound is LZ4's own largest ratio rather than [`MAX_RATIO`].
fn lz4(stream: &[u8], expected: u64) -> Result<Vec<u8>, String> {
    check_ratio(stream, expected, MAX_LZ4_RATIO)?;
    let size = usize::try_from(expected).map_err(|_| "too large to decompress".to_string())?;
    let out = lz4_flex::block::decompress(stream, size)
        .map_err(|error| format!("LZ4 block is damaged: {error}"))?;
    expect_len(out, expected)
}

fn expect_len(out: Vec<u8>, expected: u64) -> Result<Vec<u8>, String> {
    if out.len() as u64 != expected {
        return Err(format!(
            "decompressed to {} bytes, but the header says {expected}",
            out.len()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fatbin of one entry whose header has `fields` written at their offsets.
    fn fatbin(fields: &[(usize, u64)], payload: &[u8]) -> Vec<u8> {
        let mut entry = vec![0u8; ENTRY_HEADER_MIN];
        entry[0..2].copy_from_slice(&KIND_SASS.to_le_bytes());
        entry[4..8].copy_from_slice(&(ENTRY_HEADER_MIN as u32).to_le_bytes());
        entry[8..16].copy_from_slice(&(payload.len() as u64).to_le_bytes());
        for &(offset, value) in fields {
            let width = if offset == 8 || offset >= 40 { 8 } else { 4 };
            entry[offset..offset + width].copy_from_slice(&value.to_le_bytes()[..width]);
        }
        entry.extend_from_slice(payload);
        let mut out = MAGIC.to_le_bytes().to_vec();
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&(HEADER_SIZE as u16).to_le_bytes());
        out.extend_from_slice(&(entry.len() as u64).to_le_bytes());
        out.extend_from_slice(&entry);
        out
    }

    #[test]
    fn a_body_larger_than_the_file_is_an_error() {
        let mut bytes = fatbin(&[], &[]);
        bytes[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        let error = parse(&bytes).unwrap_err().to_string();
        assert!(error.contains("only 80 bytes are there"), "{error}");
    }

    #[test]
    fn an_entry_running_past_the_end_is_a_note() {
        let bytes = fatbin(&[(8, u64::MAX)], &[0; 8]);
        let parsed = parse(&bytes).unwrap();
        assert!(parsed.entries.is_empty());
        assert!(
            parsed.notes[0].contains("runs past the fatbin's end"),
            "{:?}",
            parsed.notes
        );
    }

    #[test]
    fn a_compression_bomb_is_refused_before_decoding() {
        let bytes = fatbin(
            &[(16, 4), (40, FLAG_ZSTD | FLAG_64BIT), (56, 1 << 40)],
            &[0x28, 0xb5, 0x2f, 0xfd],
        );
        let entry = &parse(&bytes).unwrap().entries[0];
        assert_eq!(entry.compression, Compression::Zstd);
        assert_eq!(entry.decompressed_size, Some(1 << 40));
        let note = entry.note.as_deref().unwrap();
        assert!(note.contains("more than cudyn believes"), "{note}");
    }

    #[test]
    fn ptxas_options_are_read_from_inside_the_header_only() {
        // A 96-byte header: the pair (72, 13) at byte 64, the options at byte 72.
        let mut extension = [72u32.to_le_bytes(), 13u32.to_le_bytes()].concat();
        extension.extend_from_slice(b"-O2 -lineinfo");
        extension.resize(32, 0);
        let options = |at: u64| {
            let bytes = fatbin(&[(4, 96), (8, 0), (20, at)], &extension);
            parse(&bytes).unwrap().entries[0].ptxas_options.clone()
        };
        assert_eq!(options(64).as_deref(), Some("-O2 -lineinfo"));
        assert_eq!(options(0), None);
        assert_eq!(options(92), None);
    }

    #[test]
    fn an_identifier_outside_the_header_is_ignored() {
        let bytes = fatbin(&[(32, u32::MAX.into()), (36, 16)], &[]);
        assert_eq!(parse(&bytes).unwrap().entries[0].identifier, None);
    }
}
