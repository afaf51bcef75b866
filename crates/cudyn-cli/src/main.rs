//! `cudyn`: compile, inspect, load and launch CUDA device code, and report what CUDA is here.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod compile;
mod demo;
mod doctor;
mod inspect;
mod link;
mod output;

/// Dynamic loading of CUDA device code, runtime-style.
#[derive(Parser)]
#[command(name = "cudyn", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Report every CUDA library (where it was found, its version), every GPU, and
    /// compatibility problems.
    ///
    /// Exit status: 0 when the runtime, NVRTC and nvJitLink are usable and any driver
    /// present works (a machine without a driver or GPU is fine: it compiles, links and
    /// inspects); 1 when something required is missing or broken, or with --require-gpu
    /// when there is no usable GPU; 2 for a usage error.
    Doctor(doctor::Args),

    /// cudyn end to end: compile the NVRTC documentation's SAXPY, inspect it offline, link
    /// two LTO-IR pieces with nvJitLink and, where a GPU exists, load both through the runtime,
    /// launch them and check every element against the CPU. Without a GPU the GPU step says why
    /// it is skipped. Exit status 1 when any step that ran failed.
    Demo(demo::Args),
    /// Compile CUDA C++ files with NVRTC to cubins (default), PTX, LTO-IR, or fat binaries for
    /// several architectures, in parallel; report the compiler's logs and each output. Exit
    /// status 1 when a file does not compile.
    Compile(compile::Args),

    /// Link cubins, PTX, LTO-IR, fatbins, nvcc objects and static libraries with nvJitLink into
    /// one cubin, with the linker's logs. Exit status 1 when the link fails.
    Link(link::Args),

    /// Show what device code files hold, with no GPU: kind, architectures, fatbin entries,
    /// kernels with their parameter layout and resources, variables (names demangled).
    ///
    /// Exit status: 0 when every file was read; 1 when any is not device code or is damaged.
    Inspect(inspect::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Doctor(args) => doctor::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Compile(args) => compile::run(&args),
        Command::Link(args) => link::run(&args),
        Command::Inspect(args) => inspect::run(&args),
    }
}
