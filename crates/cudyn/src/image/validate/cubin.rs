//! Cubins: a 64-bit little-endian CUDA ELF executable whose program and section header tables,
//! segments and sections (all but `SHT_NOBITS` ones) lie inside the bytes given; whose section
//! names, symbol names, section links and symbol section indices all resolve; whose string
//! tables end with a NUL; whose loadable segments fit in the memory they ask for; whose symbol
//! and relocation tables have their standard entry sizes,
//! with every relocation naming a symbol that exists and a place inside its section; whose
//! defined symbols lie inside their sections; whose notes read to their end; and whose
//! `.nv.info` and `.nv.compat` attribute lists read to their end. A relocatable cubin (`ET_REL`)
//! must be linked first.
//!
//! Beyond lying inside the bytes, an image must have the shape every compiler's cubin has (NVRTC,
//! nvcc, ptxas, nvJitLink): the ELF header's fixed fields hold their only values, section 0 is
//! the null section, sections have no address and do not overlap each other or the header
//! tables, section indices in `sh_link` and `sh_info` point where their kind says, and segments
//! have no address and cover their program header table. The driver reads these fields as
//! indices and offsets without checking them: a cubin with one of them damaged has crashed the
//! driver's loader, so cudyn refuses what no compiler writes rather than guess which damage the
//! driver survives.

use std::mem::size_of;

use object::elf::{
    FileHeader64, ProgramHeader64, Rel64, Rela64, SectionHeader64, Sym64, ET_EXEC, ET_REL,
    EV_CURRENT, PN_XNUM, PT_LOAD, PT_PHDR, SHF_EXECINSTR, SHF_INFO_LINK, SHN_LORESERVE, SHN_UNDEF,
    SHT_DYNSYM, SHT_NOBITS, SHT_NOTE, SHT_NULL, SHT_REL, SHT_RELA, SHT_STRTAB, SHT_SYMTAB,
    STT_FUNC,
};
use object::read::elf::{FileHeader, ProgramHeader, Rel, Rela, SectionHeader, Sym};
use object::LittleEndian as LE;

use super::{Facts, Refusal};
use crate::inspect::cubin::{self as inspect_cubin, elf_error, header};
use crate::inspect::info::first_damage;
use crate::inspect::ParseError;

type Header = FileHeader64<LE>;

/// How many times over the image's size the sections read may add up to.
const READ_BUDGET_FACTOR: usize = 4;

/// The bits of `e_flags`' low byte that compilers set in cubins of ELF ABI 8 and later, where the
/// architecture moved to the bytes above (CUDA 13.0's ptxas: 0x04 for sm_75 to sm_90a, 0x02 for
/// sm_100 to sm_121). The H200's driver crashed on a cubin with bit 0 set, so the other bits are
/// refused until a compiler is seen to set them.
const KNOWN_LOW_FLAGS: u32 = 0x0e;

/// The largest section or segment alignment accepted; compilers use at most 128.
const MAX_ALIGN: u64 = 4096;

/// Whether `data` is an executable cubin, from its ELF header alone: all that output of NVRTC or
/// nvJitLink needs checked before a load (see `validate::compiler_output`); and whether it
/// defines variables, from its symbol table (a table that cannot be read counts as defining
/// some).
pub(super) fn compiler_output(data: &[u8]) -> Result<Facts, Refusal> {
    executable_header(data)?;
    Ok(
        inspect_cubin::variables(data).map_or(Facts::UNKNOWN, |variables| Facts {
            defines_variables: variables.defined,
            uninitialized_bytes: Some(variables.uninitialized_bytes),
        }),
    )
}

/// The ELF header of an executable cubin; a relocatable one needs linking first.
fn executable_header(data: &[u8]) -> Result<&Header, Refusal> {
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
    Ok(header)
}

pub(super) fn validate(data: &[u8]) -> Result<Facts, Refusal> {
    let header = executable_header(data)?;
    let header_size = header.e_ehsize(LE);
    if usize::from(header_size) != size_of::<Header>() {
        return Err(ParseError::new(
            "ELF header",
            format!("its size field says {header_size} bytes, not 64"),
        )
        .into());
    }
    fixed_fields(header)?;
    segments(header, data)?;
    Ok(sections(header, data)?)
}

