//! The compile server (`cudyn __compile-server`): a single-threaded process that starts its
//! workers (`cudyn __compile-worker` processes), hands them the jobs that arrive on its standard
//! input, and passes their outcomes back on its standard output.
//!
//! The server polls its input and every worker's result pipe. A worker whose pipe closes died:
//! its job, if it had one, is reported lost with how the worker ended, and a new worker is started
//! in its place. A job that runs past the time limit has its worker killed the same way. The end
//! of its input (the batch's process is gone, or closed it) ends the server, and the server's end
//! ends its workers (they see their job pipe close, and the kernel kills them with their parent).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use super::wire::{self, Job, NvrtcIdentity, Outcome, Ready, Start};
use crate::sys::{self, locate::Component};

/// Programs (or link inputs) on which a worker misbehaves, for cudyn's tests of crashes, hangs
/// and growth in the middle of a batch or a link: named by `CUDYN_WORKER_TEST_ABORT` (the worker
/// aborts), `CUDYN_WORKER_TEST_HANG` (it never answers) and `CUDYN_WORKER_TEST_GROW` (it takes
/// memory, 16 MiB every few milliseconds, and never answers), read by each worker.
#[derive(Debug, Default)]
pub(super) struct TestHooks {
    abort_on: Option<String>,
    hang_on: Option<String>,
    grow_on: Option<String>,
}

impl TestHooks {
    pub(super) fn from_environment() -> Self {
        TestHooks {
            abort_on: std::env::var("CUDYN_WORKER_TEST_ABORT").ok(),
            hang_on: std::env::var("CUDYN_WORKER_TEST_HANG").ok(),
            grow_on: std::env::var("CUDYN_WORKER_TEST_GROW").ok(),
        }
    }

    pub(super) fn before(&self, program: &str) {
        if self.abort_on.as_deref() == Some(program) {
            std::process::abort();
        }
        let mut taken: Vec<Vec<u8>> = Vec::new();
        while self.grow_on.as_deref() == Some(program) {
            // Written, so that the pages are resident.
            taken.push(vec![1; 16 << 20]);
            std::thread::sleep(Duration::from_millis(5));
        }
        while self.hang_on.as_deref() == Some(program) {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
}

/// Runs the server on this process's standard input and output until its input ends; the exit
/// status for the process.
pub(super) fn serve() -> i32 {
    match Server::start() {
        Ok(mut server) => {
            server.run();
            0
        }
        Err(error) => {
            crate::warn::warning!("cudyn compile server: {error}");
            1
        }
    }
}

/// One worker.
#[derive(Debug)]
struct Worker {
    pid: libc::pid_t,
    jobs: io::PipeWriter,
    results: io::PipeReader,
    /// The job it compiles: id, program name, when it was handed over.
    busy: Option<(u64, String, Instant)>,
}

/// The server; its end ends its workers.
#[derive(Debug)]
struct Server {
    from_batch: Option<File>,
    to_batch: File,
    workers: Vec<Worker>,
    /// Jobs waiting for a worker: id, program name, the message.
    queue: VecDeque<(u64, String, Vec<u8>)>,
    time_limit: Duration,
    /// The batch's library search override, handed to the workers.
    library_path: Option<Vec<std::path::PathBuf>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        for worker in &self.workers {
            end_worker(worker.pid);
        }
    }
}

impl Server {
    /// Greets the batch, reads its request, starts the workers, and reports the NVRTC they use.
    fn start() -> io::Result<Server> {
        let (from_batch, to_batch) = take_standard_streams()?;
        let mut server = Server {
            from_batch: Some(from_batch),
            to_batch,
            workers: Vec::new(),
            queue: VecDeque::new(),
            time_limit: Duration::MAX,
            library_path: None,
        };
        let greeting = format!(
            "{} {} {} {}\n",
            wire::GREETING,
            wire::PROTOCOL,
            env!("CARGO_PKG_VERSION"),
            std::process::id()
        );
        server.to_batch.write_all(greeting.as_bytes())?;
        let request = server
            .from_batch
            .as_mut()
            .map(wire::read_frame)
            .transpose()?
            .flatten()
            .ok_or_else(|| io::Error::other("the batch closed before its request"))?;
        let start = Start::decode(&request).map_err(io::Error::other)?;
        server.time_limit = start.job_time_limit;
        server.library_path = start.library_path.clone();
        let workers = start.workers.max(1);
        // The workers first, so that their start-up overlaps the server's own. The server
        // compiles nothing itself: a warm-up compile (NVRTC's start-up, a few hundred
        // milliseconds) would hold every job back until it ended, and each worker pays its own
        // start-up on its first job anyway. Opening NVRTC identifies it.
        let nvrtc = (0..workers)
            .try_for_each(|_| server.start_worker())
            .map_err(|error| error.to_string())
            .and_then(|()| open_nvrtc(&start));
        let failed = nvrtc.as_ref().err().cloned();
        wire::write_frame(&mut server.to_batch, &Ready { nvrtc }.encode())?;
        match failed {
            Some(why) => Err(io::Error::other(why)),
            None => Ok(server),
        }
    }

