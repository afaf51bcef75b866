//! Link workers: nvJitLink in a process of its own, so that a crash on a damaged input ends the
//! worker and not the program, and a link can be stopped at a time or memory limit.
//!
//! A link worker is the worker executable ([`super`] says which) started as
//! `EXECUTABLE __link-worker` ([`LINK_WORKER_MODE`]), tied to the calling process
//! ([`super::spawn`]). It greets as the compile server does (`cudyn-link-worker PROTOCOL
//! VERSION PID`, checked the same way), then reads `LINK` frames and answers each with a
//! `LINKED` frame ([`super::link_job`]). A worker whose link succeeded goes back to a pool of
//! idle workers and links again, so that a program linking often pays for one start (an `exec`
//! and opening nvJitLink, 70 to 140 ms measured) and not one per link. Any other worker (nvJitLink
//! failed, crashed, or a limit killed it) is ended, and the next link starts another.
//!
//! The calling thread waits for the answer in slices of a few milliseconds, and between them
//! checks the link's time and the worker's resident memory (`/proc/PID/statm`) against the
//! limits; past one, the worker is killed (SIGKILL) and the link fails with
//! [`Error::LinkStopped`], naming the inputs and the limit. Resident memory is watched, not
//! limited with `RLIMIT_AS`, measured with nvJitLink 13.0: the address space counts what is
//! reserved, not used (an idle worker maps 111 MB and holds 35 MB), below 100 MB nvJitLink cannot
//! even be opened, and a link refused memory ends the process from inside nvJitLink ("fatal:
//! Memory allocation failure" and exit status 1 at 120 MB, "LLVM ERROR: out of memory" and an
//! abort on a damaged input), which cannot be told from a crash.

use std::io::{self, BufRead, BufReader, Read};
use std::os::fd::AsRawFd;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::link_job::{self, LinkInput, LinkResult};
use super::{connection, locate, wire, LINK_WORKER_MODE};
use crate::error::{Error, LinkStop, Result};

/// The first word of a link worker's greeting.
const GREETING: &str = "cudyn-link-worker";

/// How long a worker may take to greet.
const START_LIMIT: Duration = Duration::from_secs(60);

/// How often the limits are checked while a link runs: a link takes tens of milliseconds at
/// least, and a check reads one small file.
const CHECK_EVERY: Duration = Duration::from_millis(5);

/// The limits of one link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) time: Duration,
    /// Resident memory, in bytes.
    pub(crate) memory: Option<u64>,
}

/// A started link worker and its pipes.
#[derive(Debug)]
struct LinkWorker {
    child: Child,
    to_worker: ChildStdin,
    from_worker: BufReader<ChildStdout>,
}

impl Drop for LinkWorker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Idle workers, kept for the process's later links.
static IDLE: Mutex<Vec<LinkWorker>> = Mutex::new(Vec::new());

/// Links `inputs` in a link worker with nvJitLink's `options`, within `limits`.
///
/// A worker is kept for later links only after a link that succeeded: nvJitLink's state after a
/// failure on a damaged input may be damaged too (measured with nvJitLink 13.0: after some
/// damaged inputs it had refused, a later link of sound inputs crashed in the same process). For
/// the same reason a crash in a worker that linked before is tried once more in a new worker,
/// so that a crash is reported against the inputs that cause it.
pub(crate) fn link(
    options: &[String],
    ptx: bool,
    inputs: &[LinkInput],
    limits: Limits,
) -> Result<(crate::compile::Output, Vec<u8>, String)> {
    let stopped = |stop: LinkStop| Error::LinkStopped {
        inputs: inputs
            .iter()
            .map(|(_, name, _)| (*name).to_owned())
            .collect(),
        stop,
    };
    let message = link_job::encode_link(options, ptx, inputs);
    let answer = match idle_worker() {
        Some(worker) => match run(worker, &message, limits) {
            Err(LinkStop::Signal(_)) => run(start().map_err(&stopped)?, &message, limits),
            answer => answer,
        },
        None => run(start().map_err(&stopped)?, &message, limits),
    };
    answer.map_err(stopped)?
}

