//! Offline inspection of device code: what is in a PTX file, a cubin, a fatbin, LTO-IR or a host
//! binary built by nvcc, which GPUs it runs on, and what each kernel takes. No GPU and no CUDA
//! library is needed.
//!
//! Every parser here reads untrusted bytes: offsets, counts and sizes are checked before use, and
//! nothing is allocated in proportion to a number read from the input, only to the input's own
//! size (decompressed fatbin entries are capped likewise). Malformed input is an
//! [`Error::MalformedImage`] or, inside a container, a note on the
//! damaged part; never a panic.

use crate::error::{Error, Result};
use crate::image::{Image, ImageKind};

pub mod cubin;
pub mod fatbin;
pub mod host;
mod info;
pub mod ltoir;
pub mod ptx;

/// One kernel parameter as the compiled code lays it out in the parameter buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ParamInfo {
    /// Position in the parameter list, from 0.
    pub index: u32,
    /// Byte offset in the parameter buffer.
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
}

/// What inspecting one image found.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
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
            Contents::LtoIr(_) => {}
        }
        out
    }

    /// The parameter layout of `kernel` (mangled name): from the first cubin that defines it,
    /// else from the first PTX module that does.
    pub fn param_layout(&self, kernel: &str) -> Option<Vec<ParamInfo>> {
        let modules = self.modules();
        let from_cubin = modules.iter().find_map(|module| match module {
            Module::Cubin(cubin) => cubin.kernel(kernel).map(|k| k.params.clone()),
            Module::Ptx(_) => None,
        });
        from_cubin.or_else(|| {
            modules.iter().find_map(|module| match module {
                Module::Ptx(ptx) => ptx.entry(kernel).and_then(ptx::PtxEntry::layout),
                Module::Cubin(_) => None,
            })
        })
    }
}

/// A decoded module inside an image.
#[derive(Debug, Clone, Copy)]
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
        ImageKind::Ptx => Contents::Ptx(ptx::parse(bytes).map_err(malformed(kind))?),
        ImageKind::Cubin => Contents::Cubin(cubin::parse(bytes).map_err(malformed(kind))?),
        ImageKind::Fatbin => Contents::Fatbin(fatbin::parse(bytes).map_err(malformed(kind))?),
        ImageKind::LtoIr => Contents::LtoIr(ltoir::parse(bytes).map_err(malformed(kind))?),
        ImageKind::HostBinary => Contents::HostBinary(host::parse(bytes).map_err(malformed(kind))?),
    };
    Ok(Inspection {
        kind,
        size: bytes.len(),
        contents,
    })
}

fn malformed(kind: ImageKind) -> impl Fn(String) -> Error {
    move |reason| Error::MalformedImage { kind, reason }
}

/// Longest symbol name handed to the demangler: real names are far shorter, and the demangler's
/// time grows with its input.
const MAX_DEMANGLE_LEN: usize = 4096;

/// The C++ name for an Itanium-mangled symbol (`_Z...`); `None` for a plain C name or one that
/// does not demangle.
pub fn demangle(name: &str) -> Option<String> {
    if !name.starts_with("_Z") || name.len() > MAX_DEMANGLE_LEN {
        return None;
    }
    let symbol = cpp_demangle::Symbol::new(name).ok()?;
    symbol.demangle().ok()
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

pub(crate) fn u64_at(data: &[u8], offset: usize) -> Option<u64> {
    le(data, offset).map(u64::from_le_bytes)
}
