//! Offline inspection of device code: what is in a PTX file, a cubin, a fatbin, LTO-IR, a host
//! binary built by nvcc or a static library, which GPUs it runs on, and what each kernel takes. No GPU and no CUDA
//! library is needed.
//!
//! Every parser here reads untrusted bytes: offsets, counts and sizes are checked before use, and
//! nothing is allocated in proportion to a number read from the input, only to the input's own
//! size (decompressed fatbin entries are capped likewise). Malformed input is a [`ParseError`]
//! (an [`Error::MalformedImage`] through [`Image`]) or, inside a container, a note on the damaged
//! part; never a panic.
//!
//! Inspection describes what it can read of damaged input; whether an image is whole enough for
//! the driver is [`Image::validate`]'s question.

use crate::error::{Error, Result};
use crate::image::{Image, ImageKind};
use crate::param::ParamLayout;

pub mod archive;
pub mod cubin;
pub mod fatbin;
pub mod host;
pub(crate) mod info;
pub mod ltoir;
mod param_table;
pub mod ptx;
pub(crate) mod search;

pub use crate::parse_error::ParseError;
pub use crate::symbols::demangle;

/// What inspecting one image found.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Inspection {
    /// The detected kind.
    pub kind: ImageKind,
    /// The image's size in bytes.
    pub size: usize,
    /// What it holds.
    pub contents: Contents,
}

/// The contents of an image, by kind.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Contents {
    /// PTX text.
    Ptx(ptx::PtxModule),
    /// One cubin.
    Cubin(cubin::Cubin),
    /// A fatbin's entries.
    Fatbin(fatbin::Fatbin),
    /// LTO-IR.
    LtoIr(ltoir::LtoIr),
    /// A host binary's embedded fatbins.
    HostBinary(host::HostBinary),
    /// A static library's members.
    Archive(archive::Archive),
}

impl Inspection {
    /// Every cubin in the image, with the PTX modules, in the order they appear.
    pub fn modules(&self) -> Vec<Module<'_>> {
        let mut out = Vec::new();
        match &self.contents {
            Contents::Ptx(ptx) => out.push(Module::Ptx(ptx)),
            Contents::Cubin(cubin) => out.push(Module::Cubin(cubin)),
            Contents::Fatbin(fatbin) => fatbin.collect_modules(&mut out),
            Contents::HostBinary(host) => {
                for fatbin in host.sections.iter().flat_map(|s| &s.fatbins) {
                    fatbin.collect_modules(&mut out);
                }
            }
            Contents::Archive(archive) => {
                for inspection in archive.members.iter().filter_map(|m| m.inspection.as_ref()) {
                    out.extend(inspection.modules());
                }
            }
            Contents::LtoIr(_) => {}
        }
        out
    }

    /// The parameter layout of `kernel` (mangled name): from the first cubin that defines it
    /// with a parameter table cudyn reads, else from the first PTX module that declares it with
    /// types of known sizes. `Ok(None)` when no module defines it; when modules do but none
    /// gives the layout, the first one's error (see [`cubin::CubinKernel::params_error`] and
    /// [`ptx::PtxEntry::param_layout`]), never an empty list; when none does but a part of the
    /// image could not be decoded (which may), that part's error.
    pub fn param_layout(&self, kernel: &str) -> Result<Option<Vec<ParamLayout>>, ParseError> {
        let modules = self.modules();
        let mut failure = None;
        let cubins = modules.iter().filter_map(|module| match module {
            Module::Cubin(cubin) => cubin
                .kernel(kernel)
                .map(|kernel| match &kernel.params_error {
                    Some(error) => Err(error.clone()),
                    None => Ok(kernel.params.clone()),
                }),
            Module::Ptx(_) => None,
        });
        let ptx = modules.iter().filter_map(|module| match module {
            Module::Ptx(ptx) => ptx.entry(kernel).map(ptx::PtxEntry::param_layout),
            Module::Cubin(_) => None,
        });
        for found in cubins.chain(ptx) {
            match found {
                Ok(layout) => return Ok(Some(layout)),
                Err(error) => {
                    failure.get_or_insert(error);
                }
            }
        }
        // A part that was not decoded may define the kernel.
        failure.or_else(|| self.undecoded()).map_or(Ok(None), Err)
    }

    /// The first part of the image that may hold a module but was not decoded (a fatbin entry,
    /// bytes of a host binary's section that are no fatbin; see the notes), placed; `None` when
    /// every part was.
    fn undecoded(&self) -> Option<ParseError> {
        match &self.contents {
            Contents::Fatbin(fatbin) => fatbin.undecoded(),
            Contents::HostBinary(host) => host.sections.iter().find_map(|section| {
                let fatbin = section.fatbins.iter().find_map(fatbin::Fatbin::undecoded);
                let damage = || {
                    let note = section.notes.first()?;
                    Some(ParseError::new("section", note.clone()))
                };
                fatbin
                    .or_else(damage)
                    .map(|error| error.inside(&section.name))
            }),
            Contents::Archive(archive) => archive.members.iter().find_map(|member| {
                let error = member.inspection.as_ref()?.undecoded()?;
                Some(error.inside(&format!("member {}", member.name)))
            }),
            Contents::Ptx(_) | Contents::Cubin(_) | Contents::LtoIr(_) => None,
        }
    }
}

/// A decoded module inside an image.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Module<'a> {
    /// A cubin.
    Cubin(&'a cubin::Cubin),
    /// A PTX module.
    Ptx(&'a ptx::PtxModule),
}

/// Detects the kind of `bytes` and inspects them.
pub fn inspect(bytes: &[u8]) -> Result<Inspection> {
    Image::new(bytes)?.inspect()
}

pub(crate) fn inspect_kind(bytes: &[u8], kind: ImageKind) -> Result<Inspection> {
    let contents = match kind {
        ImageKind::Ptx => ptx::parse(bytes).map(Contents::Ptx),
        ImageKind::Cubin => cubin::parse(bytes).map(Contents::Cubin),
        ImageKind::Fatbin => fatbin::parse(bytes).map(Contents::Fatbin),
        ImageKind::LtoIr => ltoir::parse(bytes).map(Contents::LtoIr),
        ImageKind::HostBinary => host::parse(bytes).map(Contents::HostBinary),
        ImageKind::Archive => archive::parse(bytes).map(Contents::Archive),
    }
    .map_err(|error| Error::MalformedImage {
        what: crate::image::bytes_given(bytes),
        kind,
        error,
    })?;
    Ok(Inspection {
        kind,
        size: bytes.len(),
        contents,
    })
}

/// Reads a little-endian integer at `offset`, or `None` past the end.
fn le<const N: usize>(data: &[u8], offset: usize) -> Option<[u8; N]> {
    data.get(offset..offset.checked_add(N)?)?.try_into().ok()
}

pub(crate) fn u16_at(data: &[u8], offset: usize) -> Option<u16> {
    le(data, offset).map(u16::from_le_bytes)
}

pub(crate) fn u32_at(data: &[u8], offset: usize) -> Option<u32> {
    le(data, offset).map(u32::from_le_bytes)
}
