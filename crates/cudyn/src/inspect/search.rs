//! Answers about an image that need only part of it: one kernel's parameter layout, every
//! kernel's symbol. Where [`inspect`](super::inspect) decodes and describes every part, these
//! visit the image's cubins and PTX modules one at a time ([`modules`]) and read of each only
//! what the answer needs.

use std::ops::ControlFlow;

use crate::formats::fatbin::{self, CodeKind, EntryKind, RawEntry};
use crate::formats::{archive, cubin, host, ptx};
use crate::image::ImageKind;
use crate::param::ParamLayout;
use crate::parse_error::{Fault, ParseError, Problem};

/// The code of one module of an image.
#[derive(Debug, Clone, Copy)]
enum Code<'a> {
    /// A cubin's bytes.
    Cubin(&'a [u8]),
    /// PTX text.
    Ptx(&'a [u8]),
    /// LTO-IR, whose kernels cudyn cannot read (and the driver does not load).
    LtoIr,
}

/// One module found: where it is (empty for the image itself, else e.g. `fatbin entry 2 (at
/// byte 4096)`), and its code, or why the part that may hold it cannot be read.
struct Found<'a> {
    place: &'a str,
    code: Result<Code<'a>, ParseError>,
}

impl Found<'_> {
    /// What the visit of this module read of its code: `read`'s result for a module whose code
    /// was found, its errors placed inside the module; the error of one that was not.
    fn read<T>(
        &self,
        read: impl FnOnce(Code<'_>) -> Result<T, ParseError>,
    ) -> Result<T, ParseError> {
        match &self.code {
            Ok(code) => read(*code).map_err(|error| within(self.place, error)),
            Err(error) => Err(error.clone()),
        }
    }
}

type Visitor<'v, B> = dyn FnMut(Found<'_>) -> ControlFlow<B> + 'v;

/// Visits the modules of `bytes`, of `kind`, until `visit` breaks: the image itself when it is a
/// cubin, PTX or LTO-IR; a fatbin's SASS entries, then its PTX entries, then the rest
/// (decompressed, one at a time); each fatbin of a host binary in turn; each member of a static
/// library that is device code. A part that cannot be read (an entry that does not decompress,
/// obfuscated code, a kind holding neither a cubin nor PTX, a damaged member) is visited as its
/// error, and the walk goes on where it can. An error is returned only when the image's own
/// outer structure (a host binary's or an archive's headers) cannot be read.
fn modules<B>(
    bytes: &[u8],
    kind: ImageKind,
    place: &str,
    visit: &mut Visitor<'_, B>,
) -> Result<ControlFlow<B>, ParseError> {
    let code = match kind {
        ImageKind::Cubin => Code::Cubin(bytes),
        ImageKind::Ptx => Code::Ptx(bytes),
        ImageKind::LtoIr => Code::LtoIr,
        ImageKind::Fatbin => return Ok(fatbin_modules(bytes, place, visit)),
        ImageKind::HostBinary => {
            for fatbin in host::fatbin_slices(bytes)? {
                if let ControlFlow::Break(found) = fatbin_modules(fatbin, place, visit) {
                    return Ok(ControlFlow::Break(found));
                }
            }
            return Ok(ControlFlow::Continue(()));
        }
        ImageKind::Archive => {
            for (name, member) in archive::members(bytes)? {
                // Members that are not device code (host objects without any) hold no kernel.
                let Ok(kind) = crate::image::detect(member) else {
                    continue;
                };
                if kind == ImageKind::Archive {
                    continue;
                }
                let inner = join(place, &format!("member {name}"));
                let walked = modules(member, kind, &inner, visit).unwrap_or_else(|error| {
                    visit(Found {
                        place: &inner,
                        code: Err(within(&inner, error)),
                    })
                });
                if let ControlFlow::Break(found) = walked {
                    return Ok(ControlFlow::Break(found));
                }
            }
            return Ok(ControlFlow::Continue(()));
        }
    };
    Ok(visit(Found {
        place,
        code: Ok(code),
    }))
}

/// `inner` inside `outer`, for errors: `member a.o > fatbin entry 1 (at byte 80)`.
fn join(outer: &str, inner: &str) -> String {
    if outer.is_empty() {
        inner.to_owned()
    } else {
        format!("{outer} > {inner}")
    }
}

/// `error` inside `place`, when there is one.
fn within(place: &str, error: ParseError) -> ParseError {
    if place.is_empty() {
        error
    } else {
        error.inside(place)
    }
}

/// The modules of the fatbin at the start of `bytes`: SASS entries first, then PTX, then the
/// rest, each in the order stored.
fn fatbin_modules<B>(bytes: &[u8], place: &str, visit: &mut Visitor<'_, B>) -> ControlFlow<B> {
    let entries: Vec<Result<RawEntry<'_>, ParseError>> = match fatbin::entries(bytes) {
        Ok(entries) => entries.collect(),
        Err(error) => {
            return visit(Found {
                place,
                code: Err(within(place, error)),
            })
        }
    };
    let pass_of = |entry: &Result<RawEntry<'_>, ParseError>| match entry {
        Ok(raw) if raw.header.entry_kind() == EntryKind::Sass => 0,
        Ok(raw) if raw.header.entry_kind() == EntryKind::Ptx => 1,
        _ => 2,
    };
    for pass in 0..3 {
        for (index, entry) in entries.iter().enumerate() {
            if pass_of(entry) != pass {
                continue;
            }
            match entry {
                Ok(raw) => entry_module(raw, &join(place, &raw.place(index)), visit)?,
                Err(error) => visit(Found {
                    place,
                    code: Err(within(place, error.clone())),
                })?,
            }
        }
    }
    ControlFlow::Continue(())
}

