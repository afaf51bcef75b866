//! Compile worker processes: how [`compile_all`](crate::compile::compile_all) scales across
//! cores. The one place where cudyn starts processes.
//!
//! **Where it sits.** This module is the library's edge: it uses the layers below it (a
//! [`Program`](crate::compile::Program) compiled by NVRTC, the library search of `sys`, the
//! [codec](#the-protocol) of the cache's files) and only [`compile_batch`] uses it in turn. The
//! executable that serves it, `cudyn` of the `cudyn-cli` package, hosts the two hidden modes
//! ([`SERVER_MODE`], [`WORKER_MODE`]) by calling [`serve`] and [`work`].
//!
//! Every process started here dies with the process that started it (`PR_SET_PDEATHSIG`, see
//! `spawn.rs`): killing a program leaves no server or worker running.
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
//! __compile-worker` process of the server's own executable, and opens NVRTC to identify the one
//! they use. The server hands the workers the jobs, one at a time each, so uneven programs still
//! keep every worker busy. It is started on the first batch that needs it and kept for the life
//! of the calling process, so later batches pay nothing to start. What it costs: one `exec` of
//! `cudyn` per process, and NVRTC's start-up (its first compile costs several times a later one)
//! in every worker, all at once, on each worker's first job; and the memory of the warm processes
//! while the calling process lives. The server compiles nothing itself, so the jobs reach the
//! workers as soon as they are started.
//!
//! **What travels.** A job carries everything the compile depends on, the same inputs the compile
//! cache's key covers: source, name, every option, in-memory headers, name expressions, and the
//! architecture and CUDA header folders decided in the calling process (its current device, the
//! headers its cache key names), and the calling process's working folder at the time of the
//! batch, from which relative include folders resolve (and which line information records). The
//! server keeps the environment variables the calling process had when it started the server.
//! Results come back over a pipe in frames sealed by a checksum and checked at every hop, are
//! checked against the job (name, output kind, architecture, name expressions), and are stored
//! in the compile cache by the calling process exactly as its own compile would be, when the
//! server's NVRTC is the one the key names. Cached programs never reach the server: a batch looks
//! every program up first, and a batch of hits starts nothing.
//!
//! **Why not fork warm workers (a zygote).** Workers forked from a server that had compiled once
//! would skip NVRTC's start-up, and a C program doing so scaled well on some hosts. cudyn measured
//! it on a 16-core H200 host (CUDA 13.0): forked workers made a batch 2 to 3 times *slower* than
//! compiling one source after another, where fresh workers made it 3 to 7 times faster
//! (docs/BENCHMARKS.md). A likely reason: NVRTC loads the CUDA driver during a compile where one is
//! installed, and the driver starts threads of its own, so a forked copy of a warm process carries
//! a driver whose threads are gone. Fresh workers share nothing with the server.
//!
//! # Which executable runs
//!
//! Found explicitly, never searched for on `PATH`, in this order:
//!
//! 1. the executable given to [`set_workers`] ([`WorkerSetting::Executable`]), or none
//!    ([`WorkerSetting::Off`]);
//! 2. the `CUDYN_WORKER` variable ([`WORKER_ENV`]): a path, or `off` (also `0`, `false`);
//! 3. `cudyn` beside the running program (and in the folder above it, where cargo puts tests
//!    and examples: `target/<profile>/deps/` and `.../examples/` below the `cudyn` it builds).
//!
//! So a program gets worker processes only from an executable its author named or shipped
//! beside it, and whatever runs must pass the handshake below. Without one, batches compile on
//! the program's threads, quietly: [`BatchRun::InProcess`](crate::compile::BatchRun) says why.
//!
//! # The protocol
//!
//! The batch's process starts `EXECUTABLE __compile-server` with piped standard input and output
//! (standard error is shared). Its number is [`PROTOCOL`]; it changes with any change below.
//!
//! 1. **The handshake.** The server's first output is one line of text, at most 200 bytes:
//!    `cudyn-compile-server PROTOCOL VERSION PID`. The library compares PROTOCOL with its own
//!    and VERSION with its own cudyn version; unless both are equal it ends the process and
//!    refuses it, saying what the executable is and what to install (`it is cudyn 0.0.1 (worker
//!    protocol 1), but this program uses cudyn 0.1.0 (protocol 3); install the same version
//!    ...`). Nothing binary is written to an executable before it passed this check, so an
//!    executable of another kind or version cannot misread a message.
//! 2. **Frames.** Everything after the line is a frame: the message's length (a little-endian
//!    `u32`, at most 1 GiB), the message, and its checksum (16 bytes, the seal of the codec
//!    cudyn's cache files use). A frame whose checksum fails, or that is cut short, ends the
//!    connection: the jobs it carried fail, never taken for results.
//! 3. **Messages.** A message's first byte is its tag; its fields are the codec's
//!    (little-endian numbers, length-prefixed bytes and texts, count-prefixed lists):
//!    - `START` (batch to server): the number of workers, the folders of
//!      [`crate::set_library_path`] if set, the time limit of one job;
//!    - `READY` (server to batch): the file and version of the NVRTC the workers compile with,
//!      or why there is none;
//!    - `JOB` (batch to server, passed on to a worker as it is): an id, the architecture, CUDA's
//!      header folders, the working folder and the program with every option;
//!    - `OUTCOME` (worker to server to batch, or the server's for a lost job): the job's id and
//!      its result: the compiled code, NVRTC's failure, a missing header, another failure, or
//!      the worker's death.
//! 4. **Link workers.** An isolated link ([`LinkOptions::isolated`](crate::compile::LinkOptions::isolated))
//!    starts `EXECUTABLE __link-worker` ([`LINK_WORKER_MODE`]) itself, with no server: it greets
//!    with `cudyn-link-worker PROTOCOL VERSION PID`, checked as the server's greeting is, then
//!    answers each `LINK` frame (nvJitLink's options, whether PTX is wanted, each input's kind,
//!    name and bytes) with a `LINKED` frame (the code and info log, or nvJitLink's failure).
//!    `link_worker.rs` says how workers are kept and stopped.
//! 5. **Workers.** The server starts each worker from its own executable file
//!    (`/proc/self/exe`, which stays that file even when an upgrade replaces it) with
//!    `__compile-worker`, so a worker is always of the server's version; its standard input
//!    carries `JOB` frames and its output `OUTCOME` frames.
//!
//! # Falling back, crashes and hangs
//!
//! When no executable is found, it is of another version, or the server cannot start (NVRTC
//! missing or not identifiable), the batch compiles on this process's threads, as
//! [`compile_all_on`](crate::compile::compile_all_on) does; [`compile_batch`]'s
//! [`BatchRun::InProcess`](crate::compile::BatchRun) says why, and the first such batch of a
//! process also prints the reason as a warning on standard error when an executable was named or
//! found but cannot serve (not when there is none, nor when workers are turned off). A failed
//! start is not retried in the same process unless [`set_workers`] is called again. Batches of
//! fewer than [`MIN_PROGRAMS`] programs to compile stay in the process: with one or two
//! programs, starting the server costs as much as the compiles themselves.
//! [`compile_batch_isolated`](crate::compile::compile_batch_isolated) never compiles in the
//! process: however few its programs, they go to the server, so that the time limit and the
//! isolation from crashes hold for each, and without a server each fails, saying why.
//!
//! A worker that dies (a crash inside NVRTC, a kill) fails the job it held with
//! [`Error::CompileWorker`](crate::Error::CompileWorker), naming the program and how the worker
//! ended; the server starts a new worker and the batch goes on. A job that runs longer than
//! [`set_job_time_limit`] (10 minutes by default) has its worker killed, the same way. When the
//! server itself dies, or sends no outcome to any batch for the time limit plus a minute while a
//! batch waits (it is then killed), every job it still held fails with the same error, and the
//! next batch starts a new server. So no batch waits forever.
//!
//! # Not a cargo feature
//!
//! The workers are always compiled in (on Linux; elsewhere [`serve`] and [`work`] only say they
//! cannot run), and chosen at run time. A feature would not make a program's behaviour any more
//! certain: features unify across a dependency graph, so one crate that turned workers on would
//! turn them on for every other, and none could count on them being off. The run-time setting
//! can: [`set_workers`]`(`[`WorkerSetting::Off`]`)` or `CUDYN_WORKER=off` decides for one
//! process, and without an executable named or beside the program nothing is started anyway. A
//! feature would save no dependency either (`libc` is the cache's too), and would double the
//! configurations to build and test, while `cudyn` itself must always host the modes.
//!
//! [`compile_batch`]: crate::compile::compile_batch

