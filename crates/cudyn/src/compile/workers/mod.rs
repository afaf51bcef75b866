//! Compile worker processes: how [`compile_all`](super::compile_all) scales across cores.
//!
//! **Why processes.** NVRTC 13.0 serializes much of its work inside one process, so threads of
//! one process stop scaling at 3 to 5 times one core's speed, however many cores there are. Each
//! process, though, pays NVRTC's start-up: its first compile costs several times a later one
//! (240-380 ms against 50-80 ms on an H200 host for a source of five template instantiations),
//! so cold worker processes spend much of a batch starting up.
//!
//! **A server of cudyn's own.** cudyn therefore starts one compile server, a single-threaded
//! process of its own (the `cudyn` executable in its hidden `__compile-server` mode; never a fork
//! of the calling process, whose threads, locks and CUDA state cudyn does not own), which starts
//! one worker per available core ([`std::thread::available_parallelism`]), each a `cudyn
//! __compile-worker` process, and opens NVRTC to identify the one they use. The server hands the
//! workers the jobs, one at a time each, so uneven programs still keep every worker busy. It is
//! started on the first batch that needs it and kept for the life of the calling process, so
//! later batches pay nothing to start. What it costs: one `exec` of `cudyn` per process, and
//! NVRTC's start-up (its first compile costs several times a later one) in every worker, all at
//! once, on each worker's first job; and the memory of the warm processes while the calling
//! process lives. The server compiles nothing itself, so the jobs reach the workers as soon as
//! they are started.
//!
//! **What travels.** A job carries everything the compile depends on, the same inputs the compile
//! cache's key covers: source, name, every option, in-memory headers, name expressions, and the
//! architecture and CUDA header folders decided in the calling process (its current device, the
//! headers its cache key names), and the calling process's working folder at the time of the
//! batch, from which relative include folders resolve (and which line information records). The
//! server keeps the environment variables the calling process had when it started the server.
//! Results come back over a pipe in frames sealed by a checksum and checked at every hop, are
//! checked against the job (name, output kind, architecture,
//! name expressions), and are stored in the compile cache by the calling process exactly as its
//! own compile would be, when the server's NVRTC is the one the key names. Cached programs never
//! reach the server: a batch looks every program up first, and a batch of hits starts nothing.
//!
//! **Why not fork warm workers (a zygote).** Workers forked from a server that had compiled once
//! would skip NVRTC's start-up, and a C program doing so scaled well on some hosts. cudyn measured
//! it on a 16-core H200 host (CUDA 13.0): forked workers made a batch 2 to 3 times *slower* than
//! compiling one source after another, where fresh workers made it 3 to 7 times faster
//! (docs/BENCHMARKS.md). A likely reason: NVRTC loads the CUDA driver during a compile where one is
//! installed, and the driver starts threads of its own, so a forked copy of a warm process carries
//! a driver whose threads are gone. Fresh workers share nothing with the server.
//!
//! **Finding the executable**, in order: [`set_workers`]; the `CUDYN_WORKER` variable (a path,
//! or `off`); `cudyn` beside the current executable (and in the folder above, for cargo's
//! `deps/` and `examples/` folders); `cudyn` on `PATH`; `$CARGO_HOME/bin` (`~/.cargo/bin`). The
//! server greets with its protocol number and version, and one that differs from this library's
//! is not used.
//!
//! **Falling back.** When no executable is found, it is of another version, or the server cannot
//! start (NVRTC missing or not identifiable), the batch compiles on this process's threads, as
//! [`compile_all_on`](super::compile_all_on) does; [`compile_batch`](super::compile_batch)'s
//! [`BatchRun::InProcess`](super::BatchRun) says why, and the first such batch of a process also
//! prints the reason as a warning on standard error (not when turned off on purpose). A failed
//! start is not retried in the same process unless [`set_workers`] is called again. Batches of
//! fewer than [`MIN_PROGRAMS`] programs to compile stay in the process: with one or two
//! programs, starting the server costs as much as the compiles themselves.
//!
//! **Crashes and hangs.** A worker that dies (a crash inside NVRTC, a kill) fails the job it held
//! with [`Error::CompileWorker`](crate::Error::CompileWorker), naming the program and how the
//! worker ended; the server starts a new worker and the batch goes on. A job that runs longer than
//! [`set_job_time_limit`] (10 minutes by default) has its worker killed, the same way. When the
//! server itself dies, or sends no outcome to any batch for the time limit plus a minute while a
//! batch waits (it is then killed), every job it still held fails with the same error, and the
//! next batch starts a new server. So no batch waits forever.

mod locate;
#[cfg(target_os = "linux")]
mod server;
mod wire;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub(crate) use wire::{NvrtcIdentity, Outcome};

use super::Arch;