/// Runs one link, the encoded `message`, in `worker` within `limits`: nvJitLink's result, or what
/// stopped the worker.
fn run(
    mut worker: LinkWorker,
    message: &[u8],
    limits: Limits,
) -> std::result::Result<LinkResult, LinkStop> {
    let started = Instant::now();
    if let Err(error) = wire::write_frame(&mut worker.to_worker, message) {
        return Err(worker.ended(format!("it stopped reading ({error})")));
    }
    loop {
        let left = limits.time.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(worker.kill(LinkStop::TimeLimit(limits.time)));
        }
        if let Some(limit) = limits.memory {
            if worker.resident().is_some_and(|resident| resident > limit) {
                return Err(worker.kill(LinkStop::MemoryLimit(limit)));
            }
        }
        match readable(&worker.from_worker, left.min(CHECK_EVERY)) {
            Ok(false) => continue,
            Ok(true) => {}
            Err(error) => {
                return Err(worker.kill(LinkStop::Worker(format!("cannot wait for it: {error}"))))
            }
        }
        let answer = match wire::read_frame(&mut worker.from_worker) {
            Ok(Some(message)) => link_job::decode_linked(&message),
            Ok(None) => return Err(worker.ended(String::new())),
            Err(error) => return Err(worker.ended(format!("its answer broke off ({error})"))),
        };
        return match answer {
            Ok(Ok(result)) => {
                if result.is_ok() {
                    keep(worker);
                }
                Ok(result)
            }
            Ok(Err(text)) => Err(LinkStop::Worker(text)),
            Err(malformed) => {
                Err(worker.ended(format!("it sent a malformed answer ({malformed})")))
            }
        };
    }
}

impl LinkWorker {
    /// Kills the worker at a limit, reaps it, and says which.
    fn kill(mut self, stop: LinkStop) -> LinkStop {
        let _ = self.child.kill();
        let _ = self.child.wait();
        stop
    }

    /// How a worker whose pipe closed (or broke, `why`) ended, once it is reaped.
    fn ended(mut self, why: String) -> LinkStop {
        use std::os::unix::process::ExitStatusExt;
        // A worker that broke the protocol but lives is ended.
        if !why.is_empty() {
            let _ = self.child.kill();
        }
        match self.child.wait() {
            Ok(status) if why.is_empty() => match (status.signal(), status.code()) {
                (Some(signal), _) => LinkStop::Signal(signal),
                (None, code) => LinkStop::Worker(format!(
                    "the link worker (pid {}) exited with status {}",
                    self.child.id(),
                    code.unwrap_or(-1)
                )),
            },
            _ => LinkStop::Worker(format!("the link worker (pid {}): {why}", self.child.id())),
        }
    }

    /// The worker's resident memory in bytes, when it can be read.
    fn resident(&self) -> Option<u64> {
        let statm = std::fs::read_to_string(format!("/proc/{}/statm", self.child.id())).ok()?;
        let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
        // SAFETY: sysconf takes and returns plain integers.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        Some(pages.saturating_mul(u64::try_from(page).ok()?))
    }
}

