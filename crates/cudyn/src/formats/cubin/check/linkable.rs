//! What nvJitLink needs of a cubin beyond what a load checks: the ELF header fields compilers
//! write, the section types a cubin may have and the names that go with them, and call graph and
//! prototype entries that name what exists.
//!
//! nvJitLink finds some sections by name and others by type, and reads each as the table its
//! type or name says, without checking that the two agree: one byte of a damaged section type
//! (a note read as a call graph, a constant bank as a prototype table) crashed it, as did a
//! type no compiler writes. So a cubin to link may only have the types compilers write, and
//! the sections nvJitLink parses as tables must have the type their name says and the name
//! their type says. A load needs none of this: the driver's loader was not seen to crash on it.

use object::elf::{
    Sym64, SHT_NOBITS, SHT_NOTE, SHT_PROGBITS, SHT_REL, SHT_RELA, SHT_STRTAB, SHT_SYMTAB, STT_FILE,
    STT_FUNC, STT_HIPROC, STT_LOPROC, STT_NOTYPE, STT_OBJECT, STT_SECTION,
};
use object::pod::{self, Pod};
use object::read::elf::FileHeader;
use object::U32;

use super::sht::{CUDA_CALLGRAPH, CUDA_INFO, CUDA_PROTOTYPE};
use super::{Header, LE};
use crate::parse_error::{Fault, ParseError, Problem};

/// The values of the top byte of `e_flags` that nvJitLink reads safely in cubins of ELF ABI 8
/// and later: CUDA 13.0's compilers write 6 (every architecture, executable or relocatable);
/// nvJitLink 13.0 also takes 5, and crashed on every other value but 0xff, so the others are
/// refused until a compiler is seen to write them.
const TOP_FLAGS: [u32; 2] = [5, 6];

/// Whether the OS/ABI and ABI version bytes are a pair compilers write: `ELFOSABI_CUDA` (0x33)
/// with ELF ABI versions up to 7, 0x41 with version 8 (CUDA 12.8 and later). After a cubin with
/// another OS/ABI or a version past 8, nvJitLink 13.0 failed its link and left every later link
/// in another thread of the process waiting forever.
fn known_abi(os_abi: u8, abi_version: u8) -> bool {
    matches!((os_abi, abi_version), (0x33, 0..=7) | (0x41, 8))
}

/// The ELF header fields nvJitLink needs to be what compilers write: the OS/ABI and ABI version
/// (see [`known_abi`]) and the top byte of `e_flags` (see [`TOP_FLAGS`]).
pub(super) fn header(header: &Header) -> Result<(), ParseError> {
    let ident = header.e_ident();
    if !known_abi(ident.os_abi, ident.abi_version) {
        return Err(ParseError::new(
            "ELF header",
            Problem::Damaged,
            format!(
                "its OS/ABI {:#x} and ABI version {} are a pair no compiler writes (0x33 with \
                 versions up to 7, 0x41 with 8)",
                ident.os_abi, ident.abi_version
            ),
        ));
    }
    let flags = header.e_flags(LE);
    if ident.abi_version < 8 || TOP_FLAGS.contains(&(flags >> 24)) {
        return Ok(());
    }
    Err(ParseError::new(
        "ELF header",
        Problem::Damaged,
        format!(
            "its flags {flags:#x} end in a byte ({:#x}) that no compiler nvJitLink reads writes \
             ({})",
            flags >> 24,
            TOP_FLAGS.map(|top| format!("{top:#x}")).join(" or ")
        ),
    ))
}

/// The CUDA section types compilers write (CUDA 13.0's NVRTC, nvcc and the device runtime
/// library, sm_75 to sm_121): the attribute lists, call graph and prototypes (0 to 2),
/// variables (7 to 0xa: `.nv.global`, `.nv.global.init`, `.nv.local`, `.nv.shared`), the
/// relocation actions (0xb), reserved shared memory (0x15), the capability views of code
/// (0x16), the constant banks (0x64 to 0x75), and the types of the second views sm_100 and
/// later add (`.nv.merc.*`, up to 0x8f, with `.nv.compat` at 0x86).
fn is_compilers_cuda_type(kind: u32) -> bool {
    matches!(
        kind.checked_sub(CUDA_INFO),
        Some(0x00..=0x02 | 0x07..=0x0b | 0x15 | 0x16 | 0x64..=0x8f)
    )
}

