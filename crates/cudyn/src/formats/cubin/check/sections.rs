//! The walk over a cubin's sections, each checked in one place as its header is read, then over
//! its symbols.

use std::mem::size_of;

use object::elf::{
    Rel64, Rela64, SectionHeader64, Sym64, ET_REL, SHF_EXECINSTR, SHF_INFO_LINK, SHT_DYNSYM,
    SHT_NOBITS, SHT_NOTE, SHT_NULL, SHT_PROGBITS, SHT_REL, SHT_RELA, SHT_STRTAB, SHT_SYMTAB,
};
use object::pod::slice_from_all_bytes;
use object::read::elf::{FileHeader, NoteIterator, Rel, Rela, SectionHeader};

use super::layout::{check_layout, InOrder, Owner};
use super::symbols::SymbolTable;
use super::{alignment_error, holds_bytes, linkable, misaligned, outside, sht, Header, LE};
use crate::formats::cubin::info::{first_damage, first_unreadable, is_sound};
use crate::formats::cubin::{elf_error, variable_space};
use crate::formats::object_problem;
use crate::formats::{Facts, Purpose};
use crate::parse_error::{ParseError, Problem};

/// How many times over the image's size the sections read may add up to.
const READ_BUDGET_FACTOR: usize = 4;

/// The names of the sections that compilers for sm_100 and later write as a second view of the
/// code and its tables for the driver (`.nv.merc.nv.constant.pic`, `.nv.merc.debug_str`, ...):
/// such a section may cover exactly the bytes of a data section ([`is_data_type`]: `.nv.constant4`,
/// `.debug_str`, `.nv.global.init`).
const MERC: &[u8] = b".nv.merc.";

type Section = SectionHeader64<LE>;

/// The section types of plain data: `SHT_PROGBITS`, and the types a relocatable cubin gives its
/// constant banks (`.nv.constant0` to `.nv.constant17`, from `SHT_CUDA_CONSTANT_B0`) and
/// initialized variables (`.nv.global.init`, `SHT_CUDA_GLOBAL_INIT`).
fn is_data_type(kind: u32) -> bool {
    kind == SHT_PROGBITS
        || kind == sht::CUDA_GLOBAL_INIT
        || sht::CUDA_CONSTANT_BANKS.contains(&kind)
}

