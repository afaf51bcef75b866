//! `cudyn inspect`: what is in device code files, with no GPU.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use cudyn::ctype::param_types_of_symbol;
use cudyn::inspect::archive::Archive;
use cudyn::inspect::cubin::{Cubin, Space};
use cudyn::inspect::fatbin::{Compression, Entry, EntryContents, EntryKind, Fatbin};
use cudyn::inspect::ltoir::LtoIr;
use cudyn::inspect::ptx::PtxModule;
use cudyn::inspect::Contents;
use cudyn::{Inspection, KernelName};

/// The text after `cudyn inspect --help`'s options.
const AFTER_HELP: &str = "\
The kernel table (one per cubin), one row per kernel:
  regs     registers per thread
  params   bytes of parameters the kernel takes
  shared   bytes of static shared memory per block
  local    bytes of local memory per thread, besides the stack
  stack    bytes of stack per thread
  threads  the most threads per block the kernel allows (__launch_bounds__); - when unbounded
  kernel   the C++ name, then the symbol the driver knows [in brackets] when it is mangled
  params: #0 @0+8 float* #1 @8+4 int   under a row: parameter #0 at byte offset 0, 8 bytes long,
           a float*; #1 at 8, 4 bytes, an int: the layout and C types a launch's arguments
           must follow (the types come from a C++ kernel's mangled name)
  params: #0 @0+8 #1 @8+4  (size-checked only)   an extern \"C\" kernel: the cubin records
           only sizes, so its launches are checked by size and offset, not by type
  PTX entries list their .param types: a launch of a kernel loaded from PTX checks what they
  say (.f32 is a float, .u32 any 32-bit integer, .u64 an integer or a pointer).
  A - in any column: the cubin does not record it. A ? for params: the kernel's parameter table
  cannot be read; a note under the cubin says why.

--kernels lists each file's kernels instead, each once however many modules define it (a
fatbin's SASS for several architectures and its PTX): the C++ signature, then the symbol the
driver knows [in brackets]; an extern \"C\" kernel by its symbol alone. Either one finds the
kernel in `cudyn run` and cudyn::Library::kernel.

Static libraries (.a): each member is shown as device code (a cubin, a fatbin, ...) or a host
object with its embedded device code; members without device code are named with the reason.

Errors go to standard error; with --json each file's object also holds them as \"error\".

Exit status:
  0  every file was read
  1  a file could not be read, is not device code, or is damaged
  2  usage error (bad option)

Examples:
  cudyn inspect saxpy.cubin
  cudyn inspect app.fatbin kernels.ptx piece.ltoir
  cudyn inspect ./my_program            # a host program built by nvcc
  cudyn inspect libcudadevrt.a          # a static library
  cudyn inspect --kernels app.fatbin     # every kernel once, with its C++ signature
  cudyn inspect --json saxpy.cubin
  cudyn inspect - < saxpy.cubin          # standard input";

#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// Files to inspect: PTX, cubin, fatbin, LTO-IR, host programs, shared libraries and
    /// objects built by nvcc, and static libraries (.a); `-` reads standard input.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    limit: crate::input::Limit,
    /// Print JSON (one array, an object per file: file, then inspection (or kernels) or
    /// error) instead of tables.
    #[arg(long)]
    json: bool,
    /// List each file's kernels, each once, with its C++ signature and its symbol, instead of
    /// the tables.
    #[arg(long)]
    kernels: bool,
}

