//! `cudyn`: compile, inspect, load and launch CUDA device code, and report what CUDA is here.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

mod cache;
mod compile;
mod completions;
mod demo;
mod doctor;
mod input;
mod inspect;
mod link;
mod output;
mod remote;
mod run;
mod streams;
mod terminal;
mod worker;

const AFTER_HELP: &str = "\
Exit status: 0 on success, 1 on failure, 2 for a usage error; `cudyn run` adds 3 (no GPU) and
4 (the kernel and the arguments disagree). `cudyn help COMMAND` tells each command's.
Errors go to standard error with their causes. Colour only on a terminal, never with NO_COLOR.

Examples:
  cudyn doctor                  # what CUDA is here, and whether cudyn can use it
  cudyn demo                    # compile, inspect, link and (on a GPU) launch
  cudyn compile saxpy.cu --arch sm_90
  cudyn inspect saxpy.cubin
  cudyn link main.ltoir step.ltoir --lto --arch sm_90 -o linked.cubin
  cudyn cache list              # what the compile cache holds
  cudyn run saxpy.cu saxpy --grid 4 --block 256 --arg f32:2.5 --arg buf:f32:1024=random \\
      --arg buf:f32:1024=1 --arg buf:f32:1024 --arg u64:1024
  source <(cudyn completions bash)";

/// Dynamic loading of CUDA device code, runtime-style.
#[derive(Parser)]
#[command(name = "cudyn", version, about, long_about = None, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Report every CUDA library (where it was found, its version), every GPU, and
    /// compatibility problems.
    Doctor(doctor::Args),

    /// cudyn end to end: compile the NVRTC documentation's SAXPY, inspect it offline, link
    /// two LTO-IR pieces with nvJitLink and, where a GPU exists, load both through the runtime,
    /// launch them and check every element against the CPU.
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

    /// Launch one kernel with arguments from the command line: load device code (or compile a
    /// .cu), time the launches with device events and summarize every buffer.
    Run(run::Args),

    /// The compile cache: where it is (path), what it holds (stats, list), its upkeep (verify,
    /// prune, clear).
    Cache(cache::Args),

    /// Write the shell completion script for bash, zsh, fish, elvish or PowerShell.
    Completions(completions::Args),
}

fn main() -> ExitCode {
    // The compile server, its workers and the link workers, which the library starts
    // (`cudyn::compile_all`, isolated links), are
    // modes of this executable that no user types: kept out of the command line's parser, they
    // stay out of its help, its completions and its suggestions for a mistyped command.
    if let Some(status) = worker::run_hidden_mode() {
        return status;
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            if let Some(command) = typed_subcommand() {
                streams::set_command(&command);
            }
            return streams::finish(clap_exit(&error));
        }
    };
    streams::set_command(cli.command.name());
    let status = match cli.command {
        Command::Doctor(args) => doctor::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Compile(args) => compile::run(&args),
        Command::Link(args) => link::run(&args),
        Command::Inspect(args) => inspect::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Cache(args) => cache::run(&args),
        Command::Completions(args) => completions::run(&args, Cli::command()),
    };
    streams::finish(status)
}

impl Command {
    /// The subcommand's name, as typed (with the action for `cache`).
    fn name(&self) -> &'static str {
        match self {
            Command::Doctor(_) => "doctor",
            Command::Demo(_) => "demo",
            Command::Compile(_) => "compile",
            Command::Link(_) => "link",
            Command::Inspect(_) => "inspect",
            Command::Run(_) => "run",
            Command::Cache(args) => args.name(),
            Command::Completions(_) => "completions",
        }
    }
}

/// The subcommand named on the command line (its first word that is not an option), when it is
/// one: whose help is printed, or whose usage is wrong.
fn typed_subcommand() -> Option<String> {
    let word = std::env::args()
        .skip(1)
        .find(|word| !word.starts_with('-'))?;
    Cli::command()
        .find_subcommand(&word)
        .map(|subcommand| subcommand.get_name().to_owned())
}

/// Prints what clap has to say when it stops the command (help and the version on standard
/// output, checked like every output; a usage error on standard error) and gives its exit
/// status: 0 for help, 2 for a usage error.
fn clap_exit(error: &clap::Error) -> ExitCode {
    let text = error.render().ansi().to_string();
    if error.use_stderr() {
        streams::eprint(&text);
    } else {
        streams::print(&text);
    }
    ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2))
}