/// Checks the section header table, every section and the symbol table; what the cubin's
/// variables are.
pub(super) fn check(header: &Header, data: &[u8], purpose: Purpose) -> Result<Facts, ParseError> {
    // `sections` finds the section-name table too, with the errors readers of the file know;
    // past it the table is read as the slice of headers it is.
    let sections = header
        .sections(LE, data)
        .map_err(elf_error("section header table"))?;
    let headers = sections.iter().as_slice();
    let Some(null) = headers.first() else {
        return Err(ParseError::new(
            "section header table",
            Problem::Missing,
            "it has no sections",
        ));
    };
    let symbols = SymbolTable::find(headers, data)?;
    if null.sh_type(LE) != SHT_NULL
        || null.sh_name(LE) != 0
        || null.sh_flags(LE) != 0
        || null.sh_addr(LE) != 0
        || null.sh_offset(LE) != 0
        || null.sh_size(LE) != 0
        || null.sh_link(LE) != 0
        || null.sh_info(LE) != 0
        || null.sh_addralign(LE) != 0
        || null.sh_entsize(LE) != 0
    {
        return Err(ParseError::new(
            "section header 0",
            Problem::Damaged,
            "it is not the all-zero null section",
        ));
    }
    let names = section_names(header, headers, data);
    let walk = Walk {
        headers,
        data,
        names,
        names_table: usize::from(header.e_shstrndx(LE)),
        symbol_count: symbols.symbols.len(),
        relocatable: header.e_type(LE) == ET_REL,
        purpose,
    };
    // The null section, all zero, has only its name to check: the table's first string.
    if names.is_empty() {
        return Err(unnamed(0));
    }
    // Section headers may all point at the same bytes; reading them over and over must not turn
    // a small image into minutes of checking.
    let mut budget = data.len().saturating_mul(READ_BUDGET_FACTOR);
    // Kept here rather than in the walk, which is only read: in registers across the sections.
    let mut layout = InOrder::new();
    let mut uninitialized_bytes: usize = 0;
    for (index, section) in headers.iter().enumerate().skip(1) {
        let read = walk
            .header(index, section, budget)
            .map_err(|flaw| walk.damage(index, section, flaw))?;
        // Within the budget, so within a `usize`.
        budget -= read as usize;
        let kind = section.sh_type(LE);
        if walk.has_bytes(kind) {
            layout.claim(
                section.sh_offset(LE),
                section.sh_size(LE),
                Owner::Section(index),
            );
        }
        let named = named(names, section);
        // The attribute lists, many, are read here; the tables and notes, few, out of line.
        if matches!(
            kind,
            SHT_SYMTAB | SHT_DYNSYM | SHT_REL | SHT_RELA | SHT_STRTAB | SHT_NOTE | SHT_NOBITS
        ) {
            let variables = walk.contents(index, section, named)?;
            uninitialized_bytes = uninitialized_bytes.saturating_add(variables);
        } else if is_attribute_list(named) {
            let contents = bytes(data, section.sh_offset(LE), section.sh_size(LE));
            walk.attributes(index, named, contents.unwrap_or_default())?;
        } else if matches!(kind, sht::CUDA_CALLGRAPH | sht::CUDA_PROTOTYPE)
            && purpose == Purpose::Link
        {
            let contents = bytes(data, section.sh_offset(LE), section.sh_size(LE));
            let strings = headers.get(symbols.strings).map_or(0, |s| s.sh_size(LE));
            linkable::cuda_table(kind, contents.unwrap_or_default(), symbols.symbols, strings)
                .map_err(|fault| fault.at(section_place(index, named)))?;
        }
    }
    let section = |owner: Owner| match owner {
        Owner::Section(index) => Some(&headers[index]),
        _ => None,
    };
    let is_merc = |owner: Owner| section(owner).is_some_and(|s| named(names, s).starts_with(MERC));
    let is_data = |owner: Owner| section(owner).is_some_and(|s| is_data_type(s.sh_type(LE)));
    // A second view of plain data (constants, debug information), never of a table the driver
    // follows indices through.
    let may_share = |one: Owner, other: Owner| {
        (is_merc(one) && !is_merc(other) && is_data(other))
            || (is_merc(other) && !is_merc(one) && is_data(one))
    };
    check_layout(
        header,
        headers,
        layout,
        |owner| match owner {
            Owner::ElfHeader => "the ELF header".into(),
            Owner::SectionHeaders => "the section header table".into(),
            Owner::ProgramHeaders => "the program header table".into(),
            Owner::Section(index) => section_place(index, named(names, &headers[index])),
        },
        may_share,
    )?;
    Ok(Facts {
        defines_variables: symbols.check(headers, names, walk.relocatable, purpose)?,
        uninitialized_bytes: Some(uninitialized_bytes),
    })
}

/// The section-name table (e_shstrndx) up to its last NUL, empty when it cannot be read: a name
/// resolves exactly when it starts in there, as `SectionTable::section_name` would find, without
/// looking for each name's end.
pub(super) fn section_names<'data>(
    header: &Header,
    headers: &[Section],
    data: &'data [u8],
) -> &'data [u8] {
    let table = headers
        .get(usize::from(header.e_shstrndx(LE)))
        .and_then(|table| table.data(LE, data).ok())
        .unwrap_or_default();
    let end = table
        .iter()
        .rposition(|&byte| byte == 0)
        .map_or(0, |last| last + 1);
    table.get(..end).unwrap_or_default()
}

/// The names in `names` from `section`'s on: its name and those after it, empty when its name
/// lies outside the table.
pub(super) fn named<'data>(names: &'data [u8], section: &Section) -> &'data [u8] {
    usize::try_from(section.sh_name(LE))
        .ok()
        .and_then(|start| names.get(start..))
        .unwrap_or_default()
}

/// The first of `named`: a section's name.
pub(super) fn first_name(named: &[u8]) -> &[u8] {
    named.split(|&byte| byte == 0).next().unwrap_or_default()
}

