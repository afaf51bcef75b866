//! The check of a cubin before the driver or nvJitLink reads it: a 64-bit little-endian CUDA
//! ELF executable whose program and section header tables,
//! segments and sections (all but `SHT_NOBITS` ones) lie inside the bytes given; whose section
//! names, symbol names, section links and symbol section indices all resolve; whose string
//! tables end with a NUL; whose loadable segments fit in the memory they ask for; whose symbol
//! and relocation tables have their standard entry sizes,
//! with every relocation naming a symbol that exists and a place inside its section; whose
//! defined symbols lie inside their sections; whose notes read to their end; and whose
//! `.nv.info` and `.nv.compat` attribute lists read to their end. A relocatable cubin (`ET_REL`)
//! must be linked before a load; as an input to a link it is checked the same way.
//!
//! Beyond lying inside the bytes, an image must have the shape every compiler's cubin has (NVRTC,
//! nvcc, ptxas, nvJitLink): the ELF header's fixed fields hold their only values, section 0 is
//! the null section, sections have no address and do not overlap each other or the header
//! tables (but that a `.nv.merc.` section, which compilers for sm_100 and later write as a
//! second view of a data section's bytes, may cover exactly the bytes of one), section indices in `sh_link` and `sh_info` point where their kind says, and segments
//! have no address and cover their program header table. The driver reads these fields as
//! indices and offsets without checking them: a cubin with one of them damaged has crashed the
//! driver's loader, so cudyn refuses what no compiler writes rather than guess which damage the
//! driver survives.

use std::mem::size_of;

use object::elf::{
    ProgramHeader64, SectionHeader64, ET_EXEC, ET_REL, EV_CURRENT, PN_XNUM, PT_LOAD, PT_PHDR,
    SHN_LORESERVE, SHT_NOBITS,
};
use object::read::elf::{FileHeader, ProgramHeader};
use object::LittleEndian as LE;

use super::{elf_error, header, variables, Header};
use crate::formats::{Facts, Purpose, Refusal};
use crate::parse_error::{ParseError, Problem};

mod layout;
mod linkable;
mod sections;
mod symbols;
mod unread;

pub(crate) use unread::unread_contents;

/// The CUDA section types (`SHT_CUDA_*`, in the processor-specific range) the checks name.
mod sht {
    /// The attribute lists, `.nv.info` and `.nv.info.<function>`.
    pub(super) const CUDA_INFO: u32 = 0x7000_0000;
    /// `.nv.callgraph`.
    pub(super) const CUDA_CALLGRAPH: u32 = 0x7000_0001;
    /// `.nv.prototype`.
    pub(super) const CUDA_PROTOTYPE: u32 = 0x7000_0002;
    /// `.nv.global` of a relocatable cubin.
    pub(super) const CUDA_GLOBAL: u32 = 0x7000_0007;
    /// `.nv.global.init` of a relocatable cubin.
    pub(super) const CUDA_GLOBAL_INIT: u32 = 0x7000_0008;
    /// `.nv.local.<function>` of a relocatable cubin.
    pub(super) const CUDA_LOCAL: u32 = 0x7000_0009;
    /// `.nv.shared.<function>` of a relocatable cubin.
    pub(super) const CUDA_SHARED: u32 = 0x7000_000a;
    /// `.nv.shared.reserved.<n>` of a relocatable cubin.
    pub(super) const CUDA_SHARED_RESERVED: u32 = 0x7000_0015;
    /// The constant banks `.nv.constant0` to `.nv.constant17` of a relocatable cubin.
    pub(super) const CUDA_CONSTANT_BANKS: std::ops::RangeInclusive<u32> = 0x7000_0064..=0x7000_0075;
}

/// The bits of `e_flags`' low byte that compilers set in cubins of ELF ABI 8 and later, where the
/// architecture moved to the bytes above (CUDA 13.0's ptxas: 0x04 for sm_75 to sm_90a, 0x02 for
/// sm_100 to sm_121). The H200's driver crashed on a cubin with bit 0 set, so the other bits are
/// refused until a compiler is seen to set them.
const KNOWN_LOW_FLAGS: u32 = 0x0e;

/// The largest section or segment alignment accepted; compilers use at most 128.
const MAX_ALIGN: u64 = 4096;

/// Whether `data` is an executable cubin, from its ELF header alone: all that output of NVRTC or
/// nvJitLink needs checked before a load (see `crate::image`'s `compiler_output`); and whether it
/// defines variables, from its symbol table (a table that cannot be read counts as defining
/// some).
pub(crate) fn compiler_output(data: &[u8]) -> Result<Facts, Refusal> {
    executable_header(data)?;
    Ok(variables(data).map_or(Facts::UNKNOWN, |variables| Facts {
        defines_variables: variables.defined,
        uninitialized_bytes: Some(variables.uninitialized_bytes),
    }))
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
                Problem::Damaged,
                format!("ELF type {other} is not an executable cubin (ET_EXEC, 2)"),
            )
            .into())
        }
    }
    Ok(header)
}

/// Whether `data` is an executable cubin (`ET_EXEC`); `false` for what has no cubin header.
pub(crate) fn is_executable(data: &[u8]) -> bool {
    header(data).is_ok_and(|header| header.e_type(LE) == ET_EXEC)
}

/// The ELF header of a cubin nvJitLink links: executable or relocatable.
fn linkable_header(data: &[u8]) -> Result<&Header, ParseError> {
    let header = header(data)?;
    match header.e_type(LE) {
        ET_EXEC | ET_REL => Ok(header),
        other => Err(ParseError::new(
            "ELF header",
            Problem::Damaged,
            format!("ELF type {other} is not a cubin (ET_REL, 1, or ET_EXEC, 2)"),
        )),
    }
}

