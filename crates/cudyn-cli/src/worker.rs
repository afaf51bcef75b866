//! `cudyn __compile-server`: the compile server behind `cudyn::compile_all`'s worker processes
//! (see `cudyn::compile::workers`). Hidden: the library starts it and speaks to it over pipes.

use std::process::ExitCode;

/// No arguments: everything arrives on standard input.
#[derive(clap::Args)]
pub struct Args {}

pub fn run(_: &Args) -> ExitCode {
    match cudyn::compile::workers::serve() {
        0 => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}

/// `cudyn __compile-worker`: one worker, started by the compile server.
pub fn run_worker(_: &Args) -> ExitCode {
    match cudyn::compile::workers::work() {
        0 => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}