/// The variable naming the worker executable (a path), or turning workers off (`off`).
pub const WORKER_ENV: &str = "CUDYN_WORKER";

/// The fewest programs to compile (cache misses) for which a batch uses worker processes.
pub const MIN_PROGRAMS: usize = 3;

/// Where [`compile_all`](super::compile_all) gets its worker processes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WorkerSetting {
    /// `CUDYN_WORKER`, else the `cudyn` executable found beside this one, on `PATH` or in
    /// `~/.cargo/bin` (the default).
    #[default]
    Search,
    /// This `cudyn` executable.
    Executable(PathBuf),
    /// No worker processes: batches compile on this process's threads.
    Off,
}

/// Chooses the worker executable for the batches that follow. A running compile server of
/// another executable is ended, and a remembered failure to start one is forgotten.
pub fn set_workers(setting: WorkerSetting) {
    let mut state = state();
    state.setting = setting;
    state.server = Server::NotStarted;
}

/// The longest one program may compile in a worker before the worker is killed and the program
/// fails with [`Error::CompileWorker`](crate::Error::CompileWorker); 10 minutes by default.
/// Applies to servers started afterwards.
pub fn set_job_time_limit(limit: Duration) {
    state().job_time_limit = limit;
}

/// Runs the compile server on this process's standard input and output; the `cudyn` executable
/// calls it for `cudyn __compile-server`. Returns the exit status.
#[doc(hidden)]
pub fn serve() -> i32 {
    #[cfg(target_os = "linux")]
    return server::serve();
    #[cfg(not(target_os = "linux"))]
    {
        crate::warn::warning!("cudyn: compile workers run on Linux only");
        1
    }
}

/// Runs one compile worker on this process's standard input and output; the `cudyn` executable
/// calls it for `cudyn __compile-worker`, which the compile server starts. Returns the exit
/// status.
#[doc(hidden)]
pub fn work() -> i32 {
    #[cfg(target_os = "linux")]
    return server::work_on_standard_streams();
    #[cfg(not(target_os = "linux"))]
    {
        crate::warn::warning!("cudyn: compile workers run on Linux only");
        1
    }
}

#[derive(Debug)]
struct State {
    setting: WorkerSetting,
    job_time_limit: Duration,
    server: Server,
    warned: bool,
}

#[derive(Debug)]
enum Server {
    NotStarted,
    Running(Arc<Connection>),
    /// Why it could not start, kept until the setting changes.
    Unavailable(String),
}

fn state() -> MutexGuard<'static, State> {
    static STATE: Mutex<State> = Mutex::new(State {
        setting: WorkerSetting::Search,
        job_time_limit: Duration::from_secs(600),
        server: Server::NotStarted,
        warned: false,
    });
    STATE.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// A running compile server.
#[derive(Debug)]
pub(super) struct Connection {
    pub(super) executable: PathBuf,
    pub(super) workers: usize,
    pub(super) pid: u32,
    /// The NVRTC its workers compile with.
    pub(super) nvrtc: NvrtcIdentity,
    job_time_limit: Duration,
    child: Mutex<Child>,
    to_server: Mutex<ChildStdin>,
    routes: Arc<Mutex<Routes>>,
}

/// Where each job's outcome goes, and whether the server is still there.
#[derive(Debug)]
struct Routes {
    waiting: HashMap<u64, Sender<(u64, Outcome)>>,
    /// When the server last sent an outcome (for any batch), or was started.
    last_heard: Instant,
    /// Why the server is gone, once it is.
    ended: Option<String>,
}

