//! Static libraries (`ar` archives, `.a`), as nvcc and `ar` build them and as CUDA ships
//! `libcudadevrt.a`: each member is device code (a cubin, a fatbin, ...) or a host object, which
//! may embed device code.

use object::read::archive::ArchiveFile;

use super::{Inspection, ParseError};
use crate::image::ImageKind;

/// The bytes every `ar` archive starts with (thin archives, whose members live elsewhere, are
/// not read).
pub(crate) const MAGIC: &[u8] = b"!<arch>\n";

/// A static library's members.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Archive {
    /// The members, in order.
    pub members: Vec<Member>,
}

/// One member of a static library.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Member {
    /// Its name in the archive.
    pub name: String,
    /// Its size in bytes.
    pub size: usize,
    /// What it holds, when it is device code or a host object with device code.
    pub inspection: Option<Inspection>,
    /// Why it was not inspected (a host object without device code, damage), when it was not.
    pub note: Option<String>,
}

impl Archive {
    /// How many members hold device code.
    pub fn device_members(&self) -> usize {
        self.members
            .iter()
            .filter(|member| member.inspection.is_some())
            .count()
    }
}

/// The size of a member's header, before its bytes.
const HEADER: usize = 60;

/// Checks that the archive's members, symbol and name tables included, each a header and the
/// bytes it gives the size of (padded to an even offset), take up the file exactly: a file cut
/// inside its symbol table would otherwise read as an archive of no members.
fn check_extent(bytes: &[u8]) -> Result<(), ParseError> {
    let mut at = MAGIC.len();
    while at < bytes.len() {
        let Some(header) = bytes.get(at..at + HEADER) else {
            return Err(ParseError::new(
                format!("the member header at byte {at}"),
                format!(
                    "it is cut short: {} of its {HEADER} bytes are there",
                    bytes.len() - at
                ),
            ));
        };
        let place = || format!("{} (its header at byte {at})", member_name(header));
        let size = std::str::from_utf8(&header[48..58])
            .ok()
            .and_then(|digits| digits.trim_end().parse::<usize>().ok())
            .ok_or_else(|| ParseError::new(place(), "its size is not a number"))?;
        let end = (at + HEADER)
            .checked_add(size)
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| {
                ParseError::new(
                    place(),
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
fn member_name(header: &[u8]) -> String {
    let field = String::from_utf8_lossy(&header[..16]);
    match field.trim_end() {
        "/" | "/SYM64/" | "__.SYMDEF" | "__.SYMDEF SORTED" => "the symbol table".to_owned(),
        "//" => "the table of long member names".to_owned(),
        name => format!("member {}", name.strip_suffix('/').unwrap_or(name)),
    }
}

/// The members of an archive with their bytes; an error for a damaged archive or member.
pub(crate) fn members(bytes: &[u8]) -> Result<Vec<(String, &[u8])>, ParseError> {
    check_extent(bytes)?;
    let archive = ArchiveFile::parse(bytes)
        .map_err(|error| ParseError::new("archive headers", error.to_string()))?;
    let mut out = Vec::new();
    for (index, member) in archive.members().enumerate() {
        let member = member
            .map_err(|error| ParseError::new(format!("member {index}"), error.to_string()))?;
        let name = String::from_utf8_lossy(member.name()).into_owned();
        let data = member
            .data(bytes)
            .map_err(|error| ParseError::new(name.clone(), error.to_string()))?;
        out.push((name, data));
    }
    Ok(out)
}

/// Reads every member of a static library.
pub fn parse(bytes: &[u8]) -> Result<Archive, ParseError> {
    let members = members(bytes)?
        .into_iter()
        .map(|(name, data)| {
            let (inspection, note) = match inspect_member(data) {
                Ok(inspection) => (Some(inspection), None),
                Err(reason) => (None, Some(reason)),
            };
            Member {
                name,
                size: data.len(),
                inspection,
                note,
            }
        })
        .collect();
    Ok(Archive { members })
}

/// A member's inspection, or why there is none.
fn inspect_member(data: &[u8]) -> Result<Inspection, String> {
    match crate::image::detect(data)? {
        ImageKind::Archive => Err("an archive inside the archive, not read".to_owned()),
        kind => super::inspect_kind(data, kind).map_err(|error| error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::Contents;
    use crate::Image;

    /// An `ar` archive of `members` (GNU format, names up to 15 bytes).
    fn archive(members: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        for (name, data) in members {
            let header = format!(
                "{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
                format!("{name}/"),
                0,
                0,
                0,
                644,
                data.len()
            );
            out.extend_from_slice(header.as_bytes());
            out.extend_from_slice(data);
            if data.len() % 2 == 1 {
                out.push(b'\n');
            }
        }
        out
    }

    #[test]
    fn members_are_inspected_as_device_code_or_explained() {
        let cubin = crate::compile::Program::new("extern \"C\" __global__ void k() {}")
            .arch(crate::compile::Arch::new(9, 0))
            .compile()
            .expect("NVRTC (scripts/cuda-wheels)");
        let bytes = archive(&[("k.cubin", cubin.code()), ("notes.txt", b"notes\n")]);
        let image = Image::new(&bytes[..]).unwrap();
        assert_eq!(image.kind(), ImageKind::Archive);
        let Contents::Archive(archive) = image.inspect().unwrap().contents else {
            panic!("not read as an archive");
        };
        assert_eq!(archive.members.len(), 2);
        assert_eq!(archive.device_members(), 1);
        assert_eq!(archive.members[0].name, "k.cubin");
        let inspection = archive.members[0].inspection.as_ref().unwrap();
        assert_eq!(inspection.kind, ImageKind::Cubin);
        assert_eq!(archive.members[1].name, "notes.txt");
        assert!(
            archive.members[1]
                .note
                .as_deref()
                .unwrap()
                .contains("none of the kinds"),
            "{:?}",
            archive.members[1].note
        );
        assert_eq!(image.param_layout("k").unwrap(), []);
        // Loading a static library is refused with the way to link it instead.
        let error = image.validate().unwrap_err();
        assert!(
            matches!(
                &error,
                crate::Error::NotLoadable {
                    kind: ImageKind::Archive,
                    ..
                }
            ),
            "{error}"
        );
        assert!(error.to_string().contains("InputKind::Library"), "{error}");
    }

    #[test]
    fn an_archive_cut_anywhere_inside_a_member_is_an_error() {
        let bytes = archive(&[("k.cubin", &[0u8; 64]), ("notes.txt", b"notes\n")]);
        Image::new(&bytes[..]).unwrap().inspect().unwrap();
        let second = MAGIC.len() + HEADER + 64;
        for cut in (MAGIC.len() + 1..bytes.len()).filter(|&cut| cut != second) {
            let inspected = Image::new(&bytes[..cut]).and_then(|image| image.inspect());
            assert!(inspected.is_err(), "cut at {cut}: {inspected:?}");
        }
        // Cut between members, the archive is whole: one member.
        let Contents::Archive(first) = Image::new(&bytes[..second])
            .unwrap()
            .inspect()
            .unwrap()
            .contents
        else {
            panic!("not read as an archive");
        };
        assert_eq!(first.members.len(), 1);
    }

    #[test]
    fn a_member_running_past_the_end_is_an_error() {
        let mut bytes = archive(&[("k.cubin", &[0u8; 64])]);
        bytes.truncate(bytes.len() - 10);
        let error = Image::new(&bytes[..]).unwrap().inspect().unwrap_err();
        assert!(
            error.to_string().contains("k.cubin") || error.to_string().contains("member 0"),
            "{error}"
        );
    }
}
