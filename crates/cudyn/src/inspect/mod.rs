//! Offline inspection of device code: what is in a PTX file, a cubin, a fatbin, LTO-IR, a host
//! binary built by nvcc or a static library, which GPUs it runs on, and what each kernel takes.
//! No GPU and no CUDA library is needed.
//!
//! Every reader behind this reads untrusted bytes: offsets, counts and sizes are checked before
//! use, and nothing is allocated in proportion to a number read from the input, only to the
//! input's own size (decompressed fatbin entries are capped likewise). Malformed input is a
//! [`ParseError`] (an [`Error::MalformedImage`] through [`Image`]) or, inside a container, a
//! note on the damaged part; never a panic.
//!
//! Inspection describes what it can read of damaged input; whether an image is whole enough for
//! the driver is [`Image::validate`]'s question. The readers are those of each format's own
//! module, which the check before a load uses too; this module presents what they find, and
//! defines [`Image::inspect`], [`Image::param_layout`] and [`Image::kernel_list`].

use crate::error::{Error, Result};
use crate::formats::fatbin::EntryKind;
use crate::image::{bytes_given, Image, ImageKind};
use crate::param::ParamLayout;
use crate::symbols::KernelName;

pub mod archive;
mod search;

pub use crate::parse_error::{ParseError, Problem};
pub use crate::symbols::demangle;

pub mod cubin {
    //! Cubins: CUDA ELF objects holding SASS for one GPU architecture.
    //!
    //! The architecture comes from the ELF header's flags; kernels are the function symbols
    //! marked as entries; each kernel's parameter layout and limits come from its
    //! `.nv.info.<kernel>` section, and its registers and stack from the shared `.nv.info`
    //! section (both lists of `EIATTR_*` attributes). Static shared, local and parameter-bank
    //! sizes are the sizes of the kernel's `.nv.shared.`, `.nv.local.` and `.nv.constant0.`
    //! sections. The `.nv.compat` section says whether the code is architecture-specific
    //! (`sm_90a`).

    pub use crate::formats::cubin::{kernel_params, parse, Cubin, CubinKernel, Space, Variable};
}

pub mod fatbin {
    //! Fatbins: NVIDIA's container of cubins (SASS), PTX and LTO-IR for several architectures.
    //!
    //! Layout (little-endian): a [`FatbinHeader`] (magic `0xBA55ED50`, version, header size,
    //! size of the entries), then entries, each an [`EntryHeader`] of at least 64 bytes followed
    //! by its payload. Compressed entries are decompressed and decoded: zstd (what CUDA 12.8+
    //! writes by default) and LZ4 (older toolkits, and `-compress-mode=speed`), both as one raw
    //! block or frame whose decompressed size the entry header declares. Obfuscated entries are
    //! listed as such.

    pub use crate::formats::fatbin::{
        parse, Compression, Entry, EntryContents, EntryHeader, EntryKind, Fatbin, FatbinHeader,
        MAGIC,
    };
}

pub mod ptx {
    //! PTX: version, target, address size, entries with their typed parameters, and
    //! module-scope variables.
    //!
    //! Unknown directives are skipped, so a newer PTX version still lists its entries; a
    //! parameter or variable of a type cudyn does not know is listed with an unknown size. Text
    //! that ends inside a comment, a string, a bracket or a statement (a file cut short) is an
    //! error.

    pub use crate::formats::ptx::{parse, PtxEntry, PtxModule, PtxParam, PtxVariable};
}

pub mod ltoir {
    //! LTO-IR: NVVM IR for link-time optimization, as NVRTC (`-dlto`) and nvcc (`-dlto`) write
    //! it.
    //!
    //! Current toolkits wrap it in an NVVM container whose header records the target
    //! architecture; older ones wrote plain LLVM bitcode, possibly in the bitcode wrapper.

    pub use crate::formats::ltoir::{parse, LtoIr, LtoIrFormat};
}

pub mod host {
    //! Host binaries with embedded device code: objects, executables and shared libraries
    //! built by nvcc keep their fatbins in a `.nv_fatbin` section (`__nv_relfatbin` for
    //! relocatable device code, `-rdc`), one after another when several objects were linked
    //! together.

    pub use crate::formats::host::{parse, FatbinSection, HostBinary};

