//! The library's side of a compile server: starting it, the handshake, handing it jobs and
//! routing its outcomes to the batches that wait for them.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::wire::{self, NvrtcIdentity, Outcome};
use super::{SERVER_MODE, WORKER_ENV};
use crate::compile::{Arch, Program};

/// A running compile server.
#[derive(Debug)]
pub(crate) struct Connection {
    pub(crate) executable: PathBuf,
    pub(crate) workers: usize,
    pub(crate) pid: u32,
    /// The NVRTC its workers compile with.
    pub(crate) nvrtc: NvrtcIdentity,
    job_time_limit: Duration,
    child: Mutex<Child>,
    to_server: Mutex<ChildStdin>,
    pub(super) routes: Arc<Mutex<Routes>>,
}

/// Where each job's outcome goes, and whether the server is still there.
#[derive(Debug)]
pub(super) struct Routes {
    waiting: HashMap<u64, Sender<(u64, Outcome)>>,
    /// When the server last sent an outcome (for any batch), or was started.
    last_heard: Instant,
    /// Why the server is gone, once it is.
    pub(super) ended: Option<String>,
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

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// How long the server may take to greet and warm up.
const START_LIMIT: Duration = Duration::from_secs(60);

/// What the reader thread learns while the server starts.
enum Started {
    Greeting(Result<String, String>),
    Ready(Result<wire::Ready, String>),
}

impl Connection {
    pub(super) fn start(executable: PathBuf, job_time_limit: Duration) -> Result<Self, String> {
        let shown = executable.display().to_string();
        let mut command = Command::new(&executable);
        command
            .arg(SERVER_MODE)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = super::spawn::spawn_tied(command)
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
    pub(crate) fn submit(&self, jobs: Vec<(Arch, Vec<PathBuf>, &Program)>) -> Submitted {
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
    pub(crate) fn next_outcome(&self, submitted: &Submitted) -> (u64, Outcome) {
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
pub(crate) struct Submitted {
    pub(crate) ids: Vec<u64>,
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
    let pid = check_greeting(&greeting, wire::GREETING).map_err(|why| format!("{shown}: {why}"))?;
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

/// The greeting's pid, when it is `expected` (the first word: a compile server's or a link
/// worker's) of this protocol and version.
pub(super) fn check_greeting(line: &str, expected: &str) -> Result<u32, String> {
    let stranger = || {
        let role = expected.replace('-', " ");
        format!("it greeted with `{line}`, not as a {role}")
    };
    let words: Vec<&str> = line.split_whitespace().collect();
    let [greeting, protocol, version, pid] = words[..] else {
        return Err(stranger());
    };
    if greeting != expected {
        return Err(stranger());
    }
    let ours = (wire::PROTOCOL.to_string(), env!("CARGO_PKG_VERSION"));
    if (protocol, version) != (ours.0.as_str(), ours.1) {
        return Err(format!(
            "it is cudyn {version} (worker protocol {protocol}), but this program uses cudyn {} \
             (protocol {}): use the `cudyn` of cudyn {} (`cargo install cudyn-cli --version {}`), \
             beside the program or named with {WORKER_ENV} or cudyn::compile::set_workers",
            ours.1, ours.0, ours.1, ours.1
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_server_of_this_protocol_and_version_passes_the_handshake() {
        let version = env!("CARGO_PKG_VERSION");
        let ours = format!("cudyn-compile-server {} {version} 42", wire::PROTOCOL);
        assert_eq!(check_greeting(&ours, wire::GREETING), Ok(42));
        let other_protocol = format!("cudyn-compile-server {} {version} 42", wire::PROTOCOL + 1);
        let why = check_greeting(&other_protocol, wire::GREETING).unwrap_err();
        assert!(
            why.starts_with(&format!(
                "it is cudyn {version} (worker protocol {}), but this program uses cudyn \
                 {version} (protocol {})",
                wire::PROTOCOL + 1,
                wire::PROTOCOL
            )),
            "{why}"
        );
        assert!(
            why.contains(&format!("cargo install cudyn-cli --version {version}")),
            "{why}"
        );
        let other_version = format!("cudyn-compile-server {} 0.0.1 42", wire::PROTOCOL);
        let why = check_greeting(&other_version, wire::GREETING).unwrap_err();
        assert!(why.starts_with("it is cudyn 0.0.1 "), "{why}");
        for stranger in ["hello", "hello a b c", "", "cudyn-compile-server 3 0.1.0"] {
            let why = check_greeting(stranger, wire::GREETING).unwrap_err();
            assert!(why.ends_with("not as a cudyn compile server"), "{why}");
        }
        let why = check_greeting(&ours.replace("42", "x"), wire::GREETING).unwrap_err();
        assert!(why.contains("pid is not a number"), "{why}");
    }
}
