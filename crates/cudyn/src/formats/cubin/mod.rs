//! Cubins: CUDA ELF objects (64-bit, little-endian, machine `EM_CUDA`) holding SASS for one GPU
//! architecture, executable or relocatable (`-rdc`).
//!
//! The structures are the `object` crate's ELF types ([`FileHeader64`], `SectionHeader64`,
//! `Sym64`, ...), which this module and its readers alone take apart:
//!
//! - `read`: what a cubin holds, for inspection ([`Cubin`]): kernels with their parameters and
//!   resources, variables. It reads what it can of damaged code and notes the rest.
//! - `check`: whether a cubin is whole enough for the driver or nvJitLink, before either sees
//!   it: every structure inside the bytes, every index resolving. It refuses at the first damage.
//! - `info` and `param_table`: the attribute lists of `.nv.info` sections and the parameter
//!   records in them, which both of those read.
//!
//! This file holds what both read: the ELF header, the section and symbol tables as `object`
//! finds them, and which sections hold variables.

mod check;
mod info;
mod param_table;
mod read;

use object::elf::{
    FileHeader64, Ident, SectionHeader64, Sym64, ELFCLASS64, ELFDATA2LSB, ELFDATA2MSB, ELFMAG,
    EM_CUDA, SHT_NOBITS, SHT_SYMTAB, STT_FUNC, STT_OBJECT,
};
use object::pod::{self, Pod};
use object::read::elf::{FileHeader, SectionHeader, SectionTable, Sym, SymbolTable};
use object::{Endianness, LittleEndian as LE, U16};

pub(crate) use check::{compiler_output, is_executable, unread_contents, validate};
pub(crate) use read::kernel_symbols;
pub use read::{kernel_params, parse, Cubin, CubinKernel, Space, Variable};

use crate::formats::object_error;
use crate::parse_error::{ParseError, Problem};

/// A cubin's ELF header.
type Header = FileHeader64<LE>;
type Sections<'data> = SectionTable<'data, Header>;
type Symbols<'data> = SymbolTable<'data, Header>;

/// `st_other` bit of a kernel entry point.
const STO_CUDA_ENTRY: u8 = 0x10;

/// The start of every ELF header, 32- or 64-bit and in either byte order: its identification
/// bytes, type and machine, enough to tell a CUDA ELF from other ELF files.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
struct ElfStart {
    ident: Ident,
    e_type: U16<Endianness>,
    e_machine: U16<Endianness>,
}

/// The first bytes of ELF identification: the magic number, class and byte order.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
struct IdentStart {
    magic: [u8; 4],
    class: u8,
    data: u8,
}

// SAFETY: both are `repr(C)` structs of bytes and of object's byte-array integers (alignment 1,
// the `unaligned` feature), so they have no padding and every bit pattern is a valid value.
unsafe impl Pod for ElfStart {}
// SAFETY: as above.
unsafe impl Pod for IdentStart {}

/// Whether `bytes` start as a CUDA ELF file: the ELF magic number and the machine `EM_CUDA`,
/// read in the byte order the file declares.
pub(crate) fn is_cuda_elf(bytes: &[u8]) -> bool {
    let Ok((start, _)) = pod::from_bytes::<ElfStart>(bytes) else {
        return false;
    };
    let endian = match start.ident.data {
        ELFDATA2LSB => Endianness::Little,
        ELFDATA2MSB => Endianness::Big,
        _ => return false,
    };
    start.ident.magic == ELFMAG && start.e_machine.get(endian) == EM_CUDA
}

/// The ELF header of a 64-bit little-endian CUDA ELF.
fn header(data: &[u8]) -> Result<&Header, ParseError> {
    let place = "ELF header";
    let class_and_order = pod::from_bytes::<IdentStart>(data)
        .ok()
        .map(|(start, _)| (start.class, start.data));
    if class_and_order != Some((ELFCLASS64, ELFDATA2LSB)) {
        return Err(ParseError::new(
            place,
            Problem::WrongFormat,
            "only 64-bit little-endian cubins exist (ELF class or byte order differs)",
        ));
    }
    let header = Header::parse(data).map_err(elf_error(place))?;
    let machine = header.e_machine(LE);
    if machine != EM_CUDA {
        return Err(ParseError::new(
            place,
            Problem::WrongFormat,
            format!("ELF machine is {machine}, not EM_CUDA ({EM_CUDA})"),
        ));
    }
    Ok(header)
}

