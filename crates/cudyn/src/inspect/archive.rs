//! Static libraries (`ar` archives, `.a`), as nvcc and `ar` build them and as CUDA ships
//! `libcudadevrt.a`: each member is device code (a cubin, a fatbin, ...) or a host object, which
//! may embed device code, and is inspected as what it is.

use super::{inspect_kind, Inspection};
use crate::formats::archive::members;
use crate::image::ImageKind;
use crate::parse_error::ParseError;

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
    match crate::image::detect(data).map_err(|reason| reason.to_string())? {
        ImageKind::Archive => Err("an archive inside the archive, not read".to_owned()),
        kind => inspect_kind(data, kind).map_err(|error| error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::archive::MAGIC;
    use crate::inspect::Contents;
    use crate::Image;

    /// The size of a member's header, before its bytes.
    const HEADER: usize = 60;

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
