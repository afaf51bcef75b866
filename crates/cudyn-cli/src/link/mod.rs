//! `cudyn link`: device code linked by nvJitLink into one cubin, isolated in a link worker
//! process (`cudyn::compile::LinkOptions::isolated`): nvJitLink crashing on an input ends the
//! worker, not `cudyn link`, which then says what happened and exits with status 1 like any failed
//! link. The worker is this executable itself.

mod inputs;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use cudyn::compile::{Arch, InputKind, LinkOptions, Linked};

use crate::output::{self, CliError, Destination};

/// The text after `cudyn link --help`'s options.
const AFTER_HELP: &str = "\
Inputs, told apart by their contents:
  cubin (relocatable, from -rdc), PTX, LTO-IR (needs --lto), fatbin, host objects built by
  nvcc with device code (.o) and static libraries of them (.a, e.g. libcudadevrt.a).

Output: one cubin, linked.cubin in the current folder unless -o names it; -o - writes it to
standard output (refused on a terminal). An output that is one of the inputs is refused.
nvJitLink's info log goes to standard error (--json puts it in the report instead).

Exit status:
  0  linked and written
  1  an input could not be read or is not device code (a static library without any, a cubin
     of another architecture), the link failed (its log follows),
     nvJitLink crashed on an input (it runs in a process of its own, so that the crash is
     reported rather than ending cudyn) or ran past --time-limit or --memory-limit, or no
     target was known
  2  usage error: a bad option or value, an output that is an input, --json with -o -

Examples:
  cudyn compile kernel.cu step.cu --arch sm_90 --emit ltoir --rdc
  cudyn link kernel.ltoir step.ltoir --lto --arch sm_90 -o iterate.cubin
  cudyn link kernel.cubin step.cubin --arch sm_90 -o iterate.cubin
  cudyn link app.o libdevice_helpers.a --arch sm_90 --json
  cudyn inspect iterate.cubin";

/// Options of `cudyn link`.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The inputs: cubin, PTX, LTO-IR, fatbin, host objects and static libraries (`-`:
    /// standard input).
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    #[command(flatten)]
    limit: crate::input::Limit,
    /// Link-time optimization: LTO-IR inputs are optimized together (calls across them can
    /// be inlined). Needed for LTO-IR inputs.
    #[arg(long)]
    lto: bool,
    /// The GPU architecture to link for (sm_90, 90 or 9.0); the current GPU's when left out.
    #[arg(long)]
    arch: Option<Arch>,
    /// Optimization level of link-time code generation (0 to 3).
    #[arg(short = 'O', value_name = "LEVEL", value_parser = clap::value_parser!(u8).range(0..=3))]
    optimization: Option<u8>,
    /// Detailed information in nvJitLink's info log (registers, spills, ...).
    #[arg(long)]
    verbose: bool,
    /// Where to write the cubin (- for standard output).
    #[arg(short = 'o', value_name = "PATH", default_value = "linked.cubin")]
    output: PathBuf,
    /// Print a JSON object: inputs (file, kind), output, arch, lto, bytes, kernels, info_log,
    /// and error when it failed.
    #[arg(long)]
    json: bool,
    /// Stop the link after this many seconds and fail: nvJitLink can run for minutes on a
    /// damaged input. 600 seconds by default.
    #[arg(long, value_name = "SECONDS", value_parser = parse_time_limit)]
    time_limit: Option<Duration>,
    /// Stop the link when nvJitLink's process holds more than this many MiB of memory, and
    /// fail: a damaged input can make it take gigabytes. No limit by default.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..))]
    memory_limit: Option<u64>,
}

/// Set in the environment: link in this process, not in a link worker (for comparing the two).
const IN_PROCESS_ENV: &str = "CUDYN_LINK_IN_PROCESS";

/// A positive number of seconds.
fn parse_time_limit(text: &str) -> Result<Duration, String> {
    text.parse::<f64>()
        .ok()
        .filter(|seconds| seconds.is_finite() && *seconds > 0.0)
        .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok())
        .ok_or_else(|| format!("{text:?} is not a positive number of seconds"))
}

/// What a link did, as `--json` prints it.
#[derive(serde::Serialize)]
struct LinkReport {
    inputs: Vec<InputReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    arch: Option<String>,
    lto: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kernels: Option<usize>,
    info_log: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(serde::Serialize)]
struct InputReport {
    file: PathBuf,
    kind: &'static str,
}

/// Exit status: 0 when linked and written, 2 for a usage error, 1 otherwise.
pub fn run(args: &Args) -> ExitCode {
    // What the command line alone decides is refused before anything runs, on standard error
    // as every usage error is, never in a JSON report.
    let destination = match destination(args) {
        Ok(destination) => destination,
        Err(error) => {
            output::print_error("link", &error);
            return error.exit_code();
        }
    };
    let mut report = LinkReport::new(args);
    let outcome = link(args, destination, &mut report);
    finish(args, report, outcome)
}