impl Routes {
    /// Marks the server gone and fails every job still waiting.
    fn end(&mut self, why: String) {
        for (id, sender) in self.waiting.drain() {
            let _ = sender.send((id, Outcome::Lost(why.clone())));
        }
        self.ended.get_or_insert(why);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// The running server, started if need be; `Err` says why there is none. The
/// first failure of the process is also printed, unless workers were turned off.
pub(super) fn server() -> Result<Arc<Connection>, String> {
    let mut state = state();
    if let Server::Running(connection) = &state.server {
        if lock(&connection.routes).ended.is_none() {
            return Ok(Arc::clone(connection));
        }
    }
    if let Server::Unavailable(why) = &state.server {
        return Err(why.clone());
    }
    let executable = locate::worker_executable(
        &state.setting,
        |name| std::env::var_os(name),
        std::env::current_exe().ok(),
    );
    let started =
        executable.and_then(|executable| Connection::start(executable, state.job_time_limit));
    match started {
        Ok(connection) => {
            let connection = Arc::new(connection);
            state.server = Server::Running(Arc::clone(&connection));
            Ok(connection)
        }
        Err(why) => {
            let turned_off = why.starts_with("turned off");
            if !turned_off && !std::mem::replace(&mut state.warned, true) {
                crate::warn::warning!("cudyn: warning: compiling on this process's threads, not in compile worker processes: {why}");
            }
            state.server = Server::Unavailable(why.clone());
            Err(why)
        }
    }
}

/// How long the server may take to greet and warm up.
const START_LIMIT: Duration = Duration::from_secs(60);

/// What the reader thread learns while the server starts.
enum Started {
    Greeting(Result<String, String>),
    Ready(Result<wire::Ready, String>),
}

impl Connection {
    fn start(executable: PathBuf, job_time_limit: Duration) -> Result<Self, String> {
        let shown = executable.display().to_string();
        let mut child = Command::new(&executable)
            .arg("__compile-server")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|error| format!("cannot start {shown}: {error}"))?;
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        let (Some(mut stdin), Some(stdout)) = (stdin, stdout) else {
            return Err(format!("{shown} was started without pipes"));
        };
        let routes = Arc::new(Mutex::new(Routes {
            waiting: HashMap::new(),
            last_heard: Instant::now(),
            ended: None,
        }));
        let (started_tx, started) = mpsc::channel();
        let reader_routes = Arc::clone(&routes);
        std::thread::Builder::new()
            .name("cudyn-compile-server".into())
            .spawn(move || read_server(stdout, started_tx, reader_routes))
            .map_err(|error| format!("cannot start a thread to read {shown}: {error}"))?;
        let workers = std::thread::available_parallelism().map_or(1, usize::from);
        let request = wire::Start {
            workers: workers as u64,
            library_path: crate::sys::library_path_override(),
            job_time_limit,
        };
        let (pid, nvrtc) = match handshake(&shown, &mut child, &mut stdin, &started, &request) {
            Ok(started) => started,
            Err(why) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(why);
            }
        };
        Ok(Connection {
            executable,
            workers,
            pid,
            nvrtc,
            job_time_limit,
            child: Mutex::new(child),
            to_server: Mutex::new(stdin),
            routes,
        })
    }

    /// Hands `jobs` to the server; their outcomes arrive on the receiver, one per job, in the
    /// order they finish.
    pub(super) fn submit(&self, jobs: Vec<(Arch, Vec<PathBuf>, &super::Program)>) -> Submitted {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        let (sender, receiver) = mpsc::channel();
        let mut ids = Vec::with_capacity(jobs.len());
        let mut messages = Vec::with_capacity(jobs.len());
        {
            let mut routes = lock(&self.routes);
            // An unknown working folder leaves the worker in the one the server started in.
            let folder = std::env::current_dir().unwrap_or_default();
            for (arch, defaults, program) in jobs {
                let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
                ids.push(id);
                let job = wire::Job {
                    id,
                    arch,
                    defaults,
                    folder: folder.clone(),
                    program: program.clone(),
                };
                messages.push(job.encode());
                match &routes.ended {
                    Some(why) => {
                        let _ = sender.send((id, Outcome::Lost(why.clone())));
                    }
                    None => {
                        routes.waiting.insert(id, sender.clone());
                    }
                }
            }
        }
        let mut to_server = lock(&self.to_server);
        for message in messages {
            if let Err(error) = wire::write_frame(&mut *to_server, &message) {
                lock(&self.routes)
                    .end(format!("the compile server stopped reading jobs ({error})"));
                break;
            }
        }
        Submitted { ids, receiver }
    }

    /// The next outcome of `submitted`. A server that sends nothing, to any batch, for longer
    /// than any job may take is killed, which fails every job it held: its time limit should
    /// have ended the slowest job before.
    pub(super) fn next_outcome(&self, submitted: &Submitted) -> (u64, Outcome) {
        let silence = self.job_time_limit.saturating_add(Duration::from_secs(60));
        loop {
            match submitted.receiver.recv_timeout(silence) {
                Ok(outcome) => return outcome,
                Err(RecvTimeoutError::Timeout) => {
                    let mut routes = lock(&self.routes);
                    if routes.last_heard.elapsed() >= silence {
                        let _ = lock(&self.child).kill();
                        routes.end(format!(
                            "the compile server (pid {}) sent nothing for {} s and was killed",
                            self.pid,
                            silence.as_secs()
                        ));
                    }
                }
                // Every sender is gone only after every job was answered.
                Err(RecvTimeoutError::Disconnected) => {
                    return (0, Outcome::Lost("the compile server's reader ended".into()))
                }
            }
        }
    }
}