/// The ELF header fields that have one value in every cubin.
fn fixed_fields(header: &Header) -> Result<(), ParseError> {
    let ident = header.e_ident();
    let problem = if ident.version != EV_CURRENT || header.e_version(LE) != u32::from(EV_CURRENT) {
        Some("its ELF version is not 1".to_string())
    } else if ident.padding.iter().any(|&byte| byte != 0) {
        Some("the padding of its identification bytes is not zero".into())
    } else if header.e_entry(LE) != 0 {
        Some(format!(
            "it has an entry address ({:#x}); cubins have none",
            header.e_entry(LE)
        ))
    } else if header.e_phnum(LE) != 0
        && usize::from(header.e_phentsize(LE)) != size_of::<ProgramHeader64<LE>>()
    {
        Some(format!(
            "its program headers are {} bytes, not 56",
            header.e_phentsize(LE)
        ))
    } else if usize::from(header.e_shentsize(LE)) != size_of::<SectionHeader64<LE>>() {
        Some(format!(
            "its section headers are {} bytes, not 64",
            header.e_shentsize(LE)
        ))
    } else if ident.abi_version >= 8 && header.e_flags(LE) & 0xff & !KNOWN_LOW_FLAGS != 0 {
        Some(format!(
            "its flags {:#x} set bits no compiler sets",
            header.e_flags(LE)
        ))
    } else if header.e_phnum(LE) == PN_XNUM
        || header.e_shnum(LE) == 0
        || header.e_shstrndx(LE) >= SHN_LORESERVE
    {
        // Extended numbering keeps the real counts in section 0, which no compiler needs for a
        // cubin; the driver takes the header's fields as they are.
        Some("it uses extended section or segment numbering, which no cubin needs".into())
    } else {
        None
    };
    problem.map_or(Ok(()), |problem| {
        Err(ParseError::new("ELF header", problem))
    })
}

/// `align` is a power of two (or 0) no larger than [`MAX_ALIGN`].
fn check_align(align: u64, place: impl FnOnce() -> String) -> Result<(), ParseError> {
    // Not `is_power_of_two`: without the popcnt instruction it counts bits, for every section.
    if align > 1 && (align & (align - 1) != 0 || align > MAX_ALIGN) {
        return Err(ParseError::new(
            place(),
            format!("its alignment {align} is not a power of two up to {MAX_ALIGN}"),
        ));
    }
    Ok(())
}

/// A structure of the file that owns a byte range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Owner {
    ElfHeader,
    SectionHeaders,
    ProgramHeaders,
    Section(usize),
}

/// Bytes of the file a structure owns: where they start and end.
type Claim = (u64, u64, Owner);

/// `size` bytes at `offset` claimed for `owner`; nothing when there are none.
fn claim(offset: u64, size: u64, owner: Owner) -> Option<Claim> {
    (size > 0).then(|| (offset, offset.saturating_add(size), owner))
}

/// The byte ranges of the file that belong to one structure each: the headers, then sections.
/// Claims are gathered first and compared once sorted, so that a cubin of thousands of sections
/// costs no more than sorting them.
#[derive(Default)]
struct Ranges(Vec<Claim>);

impl Ranges {
    /// Claims `size` bytes at `offset` for `owner`.
    fn claim(&mut self, offset: u64, size: u64, owner: Owner) {
        self.0.extend(claim(offset, size, owner));
    }

    /// Damage when two claims overlap (see [`Sweep::check`]).
    fn check(mut self, name: impl Fn(Owner) -> String) -> Result<(), ParseError> {
        if !self.0.is_sorted() {
            self.0.sort_unstable();
        }
        let mut sweep = Sweep::default();
        for &claim in &self.0 {
            sweep.add(claim);
        }
        sweep.check(name)
    }
}