/// Names section `index` in errors, given the names from its on: `section 3 (.text.saxpy)`.
fn section_place(index: usize, named: &[u8]) -> String {
    format!(
        "section {index} ({})",
        String::from_utf8_lossy(first_name(named))
    )
}

/// The damage of section `index` whose name lies outside the section-name table.
fn unnamed(index: usize) -> ParseError {
    ParseError::new(
        format!("section header {index}"),
        Problem::Damaged,
        "its name lies outside the section-name string table (e_shstrndx)",
    )
}

/// `size` bytes at `offset` of `data`, as `SectionHeader::data` reads them: none at any offset
/// when there are none.
fn bytes(data: &[u8], offset: u64, size: u64) -> Option<&[u8]> {
    if size == 0 {
        return Some(&[]);
    }
    let end = usize::try_from(offset.checked_add(size)?).ok()?;
    // The start is below the end, so it fits in a `usize` too.
    data.get(usize::try_from(offset).ok()?..end)
}

/// What can be wrong with a section's header, in the order the walk checks it.
#[derive(Debug, Clone, Copy)]
enum Flaw {
    /// Its name lies outside the section-name table.
    Unnamed,
    /// Its bytes lie outside the image.
    Outside,
    /// Its offset lies past the image's end.
    OffsetPastEnd,
    /// It holds the section names but is not a string table.
    NamesNotStrings,
    /// It has an address.
    Address,
    /// Its alignment is not a power of two up to `MAX_ALIGN`.
    Alignment,
    /// Its offset is not aligned.
    Unaligned,
    /// Its `sh_link` names a missing section, or one of the wrong kind.
    Link,
    /// Its `sh_info` names a missing section or symbol.
    Info,
    /// Reading it would exceed the read budget.
    Budget,
    /// Its `sh_info` does not name the section its name says it describes.
    InfoTarget,
    /// It is not a section nvJitLink can be given, for the reason said.
    NotLinkable(&'static str),
}

/// What the walk over the sections reads.
struct Walk<'data> {
    headers: &'data [Section],
    data: &'data [u8],
    /// See [`section_names`].
    names: &'data [u8],
    /// The index of the section-name table (e_shstrndx).
    names_table: usize,
    /// How many entries the symbol table has.
    symbol_count: usize,
    /// Whether the cubin is relocatable (`ET_REL`), an input of a link.
    relocatable: bool,
    /// What the cubin is checked for.
    purpose: Purpose,
}