mod connection;
mod link_job;
mod link_worker;
mod locate;
#[cfg(target_os = "linux")]
mod server;
mod spawn;
mod wire;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use connection::lock;
pub(crate) use connection::Connection;
pub(crate) use link_job::LinkInput;
pub(crate) use link_worker::{link, Limits};
pub use wire::PROTOCOL;
pub(crate) use wire::{NvrtcIdentity, Outcome};

/// The variable naming the worker executable (a path), or turning workers off (`off`).
pub const WORKER_ENV: &str = "CUDYN_WORKER";

/// The fewest programs to compile (cache misses) for which a batch uses worker processes.
pub const MIN_PROGRAMS: usize = 3;

/// The argument that starts an executable as a compile server: its only argument.
pub const SERVER_MODE: &str = "__compile-server";

/// The argument that starts an executable as a compile worker: its only argument.
pub const WORKER_MODE: &str = "__compile-worker";

/// The argument that starts an executable as a link worker (an isolated link's process, see
/// [`LinkOptions::isolated`](crate::compile::LinkOptions::isolated)): its only argument.
pub const LINK_WORKER_MODE: &str = "__link-worker";

/// Where [`compile_all`](crate::compile::compile_all) gets its worker processes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WorkerSetting {
    /// `CUDYN_WORKER`, else the `cudyn` executable beside the running program (the default).
    #[default]
    Search,
    /// This `cudyn` executable.
    Executable(PathBuf),
    /// No worker processes: batches compile on this process's threads.
    Off,
}

