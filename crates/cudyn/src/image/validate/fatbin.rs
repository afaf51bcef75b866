//! Fatbins: the header, then every entry inside the declared length, the entries tiling it
//! exactly, and every cubin and PTX entry (decompressed when compressed) valid in turn.
//!
//! Identifiers and ptxas options must lie inside their entry header, and PTX must end with a NUL
//! (the driver reads it as a C string). An entry of a kind cudyn does not know is checked as the
//! cubin or PTX it holds. Entries whose code cannot be checked are refused: obfuscated cubins or
//! PTX, and entries of an unknown kind holding neither. LTO-IR entries are only checked to lie inside the fatbin: the driver
//! does not load them.

use super::{cubin, ptx, Facts, Refusal};
use crate::inspect::fatbin::{self, EntryKind};
use crate::inspect::ParseError;
use object::LittleEndian as LE;

pub(super) fn validate(bytes: &[u8]) -> Result<Facts, Refusal> {
    let mut count = 0;
    let mut facts = Facts {
        defines_variables: false,
    };
    for (index, raw) in fatbin::entries(bytes)?.enumerate() {
        let raw = raw?;
        count += 1;
        let place = || raw.place(index);
        let refuse = |problem: String| Refusal::Malformed(ParseError::new(place(), problem));
        // The identifier's offset is followed even when its length is 0: it must lie inside
        // the header whatever the length says.
        let header = &raw.header;
        if header.identifier_offset.get(LE) > header.header_size.get(LE)
            || (header.identifier_len.get(LE) != 0 && fatbin::identifier_bytes(&raw).is_none())
        {
            return Err(refuse("its identifier lies outside its header".into()));
        }
        fatbin::options_bytes(&raw).map_err(refuse)?;
        let kind = raw.header.entry_kind();
        let compression = raw.header.compression().map_err(refuse)?;
        if kind == EntryKind::LtoIr {
            // The driver does not load LTO-IR; it only has to lie inside the fatbin.
            continue;
        }
        if raw.header.obfuscated() {
            return Err(refuse(
                "its code is obfuscated, so cudyn cannot check it before the driver reads it"
                    .into(),
            ));
        }
        let code = raw
            .code()
            .map_err(|problem| refuse(format!("{compression:?} payload: {problem}")))?;
        let checked = match kind {
            EntryKind::Sass => cubin::validate(&code),
            EntryKind::Ptx => validate_ptx(&code),
            // A kind newer than cudyn: checked by what it holds, refused when that is unknown.
            _ if code.starts_with(b"\x7fELF") => cubin::validate(&code),
            _ if ptx::looks_like(&code) => validate_ptx(&code),
            _ => {
                return Err(refuse(format!(
                    "its kind {} is none cudyn knows (1 PTX, 2 SASS, 8 LTO-IR) and it holds \
                     neither a cubin nor PTX, so it cannot be checked",
                    raw.header.kind.get(LE)
                )))
            }
        };
        facts = facts.and(checked.map_err(|refusal| refusal.inside(&place()))?);
    }
    if count == 0 {
        return Err(ParseError::new("fatbin header", "it holds no entries").into());
    }
    Ok(facts)
}

/// An entry's PTX: the driver reads it as a C string, so it must end with a NUL.
fn validate_ptx(code: &[u8]) -> Result<Facts, Refusal> {
    if code.last() != Some(&0) {
        return Err(ParseError::new("PTX text", "it does not end with a NUL").into());
    }
    ptx::validate(code).map_err(Refusal::Malformed)
}
