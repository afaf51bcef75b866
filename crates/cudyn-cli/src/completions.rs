//! `cudyn completions`: the shell completion script for every subcommand and option.

use std::process::ExitCode;

use clap_complete::Shell;

const AFTER_HELP: &str = "\
Exit status: 0 when the script was written; 2 for a usage error (an unknown shell).

Examples:
  # bash: for this session, then for every session
  source <(cudyn completions bash)
  cudyn completions bash > ~/.local/share/bash-completion/completions/cudyn
  # zsh: into a folder on $fpath
  cudyn completions zsh > ~/.zfunc/_cudyn
  # fish
  cudyn completions fish > ~/.config/fish/completions/cudyn.fish";

/// Options of `cudyn completions`.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The shell to write the script for.
    shell: Shell,
}

/// Writes the completion script of `command` (the whole `cudyn` command line) to standard output.
pub fn run(args: &Args, mut command: clap::Command) -> ExitCode {
    let name = command.get_name().to_owned();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, name, &mut script);
    crate::streams::print_bytes(&script);
    ExitCode::SUCCESS
}
