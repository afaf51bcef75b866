//! Fatbins: NVIDIA's container of cubins (SASS), PTX and LTO-IR for several architectures.
//!
//! Layout (little-endian): a 16-byte header (magic `0xBA55ED50`, version, header size, size of
//! the entries), then entries, each a header of at least 64 bytes (kind, header size, payload
//! size, compressed size, version, architecture, identifier, flags, decompressed size) followed
//! by its payload. Entries compressed with zstd (what CUDA 12.8+ writes) are decompressed and
//! decoded; LZ4-compressed (older toolkits) and obfuscated entries are listed as such.

use std::io::Read;

use super::cubin::{self, Cubin};
use super::ltoir::{self, LtoIr};
use super::ptx::{self, PtxModule};
use super::{u16_at, u32_at, u64_at, Module};

/// The fatbin container's magic number.
pub const MAGIC: u32 = 0xBA55_ED50;

const HEADER_SIZE: usize = 16;
const ENTRY_HEADER_MIN: usize = 64;

const KIND_PTX: u16 = 1;
const KIND_SASS: u16 = 2;
const KIND_LTOIR: u16 = 8;

const FLAG_64BIT: u64 = 0x1;
const FLAG_LZ4: u64 = 0x2000;
const FLAG_ZSTD: u64 = 0x8000;
const FLAG_OBFUSCATED: u64 = 0x1_0000;

/// Most bytes one entry may decompress to per compressed byte. zstd reaches about 20x on real
/// device code; the cap keeps a hostile "compression bomb" from exhausting memory.
const MAX_RATIO: u64 = 1024;

/// A zstd window this small is accepted whatever the content size.
const MIN_WINDOW: u64 = 1 << 17;

/// A fatbin's contents.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
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
pub enum Compression {
    /// Stored as is.
    None,
    /// LZ4 (toolkits before 12.8 and `-compress-mode=speed` on some); listed, not decoded.
    Lz4,
    /// Zstandard (CUDA 12.8+); decoded.
    Zstd,
}

/// The decoded payload of an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum EntryContents {
    /// A cubin.
    Cubin(Cubin),
    /// PTX.
    Ptx(PtxModule),
    /// LTO-IR.
    LtoIr(LtoIr),
}

