//! `cudyn compile`: CUDA C++ files to cubins, PTX, LTO-IR or fat binaries with NVRTC (and
//! nvFatbin), several files in parallel through cudyn's compile worker processes.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cudyn::compile::{compile_batch, Arch, CacheUse, Compiled, FatbinBuilder, Output, Program};

use crate::output::{self, CliError, Destination};

/// The text after `cudyn compile --help`'s options.
const AFTER_HELP: &str = "\
Output naming:
  One file, no -o        beside the source: kernel.cu -> kernel.cubin (.ptx, .ltoir, .fatbin)
  One file, -o PATH      PATH; -o - writes the code to standard output (refused on a terminal
                         for binary code), and the report then goes to standard error
  Several files          each beside its source, or with -o FOLDER as FOLDER/<stem>.<ext>;
                         -o FILE and -o - are refused, and so are two sources with one stem
  -o FOLDER/             (ending in /) a folder, made when missing, for one file or several
  An output that is one of the inputs (same file by any path) is refused.

Targets (--arch, comma-separated or repeated):
  sm_90, 90, 9.0         SASS for that GPU (a cubin)
  compute_90             PTX for that virtual architecture, JIT-compiled by the driver
  Several targets, or any compute_ target, make one fat binary (--emit fatbin) holding SASS
  per sm_ target and PTX per compute_ target. Without --arch: the current GPU's architecture.

Inputs are regular files of CUDA C++ text (- reads standard input, with -o naming the output),
at most --max-input-bytes each.

Exit status:
  0  every file compiled and was written
  1  a file did not compile, could not be read or written, or no target was known
  2  usage error: a bad option or value, or a contradiction (--emit cubin with two targets, a
     target named twice, an output that is an input, --json with -o -); nothing is written

Examples:
  cudyn compile saxpy.cu --arch sm_90                     # saxpy.cubin
  cudyn compile saxpy.cu --arch sm_80,sm_90,compute_90    # saxpy.fatbin
  cudyn compile saxpy.cu --arch sm_90 --emit ptx -o -     # PTX on standard output
  cudyn compile a.cu b.cu c.cu --arch sm_90 -o build/     # build/a.cubin, build/b.cubin, ...
  cudyn compile piece.cu --arch sm_90 --emit ltoir --rdc  # piece.ltoir, for cudyn link --lto
  cudyn compile scale.cu --arch 90 -D FACTOR=2.0f --json
  cudyn compile half.cu --arch sm_90          # #include <cuda_fp16.h>: no -I needed
  cudyn compile saxpy.cu --arch sm_90 --no-cache          # NVRTC runs, the cache is untouched
  cudyn compile - --arch sm_90 -o from_stdin.cubin < saxpy.cu";

