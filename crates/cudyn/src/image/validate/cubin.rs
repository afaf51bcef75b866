//! Cubins: a 64-bit little-endian CUDA ELF executable whose program and section header tables,
//! segments and sections (all but `SHT_NOBITS` ones) lie inside the bytes given; whose section
//! names, symbol names, section links and symbol section indices all resolve; whose string
//! tables end with a NUL; whose loadable segments fit in the memory they ask for; whose symbol
//! and relocation tables have their standard entry sizes,
//! with every relocation naming a symbol that exists and a place inside its section; whose
//! defined symbols lie inside their sections; whose notes read to their end; and whose
//! `.nv.info` and `.nv.compat` attribute lists read to their end. A relocatable cubin (`ET_REL`)
//! must be linked first.

use std::mem::size_of;

use object::elf::{
    FileHeader64, Rel64, Rela64, SectionHeader64, Sym64, ET_EXEC, ET_REL, PT_LOAD, SHN_LORESERVE,
    SHN_UNDEF, SHT_DYNSYM, SHT_NOBITS, SHT_REL, SHT_RELA, SHT_STRTAB, SHT_SYMTAB,
};
use object::read::elf::{FileHeader, ProgramHeader, Rel, Rela, SectionHeader, Sym};
use object::LittleEndian as LE;

use super::Refusal;
use crate::inspect::cubin::{elf_error, header};
use crate::inspect::info::Attributes;
use crate::inspect::ParseError;

type Header = FileHeader64<LE>;

/// How many times over the image's size the sections read may add up to.
const READ_BUDGET_FACTOR: usize = 4;

pub(super) fn validate(data: &[u8]) -> Result<(), Refusal> {
    let header = header(data)?;
    match header.e_type(LE) {
        ET_EXEC => {}
        ET_REL => {
            return Err(Refusal::NeedsLinking(
                "it is a relocatable cubin (ELF type ET_REL), as NVRTC and nvcc write with -rdc \
                 (relocatable device code)"
                    .into(),
            ))
        }
        other => {
            return Err(ParseError::new(
                "ELF header",
                format!("ELF type {other} is not an executable cubin (ET_EXEC, 2)"),
            )
            .into())
        }
    }
    let header_size = header.e_ehsize(LE);
    if usize::from(header_size) != size_of::<Header>() {
        return Err(ParseError::new(
            "ELF header",
            format!("its size field says {header_size} bytes, not 64"),
        )
        .into());
    }
    segments(header, data)?;
    sections(header, data)?;
    Ok(())
}

fn outside(place: String, offset: u64, size: u64, len: usize) -> ParseError {
    ParseError::new(
        place,
        format!("its {size} bytes at offset {offset} lie outside the {len} bytes given"),
    )
}

fn segments(header: &Header, data: &[u8]) -> Result<(), ParseError> {
    let segments = header
        .program_headers(LE, data)
        .map_err(elf_error("program header table"))?;
    for (index, segment) in segments.iter().enumerate() {
        let (file_size, memory_size) = (segment.p_filesz(LE), segment.p_memsz(LE));
        // The loader copies the file bytes into the memory the segment asks for.
        if segment.p_type(LE) == PT_LOAD && file_size > memory_size {
            return Err(ParseError::new(
                format!("program header {index}"),
                format!("it loads {file_size} bytes into {memory_size}"),
            ));
        }
        if segment.data(LE, data).is_err() {
            return Err(outside(
                format!("program header {index}"),
                segment.p_offset(LE),
                segment.p_filesz(LE),
                data.len(),
            ));
        }
    }
    Ok(())
}