/// Whether `from` has something to read (or reached its end) within `wait`.
fn readable(from: &BufReader<ChildStdout>, wait: Duration) -> io::Result<bool> {
    if !from.buffer().is_empty() {
        return Ok(true);
    }
    let mut polled = libc::pollfd {
        fd: from.get_ref().as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let millis = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: one live pollfd whose descriptor stays open for the call.
    match unsafe { libc::poll(&mut polled, 1, millis) } {
        -1 => match io::Error::last_os_error() {
            error if error.kind() == io::ErrorKind::Interrupted => Ok(false),
            error => Err(error),
        },
        ready => Ok(ready > 0),
    }
}

/// An idle worker that is still running, if there is one.
fn idle_worker() -> Option<LinkWorker> {
    let mut idle = connection::lock(&IDLE);
    while let Some(mut worker) = idle.pop() {
        if matches!(worker.child.try_wait(), Ok(None)) {
            return Some(worker);
        }
    }
    None
}

/// Keeps a worker that answered for a later link; as many are kept as links ran at once, up to
/// one per core.
fn keep(worker: LinkWorker) {
    let mut idle = connection::lock(&IDLE);
    if idle.len() < std::thread::available_parallelism().map_or(1, usize::from) {
        idle.push(worker);
    }
}

/// Ends the idle workers: the worker executable changed.
pub(super) fn end_idle() {
    connection::lock(&IDLE).clear();
}

/// Starts a link worker and checks its greeting; `Err` says why none runs.
fn start() -> std::result::Result<LinkWorker, LinkStop> {
    let executable = {
        let state = super::state();
        locate::worker_executable(
            &state.setting,
            |name| std::env::var_os(name),
            std::env::current_exe().ok(),
        )
    }
    .map_err(|why| {
        LinkStop::Worker(format!(
            "an isolated link needs a worker executable, and there is none: {why}"
        ))
    })?;
    let shown = executable.display().to_string();
    let mut command = Command::new(&executable);
    command
        .arg(LINK_WORKER_MODE)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(folders) = crate::sys::library_path_override() {
        if let Ok(joined) = std::env::join_paths(folders) {
            command.env(crate::sys::locate::LIBRARY_PATH_ENV, joined);
        }
    }
    let mut child = super::spawn::spawn_tied(command)
        .map_err(|error| LinkStop::Worker(format!("cannot start {shown}: {error}")))?;
    let (Some(to_worker), Some(from_worker)) = (child.stdin.take(), child.stdout.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(LinkStop::Worker(format!("{shown} started without pipes")));
    };
    let mut worker = LinkWorker {
        child,
        to_worker,
        from_worker: BufReader::new(from_worker),
    };
    greeting(&mut worker)
        .and_then(|line| connection::check_greeting(&line, GREETING))
        .map_err(|why| LinkStop::Worker(format!("{shown} cannot link: {why}")))?;
    Ok(worker)
}

/// The worker's greeting line, read within [`START_LIMIT`].
fn greeting(worker: &mut LinkWorker) -> std::result::Result<String, String> {
    let ready = readable(&worker.from_worker, START_LIMIT).map_err(|error| error.to_string())?;
    if !ready {
        return Err(format!("it did not greet within {START_LIMIT:?}"));
    }
    let mut line = Vec::new();
    let read = (&mut worker.from_worker)
        .take(200)
        .read_until(b'\n', &mut line);
    match read {
        Ok(_) if line.ends_with(b"\n") => Ok(String::from_utf8_lossy(&line).trim().to_owned()),
        Ok(_) => Err(format!(
            "it wrote `{}`",
            String::from_utf8_lossy(&line).trim()
        )),
        Err(error) => Err(error.to_string()),
    }
}

/// Runs a link worker on this process's standard input (links) and output (results), until its
/// input ends; the exit status for the process.
#[cfg(target_os = "linux")]
pub(super) fn work_on_standard_streams() -> i32 {
    use std::io::Write;
    // Opened before the first link arrives; a failure shows again in the first link's answer.
    let _ = crate::sys::nvjitlink();
    // The memory a link frees stays mapped for the next link, rather than going back to the
    // system and faulting in again: measured, an LTO link of two small pieces in a worker took
    // 1.13 to 1.33 times the link in the calling process without this, 1.00 with it.
    // SAFETY: mallopt takes plain integers, before this process's threads are started.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
    }
    let hooks = super::server::TestHooks::from_environment();
    let (mut links, mut results) = match super::server::take_standard_streams() {
        Ok(streams) => streams,
        Err(error) => {
            crate::warn::warning!("cudyn link worker: {error}");
            return 1;
        }
    };
    let greeting = format!(
        "{GREETING} {} {} {}\n",
        wire::PROTOCOL,
        env!("CARGO_PKG_VERSION"),
        std::process::id()
    );
    if results.write_all(greeting.as_bytes()).is_err() {
        return 1;
    }
    loop {
        let message = match wire::read_frame(&mut links) {
            Ok(Some(message)) => message,
            _ => return 0,
        };
        let result = match link_job::decode_link(&message) {
            Ok((options, ptx, inputs)) => {
                for (_, name, _) in &inputs {
                    hooks.before(name);
                }
                crate::compile::link_all(&options, ptx, inputs)
            }
            Err(malformed) => Err(Error::LinkStopped {
                inputs: Vec::new(),
                stop: LinkStop::Worker(format!("a link that does not read: {malformed}")),
            }),
        };
        if wire::write_frame(&mut results, &link_job::encode_linked(&result)).is_err() {
            return 1;
        }
    }
}
