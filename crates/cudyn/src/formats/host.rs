//! Host binaries with embedded device code: objects, executables and shared libraries built by
//! nvcc keep their fatbins in a `.nv_fatbin` section (`__nv_relfatbin` for relocatable device
//! code, `-rdc`), one after another when several objects were linked together.

use std::fmt;

use object::{Object, ObjectSection};

use super::fatbin::{self, Fatbin};
use super::object_error;
use crate::parse_error::ParseError;

/// Sections that hold fatbins: ELF, ELF with `-rdc`, PE (names cut to 8 bytes), Mach-O.
const FATBIN_SECTIONS: [&str; 4] = [".nv_fatbin", "__nv_relfatbin", ".nv_fatb", "__nv_fatbin"];

/// Fatbins inside one section start at multiples of this.
const FATBIN_ALIGN: usize = 8;

/// A host binary's embedded device code.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct HostBinary {
    /// The object format: "ELF", "PE", "COFF" or "Mach-O".
    pub format: String,
    /// The host architecture, e.g. "x86-64", "AArch64".
    pub architecture: String,
    /// What the file is: "object", "executable" or "shared library".
    pub file_kind: String,
    /// Each section holding fatbins.
    pub sections: Vec<FatbinSection>,
}

/// One section of embedded fatbins.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct FatbinSection {
    /// The section's name.
    pub name: String,
    /// The fatbins in it, in order.
    pub fatbins: Vec<Fatbin>,
    /// Damage found, e.g. bytes between fatbins that are not one.
    pub notes: Vec<String>,
}

/// Why a host object file is no image of device code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NoDeviceCode {
    /// Its header says which object file it is (`format`: "an ELF file"), but it cannot be read.
    Unreadable {
        format: &'static str,
        error: object::read::Error,
    },
    /// It reads, and has no section of embedded fatbins.
    NoFatbins {
        file_kind: &'static str,
        format: &'static str,
        architecture: String,
    },
}

impl fmt::Display for NoDeviceCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoDeviceCode::Unreadable { format, error } => write!(
                f,
                "it is {format} that cannot be read ({error}): is it cut short or damaged?"
            ),
            NoDeviceCode::NoFatbins {
                file_kind,
                format,
                architecture,
            } => write!(
                f,
                "it is a host {file_kind} ({format}, {architecture}) with no embedded device \
                 code (no {} section)",
                FATBIN_SECTIONS.join(" or ")
            ),
        }
    }
}

/// For bytes that are a host object file: `Ok` when they embed device code, else why not.
/// `None` when they are not an object file at all. A file whose header says what object file it
/// is but which cannot be read (cut short, say) is one that cannot be read, not an unknown kind.
pub(crate) fn detect(bytes: &[u8]) -> Option<Result<(), NoDeviceCode>> {
    let file = match object::File::parse(bytes) {
        Ok(file) => file,
        Err(error) => {
            let format = match object::FileKind::parse(bytes).ok()? {
                object::FileKind::Elf32 | object::FileKind::Elf64 => "an ELF file",
                object::FileKind::MachO32 | object::FileKind::MachO64 => "a Mach-O file",
                object::FileKind::Pe32 | object::FileKind::Pe64 => "a PE file",
                object::FileKind::Coff | object::FileKind::CoffBig => "a COFF object",
                _ => return None,
            };
            return Some(Err(NoDeviceCode::Unreadable { format, error }));
        }
    };
    let found = fatbin_sections(&file).next().is_some();
    Some(if found {
        Ok(())
    } else {
        Err(NoDeviceCode::NoFatbins {
            file_kind: file_kind_name(&file),
            format: format_name(file.format()),
            architecture: architecture_name(file.architecture()),
        })
    })
}

fn fatbin_sections<'a, 'file>(
    file: &'file object::File<'a>,
) -> impl Iterator<Item = object::Section<'a, 'file>> + 'file {
    file.sections().filter(|section| {
        section
            .name()
            .is_ok_and(|name| FATBIN_SECTIONS.contains(&name))
    })
}

/// Reads the embedded fatbins of a host binary.
pub fn parse(bytes: &[u8]) -> Result<HostBinary, ParseError> {
    let file =
        object::File::parse(bytes).map_err(|error| object_error("object file headers", error))?;
    // Section headers may all point at the same bytes; reading them over and over must not turn
    // a small file into hours of work.
    let mut budget = bytes.len().saturating_mul(2);
    let mut sections = Vec::new();
    for section in fatbin_sections(&file) {
        let name = section.name().unwrap_or_default().to_string();
        let mut notes = Vec::new();
        let mut fatbins = Vec::new();
        match section.data() {
            Ok(data) if data.len() > budget => {
                notes.push("skipped: sections overlap too much".to_string());
            }
            Ok(data) => {
                budget -= data.len();
                for piece in split(data) {
                    match piece.and_then(fatbin::parse) {
                        Ok(fatbin) => fatbins.push(fatbin),
                        Err(error) => notes.push(error.to_string()),
                    }
                }
            }
            Err(error) => notes.push(format!("cannot read the section: {error}")),
        }
        sections.push(FatbinSection {
            name,
            fatbins,
            notes,
        });
    }
    Ok(HostBinary {
        format: format_name(file.format()).to_owned(),
        architecture: architecture_name(file.architecture()),
        file_kind: file_kind_name(&file).to_owned(),
        sections,
    })
}