#[derive(serde::Serialize)]
struct FileReport {
    file: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    inspection: Option<Inspection>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kernels: Option<Vec<KernelName>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// What was read of one file: an inspection, or its kernel list (`--kernels`).
enum Read {
    Inspection(Inspection),
    Kernels(Vec<KernelName>),
}

/// Exit status: 0 when every file was read, 1 when any was not device code or malformed.
pub fn run(args: &Args) -> ExitCode {
    if let Err(error) = crate::input::refuse_stdin_twice(&args.files) {
        crate::output::print_error("inspect", &error);
        return error.exit_code();
    }
    let reports: Vec<FileReport> = args
        .files
        .iter()
        .map(|file| {
            let result = crate::input::image(file, args.limit).and_then(|image| {
                Ok(if args.kernels {
                    Read::Kernels(image.kernel_list()?)
                } else {
                    Read::Inspection(image.inspect()?)
                })
            });
            let (mut inspection, mut kernels, mut error) = (None, None, None);
            match result {
                Ok(Read::Inspection(read)) => inspection = Some(read),
                Ok(Read::Kernels(read)) => kernels = Some(read),
                Err(failure) => error = Some(naming_once(file, &failure)),
            }
            FileReport {
                file: file.clone(),
                inspection,
                kernels,
                error,
            }
        })
        .collect();
    if args.json {
        crate::output::print_json("inspect", &reports);
    } else {
        let tables = reports.iter().filter_map(|report| {
            let name = report.file.display().to_string();
            match (&report.inspection, &report.kernels) {
                (Some(inspection), _) => Some(render_inspection(&name, inspection) + "\n"),
                (None, Some(kernels)) => Some(render_kernels(&name, kernels) + "\n"),
                (None, None) => None,
            }
        });
        crate::output::print_text(tables);
    }
    for error in reports.iter().filter_map(|report| report.error.as_deref()) {
        crate::terminal::print_error_text("cudyn inspect", error);
    }
    if reports.iter().any(|report| report.error.is_some()) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// `error` with its causes, naming `file` once: at the start unless the library's message
/// already names it.
fn naming_once(file: &std::path::Path, error: &crate::output::CliError) -> String {
    let text = crate::terminal::chain(error);
    let name = crate::input::display(file);
    if text.contains(&name) {
        text
    } else {
        format!("{name}: {text}")
    }
}

/// The readable table of what `inspection` found, headed by `name`.
pub fn render_inspection(name: &str, inspection: &Inspection) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{name}: {} ({} bytes)",
        inspection.kind, inspection.size
    );
    render_contents(&mut out, &inspection.contents, 1);
    out
}

/// The `--kernels` listing of one file, headed by `name`: a kernel a line, its signature then
/// its symbol in brackets (its symbol alone for an `extern "C"` kernel).
pub fn render_kernels(name: &str, kernels: &[KernelName]) -> String {
    let mut out = format!("{name}: {} kernel(s)\n", kernels.len());
    for kernel in kernels {
        let _ = writeln!(
            out,
            "{}{}",
            indent(1),
            display_name(&kernel.symbol, kernel.signature.as_deref())
        );
    }
    out
}

fn render_contents(out: &mut String, contents: &Contents, depth: usize) {
    match contents {
        Contents::Ptx(ptx) => render_ptx(out, ptx, depth),
        Contents::Cubin(cubin) => render_cubin(out, cubin, depth),
        Contents::Fatbin(fatbin) => render_fatbin(out, fatbin, depth),
        Contents::LtoIr(ltoir) => render_ltoir(out, ltoir, depth),
        Contents::Archive(archive) => render_archive(out, archive, depth),
        Contents::HostBinary(host) => {
            let _ = writeln!(
                out,
                "{}host {} ({}, {})",
                indent(depth),
                host.file_kind,
                host.format,
                host.architecture
            );
            for section in &host.sections {
                let _ = writeln!(
                    out,
                    "{}section {}: {} fatbin(s)",
                    indent(depth),
                    section.name,
                    section.fatbins.len()
                );
                for fatbin in &section.fatbins {
                    render_fatbin(out, fatbin, depth + 1);
                }
                render_notes(out, &section.notes, depth + 1);
            }
        }
        other => {
            let _ = writeln!(out, "{}{other:?}", indent(depth));
        }
    }
}

