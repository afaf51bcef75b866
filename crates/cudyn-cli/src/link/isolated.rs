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
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// Set in the child: link in this process.
const IN_PROCESS_ENV: &str = "CUDYN_LINK_IN_PROCESS";

/// How the child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildEnd {
    /// It exited with this status, having printed its own report.
    Exited(i32),
    /// A signal ended it: it printed no report.
    Signaled(i32),
    /// It ran past the time limit and was killed.
    TimedOut(Duration),
}

/// Whether this process links itself: it is the child.
pub fn in_process() -> bool {
    std::env::var_os(IN_PROCESS_ENV).is_some()
}

/// Runs this command again as a child that links, with the same arguments, standard streams and
/// folder, and waits for it, at most `limit` when given (then it is killed); `None` when it could
/// not be started.
pub fn run_child(limit: Option<Duration>) -> Option<ChildEnd> {
    let program = std::env::current_exe().ok()?;
    let mut child = Command::new(program)
        .args(std::env::args_os().skip(1))
        .env(IN_PROCESS_ENV, "1")
        .spawn()
        .ok()?;
    let status = match limit {
        None => child.wait().ok()?,
        Some(limit) => match wait_at_most(&mut child, limit)? {
            Some(status) => status,
            None => return Some(ChildEnd::TimedOut(limit)),
        },
    };
    match (status.code(), status.signal()) {
        (Some(code), _) => Some(ChildEnd::Exited(code)),
        (None, Some(signal)) => Some(ChildEnd::Signaled(signal)),
        (None, None) => Some(ChildEnd::Exited(1)),
    }
}

/// The child's status once it ends, or `Some(None)` after killing it at `limit`; `None` when it
/// cannot be waited for.
fn wait_at_most(child: &mut Child, limit: Duration) -> Option<Option<ExitStatus>> {
    let deadline = Instant::now() + limit;
    // A link takes tens of milliseconds at least: polling this often costs nothing measurable.
    let poll = Duration::from_millis(10);
    loop {
        if let Some(status) = child.try_wait().ok()? {
            return Some(Some(status));
        }
        let now = Instant::now();
        if now >= deadline {
            // The child may end between the last look and the kill: either way it is reaped.
            let _ = child.kill();
            let _ = child.wait();
            return Some(None);
        }
        std::thread::sleep(poll.min(deadline - now));
    }
}

/// What to tell the user when the link of `inputs` ran past `limit`.
pub fn timed_out(limit: Duration, inputs: &[PathBuf]) -> String {
    format!(
        "the link of {} did not finish within {} s (--time-limit) and was stopped: nvJitLink can \
         run for minutes on a damaged input; rebuild the inputs from their sources, or allow a \
         large link more time",
        file_list(inputs),
        limit.as_secs_f64()
    )
}

/// `inputs` as the messages list them.
fn file_list(inputs: &[PathBuf]) -> String {
    inputs
        .iter()
        .map(|file| file.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What to tell the user when the child linking `inputs` was ended by `signal`.
pub fn ended_by(signal: i32, inputs: &[PathBuf]) -> String {
    let files = file_list(inputs);
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
        let message = timed_out(Duration::from_millis(2500), &inputs);
        assert!(
            message.starts_with(
                "the link of a.ltoir, dir/b.cubin did not finish within 2.5 s (--time-limit)"
            ),
            "{message}"
        );
    }

    #[test]
    fn a_child_past_its_limit_is_killed_and_one_within_it_is_waited_for() {
        let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
        let started = Instant::now();
        assert_eq!(
            wait_at_most(&mut sleeper, Duration::from_millis(200)),
            Some(None)
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        let mut quick = Command::new("true").spawn().unwrap();
        let status = wait_at_most(&mut quick, Duration::from_secs(30)).unwrap();
        assert!(status.is_some_and(|status| status.success()));
    }
}