/// Chooses the worker executable for the batches and isolated links that follow. A running
/// compile server and idle link workers of another executable are ended, and a remembered
/// failure to start a server is forgotten.
pub fn set_workers(setting: WorkerSetting) {
    let mut state = state();
    state.setting = setting;
    state.server = Server::NotStarted;
    link_worker::end_idle();
}

/// The longest one program may compile in a worker before the worker is killed and the program
/// fails with [`Error::CompileWorker`](crate::Error::CompileWorker); 10 minutes by default.
/// Applies to servers started afterwards.
pub fn set_job_time_limit(limit: Duration) {
    state().job_time_limit = limit;
}

/// Runs the compile server on this process's standard input and output; the `cudyn` executable
/// calls it for `cudyn __compile-server` ([`SERVER_MODE`]). Returns the exit status.
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
/// calls it for `cudyn __compile-worker` ([`WORKER_MODE`]), which the compile server starts.
/// Returns the exit status.
pub fn work() -> i32 {
    #[cfg(target_os = "linux")]
    return server::work_on_standard_streams();
    #[cfg(not(target_os = "linux"))]
    {
        crate::warn::warning!("cudyn: compile workers run on Linux only");
        1
    }
}

/// Runs one link worker on this process's standard input and output; the `cudyn` executable
/// calls it for `cudyn __link-worker` ([`LINK_WORKER_MODE`]), which an isolated link starts.
/// Returns the exit status.
pub fn link_worker() -> i32 {
    #[cfg(target_os = "linux")]
    return link_worker::work_on_standard_streams();
    #[cfg(not(target_os = "linux"))]
    {
        crate::warn::warning!("cudyn: link workers run on Linux only");
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

/// The process's worker setting and its compile server: one per process, because the server is
/// kept warm for every later batch of the process.
fn state() -> MutexGuard<'static, State> {
    static STATE: Mutex<State> = Mutex::new(State {
        setting: WorkerSetting::Search,
        job_time_limit: Duration::from_secs(600),
        server: Server::NotStarted,
        warned: false,
    });
    STATE.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// The running server, started if need be; `Err` says why there is none. The first failure of
/// the process to start an executable that was named or found is also printed.
pub(crate) fn server() -> Result<Arc<Connection>, String> {
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
    let started = match executable {
        Ok(executable) => Connection::start(executable, state.job_time_limit).map_err(|why| {
            if !std::mem::replace(&mut state.warned, true) {
                crate::warn::warning!(
                    "cudyn: warning: compiling on this process's threads, not in compile worker \
                     processes: {why}"
                );
            }
            why
        }),
        Err(none) => Err(none),
    };
    match started {
        Ok(connection) => {
            let connection = Arc::new(connection);
            state.server = Server::Running(Arc::clone(&connection));
            Ok(connection)
        }
        Err(why) => {
            state.server = Server::Unavailable(why.clone());
            Err(why)
        }
    }
}