/// Options of `cudyn compile`.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The CUDA C++ source files (`-`: standard input, with -o naming the output).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    limit: crate::input::Limit,
    /// What to produce: cubin (SASS, the default for one sm_ target), ptx, ltoir (for
    /// `cudyn link --lto`) or fatbin (the default for several targets).
    #[arg(long, value_enum)]
    emit: Option<Emit>,
    /// Target architectures, comma-separated: sm_90 (or 90, 9.0) for SASS, compute_90 for
    /// PTX. The current GPU's (device 0, as CUDA numbers them) when left out.
    #[arg(long, value_delimiter = ',', value_name = "ARCH,...")]
    arch: Vec<Target>,
    /// Define a macro: NAME or NAME=VALUE (repeatable).
    #[arg(short = 'D', value_name = "NAME[=VALUE]", value_parser = parse_define)]
    define: Vec<String>,
    /// Add an include folder (repeatable). CUDA's own headers (cuda_fp16.h, cooperative_groups.h,
    /// cuda/std, cub, thrust, nv) need none: their folders, as `cudyn doctor` lists them, are
    /// searched after these.
    #[arg(short = 'I', value_name = "FOLDER")]
    include: Vec<PathBuf>,
    /// Do not search CUDA's own header folders: only the -I folders.
    #[arg(long)]
    no_default_includes: bool,
    /// Relocatable device code (-rdc=true), for pieces linked together.
    #[arg(long)]
    rdc: bool,
    /// Write PTX even when NVRTC is newer than this machine's driver (for another machine).
    #[arg(long)]
    allow_newer_ptx: bool,
    /// Compile with NVRTC even when the compile cache holds the result, and store nothing (as
    /// CUDYN_CACHE=off does for every command).
    #[arg(long)]
    no_cache: bool,
    /// Pass an NVRTC option as is (repeatable), e.g. -X=--use_fast_math. The options that
    /// --arch, --rdc and --emit ltoir set are refused here.
    #[arg(
        short = 'X',
        value_name = "OPTION",
        allow_hyphen_values = true,
        value_parser = parse_nvrtc_option
    )]
    option: Vec<String>,
    /// Where to write: a file for one source (- for standard output), a folder for several.
    /// Beside each source when left out (see "Output naming" below).
    #[arg(short = 'o', value_name = "PATH")]
    output: Option<PathBuf>,
    /// Print a JSON array, an object per file: file, output, emit, targets, bytes, kernels,
    /// log, warnings, and error when it failed.
    #[arg(long)]
    json: bool,
}

/// A `-D` value: `NAME` or `NAME=VALUE`, the name a C identifier, optionally with a parameter
/// list (`MAX(a,b)=...`). An empty one would reach NVRTC as a bare `-D`, which takes the next
/// option as the macro.
fn parse_define(text: &str) -> Result<String, String> {
    let name = text.split_once('=').map_or(text, |(name, _)| name);
    let identifier = name
        .split_once('(')
        .map_or(name, |(identifier, _)| identifier);
    let mut chars = identifier.chars();
    let valid = chars
        .next()
        .is_some_and(|first| first == '_' || first.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        && (identifier.len() == name.len() || name.ends_with(')'));
    if valid {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "`{text}` is not a macro definition: write NAME or NAME=VALUE, the name a C \
             identifier (e.g. -D FACTOR=2.0f)"
        ))
    }
}

/// The NVRTC options that cudyn's own options set, with the option to use instead.
const OWN_OPTIONS: [(&str, &str); 6] = [
    ("--gpu-architecture", "--arch"),
    ("-arch", "--arch"),
    ("--relocatable-device-code", "--rdc"),
    ("-rdc", "--rdc"),
    ("--dlink-time-opt", "--emit ltoir"),
    ("-dlto", "--emit ltoir"),
];

/// A `-X` value, unless it sets what one of cudyn's own options sets: NVRTC takes the last
/// setting, so the output would differ from the targets and kind the report names.
fn parse_nvrtc_option(text: &str) -> Result<String, String> {
    let sets = |name: &str| {
        text == name
            || text
                .strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('=') || rest.starts_with(' '))
    };
    match OWN_OPTIONS.iter().find(|(name, _)| sets(name)) {
        Some((name, instead)) => Err(format!(
            "{name} is set by cudyn compile's {instead}, which the report of what was built \
             follows: use {instead} instead of -X"
        )),
        None => Ok(text.to_owned()),
    }
}

/// The kinds of output `cudyn compile` writes.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Emit {
    /// SASS for one architecture, in an ELF cubin.
    Cubin,
    /// PTX text for one virtual architecture.
    Ptx,
    /// LTO-IR for link-time optimization.
    Ltoir,
    /// A fat binary: SASS per sm_ target, PTX per compute_ target.
    Fatbin,
}

impl Emit {
    fn extension(self) -> &'static str {
        match self {
            Emit::Cubin => "cubin",
            Emit::Ptx => "ptx",
            Emit::Ltoir => "ltoir",
            Emit::Fatbin => "fatbin",
        }
    }
}

/// One `--arch` item: SASS for a real architecture or PTX for a virtual one.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Target {
    Sass(Arch),
    Ptx(Arch),
}