/// Why a section named `name` (its first name) of type `kind` is not one nvJitLink can be given.
pub(super) fn refusal(name: &[u8], kind: u32) -> Option<&'static str> {
    let standard = matches!(
        kind,
        SHT_PROGBITS | SHT_SYMTAB | SHT_STRTAB | SHT_RELA | SHT_NOTE | SHT_NOBITS | SHT_REL
    );
    if !standard && !(CUDA_INFO..=0x7000_00ff).contains(&kind) {
        return Some("its type is none that compilers write in a cubin");
    }
    if !standard && !is_compilers_cuda_type(kind) {
        return Some("its CUDA section type is none that compilers write");
    }
    // Sections nvJitLink reads as tables: the type their name says, and the name their type
    // says.
    let expected = if name == b".symtab" {
        Some(SHT_SYMTAB)
    } else if name == b".strtab" || name == b".shstrtab" {
        Some(SHT_STRTAB)
    } else if name.starts_with(b".note") {
        Some(SHT_NOTE)
    } else if name == b".nv.info" || name.starts_with(b".nv.info.") {
        Some(CUDA_INFO)
    } else if name == b".nv.callgraph" {
        Some(CUDA_CALLGRAPH)
    } else if name == b".nv.prototype" {
        Some(CUDA_PROTOTYPE)
    } else if name.starts_with(b".rela.") {
        Some(SHT_RELA)
    } else if name.starts_with(b".rel.") {
        Some(SHT_REL)
    } else if name.starts_with(b".text.") {
        Some(SHT_PROGBITS)
    } else {
        None
    };
    if expected.is_some_and(|expected| expected != kind) {
        return Some("its type is not the one its name says");
    }
    let table = matches!(
        kind,
        SHT_SYMTAB | SHT_NOTE | CUDA_INFO | CUDA_CALLGRAPH | CUDA_PROTOTYPE
    );
    if table && expected != Some(kind) {
        return Some("its type is that of a table its name is not");
    }
    None
}

/// Whether a symbol of type `kind` is one nvJitLink reads safely: the standard types compilers
/// write (none, object, function, section, file) and the processor-specific ones (13 to 15: CUDA
/// writes 13 for its variables). An OS-specific type (10 to 12) turned nvJitLink's next link in
/// the process into an abort in `free()`; the others are refused with them, unwritten by any
/// compiler.
pub(super) fn symbol_type(kind: u8) -> bool {
    matches!(
        kind,
        STT_NOTYPE | STT_OBJECT | STT_FUNC | STT_SECTION | STT_FILE | STT_LOPROC..=STT_HIPROC
    )
}

/// What the `sh_info` of a section named `name` must name, by that name, as compilers write it
/// (CUDA 13.0, sm_75 to sm_121): a function's attribute list, parameter bank and shared memory
/// (`.nv.info.<f>`, `.nv.constant0.<f>`, `.nv.shared.<f>`) its code, `.text.<f>`; a relocation
/// table `.rel<target>` or `.rela<target>` the section `<target>`; the module's attribute list
/// and reserved shared memory none (0). `section_name` gives a section's name by index, `None`
/// for the null section and those that do not exist.
///
/// nvJitLink takes a section's `sh_info` as what it describes without checking: `.nv.info` with
/// its `sh_info` turned from 0 to 1 (the section names) was read as a function's attributes, and
/// the next link in the process aborted in `free()`.
pub(super) fn info_agrees<'a>(
    name: &[u8],
    info: u32,
    section_name: impl FnOnce(u32) -> Option<&'a [u8]>,
) -> bool {
    if name == b".nv.info" || name.starts_with(b".nv.shared.reserved.") {
        return info == 0;
    }
    let function = [&b".nv.info."[..], b".nv.constant0.", b".nv.shared."]
        .into_iter()
        .find_map(|prefix| name.strip_prefix(prefix));
    let (prefix, rest): (&[u8], &[u8]) = if let Some(function) = function {
        (b".text.", function)
    } else if name.starts_with(b".rela.") {
        (b"", &name[".rela".len()..])
    } else if name.starts_with(b".rel.") {
        (b"", &name[".rel".len()..])
    } else {
        return true;
    };
    section_name(info).is_some_and(|target| {
        target.len() == prefix.len() + rest.len()
            && target.starts_with(prefix)
            && target.ends_with(rest)
    })
}

/// An entry of the call graph (`.nv.callgraph`: a caller's and a callee's symbol index) or of
/// the prototype table (`.nv.prototype`: a function's symbol index and the offset of its
/// prototype in the symbol string table).
#[derive(Debug, Clone, Copy)]
#[repr(C)]
struct TableEntry {
    first: U32<LE>,
    second: U32<LE>,
}

// SAFETY: a `repr(C)` struct of object's byte-array integers (alignment 1, the `unaligned`
// feature), so it has no padding and every bit pattern is a valid value.
unsafe impl Pod for TableEntry {}