/// Jobs handed to the server: their ids, in the order given, and where their outcomes arrive.
#[derive(Debug)]
pub(super) struct Submitted {
    pub(super) ids: Vec<u64>,
    receiver: Receiver<(u64, Outcome)>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        let mut child = lock(&self.child);
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Checks the server's greeting, sends it `request` and waits until it is ready: its pid and
/// NVRTC, or why it cannot serve.
fn handshake(
    shown: &str,
    child: &mut Child,
    stdin: &mut ChildStdin,
    started: &Receiver<Started>,
    request: &wire::Start,
) -> Result<(u32, NvrtcIdentity), String> {
    let greeting = match started.recv_timeout(START_LIMIT) {
        Ok(Started::Greeting(Ok(line))) => line,
        Ok(Started::Greeting(Err(why))) => {
            let status = match child.try_wait() {
                Ok(Some(status)) => format!(" ({status})"),
                _ => String::new(),
            };
            return Err(format!(
                "{shown} is not a cudyn compile server{status}: {why}"
            ));
        }
        _ => return Err(format!("{shown} did not answer within {START_LIMIT:?}")),
    };
    let pid = check_greeting(&greeting).map_err(|why| format!("{shown}: {why}"))?;
    wire::write_frame(stdin, &request.encode())
        .map_err(|error| format!("{shown} stopped reading: {error}"))?;
    match started.recv_timeout(START_LIMIT) {
        Ok(Started::Ready(Ok(wire::Ready { nvrtc: Ok(nvrtc) }))) => Ok((pid, nvrtc)),
        Ok(Started::Ready(Ok(wire::Ready { nvrtc: Err(why) }))) => {
            Err(format!("the compile server cannot compile: {why}"))
        }
        Ok(Started::Ready(Err(why))) => Err(format!("the compile server failed to start: {why}")),
        _ => Err(format!("{shown} did not warm up within {START_LIMIT:?}")),
    }
}

/// The greeting's pid, when it is a server of this protocol and version.
fn check_greeting(line: &str) -> Result<u32, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let [greeting, protocol, version, pid] = words[..] else {
        return Err(format!(
            "it greeted with `{line}`, not as a cudyn compile server"
        ));
    };
    let ours = (wire::PROTOCOL.to_string(), env!("CARGO_PKG_VERSION"));
    if greeting != wire::GREETING || (protocol, version) != (ours.0.as_str(), ours.1) {
        return Err(format!(
            "it is cudyn {version} (worker protocol {protocol}), but this program uses cudyn {} \
             (protocol {}); install the same version (`cargo install cudyn-cli --version {}`) \
             or name one with {WORKER_ENV}",
            ours.1, ours.0, ours.1
        ));
    }
    pid.parse()
        .map_err(|_| format!("it greeted with `{line}`, whose pid is not a number"))
}

/// The reader thread: the greeting, the ready message, then every outcome, routed to the batch
/// that waits for it. At the end of the server's output every waiting job fails.
fn read_server(stdout: impl Read, started: Sender<Started>, routes: Arc<Mutex<Routes>>) {
    let mut from_server = BufReader::new(stdout);
    let mut line = Vec::new();
    let greeting = match (&mut from_server).take(200).read_until(b'\n', &mut line) {
        Ok(_) if line.ends_with(b"\n") => Ok(String::from_utf8_lossy(&line).trim().to_owned()),
        Ok(0) => Err("it wrote nothing and closed its output".to_owned()),
        Ok(_) => Err(format!(
            "it wrote `{}`",
            String::from_utf8_lossy(&line).trim()
        )),
        Err(error) => Err(error.to_string()),
    };
    let Ok(line) = &greeting else {
        let _ = started.send(Started::Greeting(greeting));
        return;
    };
    let server = match line.rsplit(' ').next() {
        Some(pid) => format!("the compile server (pid {pid})"),
        None => "the compile server".to_owned(),
    };
    let _ = started.send(Started::Greeting(greeting.clone()));
    let ready = match wire::read_frame(&mut from_server) {
        Ok(Some(message)) => wire::Ready::decode(&message)
            .map_err(|malformed| format!("its first message does not read: {malformed}")),
        Ok(None) => Err("it closed its output".to_owned()),
        Err(error) => Err(error.to_string()),
    };
    let ready_ok = matches!(ready, Ok(wire::Ready { nvrtc: Ok(_) }));
    let _ = started.send(Started::Ready(ready));
    if !ready_ok {
        return;
    }
    let why = loop {
        let message = match wire::read_frame(&mut from_server) {
            Ok(Some(message)) => message,
            Ok(None) => break format!("{server} ended"),
            Err(error) => break format!("{server}'s output broke off ({error})"),
        };
        match wire::decode_outcome(&message) {
            Ok((id, outcome)) => {
                let mut routes = lock(&routes);
                routes.last_heard = Instant::now();
                if let Some(sender) = routes.waiting.remove(&id) {
                    let _ = sender.send((id, outcome));
                }
            }
            Err(malformed) => break format!("{server} sent a malformed message ({malformed})"),
        }
    };
    lock(&routes).end(why);
}