/// An error of the `object` crate reading the structure at `place` (see [`object_error`]).
fn elf_error(place: &'static str) -> impl Fn(object::read::Error) -> ParseError {
    move |error| object_error(place, error)
}

/// The section table and the symbol table of the cubin `data`, as `object` reads them.
fn tables(data: &[u8]) -> Result<(Sections<'_>, Symbols<'_>), ParseError> {
    let sections = header(data)?
        .sections(LE, data)
        .map_err(elf_error("section headers"))?;
    let symbols = sections
        .symbols(LE, data, SHT_SYMTAB)
        .map_err(elf_error("symbol table"))?;
    Ok((sections, symbols))
}

/// Whether `symbol` is a kernel: a function marked as an entry point.
fn is_kernel(symbol: &Sym64<LE>) -> bool {
    symbol.st_type() == STT_FUNC && symbol.st_other() & STO_CUDA_ENTRY != 0
}

/// The memory space of the variables of the section named `section`: `.nv.global*`, or a
/// constant bank other than 0 (`.nv.constant3`); `None` for a section of no variables.
fn variable_space(section: &[u8]) -> Option<Space> {
    if section.starts_with(b".nv.global") {
        return Some(Space::Global);
    }
    let bank = section.strip_prefix(b".nv.constant")?;
    let bank: u32 = std::str::from_utf8(bank).ok()?.parse().ok()?;
    // Bank 0 holds kernel parameters, not variables.
    (bank != 0).then_some(Space::Constant(bank))
}

/// Whether `symbol` is a device variable: an object in a `.nv.global` section or a constant bank
/// other than 0 (`__device__`, `__managed__`, `__constant__`), as [`parse`] lists them.
fn is_variable(sections: &Sections<'_>, symbol: &Sym64<LE>) -> bool {
    symbol.st_type() == STT_OBJECT
        && sections
            .section(object::SectionIndex(usize::from(symbol.st_shndx(LE))))
            .ok()
            .and_then(|section| sections.section_name(LE, section).ok())
            .is_some_and(|name| variable_space(name).is_some())
}

/// What a cubin's variables are, read from its section and symbol tables only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Variables {
    /// Whether it defines any (see [`is_variable`]).
    defined: bool,
    /// The device memory of those the image holds no bytes for (uninitialized ones, in
    /// `SHT_NOBITS` sections): what a loaded library takes beyond its image's size.
    uninitialized_bytes: usize,
}

/// What the cubin's variables are (see [`Variables`]).
fn variables(data: &[u8]) -> Result<Variables, ParseError> {
    let (sections, symbols) = tables(data)?;
    Ok(Variables {
        defined: symbols
            .symbols()
            .iter()
            .any(|symbol| is_variable(&sections, symbol)),
        uninitialized_bytes: uninitialized_variable_bytes(&sections),
    })
}

/// The sizes of the `SHT_NOBITS` sections that hold variables, added up.
fn uninitialized_variable_bytes(sections: &Sections<'_>) -> usize {
    sections
        .iter()
        .filter_map(|section| {
            uninitialized_bytes(section, || sections.section_name(LE, section).ok())
        })
        .fold(0, usize::saturating_add)
}

/// The device memory `section` takes beyond the image's bytes: its size when it is an
/// `SHT_NOBITS` section of variables (`name` says its name, asked only then).
fn uninitialized_bytes<'a>(
    section: &SectionHeader64<LE>,
    name: impl FnOnce() -> Option<&'a [u8]>,
) -> Option<usize> {
    (section.sh_type(LE) == SHT_NOBITS && name().is_some_and(|name| variable_space(name).is_some()))
        .then(|| usize::try_from(section.sh_size(LE)).unwrap_or(usize::MAX))
}

/// `prefix` and `name` as one name, e.g. `.nv.info.` and a kernel's.
fn suffixed(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    [prefix, name].concat()
}