/// Checks the call graph or the prototype table (`kind`) `contents`: 8-byte entries that nvJitLink
/// reads the symbol and string tables at, unchecked. A call is a caller and a callee: the caller
/// the null symbol (with a marker for callee) or a function; the callee a function, the null
/// symbol, a section's symbol (in executable cubins) or one of the markers -4 to -1 compilers
/// write for callees they do not name. A prototype is a function's symbol index and the offset
/// of its prototype in the symbol string table, of `strings` bytes. (nvJitLink crashed on a
/// caller turned from the null symbol into a section's, and on a callee turned from a function
/// into a variable.)
pub(super) fn cuda_table(
    kind: u32,
    contents: &[u8],
    symbols: &[Sym64<LE>],
    strings: u64,
) -> Result<(), Fault> {
    const MARKERS: u32 = 0xffff_fffc;
    let Ok(entries) = pod::slice_from_all_bytes::<TableEntry>(contents) else {
        return Err(Fault::new(
            Problem::Damaged,
            format!(
                "its {} bytes are not a whole number of 8-byte entries",
                contents.len()
            ),
        ));
    };
    let symbol = |index: u32| {
        usize::try_from(index)
            .ok()
            .and_then(|index| symbols.get(index))
    };
    let caller = |index: u32| index == 0 || symbol(index).is_some_and(|s| s.st_type() == STT_FUNC);
    let callee = |index: u32| {
        index == 0
            || index >= MARKERS
            || symbol(index).is_some_and(|s| matches!(s.st_type(), STT_FUNC | STT_SECTION))
    };
    for (at, entry) in entries.iter().enumerate() {
        let (first, second) = (entry.first.get(LE), entry.second.get(LE));
        let problem = if kind == CUDA_CALLGRAPH && !caller(first) {
            Some("names as its caller a symbol that is not a function")
        } else if kind == CUDA_CALLGRAPH {
            (!callee(second)).then_some("names as its callee a symbol that is not a function")
        } else {
            (symbol(first).is_none() || u64::from(second) >= strings)
                .then_some("names a symbol or string that does not exist")
        };
        if let Some(problem) = problem {
            return Err(Fault::new(
                Problem::Damaged,
                format!(
                    "its entry {at} ({first}, {second}) {problem} ({} symbols, {strings} bytes \
                     of names)",
                    symbols.len()
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_types_must_agree_where_nvjitlink_reads_a_table() {
        for (name, kind) in [
            (&b".symtab"[..], SHT_SYMTAB),
            (b".shstrtab", SHT_STRTAB),
            (b".note.nv.cuinfo", SHT_NOTE),
            (b".nv.info.saxpy", CUDA_INFO),
            (b".nv.callgraph", CUDA_CALLGRAPH),
            (b".rela.text.k", SHT_RELA),
            (b".rel.debug_frame", SHT_REL),
            (b".text.k", SHT_PROGBITS),
            (b".debug_frame", SHT_PROGBITS),
            (b".nv.global", 0x7000_0007),
            (b".nv.global", SHT_NOBITS),
            (b".nv.shared.reserved.0", 0x7000_0015),
            (b".nv.constant0.k", 0x7000_0064),
            (b".nv.merc.symtab", 0x7000_0085),
        ] {
            assert_eq!(
                refusal(name, kind),
                None,
                "{}",
                String::from_utf8_lossy(name)
            );
        }
        for (name, kind) in [
            (&b".note.nv.cuinfo"[..], CUDA_CALLGRAPH),
            (b".nv.info", SHT_PROGBITS),
            (b".debug_frame", CUDA_PROTOTYPE),
            (b".nv.global.init", CUDA_INFO),
            (b".text.k", SHT_NOTE),
            (b".rela.text.k", CUDA_INFO),
            (b".nv.constant0.k", 0x7000_0011),
            (b".debug_frame", 0x7000_0004),
            (b".note.nv.cuinfo", 6),
            (b".nv.constant0.k", 0x6fff_ffff),
        ] {
            assert!(
                refusal(name, kind).is_some(),
                "{} {kind:#x}",
                String::from_utf8_lossy(name)
            );
        }
    }

    #[test]
    fn sh_info_must_name_the_section_the_name_describes() {
        let names: [&[u8]; 4] = [b"", b".shstrtab", b".text.k", b".debug_frame"];
        let name_of = |index: u32| names.get(index as usize).filter(|_| index != 0).copied();
        for (name, info) in [
            (&b".nv.info"[..], 0),
            (b".nv.info.k", 2),
            (b".nv.constant0.k", 2),
            (b".nv.shared.k", 2),
            (b".nv.shared.reserved.0", 0),
            (b".rela.text.k", 2),
            (b".rel.debug_frame", 3),
            (b".nv.global", 7),
        ] {
            assert!(
                info_agrees(name, info, name_of),
                "{}",
                String::from_utf8_lossy(name)
            );
        }
        for (name, info) in [
            (&b".nv.info"[..], 1),
            (b".nv.info.k", 1),
            (b".nv.info.k", 0),
            (b".nv.info.k", 9),
            (b".nv.info.kk", 2),
            (b".nv.constant0.k", 3),
            (b".nv.shared.reserved.0", 2),
            (b".rela.text.k", 3),
            (b".rel.debug_frame", 2),
        ] {
            assert!(
                !info_agrees(name, info, name_of),
                "{} {info}",
                String::from_utf8_lossy(name)
            );
        }
    }
}