impl std::str::FromStr for Target {
    type Err = cudyn::Error;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let arch = text.parse()?;
        Ok(if text.trim().starts_with("compute_") {
            Target::Ptx(arch)
        } else {
            Target::Sass(arch)
        })
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Sass(arch) => f.write_str(&arch.sm()),
            Target::Ptx(arch) => f.write_str(&arch.compute()),
        }
    }
}

/// What was made of one file, as `--json` prints it.
#[derive(serde::Serialize)]
struct FileReport {
    file: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<String>,
    emit: Emit,
    targets: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kernels: Option<usize>,
    /// How the compile cache served each target, in the targets' order: `hit`, `miss`, `off`
    /// or `uncacheable`.
    cache: Vec<&'static str>,
    log: String,
    warnings: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// What a file's programs made: its code, the compiler's logs, and how the cache served each.
struct Built {
    code: Vec<u8>,
    log: String,
    cache: Vec<CacheUse>,
}

/// Exit status: 0 when every file compiled and was written, 1 otherwise (see `AFTER_HELP`).
pub fn run(args: &Args) -> ExitCode {
    let plan = match Plan::new(args) {
        Ok(plan) => plan,
        Err(error) => {
            output::print_error("compile", &error);
            return error.exit_code();
        }
    };
    let reports = compile_all(args, &plan);
    let failed = reports.iter().any(|report| report.error.is_some());
    if args.json {
        output::print_json("compile", &reports);
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// What to make and where, decided before any file is compiled.
struct Plan {
    emit: Emit,
    targets: Vec<Target>,
    outputs: output::Outputs,
}

impl Plan {
    /// The plan of `args`; what the command line contradicts is a usage error, found before
    /// the current GPU is asked for its architecture.
    fn new(args: &Args) -> Result<Plan, CliError> {
        crate::input::refuse_stdin_twice(&args.files)?;
        if args.json && args.output.as_deref() == Some(Path::new("-")) {
            return Err(CliError::usage(
                "--json and -o - both want standard output: write the code to a file with -o",
            ));
        }
        if let Some(twice) = args
            .arch
            .iter()
            .enumerate()
            .find_map(|(at, target)| args.arch[..at].contains(target).then_some(target))
        {
            return Err(CliError::usage(format!(
                "--arch names {twice} twice: name each target once"
            )));
        }
        let emit = args.emit.unwrap_or(match args.arch.as_slice() {
            [] | [Target::Sass(_)] => Emit::Cubin,
            _ => Emit::Fatbin,
        });
        if emit != Emit::Fatbin && args.arch.len() > 1 {
            return Err(CliError::usage(format!(
                "--emit {} makes code for one architecture, and --arch names {}: use --emit \
                 fatbin for one file holding them all, or one --arch",
                emit.extension(),
                args.arch.len()
            )));
        }
        if let (Emit::Cubin | Emit::Ltoir, [Target::Ptx(arch)]) = (emit, args.arch.as_slice()) {
            return Err(CliError::usage(format!(
                "--emit {} makes SASS for a real architecture, and {} is a virtual one: pass \
                 --arch {} or --emit ptx",
                emit.extension(),
                arch.compute(),
                arch.sm()
            )));
        }
        let outputs = output::destinations(
            &args.files,
            args.output.as_deref(),
            emit.extension(),
            emit != Emit::Ptx,
        )?;
        let targets = match args.arch.as_slice() {
            [] => {
                vec![Target::Sass(Arch::current().map_err(|error| {
                    output::arch_fix_first(error, "compiles")
                })?)]
            }
            named => named.to_vec(),
        };
        // PTX is for a virtual architecture, whichever way --arch spelled it.
        let targets = match emit {
            Emit::Ptx => targets
                .into_iter()
                .map(|(Target::Sass(arch) | Target::Ptx(arch))| Target::Ptx(arch))
                .collect(),
            _ => targets,
        };
        Ok(Plan {
            emit,
            targets,
            outputs,
        })
    }
}

/// Compiles every file, each for every target, as one batch: programs already in the compile
/// cache are read back, the rest are compiled in cudyn's worker processes
/// (`cudyn::compile::compile_batch`; on this process's threads when workers cannot be had). A
/// spinner on a terminal says it is working; the reports are printed at the end, in the files'
/// order.
fn compile_all(args: &Args, plan: &Plan) -> Vec<FileReport> {
    let spinner = spinner(args.files.len(), args.json);
    // The batch holds every file's programs in turn; each file keeps how many are its own, or
    // why it has none.
    let mut batch = Vec::new();
    let counts: Vec<Result<usize, CliError>> = args
        .files
        .iter()
        .map(|file| {
            let programs = programs_for(args, plan, file)?;
            let count = programs.len();
            batch.extend(programs);
            Ok(count)
        })
        .collect();
    let mut results = compile_batch(&batch).results.into_iter();
    let reports: Vec<FileReport> = args
        .files
        .iter()
        .zip(counts)
        .zip(&plan.outputs.destinations)
        .map(|((file, count), destination)| {
            let built = count.and_then(|count| {
                // All of this file's results are taken, whatever they hold, so that the next
                // file starts at its own.
                let outcomes: Vec<_> = results.by_ref().take(count).collect();
                let compiled = outcomes.into_iter().collect::<Result<Vec<Compiled>, _>>()?;
                assemble(plan, file, compiled)
            });
            report(args, plan, file, destination, built)
        })
        .collect();
    spinner.finish_and_clear();
    if !args.json {
        for (report, destination) in reports.iter().zip(&plan.outputs.destinations) {
            print_report(report, destination);
        }
    }
    reports
}

/// A spinner on standard error when it is a terminal and there is more than one file; hidden
/// otherwise, so that logs and pipes get no control characters.
fn spinner(files: usize, json: bool) -> indicatif::ProgressBar {
    if files < 2 || json || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let spinner = indicatif::ProgressBar::new_spinner();
    if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
        spinner.set_style(style);
    }
    spinner.set_message(format!("compiling {files} files"));
    spinner.enable_steady_tick(std::time::Duration::from_millis(100));
    spinner
}

/// The report of `file`: what was built and written to `destination`, or why not.
fn report(
    args: &Args,
    plan: &Plan,
    file: &Path,
    destination: &Destination,
    built: Result<Built, CliError>,
) -> FileReport {
    let mut report = FileReport {
        file: file.to_owned(),
        output: None,
        emit: plan.emit,
        targets: plan.targets.iter().map(Target::to_string).collect(),
        bytes: None,
        kernels: None,
        cache: Vec::new(),
        log: String::new(),
        warnings: Vec::new(),
        error: None,
    };
    match built {
        Ok(Built { code, log, cache }) => {
            report.log = log;
            report.cache = cache.iter().map(cache_word).collect();
            let uncacheable = cache.iter().find_map(|cache_use| match cache_use {
                CacheUse::Uncacheable(why) => Some(why),
                _ => None,
            });
            if let Some(why) = uncacheable {
                report.warnings.push(format!(
                    "{} was compiled without the compile cache, which answers only when it knows \
                     every file a compile reads: {why}",
                    file.display()
                ));
            }
            report.kernels = output::count_kernels(&code);
            // A piece for linking (--rdc) may rightly hold only device functions.
            if report.kernels == Some(0) && !args.rdc {
                report.warnings.push(format!(
                    "{} defines no kernel: the output holds none (is the source empty, or are its \
                     kernels templates never instantiated?)",
                    file.display()
                ));
            }
            match plan.outputs.write(destination, &code) {
                Ok(()) => {
                    report.output = Some(destination.to_string());
                    report.bytes = Some(code.len());
                }
                Err(error) => report.error = Some(crate::terminal::chain(&error)),
            }
        }
        Err(error) => report.error = Some(crate::terminal::chain(&error)),
    }
    report
}

/// The programs of `file`, one per target of the plan, in the plan's order.
fn programs_for(args: &Args, plan: &Plan, file: &Path) -> Result<Vec<Program>, CliError> {
    let source = crate::input::source(file, args.limit)?;
    let program = program(args, file, source);
    Ok(plan
        .targets
        .iter()
        .map(|&target| {
            let (arch, kind) = match target {
                Target::Sass(arch) if plan.emit == Emit::Ltoir => (arch, Output::LtoIr),
                Target::Sass(arch) => (arch, Output::Cubin),
                Target::Ptx(arch) => (arch, Output::Ptx),
            };
            program.clone().arch(arch).output(kind)
        })
        .collect())
}

/// How a report names a [`CacheUse`].
fn cache_word(cache_use: &CacheUse) -> &'static str {
    match cache_use {
        CacheUse::Hit => "hit",
        CacheUse::Miss => "miss",
        CacheUse::Uncacheable(_) => "uncacheable",
        _ => "off",
    }
}

/// The code for `file` from its programs' results (in the plan's targets' order) and the
/// compiler's logs: the one result, or a fat binary of them all.
fn assemble(plan: &Plan, file: &Path, compiled: Vec<Compiled>) -> Result<Built, CliError> {
    let cache = compiled
        .iter()
        .map(|compiled| compiled.cache_use().clone())
        .collect();
    if plan.emit != Emit::Fatbin {
        let Some(compiled) = compiled.into_iter().next() else {
            return Err(CliError::new(format!(
                "{} was not compiled",
                file.display()
            )));
        };
        let log = compiled.log().to_owned();
        return Ok(Built {
            code: compiled.into_code(),
            log,
            cache,
        });
    }
    let mut fatbin = FatbinBuilder::new()?;
    let mut logs = String::new();
    let identifier = file.file_name().unwrap_or_default().to_string_lossy();
    for (&target, compiled) in plan.targets.iter().zip(&compiled) {
        logs.push_str(compiled.log());
        match target {
            Target::Sass(arch) => fatbin.add_cubin(compiled.code(), arch, &identifier)?,
            Target::Ptx(arch) => fatbin.add_ptx(compiled.code(), arch, &identifier)?,
        };
    }
    Ok(Built {
        code: fatbin.finish()?,
        log: logs,
        cache,
    })
}

/// The NVRTC program for `file`, every option but the target set. It is named by the file's
/// path as given, as NVIDIA's samples name theirs: NVRTC then finds the headers beside the
/// source, from any folder, and its messages name the file as the user did.
fn program(args: &Args, file: &Path, source: String) -> Program {
    let name = if crate::input::is_stdin(file) {
        "<stdin>".into()
    } else {
        file.to_string_lossy()
    };
    let mut program = Program::new(source)
        .name(name)
        .relocatable(args.rdc)
        .allow_newer_ptx(args.allow_newer_ptx)
        .default_includes(!args.no_default_includes)
        .cache(!args.no_cache);
    for define in &args.define {
        program = match define.split_once('=') {
            Some((name, value)) => program.define_value(name, value),
            None => program.define(define),
        };
    }
    for folder in &args.include {
        program = program.include(folder);
    }
    for option in &args.option {
        program = program.option(option);
    }
    program
}

/// The table form of a report: the compiler's log and warnings on standard error, the summary on
/// standard output unless the code went there.
fn print_report(report: &FileReport, destination: &Destination) {
    if !report.log.trim().is_empty() {
        crate::streams::errln!("{}", report.log.trim_end());
    }
    for warning in &report.warnings {
        crate::terminal::print_warning("cudyn compile", warning);
    }
    if let Some(error) = &report.error {
        crate::terminal::print_error_text("cudyn compile", error);
        return;
    }
    output::print_written(
        destination,
        report.bytes.unwrap_or_default(),
        report.emit.extension(),
        &report.targets.join(", "),
        report.kernels,
    );
}