    /// The fatbins embedded in a host binary, as byte slices ready to load.
    pub fn embedded_fatbins(bytes: &[u8]) -> crate::Result<Vec<&[u8]>> {
        crate::image::embedded_fatbins(bytes)
    }
}

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
            Contents::Fatbin(fatbin) => fatbin_modules(fatbin, &mut out),
            Contents::HostBinary(host) => {
                for fatbin in host.sections.iter().flat_map(|s| &s.fatbins) {
                    fatbin_modules(fatbin, &mut out);
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
            Contents::Fatbin(fatbin) => undecoded(fatbin),
            Contents::HostBinary(host) => host.sections.iter().find_map(|section| {
                let fatbin = section.fatbins.iter().find_map(undecoded);
                let damage = || {
                    let note = section.notes.first()?;
                    Some(ParseError::new("section", Problem::Damaged, note.clone()))
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

/// The cubins and PTX modules of `fatbin`, in the order of its entries, added to `out`.
fn fatbin_modules<'a>(fatbin: &'a fatbin::Fatbin, out: &mut Vec<Module<'a>>) {
    for entry in &fatbin.entries {
        match &entry.contents {
            Some(fatbin::EntryContents::Cubin(cubin)) => out.push(Module::Cubin(cubin)),
            Some(fatbin::EntryContents::Ptx(ptx)) => out.push(Module::Ptx(ptx)),
            Some(fatbin::EntryContents::LtoIr(_)) | None => {}
        }
    }
}

/// The first part of `fatbin` that may hold a module but was not decoded: an entry other than
/// LTO-IR whose code could not be read (see [`fatbin::Entry::note`]; code cudyn does not read,
/// obfuscated or of a kind it does not know, is [`Problem::Unsupported`]), or entries passed
/// over after damage (see [`fatbin::Fatbin::notes`]); `None` when every one was.
fn undecoded(fatbin: &fatbin::Fatbin) -> Option<ParseError> {
    let entry = fatbin
        .entries
        .iter()
        .enumerate()
        .find_map(|(index, entry)| {
            let note = entry
                .note
                .as_ref()
                .filter(|_| entry.kind != EntryKind::LtoIr)?;
            let problem = if entry.obfuscated || matches!(entry.kind, EntryKind::Unknown(_)) {
                Problem::Unsupported
            } else {
                Problem::Damaged
            };
            Some(ParseError::new(
                format!("fatbin entry {index}"),
                problem,
                note.clone(),
            ))
        });
    entry.or_else(|| {
        let note = fatbin.notes.first()?;
        Some(ParseError::new("fatbin", Problem::Damaged, note.clone()))
    })
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
        what: bytes_given(bytes),
        kind,
        error,
    })?;
    Ok(Inspection {
        kind,
        size: bytes.len(),
        contents,
    })
}

impl Image<'_> {
    /// Everything cudyn can tell about these bytes without a GPU: kernels, their parameter
    /// layouts and resources, variables, fatbin entries.
    pub fn inspect(&self) -> Result<Inspection> {
        inspect_kind(self.bytes(), self.kind())
    }

    /// The parameter layout of `kernel` (its mangled name, as the driver knows it) from the
    /// compiled code: the first cubin (or, failing that, PTX) that defines it.
    ///
    /// This is the layout the driver's `cuKernelGetParamInfo` reports, available offline. Only
    /// what is needed is decoded: the modules up to the first that defines `kernel`, and of a
    /// cubin only that kernel's `.nv.info` section (its symbol table when it has none).
    /// [`Error::KernelNotInImage`] when no part of the image defines `kernel` with a known
    /// layout.
    pub fn param_layout(&self, kernel: &str) -> Result<Vec<ParamLayout>> {
        search::param_layout(self.bytes(), self.kind(), kernel)
            .map_err(|error| self.malformed(error))?
            .ok_or_else(|| Error::KernelNotInImage {
                kind: self.kind(),
                name: kernel.to_owned(),
            })
    }

    /// Every kernel the image defines, with its symbol, C++ name and signature (see
    /// [`KernelName`]), each once, sorted by C++ name, then signature, then symbol: the kernels
    /// of every cubin and PTX module in it (a fatbin's SASS for several architectures and its
    /// PTX define the same kernels), of every fatbin of a host binary, of every member of a
    /// static library. Read offline, from the symbol tables and `.entry` declarations only.
    ///
    /// A module that cannot be read is [`Error::MalformedImage`] naming it, never a shorter
    /// list; so is an image of LTO-IR alone, whose kernels cudyn cannot read (link it first).
    /// A loaded library's [`Library::kernel_list`](crate::Library::kernel_list) gives the
    /// kernels of the one module the driver chose.
    ///
    /// ```no_run
    /// use cudyn::{Image, Library};
    ///
    /// let image = Image::from_file("kernels.fatbin")?;
    /// let library = Library::load(image.bytes())?;
    /// for listed in image.kernel_list()? {
    ///     // `scale(float*, int)`, `axpy<double>(double, double const*, double*, int)`, `plain`
    ///     let kernel = library.kernel(&listed.to_string())?;
    ///     assert_eq!(kernel.name()?, listed.symbol);
    /// }
    /// # Ok::<(), cudyn::Error>(())
    /// ```
    pub fn kernel_list(&self) -> Result<Vec<KernelName>> {
        let symbols = search::kernel_symbols(self.bytes(), self.kind())
            .map_err(|error| self.malformed(error))?;
        Ok(crate::symbols::kernel_list(symbols))
    }

    /// [`Error::MalformedImage`] for `error`, found in these bytes.
    fn malformed(&self, error: ParseError) -> Error {
        Error::MalformedImage {
            what: bytes_given(self.bytes()),
            kind: self.kind(),
            error,
        }
    }
}
