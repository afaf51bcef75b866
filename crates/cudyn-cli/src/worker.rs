//! `cudyn __compile-server`, `cudyn __compile-worker` and `cudyn __link-worker`: the compile
//! server behind `cudyn::compile_all`'s worker processes, its workers, and the process of an
//! isolated link (`cudyn::workers` documents them and their protocol). Hidden modes: the library
//! starts them and speaks to them over pipes.

use std::process::ExitCode;

use cudyn::workers::{LINK_WORKER_MODE, SERVER_MODE, WORKER_MODE};

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
        LINK_WORKER_MODE => cudyn::workers::link_worker(),
        _ => return None,
    };
    Some(if status == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
