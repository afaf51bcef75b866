//! The check of a cubin's symbol table: found as `object` finds it, then every symbol's name
//! and place.

use object::elf::{
    SectionHeader64, Sym64, SHF_EXECINSTR, SHN_LORESERVE, SHN_UNDEF, SHT_STRTAB, SHT_SYMTAB,
    SHT_SYMTAB_SHNDX, STT_FUNC, STT_OBJECT,
};
use object::pod::slice_from_all_bytes;
use object::read::elf::{SectionHeader, Sym};
use object::U32;

use super::sections::{first_name, named};
use super::{holds_bytes, linkable, LE};
use crate::formats::cubin::variable_space;
use crate::formats::object_problem;
use crate::formats::Purpose;
use crate::parse_error::{ParseError, Problem};

type Section = SectionHeader64<LE>;

/// The symbol table (the first `SHT_SYMTAB` section), found and read as
/// `SectionTable::symbols` finds and reads it, with its errors.
pub(super) struct SymbolTable<'data> {
    pub(super) symbols: &'data [Sym64<LE>],
    /// The index of its string table (`sh_link`); 0 for none.
    pub(super) strings: usize,
}

impl<'data> SymbolTable<'data> {
    /// The symbol table of the sections `headers` of `data`; none when there is no
    /// `SHT_SYMTAB` section.
    pub(super) fn find(headers: &[Section], data: &'data [u8]) -> Result<Self, ParseError> {
        let error =
            |message: &str| ParseError::new("symbol table", object_problem(message), message);
        let Some(index) = headers
            .iter()
            .position(|section| section.sh_type(LE) == SHT_SYMTAB)
        else {
            return Ok(SymbolTable {
                symbols: &[],
                strings: 0,
            });
        };
        let table = &headers[index];
        let symbols = table
            .data(LE, data)
            .ok()
            .and_then(|bytes| slice_from_all_bytes(bytes).ok())
            .ok_or_else(|| error("Invalid ELF symbol table data"))?;
        let strings = usize::try_from(table.sh_link(LE)).unwrap_or(usize::MAX);
        if strings != 0 {
            let table = headers
                .get(strings)
                .ok_or_else(|| error("Invalid ELF section index"))?;
            if table.sh_type(LE) != SHT_STRTAB {
                return Err(error("Invalid ELF string section type"));
            }
            if table.sh_offset(LE).checked_add(table.sh_size(LE)).is_none() {
                return Err(error("Invalid ELF string section offset or size"));
            }
        }
        // Extended section indices, which no cubin has, are read only to refuse what
        // `SymbolTable::parse` refuses.
        let bad_indices = |section: &Section| {
            section.sh_type(LE) == SHT_SYMTAB_SHNDX
                && usize::try_from(section.sh_link(LE)).is_ok_and(|link| link == index)
                && section
                    .data(LE, data)
                    .ok()
                    .and_then(|bytes| slice_from_all_bytes::<U32<LE>>(bytes).ok())
                    .is_none()
        };
        if headers.iter().any(bad_indices) {
            return Err(error("Invalid ELF symtab_shndx data"));
        }
        Ok(SymbolTable { symbols, strings })
    }

    /// Checks every symbol's name and place, given the section headers that passed the walk and
    /// their names; whether any is a variable.
    pub(super) fn check(
        &self,
        headers: &[Section],
        names: &[u8],
        relocatable: bool,
        purpose: Purpose,
    ) -> Result<bool, ParseError> {
        let count = headers.len();
        // The string table ends with a NUL (checked in the walk, as every string table, and
        // `links` made sure the symbol table's is one): every name starting inside it ends inside
        // it, so a name's offset is all there is to check.
        let strings = headers
            .get(self.strings)
            .filter(|_| self.strings != 0)
            .map_or(0, |strings| strings.sh_size(LE));
        let mut defines_variables = false;
        for (index, symbol) in self.symbols.iter().enumerate() {
            let place = || format!("symbol {index}");
            if u64::from(symbol.st_name(LE)) >= strings {
                return Err(ParseError::new(
                    place(),
                    Problem::Damaged,
                    "its name lies outside the symbol string table",
                ));
            }
            let shndx = symbol.st_shndx(LE);
            // No compiler gives a cubin's symbols a reserved section index (absolute, common),
            // which nvJitLink read as an index.
            if shndx >= SHN_LORESERVE && purpose == Purpose::Link {
                return Err(ParseError::new(
                    place(),
                    Problem::Damaged,
                    format!("it lies in the reserved section index {shndx:#x}"),
                ));
            }
            if purpose == Purpose::Link && !linkable::symbol_type(symbol.st_type()) {
                return Err(ParseError::new(
                    place(),
                    Problem::Damaged,
                    format!(
                        "its type {} is none that compilers write in a cubin",
                        symbol.st_type()
                    ),
                ));
            }
            if shndx == SHN_UNDEF || shndx >= SHN_LORESERVE {
                continue;
            }
            let Some(section) = headers.get(usize::from(shndx)) else {
                return Err(ParseError::new(
                    place(),
                    Problem::Damaged,
                    format!("it lies in section {shndx} of {count}"),
                ));
            };
            if symbol.st_type() == STT_FUNC && section.sh_flags(LE) & u64::from(SHF_EXECINSTR) == 0
            {
                return Err(ParseError::new(
                    place(),
                    Problem::Damaged,
                    format!("it is a function in section {shndx}, which holds no code"),
                ));
            }
            // In a relocatable cubin, a variable of a section without bytes is placed by the
            // link: like an ELF common symbol, its value may be its alignment (a `__shared__`
            // array of 128 bytes in a section of 128 has the value 4), never above the
            // section's, and its size is never above the section's. No bytes are read there,
            // but nvJitLink places it: with that value's byte 3 flipped, it ran for minutes.
            let placed_by_link = relocatable && !holds_bytes(section.sh_type(LE), true);
            let (start, size) = (symbol.st_value(LE), symbol.st_size(LE));
            let section_size = section.sh_size(LE);
            let outside = if placed_by_link {
                size > section_size || start > section.sh_addralign(LE).max(section_size)
            } else {
                start.checked_add(size).is_none_or(|end| end > section_size)
            };
            if outside {
                return Err(ParseError::new(
                    place(),
                    Problem::Damaged,
                    format!(
                        "its {size} bytes at {start} run past the end of section {shndx} \
                         ({section_size} bytes)"
                    ),
                ));
            }
            // A device variable, as `cubin::is_variable` tells one.
            defines_variables = defines_variables
                || symbol.st_type() == STT_OBJECT
                    && variable_space(first_name(named(names, section))).is_some();
        }
        Ok(defines_variables)
    }
}