/// Visits the module one fatbin entry holds (at `place`): by its kind, or for a kind cudyn does
/// not know by what it holds, as [`Image::validate`](crate::Image::validate) checks it.
fn entry_module<B>(raw: &RawEntry<'_>, place: &str, visit: &mut Visitor<'_, B>) -> ControlFlow<B> {
    let kind = raw.header.entry_kind();
    if kind == EntryKind::LtoIr {
        return visit(Found {
            place,
            code: Ok(Code::LtoIr),
        });
    }
    let refused = |fault: Fault| Found {
        place,
        code: Err(fault.at(place)),
    };
    if raw.header.obfuscated() {
        return visit(refused(Fault::new(
            Problem::Unsupported,
            "its code is obfuscated; only NVIDIA's tools read it",
        )));
    }
    let code = match raw.code() {
        Ok(code) => code,
        Err(fault) => return visit(refused(fault)),
    };
    let code = match CodeKind::of(kind, &code) {
        Some(CodeKind::Cubin) => Code::Cubin(&code),
        Some(CodeKind::Ptx) => Code::Ptx(&code),
        None => {
            return visit(refused(Fault::new(
                Problem::Unsupported,
                format!(
                    "its kind {} is none cudyn knows (1 PTX, 2 SASS, 8 LTO-IR) and it holds \
                     neither a cubin nor PTX",
                    raw.header.kind.get(object::LittleEndian)
                ),
            )))
        }
    };
    visit(Found {
        place,
        code: Ok(code),
    })
}

/// The parameter layout of `kernel` (mangled name) in `bytes` of `kind`, decoding no more than
/// needed: from the first cubin that defines it (of a cubin, only its `.nv.info.<kernel>`
/// section), else from the first PTX module that does. A module that cannot be read, or whose
/// record of the kernel's parameters cannot, is passed over for the next (every module of an
/// image lays out a kernel's parameters alike); when none gives the layout, the first such
/// failure is the error, since the kernel may be in that module. `Ok(None)` when every module
/// was read and none defines `kernel`.
pub(crate) fn param_layout(
    bytes: &[u8],
    kind: ImageKind,
    kernel: &str,
) -> Result<Option<Vec<ParamLayout>>, ParseError> {
    let mut failure = None;
    let found = modules(bytes, kind, "", &mut |found| {
        let layout = found.read(|code| match code {
            Code::Cubin(code) => cubin::kernel_params(code, kernel),
            Code::Ptx(code) => ptx::parse(code)?
                .entry(kernel)
                .map(ptx::PtxEntry::param_layout)
                .transpose(),
            Code::LtoIr => Ok(None),
        });
        match layout {
            Ok(Some(layout)) => ControlFlow::Break(layout),
            Ok(None) => ControlFlow::Continue(()),
            Err(error) => {
                failure.get_or_insert(error);
                ControlFlow::Continue(())
            }
        }
    })?;
    match (found, failure) {
        (ControlFlow::Break(layout), _) => Ok(Some(layout)),
        (ControlFlow::Continue(()), Some(failure)) => Err(failure),
        (ControlFlow::Continue(()), None) => Ok(None),
    }
}

/// The symbols of the kernels each cubin and PTX module of `bytes`, of `kind`, defines, module
/// after module (a kernel that several modules define comes once for each). Any module that
/// cannot be read is the error (a listing without its kernels would be short); LTO-IR is passed
/// over, and an image of LTO-IR alone is an error, since cudyn cannot read its kernels.
pub(crate) fn kernel_symbols(bytes: &[u8], kind: ImageKind) -> Result<Vec<String>, ParseError> {
    let mut symbols = Vec::new();
    let (mut modules_read, mut lto_ir) = (0usize, false);
    let walked = modules(bytes, kind, "", &mut |found| {
        let listed = found.read(|code| match code {
            Code::Cubin(code) => cubin::kernel_symbols(code).map(Some),
            Code::Ptx(code) => {
                let module = ptx::parse(code)?;
                Ok(Some(
                    module.entries.into_iter().map(|entry| entry.name).collect(),
                ))
            }
            Code::LtoIr => Ok(None),
        });
        match listed {
            Ok(Some(listed)) => {
                modules_read += 1;
                symbols.extend(listed);
                ControlFlow::Continue(())
            }
            Ok(None) => {
                lto_ir = true;
                ControlFlow::Continue(())
            }
            Err(error) => ControlFlow::Break(error),
        }
    })?;
    if let ControlFlow::Break(error) = walked {
        return Err(error);
    }
    if modules_read == 0 && lto_ir {
        return Err(ParseError::new(
            "LTO-IR",
            Problem::Unsupported,
            "cudyn cannot read the kernels of LTO-IR: link it (cudyn::Linker, `cudyn link`) and \
             list the kernels of the linked image",
        ));
    }
    Ok(symbols)
}
