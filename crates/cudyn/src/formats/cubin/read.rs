//! What a cubin holds, read for inspection: its architecture, kernels and variables.
//!
//! The architecture comes from the ELF header's flags; kernels are the function symbols marked as
//! entries; each kernel's parameter layout and limits come from its `.nv.info.<kernel>` section,
//! and its registers and stack from the shared `.nv.info` section (both lists of `EIATTR_*` attributes).
//! Static shared, local and parameter-bank sizes are the sizes of the kernel's `.nv.shared.`,
//! `.nv.local.` and `.nv.constant0.` sections. The `.nv.compat` section says whether the code is
//! architecture-specific (`sm_90a`).

use std::cell::Cell;
use std::collections::HashMap;

use object::elf::{ET_REL, SHN_LORESERVE, SHN_UNDEF, STT_FUNC, STT_OBJECT};
use object::read::elf::{FileHeader, SectionHeader, Sym};
use object::LittleEndian;

use super::info::{attr, unreadable, Attribute, Attributes, Value};
use super::{elf_error, header, is_kernel, param_table, suffixed, tables, variable_space};
use crate::param::ParamLayout;
use crate::parse_error::{ParseError, Problem};
use crate::symbols::demangle;

/// From this ELF ABI version on, the SM number sits in bits 8..16 of `e_flags`; before, in 0..8.
const ABI_WITH_SHIFTED_SM: u8 = 8;

/// How many times over the file's size the attribute sections read may add up to.
const READ_BUDGET_FACTOR: usize = 4;

/// What a cubin holds.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Cubin {
    /// The SM architecture, e.g. 90 for sm_90 and sm_90a.
    pub arch: u32,
    /// Whether the code uses architecture-specific features (`sm_90a`): it then runs on that
    /// architecture only.
    pub arch_specific: bool,
    /// The CUDA ELF ABI version (`e_ident[EI_ABIVERSION]`).
    pub abi_version: u8,
    /// Whether it is relocatable device code (ELF type `ET_REL`, from `-rdc` or `ptxas -c`),
    /// which must be linked before it can be loaded.
    pub relocatable: bool,
    /// The raw `e_flags`.
    pub flags: u32,
    /// Kernels (entry functions), in symbol-table order.
    pub kernels: Vec<CubinKernel>,
    /// `__device__` and `__constant__` variables.
    pub variables: Vec<Variable>,
    /// Parts of the cubin that could not be read, e.g. a damaged `.nv.info` section.
    pub notes: Vec<String>,
}

/// One kernel of a cubin, as inspection reads it (not a loaded [`crate::Kernel`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct CubinKernel {
    /// The symbol name (mangled for C++ kernels).
    pub name: String,
    /// The C++ name, when `name` is mangled.
    pub demangled: Option<String>,
    /// Parameters, in declaration order; empty when the kernel takes none, or when its
    /// parameter table cannot be read, which `params_error` then says.
    pub params: Vec<ParamLayout>,
    /// Why the kernel's parameters are not known, when they are not: its parameter table (in
    /// `.nv.info.<kernel>`) is damaged or in a form cudyn does not read, or missing. The
    /// cubin's notes say so too.
    pub params_error: Option<ParseError>,
    /// Bytes of parameter buffer the kernel declares (`EIATTR_CBANK_PARAM_SIZE`).
    pub param_bytes: Option<u32>,
    /// Registers per thread.
    pub registers: Option<u32>,
    /// Register limit the kernel was compiled with (`EIATTR_MAXREG_COUNT`).
    pub max_registers: Option<u32>,
    /// Static shared memory in bytes.
    pub shared_bytes: u64,
    /// Local memory per thread in bytes, besides the stack.
    pub local_bytes: u64,
    /// Stack per thread in bytes.
    pub stack_bytes: Option<u32>,
    /// Size of the kernel's own stack frame in bytes.
    pub frame_bytes: Option<u32>,
    /// Size of its constant bank 0 (parameters and driver constants) in bytes.
    pub constant0_bytes: u64,
    /// `__launch_bounds__` maximum threads per block (x, y, z).
    pub max_threads: Option<[u32; 3]>,
    /// The block size the kernel requires (x, y, z): PTX's `.reqntid` directive.
    pub required_threads: Option<[u32; 3]>,
}

/// A variable defined in a cubin.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Variable {
    /// The symbol name.
    pub name: String,
    /// The C++ name, when `name` is mangled.
    pub demangled: Option<String>,
    /// Where it lives.
    pub space: Space,
    /// Size in bytes.
    pub size: u64,
}

/// The memory space of a variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Space {
    /// Global memory (`__device__`).
    Global,
    /// A constant bank (`__constant__` lives in bank 3 on current GPUs).
    Constant(u32),
}

