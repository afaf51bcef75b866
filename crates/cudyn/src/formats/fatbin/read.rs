//! What a fatbin holds, read for inspection: its entries, each decoded where it can be.

use object::LittleEndian as LE;

use super::{entries, read_header, Compression, EntryKind, RawEntry};
use crate::formats::cubin::{self, Cubin};
use crate::formats::ltoir::{self, LtoIr};
use crate::formats::ptx::{self, PtxModule};
use crate::parse_error::{Fault, ParseError, Problem};

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

/// What `raw` holds, decoded where it can be.
fn describe(raw: &RawEntry<'_>) -> Entry {
    let header = raw.header;
    let flags = header.flags.get(LE);
    let compression = header.compression().unwrap_or(Compression::Zstd);
    let mut entry = Entry {
        kind: header.entry_kind(),
        arch: header.arch.get(LE),
        version: (header.major.get(LE), header.minor.get(LE)),
        identifier: text_in_header(raw.identifier()),
        ptxas_options: text_in_header(raw.options().ok().flatten()),
        address_64bit: header.address_64bit(),
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
        Err(note) => entry.note = Some(note.message),
    }
    entry
}

/// A string stored in an entry header, up to its first NUL; `None` when empty or absent.
fn text_in_header(raw: Option<&[u8]>) -> Option<String> {
    let raw = raw?.split(|&b| b == 0).next().unwrap_or_default();
    (!raw.is_empty()).then(|| String::from_utf8_lossy(raw).into_owned())
}

/// The module `raw` holds, or why it cannot be read.
fn decode(raw: &RawEntry<'_>) -> Result<EntryContents, Fault> {
    if raw.header.obfuscated() {
        return Err(Fault::new(
            Problem::Unsupported,
            "obfuscated; only NVIDIA's tools can read it",
        ));
    }
    let code = raw.code()?;
    let decoded = match raw.header.entry_kind() {
        EntryKind::Sass => cubin::parse(&code).map(EntryContents::Cubin),
        EntryKind::Ptx => ptx::parse(&code).map(EntryContents::Ptx),
        EntryKind::LtoIr => ltoir::parse(&code).map(EntryContents::LtoIr),
        EntryKind::Unknown(kind) => {
            return Err(Fault::new(
                Problem::Unsupported,
                format!("unknown entry kind {kind}"),
            ))
        }
    };
    decoded.map_err(|error| Fault::new(error.problem, error.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::fatbin::{
        ENTRY_HEADER_MIN, FLAG_64BIT, FLAG_ZSTD, HEADER_SIZE, KIND_SASS, MAGIC,
    };

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
