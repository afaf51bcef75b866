//! Fatbins: the header, then every entry inside the declared length, the entries tiling it
//! exactly, and every cubin and PTX entry (decompressed when compressed) valid in turn.
//!
//! Identifiers and ptxas options must lie inside their entry header, and PTX must end with a NUL
//! (the driver reads it as a C string). Entries whose code cannot be checked are refused:
//! obfuscated cubins or PTX, and entries of a kind cudyn does not know. LTO-IR entries are only checked to lie inside the fatbin: the driver
//! does not load them.

use super::{cubin, ptx, Refusal};
use crate::inspect::fatbin::{self, EntryKind};
use crate::inspect::ParseError;

pub(super) fn validate(bytes: &[u8]) -> Result<(), Refusal> {
    let mut count = 0;
    for (index, raw) in fatbin::entries(bytes)?.enumerate() {
        let raw = raw?;
        count += 1;
        let place = raw.place(index);
        let refuse = |problem: String| Refusal::Malformed(ParseError::new(place.clone(), problem));
        if raw.header.identifier_len.get(object::LittleEndian) != 0
            && fatbin::identifier_bytes(&raw).is_none()
        {
            return Err(refuse("its identifier lies outside its header".into()));
        }
        fatbin::options_bytes(&raw).map_err(refuse)?;
        let kind = raw.header.entry_kind();
        let compression = raw.header.compression().map_err(refuse)?;
        match kind {
            EntryKind::Sass | EntryKind::Ptx => {}
            EntryKind::LtoIr => continue,
            EntryKind::Unknown(code) => {
                return Err(refuse(format!(
                    "its kind {code} is none cudyn knows (1 PTX, 2 SASS, 8 LTO-IR), so it cannot \
                     be checked"
                )))
            }
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
            // The driver reads an entry's PTX as a C string.
            _ if code.last() != Some(&0) => {
                return Err(refuse("its PTX text does not end with a NUL".into()))
            }
            _ => ptx::validate(&code).map_err(Refusal::Malformed),
        };
        checked.map_err(|refusal| refusal.inside(&place))?;
    }
    if count == 0 {
        return Err(ParseError::new("fatbin header", "it holds no entries").into());
    }
    Ok(())
}