impl Cubin {
    /// The architecture as compilers spell it, e.g. "sm_90" or "sm_90a".
    pub fn arch_name(&self) -> String {
        let suffix = if self.arch_specific { "a" } else { "" };
        format!("sm_{}{suffix}", self.arch)
    }

    /// The kernel named `name` (mangled), if this cubin defines it.
    pub fn kernel(&self, name: &str) -> Option<&CubinKernel> {
        self.kernels.iter().find(|kernel| kernel.name == name)
    }
}

/// Per-function values of the shared `.nv.info` section, by symbol index.
#[derive(Default)]
struct FunctionInfo {
    registers: HashMap<u32, u32>,
    frame: HashMap<u32, u32>,
    min_stack: HashMap<u32, u32>,
    max_stack: HashMap<u32, u32>,
}

/// The parameter layouts of the kernel `name` (mangled), reading only its `.nv.info.<name>`
/// section; `None` when the cubin does not define the kernel (read from its symbol table when
/// there is no such section), an error when it does but its parameters cannot be read.
pub fn kernel_params(data: &[u8], name: &str) -> Result<Option<Vec<ParamLayout>>, ParseError> {
    let header = header(data)?;
    let endian = LittleEndian;
    let sections = header
        .sections(endian, data)
        .map_err(elf_error("section headers"))?;
    let wanted = suffixed(b".nv.info.", name.as_bytes());
    let Some(section) = sections
        .iter()
        .find(|section| sections.section_name(endian, section).ok() == Some(&wanted[..]))
    else {
        // No parameter table: not a kernel of this cubin, or one whose parameters are unknown.
        let (_, symbols) = tables(data)?;
        let defined = symbols.symbols().iter().any(|symbol| {
            is_kernel(symbol) && symbols.symbol_name(endian, symbol).ok() == Some(name.as_bytes())
        });
        return if defined {
            Err(missing_info(name))
        } else {
            Ok(None)
        };
    };
    let info = section
        .data(endian, data)
        .map_err(elf_error(".nv.info section of the kernel"))?;
    param_table::read(info, name).map(Some)
}

/// The symbols of the cubin's kernels, in symbol-table order, reading only its section headers
/// and symbol table; an error when a kernel's name cannot be read.
pub(crate) fn kernel_symbols(data: &[u8]) -> Result<Vec<String>, ParseError> {
    let (_, symbols) = tables(data)?;
    let mut kernels = Vec::new();
    for (index, symbol) in symbols.symbols().iter().enumerate() {
        if !is_kernel(symbol) {
            continue;
        }
        let name = symbols.symbol_name(LittleEndian, symbol).map_err(|error| {
            ParseError::new(
                format!("symbol {index}"),
                Problem::Damaged,
                format!("the kernel's name cannot be read: {error}"),
            )
        })?;
        kernels.push(String::from_utf8_lossy(name).into_owned());
    }
    Ok(kernels)
}