fn render_archive(out: &mut String, archive: &Archive, depth: usize) {
    let _ = writeln!(
        out,
        "{}{} member(s), {} with device code",
        indent(depth),
        archive.members.len(),
        archive.device_members()
    );
    for member in &archive.members {
        let _ = writeln!(
            out,
            "{}member {} ({} bytes)",
            indent(depth),
            member.name,
            member.size
        );
        match (&member.inspection, &member.note) {
            (Some(inspection), _) => render_contents(out, &inspection.contents, depth + 1),
            (None, Some(note)) => render_notes(out, std::slice::from_ref(note), depth + 1),
            (None, None) => {}
        }
    }
}

fn render_fatbin(out: &mut String, fatbin: &Fatbin, depth: usize) {
    let _ = writeln!(
        out,
        "{}fatbin version {}, {} entries",
        indent(depth),
        fatbin.version,
        fatbin.entries.len()
    );
    for (number, entry) in fatbin.entries.iter().enumerate() {
        let _ = writeln!(out, "{}[{number}] {}", indent(depth), entry_line(entry));
        match &entry.contents {
            Some(EntryContents::Cubin(cubin)) => render_cubin(out, cubin, depth + 1),
            Some(EntryContents::Ptx(ptx)) => render_ptx(out, ptx, depth + 1),
            Some(EntryContents::LtoIr(ltoir)) => render_ltoir(out, ltoir, depth + 1),
            Some(other) => {
                let _ = writeln!(out, "{}{other:?}", indent(depth + 1));
            }
            None => {}
        }
    }
    render_notes(out, &fatbin.notes, depth);
}

fn entry_line(entry: &Entry) -> String {
    let (kind, arch) = match entry.kind {
        EntryKind::Sass => ("SASS".to_string(), format!("sm_{}", entry.arch)),
        EntryKind::Ptx => ("PTX".to_string(), format!("compute_{}", entry.arch)),
        EntryKind::LtoIr => ("LTO-IR".to_string(), format!("sm_{}", entry.arch)),
        EntryKind::Unknown(kind) => (format!("kind {kind}"), format!("arch {}", entry.arch)),
        other => (format!("{other:?}"), format!("arch {}", entry.arch)),
    };
    let mut line = format!("{kind:<6} {arch:<12} {} bytes", entry.stored_size);
    match (entry.compression, entry.decompressed_size) {
        (Compression::None, _) => {}
        (compression, size) => {
            let _ = write!(
                line,
                ", {compression:?}-compressed from {} bytes",
                size.unwrap_or_default()
            );
        }
    }
    if entry.obfuscated {
        line.push_str(", obfuscated");
    }
    if let Some(identifier) = &entry.identifier {
        let _ = write!(line, ", id {identifier}");
    }
    if let Some(note) = &entry.note {
        let _ = write!(line, " ({note})");
    }
    line
}

