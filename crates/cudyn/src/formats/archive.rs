//! Static libraries (`ar` archives, `.a`), as nvcc and `ar` build them and as CUDA ships
//! `libcudadevrt.a`: the magic number, then members, each an [`archive::Header`] (the `object`
//! crate's) and the bytes it gives the size of. Each member is device code (a cubin, a fatbin,
//! ...) or a host object, which may embed device code; what they are is for their own formats.

use object::archive::{self, Header};
use object::pod;
use object::read::archive::ArchiveFile;

use super::object_error;
use crate::parse_error::{ParseError, Problem};

/// The bytes every `ar` archive starts with (thin archives, whose members live elsewhere, are
/// not read).
pub(crate) const MAGIC: &[u8] = &archive::MAGIC;

/// Whether `bytes` start as an `ar` archive.
pub(crate) fn has_magic(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// The size of a member's header, before its bytes.
const HEADER: usize = std::mem::size_of::<Header>();

/// Checks that the archive's members, symbol and name tables included, each a header and the
/// bytes it gives the size of (padded to an even offset), take up the file exactly: a file cut
/// inside its symbol table would otherwise read as an archive of no members.
fn check_extent(bytes: &[u8]) -> Result<(), ParseError> {
    let mut at = MAGIC.len();
    while at < bytes.len() {
        let Ok((header, _)) = pod::from_bytes::<Header>(&bytes[at..]) else {
            return Err(ParseError::new(
                format!("the member header at byte {at}"),
                Problem::Truncated,
                format!(
                    "it is cut short: {} of its {HEADER} bytes are there",
                    bytes.len() - at
                ),
            ));
        };
        let place = || format!("{} (its header at byte {at})", member_name(header));
        let size = std::str::from_utf8(&header.size)
            .ok()
            .and_then(|digits| digits.trim_end().parse::<usize>().ok())
            .ok_or_else(|| {
                ParseError::new(place(), Problem::Damaged, "its size is not a number")
            })?;
        let end = (at + HEADER)
            .checked_add(size)
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| {
                ParseError::new(
                    place(),
                    Problem::Truncated,
                    format!(
                        "it gives {size} bytes, but only {} are left",
                        bytes.len() - at - HEADER
                    ),
                )
            })?;
        // Members start at even offsets; the padding byte of the last may be missing.
        at = end + end % 2;
    }
    Ok(())
}

/// What a member header's name field names, for an error: a member, or one of the tables.
fn member_name(header: &Header) -> String {
    let field = String::from_utf8_lossy(&header.name);
    match field.trim_end() {
        "/" | "/SYM64/" | "__.SYMDEF" | "__.SYMDEF SORTED" => "the symbol table".to_owned(),
        "//" => "the table of long member names".to_owned(),
        name => format!("member {}", name.strip_suffix('/').unwrap_or(name)),
    }
}

/// The members of an archive with their bytes; an error for a damaged archive or member.
pub(crate) fn members(bytes: &[u8]) -> Result<Vec<(String, &[u8])>, ParseError> {
    check_extent(bytes)?;
    let archive =
        ArchiveFile::parse(bytes).map_err(|error| object_error("archive headers", error))?;
    let mut out = Vec::new();
    for (index, member) in archive.members().enumerate() {
        let member = member.map_err(|error| object_error(format!("member {index}"), error))?;
        let name = String::from_utf8_lossy(member.name()).into_owned();
        let data = member
            .data(bytes)
            .map_err(|error| object_error(name.clone(), error))?;
        out.push((name, data));
    }
    Ok(out)
}