impl Walk<'_> {
    /// Whether sections of type `kind` hold bytes of the file.
    #[inline(always)]
    fn has_bytes(&self, kind: u32) -> bool {
        holds_bytes(kind, self.relocatable)
    }

    /// The first problem of the header of section `index` (not the null section), `section`,
    /// with `budget` bytes left to read; how many of its bytes the walk reads when it has none.
    /// A failed check returns at once: branches never taken cost less than computing every
    /// answer, and the message is made only then, out of line (see [`Walk::damage`]).
    #[inline(always)]
    fn header(&self, index: usize, section: &Section, budget: usize) -> Result<u64, Flaw> {
        if named(self.names, section).is_empty() {
            return Err(Flaw::Unnamed);
        }
        let kind = section.sh_type(LE);
        let (offset, size) = (section.sh_offset(LE), section.sh_size(LE));
        let len = self.data.len() as u64;
        let has_bytes = self.has_bytes(kind);
        // As `bytes` finds them: none at any offset when there are none.
        let read = if has_bytes && size != 0 {
            match offset.checked_add(size) {
                Some(end) if end <= len => size,
                _ => return Err(Flaw::Outside),
            }
        } else {
            0
        };
        if offset > len {
            // Even an empty section's offset is read by the driver.
            return Err(Flaw::OffsetPastEnd);
        }
        if index == self.names_table && kind != SHT_STRTAB {
            return Err(Flaw::NamesNotStrings);
        }
        if self.purpose == Purpose::Link {
            let name = first_name(named(self.names, section));
            if let Some(reason) = linkable::refusal(name, kind) {
                return Err(Flaw::NotLinkable(reason));
            }
            if !linkable::info_agrees(name, section.sh_info(LE), |index| self.section_name(index)) {
                return Err(Flaw::InfoTarget);
            }
        }
        if section.sh_addr(LE) != 0 {
            return Err(Flaw::Address);
        }
        let align = section.sh_addralign(LE);
        // nvJitLink divides by the alignment (a 0 raised SIGFPE); no compiler writes 0.
        if misaligned(align) || (align == 0 && self.purpose == Purpose::Link) {
            return Err(Flaw::Alignment);
        }
        // A power of two by now: a mask rather than a division.
        if has_bytes && offset & (align.max(1) - 1) != 0 {
            return Err(Flaw::Unaligned);
        }
        self.links(section, kind)?;
        if read > budget as u64 {
            return Err(Flaw::Budget);
        }
        Ok(read)
    }

    /// The name of section `index`, `None` for the null section and those that do not exist.
    fn section_name(&self, index: u32) -> Option<&[u8]> {
        let section = self.headers.get(usize::try_from(index).ok()?)?;
        (index != 0).then(|| first_name(named(self.names, section)))
    }

    /// Whether the sections `sh_link` and `sh_info` name exist and are of the kind the field's
    /// meaning needs: a symbol table links to a string table, a relocation table and the
    /// `.nv.info` lists to the symbol table; an `SHF_INFO_LINK` section's `sh_info` is another
    /// section, and a code section's holds its function's symbol index in its low 24 bits (the
    /// register count above).
    #[inline(always)]
    fn links(&self, section: &Section, kind: u32) -> Result<(), Flaw> {
        let count = self.headers.len();
        let exists = |index: u32| usize::try_from(index).is_ok_and(|index| index < count);
        let kind_of = |index: u32| {
            usize::try_from(index)
                .ok()
                .filter(|&index| index != 0)
                .and_then(|index| self.headers.get(index))
                .map(|section| section.sh_type(LE))
        };
        let link = section.sh_link(LE);
        let link_ok = match kind {
            SHT_SYMTAB | SHT_DYNSYM => kind_of(link) == Some(SHT_STRTAB),
            SHT_REL | SHT_RELA => kind_of(link) == Some(SHT_SYMTAB),
            _ => link == 0 || exists(link),
        };
        if !link_ok {
            return Err(Flaw::Link);
        }
        let info = section.sh_info(LE);
        let flags = section.sh_flags(LE);
        let info_ok = if flags & u64::from(SHF_INFO_LINK) != 0 {
            info != 0 && exists(info)
        } else if flags & u64::from(SHF_EXECINSTR) != 0 {
            usize::try_from(info & 0x00ff_ffff).is_ok_and(|symbol| symbol < self.symbol_count)
        } else {
            // Symbol and relocation tables' sh_info is checked with their entries. Elsewhere it
            // is 0 or, in the sections sm_100 and later add, a section or symbol index: never more
            // than both counts (the driver crashed on `.nv.info` and `.nv.constant3` with 32768
            // there).
            matches!(kind, SHT_SYMTAB | SHT_DYNSYM | SHT_REL | SHT_RELA)
                || usize::try_from(info).is_ok_and(|info| info < count.max(self.symbol_count))
        };
        if !info_ok {
            return Err(Flaw::Info);
        }
        Ok(())
    }

    /// The damage of section `index`, whose header has `flaw`.
    #[cold]
    #[inline(never)]
    fn damage(&self, index: usize, section: &Section, flaw: Flaw) -> ParseError {
        let place = section_place(index, named(self.names, section));
        let (offset, size) = (section.sh_offset(LE), section.sh_size(LE));
        let damaged = |message: String| ParseError::new(place.clone(), Problem::Damaged, message);
        match flaw {
            Flaw::Unnamed => unnamed(index),
            Flaw::Outside => outside(place, offset, size, self.data.len()),
            Flaw::OffsetPastEnd => outside(place, offset, 0, self.data.len()),
            Flaw::NamesNotStrings => {
                damaged("it holds the section names (e_shstrndx) but is not a string table".into())
            }
            Flaw::Address => damaged("it has an address; a cubin's sections have none".into()),
            Flaw::Alignment => alignment_error(place, section.sh_addralign(LE)),
            Flaw::Unaligned => damaged(format!(
                "its offset {offset} is not {}-byte aligned",
                section.sh_addralign(LE)
            )),
            Flaw::Link => damaged(format!(
                "its sh_link names section {}, which is missing or of the wrong kind",
                section.sh_link(LE)
            )),
            Flaw::Info => damaged(format!(
                "its sh_info ({:#x}) names no section or symbol that exists",
                section.sh_info(LE)
            )),
            Flaw::InfoTarget => damaged(format!(
                "its sh_info ({}) does not name the section its name says it describes",
                section.sh_info(LE)
            )),
            Flaw::Budget => damaged("the sections overlap each other many times over".into()),
            Flaw::NotLinkable(reason) => {
                damaged(format!("{reason} (type {:#x})", section.sh_type(LE)))
            }
        }
    }

    /// Checks what section `index`, whose header passed, holds: the entries of a symbol or
    /// relocation table, the end of a string table, notes, an attribute list; the device memory
    /// of the variables of an `SHT_NOBITS` section.
    #[inline(never)]
    fn contents(&self, index: usize, section: &Section, named: &[u8]) -> Result<usize, ParseError> {
        let place = || section_place(index, named);
        let kind = section.sh_type(LE);
        let size = section.sh_size(LE);
        let contents = if !self.has_bytes(kind) {
            &[][..]
        } else {
            bytes(self.data, section.sh_offset(LE), size).unwrap_or_default()
        };
        match kind {
            SHT_SYMTAB | SHT_DYNSYM => {
                check_table(section, size_of::<Sym64<LE>>(), place)?;
                // A symbol table's sh_info is the index of its first global symbol.
                let first_global = section.sh_info(LE);
                if u64::from(first_global) > size / size_of::<Sym64<LE>>() as u64 {
                    return Err(ParseError::new(
                        place(),
                        Problem::Damaged,
                        format!("its first global symbol, {first_global}, is past its end"),
                    ));
                }
            }
            SHT_REL => {
                check_table(section, size_of::<Rel64<LE>>(), place)?;
                let entries = slice_from_all_bytes::<Rel64<LE>>(contents).unwrap_or_default();
                let entries = entries
                    .iter()
                    .map(|rel| (rel.r_offset(LE), rel.r_sym(LE), rel.r_type(LE)));
                self.relocations(section, entries, place)?;
            }
            SHT_RELA => {
                check_table(section, size_of::<Rela64<LE>>(), place)?;
                let entries = slice_from_all_bytes::<Rela64<LE>>(contents).unwrap_or_default();
                let entries = entries.iter().map(|rela| {
                    let (symbol, kind) = (rela.r_sym(LE, false), rela.r_type(LE, false));
                    (rela.r_offset(LE), symbol, kind)
                });
                self.relocations(section, entries, place)?;
            }
            SHT_STRTAB if contents.last().is_some_and(|&last| last != 0) => {
                return Err(ParseError::new(
                    place(),
                    Problem::Damaged,
                    "its last string is not NUL-terminated",
                ));
            }
            SHT_NOTE => notes(section, contents, place)?,
            SHT_NOBITS if variable_space(first_name(named)).is_some() => {
                return Ok(usize::try_from(size).unwrap_or(usize::MAX));
            }
            _ => {}
        }
        if is_attribute_list(named) {
            self.attributes(index, named, contents)?;
        }
        Ok(0)
    }

    /// Checks that the attribute list section `index` holds, `contents`, reads to its end, and
    /// that in a `.nv.info` list each attribute that the driver's loader and nvJitLink read at
    /// fixed places holds the bytes they read and names symbols that exist: both read the symbol
    /// table at those indices unchecked (the driver of CUDA 13.0 died of SIGSEGV loading a cubin
    /// whose register count named symbol 151 of 30). `.nv.compat` numbers its attributes
    /// otherwise, and names no symbol.
    #[inline(always)]
    fn attributes(&self, index: usize, named: &[u8], contents: &[u8]) -> Result<(), ParseError> {
        let nv_info = named.first_chunk() == Some(b".nv.info");
        if is_sound(contents, nv_info.then_some(self.symbol_count)) {
            return Ok(());
        }
        if let Some(offset) = first_damage(contents) {
            return Err(ParseError::new(
                section_place(index, named),
                Problem::Damaged,
                format!("its attribute at byte {offset} is damaged or runs past its end"),
            ));
        }
        if !nv_info {
            return Ok(());
        }
        if let Some((attribute, problem)) = first_unreadable(contents, self.symbol_count) {
            return Err(ParseError::new(
                section_place(index, named),
                Problem::Damaged,
                format!("its attribute {} {problem}", attribute.describe()),
            ));
        }
        Ok(())
    }

    /// Every relocation of `section`, each an offset and a symbol index, names an existing
    /// symbol and a place inside the section it applies to.
    /// For a link, also that each relocation's type is one byte: compilers' types go up to 115,
    /// and nvJitLink indexed a table with larger ones unchecked.
    fn relocations(
        &self,
        section: &Section,
        entries: impl Iterator<Item = (u64, u32, u32)>,
        place: impl Fn() -> String,
    ) -> Result<(), ParseError> {
        let target = section.sh_info(LE);
        let Some(target) = usize::try_from(target)
            .ok()
            .filter(|&index| index != 0)
            .and_then(|index| self.headers.get(index))
        else {
            return Err(ParseError::new(
                place(),
                Problem::Damaged,
                format!("it applies to section {target}, which does not exist"),
            ));
        };
        let target_size = target.sh_size(LE);
        for (index, (offset, symbol, kind)) in entries.enumerate() {
            if self.purpose == Purpose::Link && kind > u32::from(u8::MAX) {
                return Err(ParseError::new(
                    format!("{}, relocation {index}", place()),
                    Problem::Damaged,
                    format!("its type {kind} is none a compiler writes (they are below 256)"),
                ));
            }
            if usize::try_from(symbol).map_or(true, |symbol| symbol >= self.symbol_count.max(1)) {
                return Err(ParseError::new(
                    format!("{}, relocation {index}", place()),
                    Problem::Damaged,
                    format!("it names symbol {symbol} of {}", self.symbol_count),
                ));
            }
            if offset >= target_size {
                return Err(ParseError::new(
                    format!("{}, relocation {index}", place()),
                    Problem::Damaged,
                    format!("it patches byte {offset} of a section of {target_size} bytes"),
                ));
            }
        }
        Ok(())
    }
}