/// Claims compared in the order of their offsets.
struct Sweep {
    /// The claim that reaches furthest so far.
    furthest: Claim,
    /// The first claim found overlapping an earlier one, and that one.
    overlap: Option<(Claim, Claim)>,
}

impl Default for Sweep {
    fn default() -> Self {
        Sweep {
            // Before any claim (which has bytes), reaching nowhere.
            furthest: (0, 0, Owner::ElfHeader),
            overlap: None,
        }
    }
}

impl Sweep {
    /// Compares `claim`, which starts no earlier than those before it, with them.
    fn add(&mut self, claim: Claim) {
        if claim.0 < self.furthest.1 && self.overlap.is_none() {
            self.overlap = Some((claim, self.furthest));
        }
        if claim.1 > self.furthest.1 {
            self.furthest = claim;
        }
    }

    /// Damage when two claims overlap: the later owner's bytes, overlapping the earlier one
    /// (headers first, then sections in order), each named by `name`.
    fn check(self, name: impl Fn(Owner) -> String) -> Result<(), ParseError> {
        let Some((claim, reaching)) = self.overlap else {
            return Ok(());
        };
        let (first, second) = if reaching.2 < claim.2 {
            (reaching, claim)
        } else {
            (claim, reaching)
        };
        Err(ParseError::new(
            name(second.2),
            format!(
                "its bytes {}..{} overlap {}",
                second.0,
                second.1,
                name(first.2)
            ),
        ))
    }
}

/// Hands `claim` what the file's structures claim of its bytes, `size` bytes at `offset` each,
/// in the order compilers lay a cubin out: the header, the sections, then the tables of section
/// and program headers. (The walk over the sections in [`sections`] claims in this order too.)
fn layout(header: &Header, sections: &Sections<'_>, mut claim: impl FnMut(u64, u64, Owner)) {
    claim(0, size_of::<Header>() as u64, Owner::ElfHeader);
    for (index, section) in sections.iter().enumerate().skip(1) {
        if section.sh_type(LE) != SHT_NOBITS {
            claim(
                section.sh_offset(LE),
                section.sh_size(LE),
                Owner::Section(index),
            );
        }
    }
    header_tables(header, sections, claim);
}

/// Hands `claim` the bytes of the tables of section and program headers, the last of a layout.
fn header_tables(header: &Header, sections: &Sections<'_>, mut claim: impl FnMut(u64, u64, Owner)) {
    claim(
        header.e_shoff(LE),
        sections.len() as u64 * size_of::<SectionHeader64<LE>>() as u64,
        Owner::SectionHeaders,
    );
    claim(
        header.e_phoff(LE),
        u64::from(header.e_phnum(LE)) * size_of::<ProgramHeader64<LE>>() as u64,
        Owner::ProgramHeaders,
    );
}

/// The claims of a layout compared as they come, which is enough when they come in the order of
/// their offsets, as compilers lay cubins out: then no claim is gathered nor sorted. Fed in the
/// order of [`layout`] by the walk over the sections, which reads each section's place anyway.
struct InOrder {
    sweep: Sweep,
    previous_start: Option<u64>,
    in_order: bool,
}

impl InOrder {
    /// Nothing compared yet: the ELF header's claim comes first.
    fn new() -> InOrder {
        let mut layout = InOrder {
            sweep: Sweep::default(),
            previous_start: None,
            in_order: true,
        };
        layout.claim(0, size_of::<Header>() as u64, Owner::ElfHeader);
        layout
    }

    /// Compares `size` bytes at `offset`, claimed for `owner`, with the claims before.
    fn claim(&mut self, offset: u64, size: u64, owner: Owner) {
        if let Some(claim) = claim(offset, size, owner) {
            // Starts that only increase are in the order sorting would put the claims in.
            self.in_order &= self.previous_start.replace(offset) < Some(offset);
            self.sweep.add(claim);
        }
    }
}

