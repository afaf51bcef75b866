//! The link runs in a child process (this same command again), so that nvJitLink crashing on
//! an input ends the child and not `cudyn link`, which then says what happened and exits with
//! status 1 like any failed link.
//!
//! nvJitLink trusts its inputs. cudyn checks every input before nvJitLink sees it (see
//! `cudyn::compile::Linker::add`), but LTO-IR only by its header, its contents being NVIDIA's own
//! encoding, and nvJitLink 13.0 dies of SIGSEGV on a few LTO-IR files with bytes changed, or
//! aborts ("LLVM ERROR"); a few damaged cubins that pass the checks crash it too. Without the
//! child such an input ends the command with the shell's "Segmentation fault" and no word of
//! which files were being linked.
//!
//! The child is told by [`IN_PROCESS_ENV`]; it reads, links, prints and writes exactly as an
//! unsupervised link would, and its exit status is the command's. Where no child can be started
//! (the program's own file is gone), the link runs in this process.

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Command;

/// Set in the child: link in this process.
const IN_PROCESS_ENV: &str = "CUDYN_LINK_IN_PROCESS";

/// How the child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildEnd {
    /// It exited with this status, having printed its own report.
    Exited(i32),
    /// A signal ended it: it printed no report.
    Signaled(i32),
}

/// Whether this process links itself: it is the child.
pub fn in_process() -> bool {
    std::env::var_os(IN_PROCESS_ENV).is_some()
}

/// Runs this command again as a child that links, with the same arguments, standard streams and
/// folder, and waits for it; `None` when it could not be started.
pub fn run_child() -> Option<ChildEnd> {
    let program = std::env::current_exe().ok()?;
    let status = Command::new(program)
        .args(std::env::args_os().skip(1))
        .env(IN_PROCESS_ENV, "1")
        .status()
        .ok()?;
    match (status.code(), status.signal()) {
        (Some(code), _) => Some(ChildEnd::Exited(code)),
        (None, Some(signal)) => Some(ChildEnd::Signaled(signal)),
        (None, None) => Some(ChildEnd::Exited(1)),
    }
}

/// What to tell the user when the child linking `inputs` was ended by `signal`.
pub fn ended_by(signal: i32, inputs: &[PathBuf]) -> String {
    let files = inputs
        .iter()
        .map(|file| file.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let crash = match signal {
        libc::SIGSEGV => Some("SIGSEGV"),
        libc::SIGBUS => Some("SIGBUS"),
        libc::SIGFPE => Some("SIGFPE"),
        libc::SIGILL => Some("SIGILL"),
        libc::SIGABRT => Some("SIGABRT, it aborted"),
        libc::SIGTRAP => Some("SIGTRAP"),
        _ => None,
    };
    match (crash, signal) {
        (Some(name), _) => format!(
            "nvJitLink crashed ({name}) while linking {files}: an input is probably damaged in a \
             way cudyn's checks cannot see (LTO-IR is checked by its header alone); rebuild the \
             inputs from their sources, or link fewer of them at a time to find the one at fault"
        ),
        (None, libc::SIGKILL) => format!(
            "the link of {files} was killed (SIGKILL), by the system when memory ran out or by \
             a user"
        ),
        (None, _) => format!("the link of {files} was ended by signal {signal}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_names_the_signal_and_every_input() {
        let inputs = [PathBuf::from("a.ltoir"), PathBuf::from("dir/b.cubin")];
        let message = ended_by(libc::SIGSEGV, &inputs);
        assert!(
            message.starts_with("nvJitLink crashed (SIGSEGV) while linking a.ltoir, dir/b.cubin:"),
            "{message}"
        );
        assert!(ended_by(libc::SIGABRT, &inputs).contains("(SIGABRT, it aborted)"));
        assert!(ended_by(libc::SIGKILL, &inputs).contains("killed (SIGKILL)"));
        assert_eq!(
            ended_by(libc::SIGTERM, &inputs[..1]),
            format!("the link of a.ltoir was ended by signal {}", libc::SIGTERM)
        );
    }
}