/// Whether the section whose name starts `named` holds an attribute list: `.nv.info` and
/// `.nv.info.<kernel>`, `.nv.compat`.
pub(super) fn is_attribute_list(named: &[u8]) -> bool {
    // Fixed-size arrays compare as a word or two, where a slice comparison calls `memcmp`; the
    // NUL after `.nv.compat` is part of what it is compared with.
    named.first_chunk() == Some(b".nv.info") || named.first_chunk() == Some(b".nv.compat\0")
}

/// A table section's entry size must be the standard one and divide its size.
fn check_table(
    section: &Section,
    expected: usize,
    place: impl FnOnce() -> String,
) -> Result<(), ParseError> {
    let entry_size = section.sh_entsize(LE);
    if entry_size != expected as u64 || !section.sh_size(LE).is_multiple_of(expected as u64) {
        return Err(ParseError::new(
            place(),
            Problem::Damaged,
            format!(
                "its entries are {entry_size} bytes and it holds {} bytes; a table of this type \
                 has entries of {expected} bytes",
                section.sh_size(LE)
            ),
        ));
    }
    Ok(())
}

/// The notes of a note section, `contents`, read to their end.
fn notes(section: &Section, contents: &[u8], place: impl Fn() -> String) -> Result<(), ParseError> {
    let error = |error: object::read::Error| {
        let message = error.to_string();
        ParseError::new(place(), object_problem(&message), message)
    };
    let mut notes =
        NoteIterator::<Header>::new(LE, section.sh_addralign(LE), contents).map_err(error)?;
    while notes.next().map_err(error)?.is_some() {}
    Ok(())
}