fn sections(header: &Header, data: &[u8]) -> Result<(), ParseError> {
    let sections = header
        .sections(LE, data)
        .map_err(elf_error("section header table"))?;
    let count = sections.len();
    if count == 0 {
        return Err(ParseError::new(
            "section header table",
            "it has no sections",
        ));
    }
    let symbols = sections
        .symbols(LE, data, SHT_SYMTAB)
        .map_err(elf_error("symbol table"))?;
    // Section headers may all point at the same bytes; reading them over and over must not turn
    // a small image into minutes of checking.
    let mut budget = data.len().saturating_mul(READ_BUDGET_FACTOR);
    for (index, section) in sections.iter().enumerate() {
        let name = sections.section_name(LE, section).map_err(|_| {
            ParseError::new(
                format!("section header {index}"),
                "its name lies outside the section-name string table (e_shstrndx)",
            )
        })?;
        let place = format!("section {index} ({})", String::from_utf8_lossy(name));
        let kind = section.sh_type(LE);
        if kind != SHT_NOBITS && section.data(LE, data).is_err() {
            return Err(outside(
                place,
                section.sh_offset(LE),
                section.sh_size(LE),
                data.len(),
            ));
        }
        let link = section.sh_link(LE);
        if usize::try_from(link).map_or(true, |link| link >= count) {
            return Err(ParseError::new(
                place,
                format!("it links to section {link} of {count}"),
            ));
        }
        let entry_size = match kind {
            SHT_SYMTAB | SHT_DYNSYM => Some(size_of::<Sym64<LE>>()),
            SHT_REL => Some(size_of::<Rel64<LE>>()),
            SHT_RELA => Some(size_of::<Rela64<LE>>()),
            _ => None,
        };
        if let Some(expected) = entry_size {
            check_table(section, expected, &place)?;
        }
        // A symbol table's sh_info is the index of its first global symbol.
        if matches!(kind, SHT_SYMTAB | SHT_DYNSYM)
            && u64::from(section.sh_info(LE)) > section.sh_size(LE) / size_of::<Sym64<LE>>() as u64
        {
            return Err(ParseError::new(
                place,
                format!(
                    "its first global symbol, {}, is past its end",
                    section.sh_info(LE)
                ),
            ));
        }
        if matches!(kind, SHT_REL | SHT_RELA) {
            relocations(&sections, section, data, symbols.len(), &place)?;
        }
        let contents = section.data(LE, data).unwrap_or_default();
        budget = budget.checked_sub(contents.len()).ok_or_else(|| {
            ParseError::new(
                place.clone(),
                "the sections overlap each other many times over",
            )
        })?;
        if kind == SHT_STRTAB && contents.last().is_some_and(|&last| last != 0) {
            return Err(ParseError::new(
                place,
                "its last string is not NUL-terminated",
            ));
        }
        let mut notes = section
            .notes(LE, data)
            .map_err(|error| ParseError::new(place.clone(), error.to_string()))?;
        while let Some(notes) = notes.as_mut() {
            match notes.next() {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(error) => return Err(ParseError::new(place, error.to_string())),
            }
        }
        if name.starts_with(b".nv.info") || name == b".nv.compat" {
            let mut attributes = Attributes::new(contents);
            attributes.by_ref().for_each(drop);
            if let Some(offset) = attributes.damaged_at {
                return Err(ParseError::new(
                    place,
                    format!("its attribute at byte {offset} is damaged or runs past its end"),
                ));
            }
        }
    }
    for (index, symbol) in symbols.symbols().iter().enumerate() {
        let place = || format!("symbol {index}");
        if symbols.symbol_name(LE, symbol).is_err() {
            return Err(ParseError::new(
                place(),
                "its name lies outside the symbol string table",
            ));
        }
        let shndx = symbol.st_shndx(LE);
        if shndx == SHN_UNDEF || shndx >= SHN_LORESERVE {
            continue;
        }
        let Ok(section) = sections.section(object::SectionIndex(shndx.into())) else {
            return Err(ParseError::new(
                place(),
                format!("it lies in section {shndx} of {count}"),
            ));
        };
        let (start, size) = (symbol.st_value(LE), symbol.st_size(LE));
        if start
            .checked_add(size)
            .map_or(true, |end| end > section.sh_size(LE))
        {
            return Err(ParseError::new(
                place(),
                format!(
                    "its {size} bytes at {start} run past the end of section {shndx} ({} bytes)",
                    section.sh_size(LE)
                ),
            ));
        }
    }
    Ok(())
}

/// A table section's entry size must be the standard one and divide its size.
fn check_table(
    section: &SectionHeader64<LE>,
    expected: usize,
    place: &str,
) -> Result<(), ParseError> {
    let entry_size = section.sh_entsize(LE);
    if entry_size != expected as u64 || section.sh_size(LE) % expected as u64 != 0 {
        return Err(ParseError::new(
            place,
            format!(
                "its entries are {entry_size} bytes and it holds {} bytes; a table of this type \
                 has entries of {expected} bytes",
                section.sh_size(LE)
            ),
        ));
    }
    Ok(())
}

/// Every relocation names an existing symbol and a place inside the section it applies to.
fn relocations(
    sections: &object::read::elf::SectionTable<'_, Header>,
    section: &SectionHeader64<LE>,
    data: &[u8],
    symbol_count: usize,
    place: &str,
) -> Result<(), ParseError> {
    let target = usize::try_from(section.sh_info(LE))
        .ok()
        .and_then(|index| sections.section(object::SectionIndex(index)).ok())
        .ok_or_else(|| {
            ParseError::new(
                place,
                format!(
                    "it applies to section {}, which does not exist",
                    section.sh_info(LE)
                ),
            )
        })?;
    let target_size = target.sh_size(LE);
    let entries: Vec<(u64, u32)> = match section.rel(LE, data).ok().flatten() {
        Some((rel, _)) => rel.iter().map(|r| (r.r_offset(LE), r.r_sym(LE))).collect(),
        None => section
            .rela(LE, data)
            .ok()
            .flatten()
            .map(|(rela, _)| {
                rela.iter()
                    .map(|r| (r.r_offset(LE), r.r_sym(LE, false)))
                    .collect()
            })
            .unwrap_or_default(),
    };
    for (index, (offset, symbol)) in entries.into_iter().enumerate() {
        if usize::try_from(symbol).map_or(true, |symbol| symbol >= symbol_count.max(1)) {
            return Err(ParseError::new(
                format!("{place}, relocation {index}"),
                format!("it names symbol {symbol} of {symbol_count}"),
            ));
        }
        if offset >= target_size {
            return Err(ParseError::new(
                format!("{place}, relocation {index}"),
                format!("it patches byte {offset} of a section of {target_size} bytes"),
            ));
        }
    }
    Ok(())
}
