//! `cudyn compile`: CUDA C++ to a cubin, PTX or LTO-IR with NVRTC.

use std::path::PathBuf;
use std::process::ExitCode;

use cudyn::compile::{Arch, Output, Program};

/// Options of `cudyn compile`.
#[derive(clap::Args)]
pub struct Args {
    /// The CUDA C++ source file.
    file: PathBuf,
    /// Produce SASS in a cubin (the default).
    #[arg(long, group = "kind")]
    cubin: bool,
    /// Produce PTX.
    #[arg(long, group = "kind")]
    ptx: bool,
    /// Produce LTO-IR, for linking with link-time optimization.
    #[arg(long, group = "kind")]
    ltoir: bool,
    /// The GPU architecture (sm_90, 90 or 9.0); the current GPU's (device 0, as CUDA numbers
    /// them) when left out.
    #[arg(long)]
    arch: Option<Arch>,
    /// Define a macro: NAME or NAME=VALUE (repeatable).
    #[arg(short = 'D', value_name = "NAME[=VALUE]")]
    define: Vec<String>,
    /// Add an include folder (repeatable).
    #[arg(short = 'I', value_name = "FOLDER")]
    include: Vec<PathBuf>,
    /// Relocatable device code (-rdc=true), for pieces linked together.
    #[arg(long)]
    rdc: bool,
    /// Write PTX even when NVRTC is newer than this machine's driver (for another machine).
    #[arg(long)]
    allow_newer_ptx: bool,
    /// Pass an NVRTC option as is (repeatable), e.g. -X=--use_fast_math.
    #[arg(short = 'X', value_name = "OPTION", allow_hyphen_values = true)]
    option: Vec<String>,
    /// Where to write the output; FILE with the output's extension when left out.
    #[arg(short = 'o', value_name = "PATH")]
    output: Option<PathBuf>,
}

pub fn run(args: &Args) -> ExitCode {
    match compile(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("cudyn compile: {message}");
            ExitCode::FAILURE
        }
    }
}

fn compile(args: &Args) -> Result<(), String> {
    let source = std::fs::read_to_string(&args.file)
        .map_err(|error| format!("cannot read {}: {error}", args.file.display()))?;
    let output = if args.ptx {
        Output::Ptx
    } else if args.ltoir {
        Output::LtoIr
    } else {
        Output::Cubin
    };
    let name = args
        .file
        .file_name()
        .map_or_else(|| "program.cu".into(), |name| name.to_string_lossy());
    let mut program = Program::new(source)
        .name(name)
        .output(output)
        .relocatable(args.rdc)
        .allow_newer_ptx(args.allow_newer_ptx);
    if let Some(arch) = args.arch {
        program = program.arch(arch);
    }
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
    let compiled = program.compile().map_err(|error| match error {
        // The library's text names its own setters; here the fix is a flag.
        cudyn::Error::ArchRequired { reason, .. } => format!(
            "no target architecture: pass one with --arch (e.g. --arch sm_90). Without it cudyn \
             compiles for the current GPU, but {reason}; `cudyn doctor` shows what CUDA is \
             installed"
        ),
        other => other.to_string(),
    })?;
    if !compiled.log().trim().is_empty() {
        eprintln!("{}", compiled.log().trim_end());
    }
    let path = args
        .output
        .clone()
        .unwrap_or_else(|| args.file.with_extension(output.extension()));
    std::fs::write(&path, compiled.code())
        .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    println!(
        "wrote {} ({} bytes of {} for {})",
        path.display(),
        compiled.code().len(),
        output.extension(),
        compiled.arch()
    );
    Ok(())
}