    fn run(&mut self) {
        while self.step().is_ok() {}
    }

    /// Hands out jobs, waits for the next event and handles it; `Err` when the server is done.
    fn step(&mut self) -> io::Result<()> {
        self.dispatch();
        let mut polled: Vec<libc::pollfd> = self
            .from_batch
            .iter()
            .map(|file| file.as_fd())
            .chain(self.workers.iter().map(|worker| worker.results.as_fd()))
            .map(|fd| libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        if polled.is_empty() {
            return Err(io::Error::other("nothing left to serve"));
        }
        let timeout = self.next_deadline().map_or(-1, |left| {
            i32::try_from(left.as_millis().saturating_add(1)).unwrap_or(i32::MAX)
        });
        // SAFETY: `polled` is a live, initialized array of `polled.len()` pollfd structs whose
        // fds stay open for the call.
        let ready =
            unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, timeout) };
        if ready < 0 {
            let error = io::Error::last_os_error();
            return match error.kind() {
                io::ErrorKind::Interrupted => Ok(()),
                _ => Err(error),
            };
        }
        let mut events = polled.iter().map(|entry| entry.revents != 0);
        if self.from_batch.is_some() && events.next() == Some(true) {
            self.read_job()?;
        }
        let finished: Vec<usize> = events
            .enumerate()
            .filter_map(|(index, ready)| ready.then_some(index))
            .collect();
        for index in finished.into_iter().rev() {
            self.collect(index)?;
        }
        self.enforce_time_limit()
    }

    /// Reads one job from the batch; `Err` when the batch's end is reached.
    fn read_job(&mut self) -> io::Result<()> {
        let Some(from_batch) = self.from_batch.as_mut() else {
            return Ok(());
        };
        let message = wire::read_frame(from_batch)?
            .ok_or_else(|| io::Error::other("the batch closed its pipe"))?;
        let job = Job::decode(&message).map_err(io::Error::other)?;
        self.queue.push_back((job.id, job.program.name, message));
        Ok(())
    }

    fn dispatch(&mut self) {
        for worker in self.workers.iter_mut().filter(|w| w.busy.is_none()) {
            let Some((id, name, message)) = self.queue.pop_front() else {
                return;
            };
            // A worker that died meanwhile fails the write; its closed pipe reports the job lost.
            let _ = wire::write_frame(&mut worker.jobs, &message);
            worker.busy = Some((id, name, Instant::now()));
        }
    }

    /// The time until the first running job reaches its limit.
    fn next_deadline(&self) -> Option<Duration> {
        self.workers
            .iter()
            .filter_map(|worker| worker.busy.as_ref())
            .map(|(_, _, started)| self.time_limit.saturating_sub(started.elapsed()))
            .min()
    }

