//! `cudyn __compile-server` and `cudyn __compile-worker`: the compile server behind
//! `cudyn::compile_all`'s worker processes and its workers (`cudyn::workers` documents them and
//! their protocol). Hidden modes: the library starts them and speaks to them over pipes.

use std::process::ExitCode;

use cudyn::workers::{SERVER_MODE, WORKER_MODE};

/// The exit status of a hidden mode when this process was started in one (its first argument
/// names it, and no other follows), else `None`.
pub fn run_hidden_mode() -> Option<ExitCode> {
    let mut arguments = std::env::args_os().skip(1);
    let mode = arguments.next()?;
    if arguments.next().is_some() {
        return None;
    }
    let status = match mode.to_str()? {
        SERVER_MODE => cudyn::workers::serve(),
        WORKER_MODE => cudyn::workers::work(),
        _ => return None,
    };
    Some(if status == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
