//! What the examples share: running one, comparing its result with the CPU's, and reporting.
//!
//! Every example runs in two parts: the offline part (compiling, linking), which needs no GPU,
//! then loading and launching on the GPU, where each result is compared with the CPU's. It
//! prints one line, `<example>: ok: <what was checked>`, and exits 0 when the GPU's results
//! equal the CPU's; `<example>: MISMATCH: ...` and exit status 1 when they do not; and, when
//! cudyn fails (a compile error, a CUDA error), `error: ...` with its causes on stderr and exit
//! status 1.
//!
//! Without a GPU, an example first says so, with the reason and how to run its offline part
//! (`error: no GPU here ...`, exit status 1); with `--arch ARCH` (`cargo run -p cudyn --example
//! NAME -- --arch sm_90`) it runs that part for ARCH and prints `<example>: offline: <what it
//! made>` (exit status 0). On a GPU, `--arch` names the architecture to compile for instead of
//! the GPU's.

use std::error::Error;
use std::ffi::OsString;
use std::fmt::Debug;
use std::process::ExitCode;

use cudyn::compile::Arch;

/// The outcome of an example: what was computed, and the first difference from the CPU if any.
#[derive(Debug)]
pub struct Verdict {
    what: String,
    difference: Option<String>,
}

/// Compares the GPU's values with the CPU's, element by element.
pub fn compare<T: PartialEq + Debug>(what: impl Into<String>, gpu: &[T], cpu: &[T]) -> Verdict {
    let difference = if gpu.len() != cpu.len() {
        Some(format!(
            "{} values from the GPU, {} from the CPU",
            gpu.len(),
            cpu.len()
        ))
    } else {
        gpu.iter()
            .zip(cpu)
            .position(|(g, c)| g != c)
            .map(|i| format!("at {i}: the GPU gives {:?}, the CPU {:?}", gpu[i], cpu[i]))
    };
    Verdict {
        what: what.into(),
        difference,
    }
}

/// Several verdicts as one: the first difference wins.
fn all(verdicts: Vec<Verdict>) -> Verdict {
    let what = verdicts
        .iter()
        .map(|verdict| verdict.what.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    let difference = verdicts
        .into_iter()
        .find_map(|verdict| Some(format!("{}: {}", verdict.what, verdict.difference?)));
    Verdict { what, difference }
}

/// The command line of an example: `--arch ARCH`, and the other arguments in order.
#[derive(Debug)]
pub struct Options {
    /// The architecture named by `--arch`; the GPU's when `None`.
    pub arch: Option<Arch>,
    /// The other arguments.
    pub rest: Vec<OsString>,
}

// Each example uses one of these or the other: a program of its own knows nothing of the rest.
#[allow(dead_code)]
impl Options {
    /// The architecture to compile for: the one named, else the current GPU's.
    pub fn arch(&self) -> cudyn::Result<Arch> {
        self.arch.map_or_else(Arch::current, Ok)
    }

    /// `program` for the architecture named, or for the GPU's when none is.
    pub fn target(&self, program: cudyn::Program) -> cudyn::Program {
        match self.arch {
            Some(arch) => program.arch(arch),
            None => program,
        }
    }
}

/// `program`, whose name is `name`, compiled for the architecture `options` name (else the
/// GPU's), with a few words on what was made: an example's offline part.
pub fn compile(
    options: &Options,
    program: cudyn::Program,
    name: &str,
) -> Result<(cudyn::Compiled, String), Box<dyn Error>> {
    let compiled = options.target(program.name(name)).compile()?;
    let what = format!(
        "{name} compiled by NVRTC to {} bytes of {} for {}",
        compiled.code().len(),
        cudyn::Image::new(compiled.code())?.kind(),
        compiled.arch()
    );
    Ok((compiled, what))
}

/// Reads the command line (`--arch ARCH` anywhere, or `--arch=ARCH`).
fn options() -> Result<Options, Box<dyn Error>> {
    let mut arguments = std::env::args_os().skip(1);
    let mut options = Options {
        arch: None,
        rest: Vec::new(),
    };
    while let Some(argument) = arguments.next() {
        let named = match argument.to_str() {
            Some("--arch") => arguments
                .next()
                .ok_or("--arch needs an architecture, e.g. --arch sm_90")?,
            Some(text) if text.starts_with("--arch=") => text["--arch=".len()..].into(),
            _ => {
                options.rest.push(argument);
                continue;
            }
        };
        let named = named.to_str().ok_or("--arch: not UTF-8")?.to_owned();
        options.arch = Some(named.parse()?);
    }
    Ok(options)
}

/// Why there is no GPU to launch on, or `None` when there is one.
fn no_gpu() -> Option<cudyn::Error> {
    match cudyn::Device::count() {
        Ok(0) => Some(cudyn::Error::DeviceOutOfRange {
            ordinal: 0,
            count: 0,
        }),
        Ok(_) => None,
        Err(error) => Some(error),
    }
}

/// Runs an example as the module documentation says: `compile` (which gives what it made and a
/// few words on it) without a GPU, then `launch` with what it made, on the GPU.
pub fn run<C>(
    example: &str,
    compile: impl FnOnce(&Options) -> Result<(C, String), Box<dyn Error>>,
    launch: impl FnOnce(C) -> Result<Vec<Verdict>, Box<dyn Error>>,
) -> ExitCode {
    let options = match options() {
        Ok(options) => options,
        Err(error) => return report_error(example, &*error),
    };
    let no_gpu = no_gpu();
    if let (Some(reason), None) = (&no_gpu, options.arch) {
        eprintln!(
            "error: no GPU here ({}): {example} loads and launches its kernels on a GPU. Its \
             offline part (compiling) runs without one: cargo run -p cudyn --example {example} \
             -- --arch sm_90",
            in_brief(reason)
        );
        eprintln!(
            "  caused by: {}",
            reason.to_string().replace('\n', "\n    ")
        );
        print_causes(reason);
        return ExitCode::FAILURE;
    }
    let (made, what) = match compile(&options) {
        Ok(made) => made,
        Err(error) => return report_error(example, &*error),
    };
    if let Some(reason) = no_gpu {
        println!(
            "{example}: offline: {what}; loading and launching need a GPU, and there is none \
             here ({})",
            in_brief(&reason)
        );
        return ExitCode::SUCCESS;
    }
    verdict(example, launch(made).map(all))
}

/// The first line of `error`, without its closing full stop.
fn in_brief(error: &cudyn::Error) -> String {
    let text = error.to_string();
    let first = text.lines().next().unwrap_or_default();
    first.trim_end_matches('.').to_owned()
}

/// Prints `error` and its causes; exit status 1.
fn report_error(example: &str, error: &dyn Error) -> ExitCode {
    eprintln!("error: {example}: {error}");
    print_causes(error);
    ExitCode::FAILURE
}

/// Prints each cause of `error` on a `caused by:` line.
fn print_causes(error: &dyn Error) {
    let mut cause = error.source();
    while let Some(error) = cause {
        eprintln!("  caused by: {error}");
        cause = error.source();
    }
}

/// Reports the outcome of the GPU part.
fn verdict(example: &str, outcome: Result<Verdict, Box<dyn Error>>) -> ExitCode {
    match outcome {
        Ok(Verdict {
            what,
            difference: None,
        }) => {
            println!("{example}: ok: {what}, equal to the CPU's");
            ExitCode::SUCCESS
        }
        Ok(Verdict {
            what,
            difference: Some(difference),
        }) => {
            println!("{example}: MISMATCH: {what}: {difference}");
            ExitCode::FAILURE
        }
        Err(error) => report_error(example, &*error),
    }
}