/// Reads a cubin.
pub fn parse(data: &[u8]) -> Result<Cubin, ParseError> {
    let header = header(data)?;
    let endian = LittleEndian;
    let flags = header.e_flags(endian);
    let abi_version = header.e_ident().abi_version;
    let relocatable = header.e_type(endian) == ET_REL;
    let arch = if abi_version >= ABI_WITH_SHIFTED_SM {
        (flags >> 8) & 0xff
    } else {
        flags & 0xff
    };
    let (sections, symbols) = tables(data)?;

    let mut notes = Vec::new();
    let mut by_name: HashMap<&[u8], usize> = HashMap::new();
    for (index, section) in sections.iter().enumerate() {
        if let Ok(name) = sections.section_name(endian, section) {
            by_name.entry(name).or_insert(index);
        }
    }
    // Section headers may all point at the same bytes; reading them over and over must not turn
    // a small file into hours of work.
    let budget = Cell::new(data.len().saturating_mul(READ_BUDGET_FACTOR));
    let section_bytes = |name: &[u8], notes: &mut Vec<String>| -> Option<&[u8]> {
        let section = sections
            .section(object::SectionIndex(*by_name.get(name)?))
            .ok()?;
        match section.data(endian, data) {
            Ok(bytes) if bytes.len() > budget.get() => {
                notes.push(format!(
                    "section {} skipped: sections overlap too much",
                    String::from_utf8_lossy(name)
                ));
                None
            }
            Ok(bytes) => {
                budget.set(budget.get() - bytes.len());
                Some(bytes)
            }
            Err(_) => {
                notes.push(format!(
                    "section {} lies outside the file",
                    String::from_utf8_lossy(name)
                ));
                None
            }
        }
    };
    let section_size = |name: &[u8]| -> u64 {
        by_name
            .get(name)
            .and_then(|&i| sections.section(object::SectionIndex(i)).ok())
            .map_or(0, |section| section.sh_size(endian))
    };

    let mut functions = FunctionInfo::default();
    if let Some(info) = section_bytes(b".nv.info", &mut notes) {
        for attribute in readable_attributes(info, ".nv.info", &mut notes) {
            let map = match attribute.code {
                attr::REGCOUNT => &mut functions.registers,
                attr::FRAME_SIZE => &mut functions.frame,
                attr::MIN_STACK_SIZE => &mut functions.min_stack,
                attr::MAX_STACK_SIZE => &mut functions.max_stack,
                _ => continue,
            };
            // A symbol index, then the amount: checked to be there.
            if let Some(value) = attribute.value.function() {
                map.insert(
                    value.symbol.get(LittleEndian),
                    value.amount.get(LittleEndian),
                );
            }
        }
    }

    let mut arch_specific = false;
    if let Some(compat) = section_bytes(b".nv.compat", &mut notes) {
        let mut attributes = Attributes::new(compat);
        for attribute in attributes.by_ref() {
            if attribute.code == attr::COMPAT_ACCELERATOR_TARGET {
                arch_specific = attribute.value.number() == Some(1);
            }
        }
        note_damage(&attributes, ".nv.compat", &mut notes);
    }

    let mut kernels = Vec::new();
    let mut variables = Vec::new();
    for (index, symbol) in symbols.symbols().iter().enumerate() {
        let raw_name = match symbols.symbol_name(endian, symbol) {
            Ok(raw_name) => raw_name,
            Err(error) if is_kernel(symbol) || symbol.st_type() == STT_OBJECT => {
                notes.push(format!(
                    "symbol {index} (a kernel or variable) was skipped: its name cannot be read \
                     ({error})"
                ));
                continue;
            }
            Err(_) => continue,
        };
        let name = String::from_utf8_lossy(raw_name).into_owned();
        match symbol.st_type() {
            STT_FUNC if is_kernel(symbol) => {
                let Ok(index) = u32::try_from(index) else {
                    continue;
                };
                let mut kernel = CubinKernel {
                    demangled: demangle(&name),
                    params: Vec::new(),
                    params_error: None,
                    param_bytes: None,
                    registers: functions.registers.get(&index).copied(),
                    max_registers: None,
                    shared_bytes: section_size(&suffixed(b".nv.shared.", raw_name)),
                    local_bytes: section_size(&suffixed(b".nv.local.", raw_name)),
                    stack_bytes: functions
                        .max_stack
                        .get(&index)
                        .or(functions.min_stack.get(&index))
                        .copied(),
                    frame_bytes: functions.frame.get(&index).copied(),
                    constant0_bytes: section_size(&suffixed(b".nv.constant0.", raw_name)),
                    max_threads: None,
                    required_threads: None,
                    name,
                };
                let info_name = suffixed(b".nv.info.", raw_name);
                match section_bytes(&info_name, &mut notes) {
                    Some(info) => read_kernel_info(&mut kernel, info, &mut notes),
                    None => {
                        let missing = missing_info(&kernel.name);
                        unknown_params(&mut kernel, missing, &mut notes);
                    }
                }
                if kernel.registers.is_none() {
                    // Before ABI 8 the register count was the top byte of the code section's info.
                    kernel.registers = by_name
                        .get(&suffixed(b".text.", raw_name)[..])
                        .and_then(|&i| sections.section(object::SectionIndex(i)).ok())
                        .map(|text| text.sh_info(endian) >> 24)
                        .filter(|&count| count != 0);
                }
                kernels.push(kernel);
            }
            STT_OBJECT => {
                let shndx = symbol.st_shndx(endian);
                let section = sections.section(object::SectionIndex(usize::from(shndx)));
                let Some(section_name) = section
                    .ok()
                    .and_then(|s| sections.section_name(endian, s).ok())
                else {
                    // Undefined (0) and reserved indices place no variable here; another index
                    // is damage that hides one.
                    if shndx != SHN_UNDEF && shndx < SHN_LORESERVE {
                        notes.push(format!(
                            "symbol {index} ({name}) was skipped: its section {shndx} does not \
                             exist or has no readable name, so whether it is a variable is \
                             not known"
                        ));
                    }
                    continue;
                };
                if let Some(space) = variable_space(section_name) {
                    variables.push(Variable {
                        demangled: demangle(&name),
                        name,
                        space,
                        size: symbol.st_size(endian),
                    });
                }
            }
            _ => {}
        }
    }
    Ok(Cubin {
        arch,
        arch_specific,
        abi_version,
        relocatable,
        flags,
        kernels,
        variables,
        notes,
    })
}