fn render_cubin(out: &mut String, cubin: &Cubin, depth: usize) {
    let pad = indent(depth);
    let _ = writeln!(
        out,
        "{pad}cubin {} (ELF ABI {}, flags {:#x}), {} kernel(s){}",
        cubin.arch_name(),
        cubin.abi_version,
        cubin.flags,
        cubin.kernels.len(),
        if cubin.relocatable {
            ", relocatable: link it before loading"
        } else {
            ""
        }
    );
    if !cubin.kernels.is_empty() {
        let _ = writeln!(
            out,
            "{pad}  {:>4} {:>6} {:>8} {:>6} {:>6} {:>7}  kernel",
            "regs", "params", "shared", "local", "stack", "threads"
        );
    }
    for kernel in &cubin.kernels {
        let param_bytes = match kernel.params_error {
            Some(_) => "?".to_owned(),
            None => kernel
                .params
                .iter()
                .map(|p| p.offset + p.size)
                .max()
                .unwrap_or(0)
                .to_string(),
        };
        let threads = kernel.max_threads.map_or("-".to_string(), |[x, y, z]| {
            (u64::from(x) * u64::from(y) * u64::from(z)).to_string()
        });
        let _ = writeln!(
            out,
            "{pad}  {:>4} {:>6} {:>8} {:>6} {:>6} {:>7}  {}",
            opt(kernel.registers),
            param_bytes,
            kernel.shared_bytes,
            kernel.local_bytes,
            opt(kernel.stack_bytes),
            threads,
            display_name(&kernel.name, kernel.demangled.as_deref())
        );
        // A C++ kernel's name spells its parameter types; an extern "C" one in a cubin has
        // sizes only, and its launches are checked by size.
        let types = param_types_of_symbol(&kernel.name).filter(|types| {
            types.len() == kernel.params.len() && types.iter().any(Option::is_some)
        });
        let params: Vec<String> = kernel
            .params
            .iter()
            .enumerate()
            .map(|(index, p)| {
                let ty = types.as_ref().and_then(|types| types.get(index)?.as_ref());
                match ty {
                    Some(ty) => format!("#{index} @{}+{} {ty}", p.offset, p.size),
                    None => format!("#{index} @{}+{}", p.offset, p.size),
                }
            })
            .collect();
        if !params.is_empty() {
            let checked = if types.is_some() {
                ""
            } else {
                "  (size-checked only)"
            };
            let _ = writeln!(out, "{pad}{:>41}params: {}{checked}", "", params.join(" "));
        }
    }
    for variable in &cubin.variables {
        let space = match variable.space {
            Space::Global => "global".to_string(),
            Space::Constant(bank) => format!("constant bank {bank}"),
            other => format!("{other:?}"),
        };
        let _ = writeln!(
            out,
            "{pad}  variable {} ({space}, {} bytes)",
            display_name(&variable.name, variable.demangled.as_deref()),
            variable.size
        );
    }
    render_notes(out, &cubin.notes, depth);
}

fn render_ptx(out: &mut String, ptx: &PtxModule, depth: usize) {
    let pad = indent(depth);
    let _ = writeln!(
        out,
        "{pad}PTX {} for {}, {}-bit addresses, {} entr{}",
        ptx.version.as_deref().unwrap_or("(no .version)"),
        ptx.target.join(", "),
        opt(ptx.address_size),
        ptx.entries.len(),
        if ptx.entries.len() == 1 { "y" } else { "ies" }
    );
    for entry in &ptx.entries {
        let params: Vec<String> = entry
            .params
            .iter()
            .map(|p| match p.count {
                Some(1) => p.ty.clone(),
                Some(count) => format!("{}[{count}]", p.ty),
                None => format!("{}[?]", p.ty),
            })
            .collect();
        let _ = writeln!(
            out,
            "{pad}  entry {}({})",
            display_name(&entry.name, entry.demangled.as_deref()),
            params.join(", ")
        );
    }
    for variable in &ptx.variables {
        let _ = writeln!(
            out,
            "{pad}  variable {} ({}, {} bytes)",
            variable.name,
            variable.space,
            opt(variable.size)
        );
    }
}

fn render_ltoir(out: &mut String, ltoir: &LtoIr, depth: usize) {
    let arch = ltoir
        .arch
        .map_or("unknown arch".to_string(), |a| format!("sm_{a}"));
    let _ = writeln!(out, "{}LTO-IR ({:?}), {arch}", indent(depth), ltoir.format);
}

fn render_notes(out: &mut String, notes: &[String], depth: usize) {
    for note in notes {
        let _ = writeln!(out, "{}note: {note}", indent(depth));
    }
}

fn display_name(name: &str, demangled: Option<&str>) -> String {
    match demangled {
        Some(demangled) => format!("{demangled}  [{name}]"),
        None => name.to_string(),
    }
}

fn opt<T: ToString>(value: Option<T>) -> String {
    value.map_or("-".to_string(), |v| v.to_string())
}

fn indent(depth: usize) -> String {
    "  ".repeat(depth)
}
