//! The check of a fatbin before a load or link: the header, then every entry inside the declared length, the entries tiling it
//! exactly, and every cubin and PTX entry (decompressed when compressed) valid in turn.
//!
//! Identifiers and ptxas options must lie inside their entry header, and PTX must end with a NUL
//! (the driver reads it as a C string). An entry of a kind cudyn does not know is checked as the
//! cubin or PTX it holds. Entries whose code cannot be checked are refused: obfuscated cubins or
//! PTX, and entries of an unknown kind holding neither. LTO-IR entries are only checked to lie
//! inside the fatbin: the driver does not load them.
//!
//! Decompressing an entry costs far more than the rest of the check (about 15 µs for 4 KiB of
//! zstd-compressed PTX), so a compressed entry found whole is remembered for the life of the
//! process with everything its check reads (its kind, flags, sizes and payload; see
//! `formats::remembered`): the same fatbin loaded again, or another holding the same entry, is
//! not decompressed again. A load that hashed the whole fatbin already (one that may share its
//! library) names the entry by that blake3 digest and the entry's place instead, which covers
//! the same bytes without reading the payload again.

use std::ops::Range;

use object::LittleEndian as LE;

use super::{entries, CodeKind, Compression, EntryKind, RawEntry};
use crate::digest::Digest;
use crate::formats::remembered::{Keep, Read, Verdicts};
use crate::formats::{cubin, ptx, Facts, Purpose, Refusal};
use crate::parse_error::{Fault, ParseError, Problem};

/// Compressed entries found whole for a load (see `formats::remembered`): at most 1024, with
/// 64 MiB of payload.
static CHECKED: Verdicts = Verdicts::new(1024, 64 << 20, 64 << 20, Keep::AtOnce);

/// Room for the fields either way names an entry (at most 50 bytes), so that building them
/// allocates once rather than growing four times on every check of a compressed entry.
const FIELDS_CAPACITY: usize = 64;