/// Damage when two of the file's structures overlap (see [`Sweep::check`]), given the claims of
/// the sections compared as they came: those of the header tables are added, and when the
/// claims did not all come in the order of their offsets, the layout is gathered into [`Ranges`]
/// and sorted instead.
fn check_layout(
    header: &Header,
    sections: &Sections<'_>,
    mut compared: InOrder,
    name: impl Fn(Owner) -> String,
) -> Result<(), ParseError> {
    header_tables(header, sections, |offset, size, owner| {
        compared.claim(offset, size, owner)
    });
    if compared.in_order {
        return compared.sweep.check(name);
    }
    let mut ranges = Ranges::default();
    layout(header, sections, |offset, size, owner| {
        ranges.claim(offset, size, owner)
    });
    ranges.check(name)
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
        let place = || format!("program header {index}");
        if segment.p_vaddr(LE) != 0 || segment.p_paddr(LE) != 0 {
            return Err(ParseError::new(
                place(),
                "it has an address; a cubin's segments have none",
            ));
        }
        check_align(segment.p_align(LE), place)?;
        if segment.p_type(LE) == PT_PHDR
            && (segment.p_offset(LE) != header.e_phoff(LE)
                || segment.p_filesz(LE)
                    != u64::from(header.e_phnum(LE)) * size_of::<ProgramHeader64<LE>>() as u64)
        {
            return Err(ParseError::new(
                place(),
                "it does not cover the program header table it describes",
            ));
        }
        let (file_size, memory_size) = (segment.p_filesz(LE), segment.p_memsz(LE));
        // The loader copies the file bytes into the memory the segment asks for.
        if segment.p_type(LE) == PT_LOAD && file_size > memory_size {
            return Err(ParseError::new(
                place(),
                format!("it loads {file_size} bytes into {memory_size}"),
            ));
        }
        if segment.data(LE, data).is_err() {
            return Err(outside(
                place(),
                segment.p_offset(LE),
                segment.p_filesz(LE),
                data.len(),
            ));
        }
    }
    Ok(())
}

type Sections<'data> = object::read::elf::SectionTable<'data, Header>;

/// The section-name table (e_shstrndx) up to its last NUL, empty when it cannot be read: a name
/// resolves exactly when it starts in there, as `SectionTable::section_name` would find, without
/// looking for each name's end.
fn section_names<'data>(
    header: &Header,
    sections: &Sections<'data>,
    data: &'data [u8],
) -> &'data [u8] {
    let table = sections
        .section(object::SectionIndex(header.e_shstrndx(LE).into()))
        .and_then(|table| table.data(LE, data))
        .unwrap_or_default();
    let end = table
        .iter()
        .rposition(|&byte| byte == 0)
        .map_or(0, |last| last + 1);
    table.get(..end).unwrap_or_default()
}

/// Names section `index` in errors: `section 3 (.text.saxpy)`.
fn section_place(sections: &Sections<'_>, index: usize) -> String {
    let name = sections
        .section(object::SectionIndex(index))
        .ok()
        .and_then(|section| sections.section_name(LE, section).ok())
        .unwrap_or_default();
    format!("section {index} ({})", String::from_utf8_lossy(name))
}