fn read_kernel_info(kernel: &mut CubinKernel, info: &[u8], notes: &mut Vec<String>) {
    let section = format!(".nv.info.{}", kernel.name);
    for attribute in readable_attributes(info, &section, notes) {
        let value = attribute.value;
        match attribute.code {
            attr::CBANK_PARAM_SIZE => kernel.param_bytes = value.number(),
            attr::MAXREG_COUNT => kernel.max_registers = value.number(),
            attr::MAX_THREADS => kernel.max_threads = dims(value),
            attr::REQNTID => kernel.required_threads = dims(value),
            _ => {}
        }
    }
    match param_table::read(info, &kernel.name) {
        Ok(params) => kernel.params = params,
        Err(error) => unknown_params(kernel, error, notes),
    }
}

/// Why the parameters of `kernel`, which has no `.nv.info.<kernel>` section to read, are not
/// known.
fn missing_info(kernel: &str) -> ParseError {
    ParseError::new(
        format!(".nv.info.{kernel}"),
        Problem::Missing,
        "the kernel's attribute section is missing or cannot be read, so its parameters are not \
         known",
    )
}

/// Records that `kernel`'s parameters are not known, and why, in the kernel and in `notes`.
fn unknown_params(kernel: &mut CubinKernel, error: ParseError, notes: &mut Vec<String>) {
    notes.push(format!(
        "the parameters of {} are not known: {error}",
        kernel.name
    ));
    kernel.params = Vec::new();
    kernel.params_error = Some(error);
}

/// The attributes of the list `info` (the section named `section`) that read as their readers
/// take them (see [`unreadable`]), with a note in `notes` for each that does not (but those of
/// the parameter table, which reports its own) and for damage to the list.
fn readable_attributes<'a>(
    info: &'a [u8],
    section: &str,
    notes: &mut Vec<String>,
) -> Vec<Attribute<'a>> {
    let mut attributes = Attributes::new(info);
    let mut readable = Vec::new();
    for attribute in attributes.by_ref() {
        match unreadable(&attribute, None) {
            None => readable.push(attribute),
            Some(_) if param_table::reads(attribute.code) => {}
            Some(problem) => notes.push(format!(
                "section {section}: attribute {} {problem}; it was skipped",
                attribute.describe()
            )),
        }
    }
    note_damage(&attributes, section, notes);
    readable
}

fn dims(value: Value<'_>) -> Option<[u32; 3]> {
    match value.words()[..] {
        [x, y, z, ..] => Some([x, y, z]),
        _ => None,
    }
}

fn note_damage(attributes: &Attributes<'_>, section: &str, notes: &mut Vec<String>) {
    if let Some(offset) = attributes.damaged_at {
        notes.push(format!(
            "section {section} is damaged at byte {offset}; attributes after it were skipped"
        ));
    }
}

#[cfg(test)]
mod tests {
    use object::read::elf::ElfFile64;
    use object::{Object, ObjectSection, ObjectSymbol};

    use super::*;

    #[test]
    fn a_variable_in_a_section_that_does_not_exist_is_a_note_not_a_silent_gap() {
        let compiled = crate::Program::new(
            "__device__ int counter; __device__ float table[8];\n\
             extern \"C\" __global__ void k() { counter = table[threadIdx.x]; }",
        )
        .arch(crate::compile::Arch::new(9, 0))
        .compile()
        .expect("NVRTC compiles (run the tests with the CUDA wheels' venv)");
        let cubin = compiled.code();
        let listed = |bytes: &[u8]| -> Vec<String> {
            let parsed = parse(bytes).unwrap();
            parsed.variables.into_iter().map(|v| v.name).collect()
        };
        assert_eq!(listed(cubin), ["counter", "table"]);
        assert!(parse(cubin).unwrap().notes.is_empty());
        // `counter`'s section index (st_shndx, 2 bytes at 6 into its 24-byte entry) past the
        // section table.
        let elf = ElfFile64::<LittleEndian>::parse(cubin).unwrap();
        let counter = elf.symbols().find(|s| s.name() == Ok("counter")).unwrap();
        let (table_at, _) = elf
            .section_by_name(".symtab")
            .unwrap()
            .file_range()
            .unwrap();
        let at = table_at as usize + counter.index().0 * 24 + 6;
        let mut damaged = cubin.to_vec();
        damaged[at..at + 2].copy_from_slice(&0x1234u16.to_le_bytes());
        let parsed = parse(&damaged).unwrap();
        assert_eq!(listed(&damaged), ["table"]);
        let note = format!(
            "symbol {} (counter) was skipped: its section 4660 does not exist",
            counter.index().0
        );
        assert!(
            parsed.notes.iter().any(|n| n.contains(&note)),
            "{:?}",
            parsed.notes
        );
    }
}