    /// Passes the outcome of worker `index` on, or reports its job lost and replaces it.
    fn collect(&mut self, index: usize) -> io::Result<()> {
        let worker = &mut self.workers[index];
        let message = match wire::read_frame(&mut worker.results) {
            Ok(Some(message)) => message,
            ended => {
                let cause = match ended {
                    Err(error) => format!(" after sending a damaged result ({error})"),
                    _ => String::new(),
                };
                return self.replace(index, |pid, status| format!("{status}{cause} (pid {pid})"));
            }
        };
        worker.busy = None;
        wire::write_frame(&mut self.to_batch, &message)
    }

    fn enforce_time_limit(&mut self) -> io::Result<()> {
        let limit = self.time_limit;
        let overdue: Vec<usize> = (0..self.workers.len())
            .filter(|&index| {
                let busy = &self.workers[index].busy;
                busy.as_ref()
                    .is_some_and(|(_, _, started)| started.elapsed() >= limit)
            })
            .collect();
        for index in overdue.into_iter().rev() {
            // SAFETY: kill takes plain integers; the pid is a child not yet reaped, so it names
            // this worker and no other process.
            unsafe { libc::kill(self.workers[index].pid, libc::SIGKILL) };
            self.replace(index, |pid, _| {
                format!(
                    "was killed after running over the time limit of {} s (pid {pid})",
                    limit.as_secs_f64()
                )
            })?;
        }
        Ok(())
    }

    /// Reaps worker `index`, reports its job (if any) lost with `why(pid, how it ended)`, and
    /// starts a worker in its place.
    fn replace(&mut self, index: usize, why: impl FnOnce(i32, String) -> String) -> io::Result<()> {
        let worker = self.workers.swap_remove(index);
        let status = reap(worker.pid);
        if let Some((id, name, _)) = &worker.busy {
            let message = format!(
                "the compile worker compiling `{name}` {}",
                why(worker.pid, status)
            );
            let outcome = wire::encode_outcome(*id, &Outcome::Lost(message));
            wire::write_frame(&mut self.to_batch, &outcome)?;
        }
        drop(worker);
        self.start_worker()
    }

    /// Starts `cudyn __compile-worker` (this executable), its standard input and output the job
    /// and result pipes.
    fn start_worker(&mut self) -> io::Result<()> {
        // The server's own executable file, even when its path has been given to another file
        // since (an upgrade installed meanwhile): a worker always speaks the server's protocol.
        let mut command = std::process::Command::new("/proc/self/exe");
        // Named as the server is, for whoever lists the processes.
        let name: std::ffi::OsString =
            std::env::current_exe().map_or_else(|_| "cudyn".into(), |path| path.into());
        std::os::unix::process::CommandExt::arg0(&mut command, name);
        command
            .arg(super::WORKER_MODE)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        if let Some(folders) = &self.library_path {
            command.env(
                crate::sys::locate::LIBRARY_PATH_ENV,
                std::env::join_paths(folders).map_err(io::Error::other)?,
            );
        }
        // The server's one thread lives as long as the server: tied to it, the worker dies
        // with the server.
        let mut child = super::spawn::tie(&mut command).spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(io::Error::other("a worker started without its pipes"));
        };
        self.workers.push(Worker {
            pid: child.id() as libc::pid_t,
            jobs: io::PipeWriter::from(OwnedFd::from(stdin)),
            results: io::PipeReader::from(OwnedFd::from(stdout)),
            busy: None,
        });
        Ok(())
    }
}

/// Runs an exec'd worker (`cudyn __compile-worker`) on this process's standard input (jobs) and
/// output (results); the exit status for the process.
pub(super) fn work_on_standard_streams() -> i32 {
    // Opened before the first job arrives, while the server is still greeting the batch; a
    // failure here shows again, with its reason, in the first job's outcome.
    let _ = sys::nvrtc();
    match take_standard_streams() {
        Ok((jobs, results)) => work(
            io::PipeReader::from(OwnedFd::from(jobs)),
            io::PipeWriter::from(OwnedFd::from(results)),
            &TestHooks::from_environment(),
        ),
        Err(error) => {
            crate::warn::warning!("cudyn compile worker: {error}");
            1
        }
    }
}