/// Checks the section header table, every section and the symbol table; what the cubin's
/// variables are.
fn sections(header: &Header, data: &[u8]) -> Result<Facts, ParseError> {
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
    // `SectionTable::section` refuses index 0, so the null section is read as the first header.
    let null = sections.iter().next();
    if null.is_some_and(|null| {
        null.sh_type(LE) != SHT_NULL
            || null.sh_name(LE) != 0
            || null.sh_flags(LE) != 0
            || null.sh_addr(LE) != 0
            || null.sh_offset(LE) != 0
            || null.sh_size(LE) != 0
            || null.sh_link(LE) != 0
            || null.sh_info(LE) != 0
            || null.sh_addralign(LE) != 0
            || null.sh_entsize(LE) != 0
    }) {
        return Err(ParseError::new(
            "section header 0",
            "it is not the all-zero null section",
        ));
    }
    // Section headers may all point at the same bytes; reading them over and over must not turn
    // a small image into minutes of checking.
    let mut budget = data.len().saturating_mul(READ_BUDGET_FACTOR);
    let names = section_names(header, &sections, data);
    let mut uninitialized_bytes: usize = 0;
    let mut layout = InOrder::new();
    for (index, section) in sections.iter().enumerate() {
        // The section's name, then the names after it.
        let Some(named) = usize::try_from(section.sh_name(LE))
            .ok()
            .and_then(|start| names.get(start..))
            .filter(|named| !named.is_empty())
        else {
            return Err(ParseError::new(
                format!("section header {index}"),
                "its name lies outside the section-name string table (e_shstrndx)",
            ));
        };
        let name = || named.split(|&byte| byte == 0).next().unwrap_or_default();
        let place = || format!("section {index} ({})", String::from_utf8_lossy(name()));
        let kind = section.sh_type(LE);
        let contents = if kind == SHT_NOBITS {
            &[][..]
        } else {
            section.data(LE, data).map_err(|_| {
                outside(
                    place(),
                    section.sh_offset(LE),
                    section.sh_size(LE),
                    data.len(),
                )
            })?
        };
        if section.sh_offset(LE) > data.len() as u64 {
            // Even an empty section's offset is read by the driver.
            return Err(outside(place(), section.sh_offset(LE), 0, data.len()));
        }
        if index == 0 {
            continue;
        }
        if index == usize::from(header.e_shstrndx(LE)) && kind != SHT_STRTAB {
            return Err(ParseError::new(
                place(),
                "it holds the section names (e_shstrndx) but is not a string table",
            ));
        }
        if section.sh_addr(LE) != 0 {
            return Err(ParseError::new(
                place(),
                "it has an address; a cubin's sections have none",
            ));
        }
        let align = section.sh_addralign(LE);
        check_align(align, place)?;
        if kind != SHT_NOBITS {
            layout.claim(
                section.sh_offset(LE),
                section.sh_size(LE),
                Owner::Section(index),
            );
            // A power of two by now: a mask rather than a division.
            if section.sh_offset(LE) & (align.max(1) - 1) != 0 {
                return Err(ParseError::new(
                    place(),
                    format!(
                        "its offset {} is not {align}-byte aligned",
                        section.sh_offset(LE)
                    ),
                ));
            }
        }
        links(&sections, section, symbols.len(), place)?;
        budget = budget.checked_sub(contents.len()).ok_or_else(|| {
            ParseError::new(place(), "the sections overlap each other many times over")
        })?;
        // The kind decides in one branch: tested in many, it was mispredicted as it changes from
        // section to section.
        match kind {
            SHT_SYMTAB | SHT_DYNSYM => {
                check_table(section, size_of::<Sym64<LE>>(), place)?;
                // A symbol table's sh_info is the index of its first global symbol.
                let first_global = section.sh_info(LE);
                if u64::from(first_global) > section.sh_size(LE) / size_of::<Sym64<LE>>() as u64 {
                    return Err(ParseError::new(
                        place(),
                        format!("its first global symbol, {first_global}, is past its end"),
                    ));
                }
            }
            SHT_REL | SHT_RELA => {
                let entry_size = if kind == SHT_REL {
                    size_of::<Rel64<LE>>()
                } else {
                    size_of::<Rela64<LE>>()
                };
                check_table(section, entry_size, place)?;
                relocations(&sections, section, data, symbols.len(), place)?;
            }
            SHT_STRTAB if contents.last().is_some_and(|&last| last != 0) => {
                return Err(ParseError::new(
                    place(),
                    "its last string is not NUL-terminated",
                ));
            }
            SHT_NOTE => {
                let mut notes = section
                    .notes(LE, data)
                    .map_err(|error| ParseError::new(place(), error.to_string()))?;
                while let Some(notes) = notes.as_mut() {
                    match notes.next() {
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(error) => return Err(ParseError::new(place(), error.to_string())),
                    }
                }
            }
            SHT_NOBITS => {
                if let Some(bytes) = inspect_cubin::uninitialized_bytes(section, || Some(name())) {
                    uninitialized_bytes = uninitialized_bytes.saturating_add(bytes);
                }
            }
            _ => {}
        }
        // The NUL after a name is part of what it is compared with.
        if named.starts_with(b".nv.info") || named.starts_with(b".nv.compat\0") {
            if let Some(offset) = first_damage(contents) {
                return Err(ParseError::new(
                    place(),
                    format!("its attribute at byte {offset} is damaged or runs past its end"),
                ));
            }
        }
    }
    check_layout(header, &sections, layout, |owner| match owner {
        Owner::ElfHeader => "the ELF header".into(),
        Owner::SectionHeaders => "the section header table".into(),
        Owner::ProgramHeaders => "the program header table".into(),
        Owner::Section(index) => section_place(&sections, index),
    })?;
    let mut defines_variables = false;
    // The string table ends with a NUL (checked above, as every string table, and `links` made
    // sure the symbol table's is one): every name starting inside it ends inside it, so a name's
    // offset is all there is to check.
    let names = sections
        .section(symbols.string_section())
        .map_or(0, |strings| strings.sh_size(LE));
    for (index, symbol) in symbols.symbols().iter().enumerate() {
        let place = || format!("symbol {index}");
        if u64::from(symbol.st_name(LE)) >= names {
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
        if symbol.st_type() == STT_FUNC && section.sh_flags(LE) & u64::from(SHF_EXECINSTR) == 0 {
            return Err(ParseError::new(
                place(),
                format!("it is a function in section {shndx}, which holds no code"),
            ));
        }
        let (start, size) = (symbol.st_value(LE), symbol.st_size(LE));
        if start
            .checked_add(size)
            .is_none_or(|end| end > section.sh_size(LE))
        {
            return Err(ParseError::new(
                place(),
                format!(
                    "its {size} bytes at {start} run past the end of section {shndx} ({} bytes)",
                    section.sh_size(LE)
                ),
            ));
        }
        defines_variables = defines_variables || inspect_cubin::is_variable(&sections, symbol);
    }
    Ok(Facts {
        defines_variables,
        uninitialized_bytes: Some(uninitialized_bytes),
    })
}

/// The sections `sh_link` and `sh_info` name exist and are of the kind the field's meaning needs:
/// a symbol table links to a string table, a relocation table and the `.nv.info` lists to the
/// symbol table; an `SHF_INFO_LINK` section's `sh_info` is another section, and a code
/// section's holds its function's symbol index in its low 24 bits (the register count above).
fn links(
    sections: &Sections<'_>,
    section: &SectionHeader64<LE>,
    symbol_count: usize,
    place: impl Fn() -> String,
) -> Result<(), ParseError> {
    let count = sections.len();
    let kind_of = |index: u32| {
        usize::try_from(index)
            .ok()
            .filter(|&index| index < count)
            .and_then(|index| sections.section(object::SectionIndex(index)).ok())
            .map(|section| section.sh_type(LE))
    };
    let link = section.sh_link(LE);
    let linked = kind_of(link);
    let expected_link = match section.sh_type(LE) {
        SHT_SYMTAB | SHT_DYNSYM => Some(SHT_STRTAB),
        SHT_REL | SHT_RELA => Some(SHT_SYMTAB),
        _ => None,
    };
    let link_ok = match (linked, expected_link) {
        (_, None) if link == 0 => true,
        (None, _) => false,
        (Some(found), Some(expected)) => found == expected,
        (Some(_), None) => true,
    };
    if !link_ok {
        return Err(ParseError::new(
            place(),
            format!("its sh_link names section {link}, which is missing or of the wrong kind"),
        ));
    }
    let info = section.sh_info(LE);
    let flags = section.sh_flags(LE);
    let info_ok = if flags & u64::from(SHF_INFO_LINK) != 0 {
        info != 0 && kind_of(info).is_some()
    } else if flags & u64::from(SHF_EXECINSTR) != 0 {
        usize::try_from(info & 0x00ff_ffff).is_ok_and(|symbol| symbol < symbol_count)
    } else {
        // Symbol and relocation tables' sh_info is checked with their entries. Elsewhere it is 0
        // or, in the sections sm_100 and later add, a section or symbol index: never more than
        // both counts (the driver crashed on `.nv.info` and `.nv.constant3` with 32768 there).
        matches!(
            section.sh_type(LE),
            SHT_SYMTAB | SHT_DYNSYM | SHT_REL | SHT_RELA
        ) || usize::try_from(info).is_ok_and(|info| info < count.max(symbol_count))
    };
    if !info_ok {
        return Err(ParseError::new(
            place(),
            format!("its sh_info ({info:#x}) names no section or symbol that exists"),
        ));
    }
    Ok(())
}

/// A table section's entry size must be the standard one and divide its size.
fn check_table(
    section: &SectionHeader64<LE>,
    expected: usize,
    place: impl FnOnce() -> String,
) -> Result<(), ParseError> {
    let entry_size = section.sh_entsize(LE);
    if entry_size != expected as u64 || !section.sh_size(LE).is_multiple_of(expected as u64) {
        return Err(ParseError::new(
            place(),
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
    sections: &Sections<'_>,
    section: &SectionHeader64<LE>,
    data: &[u8],
    symbol_count: usize,
    place: impl Fn() -> String,
) -> Result<(), ParseError> {
    let target = usize::try_from(section.sh_info(LE))
        .ok()
        .and_then(|index| sections.section(object::SectionIndex(index)).ok())
        .ok_or_else(|| {
            ParseError::new(
                place(),
                format!(
                    "it applies to section {}, which does not exist",
                    section.sh_info(LE)
                ),
            )
        })?;
    let target_size = target.sh_size(LE);
    let check = |index: usize, offset: u64, symbol: u32| {
        if usize::try_from(symbol).map_or(true, |symbol| symbol >= symbol_count.max(1)) {
            return Err(ParseError::new(
                format!("{}, relocation {index}", place()),
                format!("it names symbol {symbol} of {symbol_count}"),
            ));
        }
        if offset >= target_size {
            return Err(ParseError::new(
                format!("{}, relocation {index}", place()),
                format!("it patches byte {offset} of a section of {target_size} bytes"),
            ));
        }
        Ok(())
    };
    if let Some((rel, _)) = section.rel(LE, data).ok().flatten() {
        for (index, entry) in rel.iter().enumerate() {
            check(index, entry.r_offset(LE), entry.r_sym(LE))?;
        }
    } else if let Some((rela, _)) = section.rela(LE, data).ok().flatten() {
        for (index, entry) in rela.iter().enumerate() {
            check(index, entry.r_offset(LE), entry.r_sym(LE, false))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(owner: Owner) -> String {
        format!("{owner:?}")
    }

    #[test]
    fn claims_that_only_touch_pass_and_any_overlap_is_named_by_its_later_owner() {
        let mut touching = Ranges::default();
        touching.claim(0, 64, Owner::ElfHeader);
        touching.claim(128, 0, Owner::Section(1));
        touching.claim(64, 64, Owner::Section(2));
        touching.claim(128, 8, Owner::SectionHeaders);
        assert!(touching.check(name).is_ok());

        // A long section covering one that starts far after it, past another in between: the
        // overlap is found although the two are not neighbours once sorted.
        let mut covering = Ranges::default();
        covering.claim(0, 64, Owner::ElfHeader);
        covering.claim(64, 1000, Owner::Section(1));
        covering.claim(2000, 8, Owner::SectionHeaders);
        covering.claim(500, 16, Owner::Section(3));
        let error = covering.check(name).unwrap_err();
        assert_eq!(error.place, "Section(3)");
        assert_eq!(error.problem, "its bytes 500..516 overlap Section(1)");

        // Claimed later but starting earlier: still the later owner is the one named.
        let mut earlier = Ranges::default();
        earlier.claim(100, 50, Owner::SectionHeaders);
        earlier.claim(90, 20, Owner::Section(4));
        let error = earlier.check(name).unwrap_err();
        assert_eq!(error.place, "Section(4)");
        assert!(error.problem.contains("overlap SectionHeaders"), "{error}");
    }
}