#[cfg(test)]
thread_local! {
    /// Entries this thread decompressed to check them: what the tests count.
    static DECOMPRESSED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Checks a fatbin for `purpose`: for a link, its cubins may be relocatable. Only entries found
/// whole for a load are remembered, so that a relocatable one is never recalled by a load.
/// `whole` is the digest of `bytes` when the caller has it.
pub(crate) fn validate(
    bytes: &[u8],
    purpose: Purpose,
    whole: Option<&Digest>,
) -> Result<Facts, Refusal> {
    let mut count = 0;
    let mut facts: Option<Facts> = None;
    for (index, raw) in entries(bytes)?.enumerate() {
        let raw = raw?;
        count += 1;
        let place = || raw.place(index);
        let refuse = |fault: Fault| Refusal::Malformed(fault.at(place()));
        // The identifier's offset is followed even when its length is 0: it must lie inside
        // the header whatever the length says.
        let header = &raw.header;
        if header.identifier_offset.get(LE) > header.header_size.get(LE)
            || (header.identifier_len.get(LE) != 0 && raw.identifier().is_none())
        {
            return Err(refuse(Fault::new(
                Problem::Damaged,
                "its identifier lies outside its header",
            )));
        }
        raw.options().map_err(refuse)?;
        let kind = raw.header.entry_kind();
        let compression = raw
            .header
            .compression()
            .map_err(|error| refuse(error.into()))?;
        if kind == EntryKind::LtoIr {
            // The driver does not load LTO-IR; it only has to lie inside the fatbin.
            continue;
        }
        if raw.header.obfuscated() {
            return Err(refuse(Fault::new(
                Problem::Unsupported,
                "its code is obfuscated, so cudyn cannot check it before the driver reads it",
            )));
        }
        let read = (compression != Compression::None).then(|| match whole {
            Some(whole) => entry_read_in(whole, &raw),
            None => entry_read(&raw),
        });
        if let Some(known) = read.as_ref().and_then(|read| CHECKED.recall(read)) {
            facts = Some(facts.map_or(known, |facts| facts.either(known)));
            continue;
        }
        #[cfg(test)]
        if read.is_some() {
            DECOMPRESSED.set(DECOMPRESSED.get() + 1);
        }
        let code = raw.code().map_err(|fault| {
            let message = format!("{compression:?} payload: {}", fault.message);
            refuse(Fault::new(fault.problem, message))
        })?;
        // A kind newer than cudyn is checked by what it holds, refused when that is unknown.
        let checked = match CodeKind::of(kind, &code) {
            Some(CodeKind::Cubin) => cubin::validate(&code, purpose),
            Some(CodeKind::Ptx) => validate_ptx(&code),
            None => {
                return Err(refuse(Fault::new(
                    Problem::Unsupported,
                    format!(
                        "its kind {} is none cudyn knows (1 PTX, 2 SASS, 8 LTO-IR) and it holds \
                         neither a cubin nor PTX, so it cannot be checked",
                        raw.header.kind.get(LE)
                    ),
                )))
            }
        };
        let checked = checked.map_err(|refusal| refusal.inside(&place()))?;
        if let Some(read) = read.filter(|_| purpose == Purpose::Load) {
            CHECKED.remember(&read, checked, Vec::new);
        }
        facts = Some(facts.map_or(checked, |facts| facts.either(checked)));
    }
    if count == 0 {
        return Err(
            ParseError::new("fatbin header", Problem::Missing, "it holds no entries").into(),
        );
    }
    // Only LTO-IR entries, which the driver does not load: no code, no variables.
    Ok(facts.unwrap_or(Facts::NO_VARIABLES))
}

/// The byte ranges of `bytes`, a fatbin that passed its check for a load, that the check did not
/// read: the contents of the code and data sections of its uncompressed cubin entries (see
/// `cubin::unread_contents`), in order and apart. Compressed entries are read whole, by their
/// decompression.
pub(crate) fn unread_contents(bytes: &[u8]) -> Vec<Range<usize>> {
    let Ok(entries) = entries(bytes) else {
        return Vec::new();
    };
    let mut unread = Vec::new();
    for raw in entries.map_while(Result::ok) {
        let uncompressed = matches!(raw.header.compression(), Ok(Compression::None));
        let kind = raw.header.entry_kind();
        if !uncompressed
            || kind == EntryKind::LtoIr
            || CodeKind::of(kind, raw.payload) != Some(CodeKind::Cubin)
        {
            continue;
        }
        let at = raw.payload_offset();
        unread.extend(
            cubin::unread_contents(raw.payload)
                .into_iter()
                .map(|range| range.start + at..range.end + at),
        );
    }
    unread
}

/// Everything the check of a compressed entry's code reads: its kind, its flags (the
/// compression), its sizes and its whole payload.
fn entry_read<'a>(raw: &RawEntry<'a>) -> Read<'a> {
    let header = raw.header;
    let mut fields = Vec::with_capacity(FIELDS_CAPACITY);
    fields.extend(b"entry\0");
    fields.extend(header.kind.get(LE).to_le_bytes());
    fields.extend(header.flags.get(LE).to_le_bytes());
    fields.extend(header.compressed_size.get(LE).to_le_bytes());
    fields.extend(header.decompressed_size.get(LE).to_le_bytes());
    fields.extend((raw.payload.len() as u64).to_le_bytes());
    Read::new(fields, raw.payload)
}

/// What the check of a compressed entry of the fatbin whose bytes have the digest `whole`
/// reads, named without reading it: the digest covers every byte of the fatbin, so with the
/// entry's place it names exactly the bytes [`entry_read`] gives.
fn entry_read_in<'a>(whole: &Digest, raw: &RawEntry<'_>) -> Read<'a> {
    let mut fields = Vec::with_capacity(FIELDS_CAPACITY);
    fields.extend(b"in fatbin\0");
    fields.extend(whole.as_bytes());
    fields.extend((raw.offset as u64).to_le_bytes());
    Read::new(fields, &[])
}