/// Where the cubin goes, unless the command line contradicts itself: standard input named twice,
/// `--json` and `-o -` both for standard output, an output that is one of the inputs.
fn destination(args: &Args) -> Result<Destination, CliError> {
    crate::input::refuse_stdin_twice(&args.inputs)?;
    let destination = if args.output == Path::new("-") {
        if args.json {
            return Err(CliError::usage(
                "--json and -o - both want standard output: write the cubin to a file with -o",
            ));
        }
        output::stdout("cubin", true)?
    } else {
        Destination::File(args.output.clone())
    };
    output::refuse_clashes(&args.inputs, std::slice::from_ref(&destination))?;
    Ok(destination)
}

impl LinkReport {
    /// The report of a link of `args` before anything was done.
    fn new(args: &Args) -> LinkReport {
        LinkReport {
            inputs: Vec::new(),
            output: None,
            arch: None,
            lto: args.lto,
            bytes: None,
            kernels: None,
            info_log: String::new(),
            warnings: Vec::new(),
            error: None,
        }
    }
}

/// Prints what the link did (`--json`: the report) and gives the exit status.
fn finish(args: &Args, mut report: LinkReport, outcome: Result<Destination, CliError>) -> ExitCode {
    if let Err(error) = &outcome {
        report.error = Some(crate::terminal::chain(error));
    }
    if args.json {
        output::print_json("link", &report);
    } else {
        if !report.info_log.trim().is_empty() {
            crate::streams::errln!("{}", report.info_log.trim_end());
        }
        for warning in &report.warnings {
            crate::terminal::print_warning("cudyn link", warning);
        }
        match &outcome {
            Err(error) => output::print_error("link", error),
            Ok(destination) => output::print_written(
                destination,
                report.bytes.unwrap_or_default(),
                "cubin",
                report.arch.as_deref().unwrap_or_default(),
                report.kernels,
            ),
        }
    }
    if outcome.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `options` isolated in a link worker of this executable, with the command's limits; in this
/// process only when asked ([`IN_PROCESS_ENV`]) or when this executable's file cannot be found.
fn isolation(mut options: LinkOptions, args: &Args) -> LinkOptions {
    let worker = std::env::current_exe().ok();
    let Some(worker) = worker.filter(|_| std::env::var_os(IN_PROCESS_ENV).is_none()) else {
        return options;
    };
    cudyn::compile::set_workers(cudyn::compile::WorkerSetting::Executable(worker));
    options = options.isolated(true);
    if let Some(limit) = args.time_limit {
        options = options.time_limit(limit);
    }
    if let Some(mib) = args.memory_limit {
        options = options.memory_limit(mib.saturating_mul(1 << 20));
    }
    options
}

fn link(
    args: &Args,
    destination: Destination,
    report: &mut LinkReport,
) -> Result<Destination, CliError> {
    let mut inputs = Vec::with_capacity(args.inputs.len());
    for file in &args.inputs {
        let bytes = crate::input::device_code(file, args.limit)?;
        let kind = inputs::kind(file, &bytes)?;
        if kind == InputKind::LtoIr && !args.lto {
            return Err(CliError::new(format!(
                "pass --lto: {} is LTO-IR, which nvJitLink links only with link-time \
                 optimization",
                file.display()
            )));
        }
        if kind == InputKind::Library {
            inputs::refuse_library_without_device_code(file, &bytes)?;
        }
        report.inputs.push(InputReport {
            file: file.clone(),
            kind: inputs::kind_name(kind),
        });
        inputs.push((file, kind, bytes));
    }
    let mut options = LinkOptions::new().lto(args.lto).verbose(args.verbose);
    options = isolation(options, args);
    if let Some(arch) = args.arch {
        options = options.arch(arch);
    }
    if let Some(level) = args.optimization {
        options = options.optimization(level);
    }
    let mut linker = options
        .linker()
        .map_err(|error| output::arch_fix_first(error, "links"))?;
    for (file, kind, bytes) in &inputs {
        linker.add(*kind, bytes, &crate::input::display(file))?;
    }
    let linked: Linked = linker.finish()?;
    report.info_log = linked.info_log().to_owned();
    report.arch = Some(linked.arch().sm());
    report.kernels = output::count_kernels(linked.code());
    if report.kernels == Some(0) {
        let bytes: Vec<&[u8]> = inputs
            .iter()
            .map(|(_, _, bytes)| bytes.as_slice())
            .collect();
        report.warnings.push(inputs::why_no_kernel(&bytes));
    }
    destination.write(linked.code())?;
    report.bytes = Some(linked.code().len());
    report.output = Some(destination.to_string());
    Ok(destination)
}