impl Fatbin {
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

/// Whether `bytes` start with the fatbin magic.
pub(crate) fn has_magic(bytes: &[u8]) -> bool {
    u32_at(bytes, 0) == Some(MAGIC)
}

/// The length of the fatbin at the start of `bytes` (header and entries), as its header says.
pub(crate) fn declared_len(bytes: &[u8]) -> Result<usize, String> {
    if !has_magic(bytes) {
        return Err("no fatbin magic number".into());
    }
    let header_size = u16_at(bytes, 6).ok_or("the fatbin header is truncated")?;
    let body = u64_at(bytes, 8).ok_or("the fatbin header is truncated")?;
    let total = usize::try_from(body)
        .ok()
        .and_then(|body| body.checked_add(usize::from(header_size)))
        .filter(|&total| total <= bytes.len())
        .ok_or_else(|| {
            format!(
                "the header claims {body} bytes of entries after {header_size} bytes of header, \
                 but only {} bytes are there",
                bytes.len()
            )
        })?;
    if usize::from(header_size) < HEADER_SIZE {
        return Err(format!(
            "the header size {header_size} is below {HEADER_SIZE}"
        ));
    }
    Ok(total)
}

/// Reads a fatbin; bytes after the length its header declares are ignored.
pub fn parse(bytes: &[u8]) -> Result<Fatbin, String> {
    let total = declared_len(bytes)?;
    let version = u16_at(bytes, 4).unwrap_or_default();
    let header_size = usize::from(u16_at(bytes, 6).unwrap_or_default());
    let mut fatbin = Fatbin {
        version,
        entries: Vec::new(),
        notes: Vec::new(),
    };
    let mut at = header_size;
    while at < total {
        match read_entry(&bytes[at..total]) {
            Ok((entry, len)) => {
                fatbin.entries.push(entry);
                at += len;
            }
            Err(reason) => {
                fatbin.notes.push(format!(
                    "entry at byte {at}: {reason}; the rest was skipped"
                ));
                break;
            }
        }
    }
    Ok(fatbin)
}

/// Reads the entry at the start of `bytes`; returns it and the bytes it spans.
fn read_entry(bytes: &[u8]) -> Result<(Entry, usize), String> {
    let truncated = || "its header is truncated".to_string();
    let raw_kind = u16_at(bytes, 0).ok_or_else(truncated)?;
    let header_size = u32_at(bytes, 4).ok_or_else(truncated)?;
    let payload_size = u64_at(bytes, 8).ok_or_else(truncated)?;
    let header = usize::try_from(header_size)
        .ok()
        .filter(|&size| (ENTRY_HEADER_MIN..=bytes.len()).contains(&size))
        .ok_or_else(|| format!("its header size {header_size} does not fit"))?;
    let len = usize::try_from(payload_size)
        .ok()
        .and_then(|size| size.checked_add(header))
        .filter(|&len| len <= bytes.len())
        .ok_or_else(|| format!("its payload of {payload_size} bytes runs past the end"))?;
    let payload = &bytes[header..len];
    let field32 = |offset| u32_at(bytes, offset).unwrap_or_default();
    let flags = u64_at(bytes, 40).unwrap_or_default();
    let compression = if flags & FLAG_ZSTD != 0 {
        Compression::Zstd
    } else if flags & FLAG_LZ4 != 0 {
        Compression::Lz4
    } else {
        Compression::None
    };
    let kind = match raw_kind {
        KIND_PTX => EntryKind::Ptx,
        KIND_SASS => EntryKind::Sass,
        KIND_LTOIR => EntryKind::LtoIr,
        other => EntryKind::Unknown(other),
    };
    let mut entry = Entry {
        kind,
        arch: field32(28),
        version: (
            u16_at(bytes, 26).unwrap_or_default(),
            u16_at(bytes, 24).unwrap_or_default(),
        ),
        identifier: identifier(&bytes[..header], field32(32), field32(36)),
        address_64bit: flags & FLAG_64BIT != 0,
        compression,
        obfuscated: flags & FLAG_OBFUSCATED != 0,
        flags,
        stored_size: payload_size,
        decompressed_size: (compression != Compression::None)
            .then(|| u64_at(bytes, 56).unwrap_or_default()),
        contents: None,
        note: None,
    };
    match decode(&entry, payload, field32(16)) {
        Ok(contents) => entry.contents = Some(contents),
        Err(note) => entry.note = Some(note),
    }
    Ok((entry, len))
}

/// The identifier string inside the entry header, if it lies inside it.
fn identifier(header: &[u8], offset: u32, len: u32) -> Option<String> {
    let start = usize::try_from(offset).ok()?;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    let raw = header.get(start..end)?;
    let raw = raw.split(|&b| b == 0).next().unwrap_or_default();
    (!raw.is_empty()).then(|| String::from_utf8_lossy(raw).into_owned())
}

fn decode(entry: &Entry, payload: &[u8], compressed_size: u32) -> Result<EntryContents, String> {
    if entry.obfuscated {
        return Err("obfuscated; only NVIDIA's tools can read it".into());
    }
    let plain;
    let code = match entry.compression {
        Compression::None => payload,
        Compression::Lz4 => return Err("LZ4-compressed; listed, not decoded".into()),
        Compression::Zstd => {
            // The payload is padded; the compressed stream is the first `compressed_size` bytes.
            let stream = usize::try_from(compressed_size)
                .ok()
                .filter(|&size| size > 0 && size <= payload.len())
                .map_or(payload, |size| &payload[..size]);
            plain = zstd(stream, entry.decompressed_size.unwrap_or_default())?;
            &plain[..]
        }
    };
    match entry.kind {
        EntryKind::Sass => cubin::parse(code).map(EntryContents::Cubin),
        EntryKind::Ptx => ptx::parse(code).map(EntryContents::Ptx),
        EntryKind::LtoIr => ltoir::parse(code).map(EntryContents::LtoIr),
        EntryKind::Unknown(kind) => Err(format!("unknown entry kind {kind}")),
    }
}

/// Decompresses a zstd stream that should give `expected` bytes, refusing to produce more than
/// [`MAX_RATIO`] times the stream's size.
fn zstd(stream: &[u8], expected: u64) -> Result<Vec<u8>, String> {
    let limit = (stream.len() as u64).saturating_mul(MAX_RATIO);
    if expected > limit {
        return Err(format!(
            "declares {expected} decompressed bytes from {} compressed ones, more than cudyn \
             believes",
            stream.len()
        ));
    }
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
        let error = parse(&bytes).unwrap_err();
        assert!(error.contains("only 80 bytes are there"), "{error}");
    }

    #[test]
    fn an_entry_running_past_the_end_is_a_note() {
        let bytes = fatbin(&[(8, u64::MAX)], &[0; 8]);
        let parsed = parse(&bytes).unwrap();
        assert!(parsed.entries.is_empty());
        assert!(
            parsed.notes[0].contains("runs past the end"),
            "{:?}",
            parsed.notes
        );
    }

    #[test]
    fn a_compression_bomb_is_refused_before_decoding() {
        let bytes = fatbin(
            &[(40, FLAG_ZSTD | FLAG_64BIT), (56, 1 << 40)],
            &[0x28, 0xb5, 0x2f, 0xfd],
        );
        let entry = &parse(&bytes).unwrap().entries[0];
        assert_eq!(entry.compression, Compression::Zstd);
        assert_eq!(entry.decompressed_size, Some(1 << 40));
        let note = entry.note.as_deref().unwrap();
        assert!(note.contains("more than cudyn believes"), "{note}");
    }

    #[test]
    fn an_identifier_outside_the_header_is_ignored() {
        let bytes = fatbin(&[(32, u32::MAX.into()), (36, 16)], &[]);
        assert_eq!(parse(&bytes).unwrap().entries[0].identifier, None);
    }
}