/// An entry's PTX: the driver reads it as a C string, so it must end with a NUL.
fn validate_ptx(code: &[u8]) -> Result<Facts, Refusal> {
    if code.last() != Some(&0) {
        return Err(
            ParseError::new("PTX text", Problem::Damaged, "it does not end with a NUL").into(),
        );
    }
    ptx::validate(code).map_err(Refusal::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::{Arch, FatbinBuilder, Output, Program};
    use crate::formats::remembered::KEY_SAMPLE;

    /// A fatbin of a cubin and PTX as nvFatbin writes it (the PTX zstd-compressed), and the
    /// offset of its first compressed entry.
    fn compressed_fatbin() -> (Vec<u8>, usize) {
        let arch = Arch::new(9, 0);
        let source = "// validate::fatbin tests\n__device__ int flag;\n\
                      extern \"C\" __global__ void k(int *x) { x[0] = flag; }";
        let compile = |output| {
            Program::new(source)
                .arch(arch)
                .output(output)
                .compile()
                .expect("NVRTC compiles (run the tests with the CUDA wheels' venv)")
        };
        let mut fatbin = FatbinBuilder::new().expect("nvFatbin (the CUDA wheels' venv)");
        fatbin
            .add_cubin(compile(Output::Cubin).code(), arch, "k.cu")
            .unwrap();
        fatbin
            .add_ptx(compile(Output::Ptx).code(), arch, "k.cu")
            .unwrap();
        let fatbin = fatbin.finish().unwrap();
        let compressed = entries(&fatbin)
            .unwrap()
            .map(Result::unwrap)
            .find(|raw| raw.header.compression().ok() != Some(Compression::None))
            .expect("nvFatbin compresses the PTX entry")
            .offset;
        (fatbin, compressed)
    }

    fn decompressions(check: impl FnOnce()) -> usize {
        let before = DECOMPRESSED.get();
        check();
        DECOMPRESSED.get() - before
    }

    /// A load's check of `bytes`, given their digest when `by_digest` (as a load that may share
    /// does), else not.
    fn load_check(bytes: &[u8], by_digest: bool) -> Result<Facts, Refusal> {
        let digest = by_digest.then(|| Digest::of(bytes));
        validate(bytes, Purpose::Load, digest.as_ref())
    }

    #[test]
    fn a_compressed_entry_found_whole_is_not_decompressed_again_but_any_change_is_checked() {
        entries_are_remembered_exactly(false);
    }

    #[test]
    fn so_is_an_entry_named_by_the_digest_of_its_fatbin() {
        entries_are_remembered_exactly(true);
    }

    fn entries_are_remembered_exactly(by_digest: bool) {
        let validate = |bytes: &[u8], _: Purpose| load_check(bytes, by_digest);
        let (fatbin, entry) = compressed_fatbin();
        let mut facts = None;
        let first = decompressions(|| facts = Some(validate(&fatbin, Purpose::Load).unwrap()));
        assert!(first >= 1, "the first check decompresses");
        assert!(facts.unwrap().defines_variables);
        let again = decompressions(|| assert_eq!(validate(&fatbin, Purpose::Load).ok(), facts));
        assert_eq!(again, 0, "the same entry is remembered");

        // Payload bytes changed: checked afresh (and refused or found whole on its own).
        let header_size = u32::from_le_bytes(fatbin[entry + 4..entry + 8].try_into().unwrap());
        let mut changed = fatbin.clone();
        changed[entry + header_size as usize + 20] ^= 0x40;
        assert_eq!(
            decompressions(|| drop(validate(&changed, Purpose::Load))),
            1
        );
        // A declared size one larger: checked afresh, and refused.
        let mut larger = fatbin.clone();
        let size_at = entry + 56;
        let size = u64::from_le_bytes(larger[size_at..size_at + 8].try_into().unwrap());
        larger[size_at..size_at + 8].copy_from_slice(&(size + 1).to_le_bytes());
        let mut refusal = None;
        assert_eq!(
            decompressions(|| refusal = validate(&larger, Purpose::Load).err()),
            1
        );
        assert!(
            matches!(&refusal, Some(Refusal::Malformed(error))
                if error.to_string().contains("decompressed") && error.problem == Problem::Compression),
            "{refusal:?}"
        );
        // And the whole fatbin still is remembered as it was.
        assert_eq!(
            decompressions(|| assert_eq!(validate(&fatbin, Purpose::Load).ok(), facts)),
            0
        );
        // Last, as it may take the fatbin's place in the table: a payload byte between the
        // samples its key hashes, the same key, so only the comparison of every byte tells the
        // entry from the one remembered.
        let raw = entries(&fatbin)
            .unwrap()
            .map(Result::unwrap)
            .find(|raw| raw.offset == entry)
            .unwrap();
        let (payload, payload_at) = (raw.payload, raw.payload_offset());
        assert_eq!(&fatbin[payload_at..payload_at + payload.len()], payload);
        let middle = (payload.len() - KEY_SAMPLE) / 2;
        assert!(middle > KEY_SAMPLE, "{} bytes", payload.len());
        let between = payload_at + (KEY_SAMPLE + middle) / 2;
        let mut unsampled = fatbin.clone();
        unsampled[between] ^= 0x40;
        let key = |bytes: &[u8]| {
            let mut raw = entries(bytes).unwrap().map(Result::unwrap);
            entry_read(&raw.find(|raw| raw.offset == entry).unwrap()).key()
        };
        if !by_digest {
            assert_eq!(
                key(&unsampled),
                key(&fatbin),
                "the byte changed is not sampled"
            );
        }
        assert_eq!(
            decompressions(|| drop(validate(&unsampled, Purpose::Load))),
            1
        );
    }
}