/// The batch's pipes, taken over from standard input and output, which become /dev/null: nothing
/// this process prints by accident can then break into the frames on the pipes.
pub(super) fn take_standard_streams() -> io::Result<(File, File)> {
    let from_batch = File::from(io::stdin().as_fd().try_clone_to_owned()?);
    let to_batch = File::from(io::stdout().as_fd().try_clone_to_owned()?);
    let null: OwnedFd = File::options()
        .read(true)
        .write(true)
        .open("/dev/null")?
        .into();
    for standard in [0, 1] {
        // SAFETY: dup2 takes plain descriptors: `null` is open, and 0 and 1 are replaced
        // atomically; the originals live on in the copies made above.
        if unsafe { libc::dup2(null.as_raw_fd(), standard) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok((from_batch, to_batch))
}

/// NVRTC opened as the batch's process would open it: which one the workers compile with.
fn open_nvrtc(start: &Start) -> Result<NvrtcIdentity, String> {
    if let Some(folders) = &start.library_path {
        sys::set_library_path(folders.iter().cloned()).map_err(|error| error.to_string())?;
    }
    let version = sys::nvrtc().map_err(|error| error.to_string())?.version;
    let file = sys::library_file(Component::Nvrtc)
        .ok_or_else(|| "NVRTC's file cannot be identified".to_owned())?;
    Ok(NvrtcIdentity {
        path: file.path,
        size: file.size,
        modified: file.modified,
        version,
    })
}

/// A worker's life: compile each job read from `jobs` and write its outcome to `results`, until
/// the server closes `jobs`. Returns the exit status.
fn work(mut jobs: io::PipeReader, mut results: io::PipeWriter, hooks: &TestHooks) -> i32 {
    loop {
        let message = match wire::read_frame(&mut jobs) {
            Ok(Some(message)) => message,
            _ => return 0,
        };
        let (id, outcome) = match Job::decode(&message) {
            Ok(job) => {
                hooks.before(&job.program.name);
                let outcome = match in_folder(&job.folder) {
                    Ok(()) => job
                        .program
                        .compile_uncached(Ok(job.arch), &job.defaults)
                        .map_or_else(Outcome::Failed, Outcome::Compiled),
                    Err(why) => Outcome::FailedOtherwise(why),
                };
                (job.id, outcome)
            }
            Err(malformed) => (
                0,
                Outcome::FailedOtherwise(format!("a job that does not read: {malformed}")),
            ),
        };
        if wire::write_frame(&mut results, &wire::encode_outcome(id, &outcome)).is_err() {
            return 1;
        }
    }
}

/// Moves the worker to the batch's working folder (an empty path: stays), so that relative paths
/// resolve as in the batch's process.
fn in_folder(folder: &std::path::Path) -> Result<(), String> {
    if folder.as_os_str().is_empty() || std::env::current_dir().is_ok_and(|here| here == folder) {
        return Ok(());
    }
    std::env::set_current_dir(folder)
        .map_err(|error| format!("cannot enter {}: {error}", folder.display()))
}

/// Waits for a worker that ended and says how it did.
pub(super) fn reap(pid: libc::pid_t) -> String {
    let mut status = 0;
    // SAFETY: waitpid writes the status into the live integer it is given.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    if waited != pid {
        return "ended".to_owned();
    }
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        let name = match signal {
            libc::SIGABRT => " (SIGABRT: it aborted)",
            libc::SIGKILL => " (SIGKILL)",
            libc::SIGSEGV => " (SIGSEGV: a crash)",
            libc::SIGBUS => " (SIGBUS: a crash)",
            libc::SIGTERM => " (SIGTERM)",
            _ => "",
        };
        format!("died of signal {signal}{name}")
    } else {
        format!("exited with status {}", libc::WEXITSTATUS(status))
    }
}

/// Ends a worker at the server's end and reaps it.
fn end_worker(pid: libc::pid_t) {
    // SAFETY: kill takes plain integers; the pid is a child not yet reaped.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    reap(pid);
}