/// Checks a cubin for `purpose` (see the module's documentation); what its variables are.
pub(crate) fn validate(data: &[u8], purpose: Purpose) -> Result<Facts, Refusal> {
    let header = match purpose {
        Purpose::Load => executable_header(data)?,
        Purpose::Link => linkable_header(data)?,
    };
    let header_size = header.e_ehsize(LE);
    if usize::from(header_size) != size_of::<Header>() {
        return Err(ParseError::new(
            "ELF header",
            Problem::Damaged,
            format!("its size field says {header_size} bytes, not 64"),
        )
        .into());
    }
    fixed_fields(header)?;
    if purpose == Purpose::Link {
        linkable::header(header)?;
    }
    segments(header, data)?;
    Ok(sections::check(header, data, purpose)?)
}

/// The ELF header fields that have one value in every cubin.
fn fixed_fields(header: &Header) -> Result<(), ParseError> {
    let ident = header.e_ident();
    let damaged = |message: String| Some((Problem::Damaged, message));
    let problem = if ident.version != EV_CURRENT || header.e_version(LE) != u32::from(EV_CURRENT) {
        damaged("its ELF version is not 1".into())
    } else if ident.padding.iter().any(|&byte| byte != 0) {
        damaged("the padding of its identification bytes is not zero".into())
    } else if header.e_entry(LE) != 0 {
        damaged(format!(
            "it has an entry address ({:#x}); cubins have none",
            header.e_entry(LE)
        ))
    } else if header.e_phnum(LE) != 0
        && usize::from(header.e_phentsize(LE)) != size_of::<ProgramHeader64<LE>>()
    {
        damaged(format!(
            "its program headers are {} bytes, not 56",
            header.e_phentsize(LE)
        ))
    } else if usize::from(header.e_shentsize(LE)) != size_of::<SectionHeader64<LE>>() {
        damaged(format!(
            "its section headers are {} bytes, not 64",
            header.e_shentsize(LE)
        ))
    } else if ident.abi_version >= 8 && header.e_flags(LE) & 0xff & !KNOWN_LOW_FLAGS != 0 {
        damaged(format!(
            "its flags {:#x} set bits no compiler sets",
            header.e_flags(LE)
        ))
    } else if header.e_phnum(LE) == PN_XNUM
        || header.e_shnum(LE) == 0
        || header.e_shstrndx(LE) >= SHN_LORESERVE
    {
        // Extended numbering keeps the real counts in section 0, which no compiler needs for a
        // cubin; the driver takes the header's fields as they are.
        Some((
            Problem::Unsupported,
            "it uses extended section or segment numbering, which no cubin needs".into(),
        ))
    } else {
        None
    };
    problem.map_or(Ok(()), |(problem, message)| {
        Err(ParseError::new("ELF header", problem, message))
    })
}

/// The section types of a relocatable cubin's variables that, like `SHT_NOBITS` ones, take
/// device memory but no bytes of the file (`.nv.global`, `.nv.local.*`, `.nv.shared.*`,
/// `.nv.shared.reserved.*`); an executable cubin gives these sections the type `SHT_NOBITS`.
const RELOCATABLE_NO_BYTES: [u32; 4] = [
    sht::CUDA_GLOBAL,
    sht::CUDA_LOCAL,
    sht::CUDA_SHARED,
    sht::CUDA_SHARED_RESERVED,
];

/// Whether a section of type `kind` holds bytes of the file, in a cubin that is `relocatable`
/// (`ET_REL`) or not.
#[inline(always)]
fn holds_bytes(kind: u32, relocatable: bool) -> bool {
    kind != SHT_NOBITS && !(relocatable && RELOCATABLE_NO_BYTES.contains(&kind))
}

/// Whether `align` is other than a power of two (or 0) up to [`MAX_ALIGN`].
fn misaligned(align: u64) -> bool {
    // Not `is_power_of_two`: without the popcnt instruction it counts bits, for every section.
    align & align.wrapping_sub(1) != 0 || align > MAX_ALIGN
}

/// The damage of a section or segment at `place` whose alignment is [`misaligned`].
fn alignment_error(place: String, align: u64) -> ParseError {
    ParseError::new(
        place,
        Problem::Damaged,
        format!("its alignment {align} is not a power of two up to {MAX_ALIGN}"),
    )
}

/// The damage of a structure at `place` whose `size` bytes at `offset` are not all in the `len`
/// bytes given.
fn outside(place: String, offset: u64, size: u64, len: usize) -> ParseError {
    ParseError::new(
        place,
        Problem::Truncated,
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
                Problem::Damaged,
                "it has an address; a cubin's segments have none",
            ));
        }
        if misaligned(segment.p_align(LE)) {
            return Err(alignment_error(place(), segment.p_align(LE)));
        }
        if segment.p_type(LE) == PT_PHDR
            && (segment.p_offset(LE) != header.e_phoff(LE)
                || segment.p_filesz(LE)
                    != u64::from(header.e_phnum(LE)) * size_of::<ProgramHeader64<LE>>() as u64)
        {
            return Err(ParseError::new(
                place(),
                Problem::Damaged,
                "it does not cover the program header table it describes",
            ));
        }
        let (file_size, memory_size) = (segment.p_filesz(LE), segment.p_memsz(LE));
        // The loader copies the file bytes into the memory the segment asks for.
        if segment.p_type(LE) == PT_LOAD && file_size > memory_size {
            return Err(ParseError::new(
                place(),
                Problem::Damaged,
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