/// An object format as its documentation spells it.
fn format_name(format: object::BinaryFormat) -> &'static str {
    match format {
        object::BinaryFormat::Elf => "ELF",
        object::BinaryFormat::Pe => "PE",
        object::BinaryFormat::Coff => "COFF",
        object::BinaryFormat::MachO => "Mach-O",
        object::BinaryFormat::Xcoff => "XCOFF",
        object::BinaryFormat::Wasm => "WebAssembly",
        _ => "unknown format",
    }
}

/// A host architecture by its usual name.
fn architecture_name(architecture: object::Architecture) -> String {
    use object::Architecture as A;
    match architecture {
        A::X86_64 | A::X86_64_X32 => "x86-64".to_owned(),
        A::I386 => "x86".to_owned(),
        A::Aarch64 | A::Aarch64_Ilp32 => "AArch64".to_owned(),
        A::Arm => "ARM".to_owned(),
        A::PowerPc64 => "PowerPC 64".to_owned(),
        A::Riscv64 => "RISC-V 64".to_owned(),
        A::Unknown => "unknown architecture".to_owned(),
        other => format!("{other:?}"),
    }
}

/// What kind of file a host binary is.
fn file_kind_name(file: &object::File<'_>) -> &'static str {
    match file.kind() {
        object::ObjectKind::Relocatable => "object",
        object::ObjectKind::Executable => "executable",
        // Position-independent executables are dynamic objects too. An ELF one names its
        // program interpreter; a shared library may have an entry point (libcudart.so has)
        // and still be none.
        object::ObjectKind::Dynamic if is_dynamic_executable(file) => "executable",
        object::ObjectKind::Dynamic => "shared library",
        object::ObjectKind::Core => "core dump",
        _ => "binary",
    }
}

/// Whether a dynamic object is an executable: an ELF file with a program interpreter
/// (`PT_INTERP`), another format with an entry point.
fn is_dynamic_executable(file: &object::File<'_>) -> bool {
    use object::read::elf::ProgramHeader as _;
    fn interpreted<Elf: object::read::elf::FileHeader>(
        elf: &object::read::elf::ElfFile<'_, Elf>,
    ) -> bool {
        let endian = elf.endian();
        elf.elf_program_headers()
            .iter()
            .any(|header| header.p_type(endian) == object::elf::PT_INTERP)
    }
    match file {
        object::File::Elf32(elf) => interpreted(elf),
        object::File::Elf64(elf) => interpreted(elf),
        other => other.entry() != 0,
    }
}

/// The fatbins embedded in a host binary, as byte slices ready to load; an error for any part
/// of a fatbin section that is no fatbin.
pub(crate) fn fatbin_slices(bytes: &[u8]) -> Result<Vec<&[u8]>, ParseError> {
    let file =
        object::File::parse(bytes).map_err(|error| object_error("object file headers", error))?;
    let mut out = Vec::new();
    for section in fatbin_sections(&file) {
        let name = section.name().unwrap_or_default().to_string();
        let data = section.data().map_err(|error| object_error(name, error))?;
        for piece in split(data) {
            out.push(piece?);
        }
    }
    Ok(out)
}

/// Refuses a host object with a section whose bytes lie outside the file, before nvJitLink
/// reads it: nvJitLink 13.0 crashed on an nvcc object in a static library whose last section
/// header had bytes of its offset changed. No linker or assembler writes such a section, so the
/// refusal is sound; sections without bytes in the file (`.bss`) have no extent to check.
pub(crate) fn check_section_extents(bytes: &[u8]) -> Result<(), ParseError> {
    let file =
        object::File::parse(bytes).map_err(|error| object_error("object file headers", error))?;
    for (index, section) in file.sections().enumerate() {
        let Some((offset, size)) = section.file_range() else {
            continue;
        };
        if offset
            .checked_add(size)
            .is_none_or(|end| end > bytes.len() as u64)
        {
            return Err(ParseError::new(
                format!("section {index}"),
                crate::parse_error::Problem::Truncated,
                format!(
                    "its {size} bytes at offset {offset} lie outside the file's {} bytes",
                    bytes.len()
                ),
            ));
        }
    }
    Ok(())
}

/// Splits a section into its fatbins: each starts at an aligned offset, after the one before.
/// Yields an error for bytes that are not a fatbin, and stops there.
fn split(mut data: &[u8]) -> impl Iterator<Item = Result<&[u8], ParseError>> {
    let mut offset = 0usize;
    std::iter::from_fn(move || {
        let skip = data.iter().take_while(|&&b| b == 0).count() / FATBIN_ALIGN * FATBIN_ALIGN;
        data = &data[skip..];
        offset += skip;
        if data.iter().all(|&b| b == 0) {
            return None;
        }
        let result = fatbin::declared_len(data);
        let at = offset;
        match result {
            Ok(len) => {
                let fatbin = &data[..len];
                let next = len.next_multiple_of(FATBIN_ALIGN).min(data.len());
                data = &data[next..];
                offset += next;
                Some(Ok(fatbin))
            }
            Err(error) => {
                data = &[];
                Some(Err(error.inside(&format!("bytes at offset {at}"))))
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_file_cut_short_is_said_to_be_unreadable_not_of_an_unknown_kind() {
        // This test's own program: an object file with no device code.
        let program = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let whole = detect(&program)
            .expect("an object file")
            .unwrap_err()
            .to_string();
        assert!(whole.contains("no embedded device code"), "{whole}");
        for cut in [64, 4096, program.len() / 2, program.len() - 1] {
            let reason = detect(&program[..cut])
                .expect("still an object file by its header")
                .unwrap_err()
                .to_string();
            assert!(
                reason.contains("cannot be read") && reason.contains("cut short"),
                "cut at {cut}: {reason}"
            );
        }
        assert!(detect(b"not an object file at all").is_none());
    }
}
