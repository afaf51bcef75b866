//! What the tests of `cudyn` in a hostile environment share: a folder of real inputs for every
//! subcommand, standard streams that fail (a full disk, a pipe whose reader has gone), and the
//! checks every case makes (no panic, the exit status, one line of error).

#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub use crate::common::cudyn;

const ITERATE_KERNEL: &str = include_str!("../kernels/iterate_kernel.cu");
const ITERATE_STEP: &str = include_str!("../kernels/iterate_step.cu");

/// A kernel with one pointer parameter.
pub const KERNEL: &str = "extern \"C\" __global__ void k(float *p) { p[0] *= 2.0f; }\n";

/// A folder of inputs made by `cudyn` itself, with a compile cache of its own:
/// `k.cu` and its cubin `k.cubin` (sm_90), `k.ptx` (compute_90), and the two relocatable pieces
/// `kernel.ltoir` and `step.ltoir` (sm_90) of one program, with their sources.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    cache: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Fixture {
        let fixture = Fixture {
            dir: tempfile::tempdir().unwrap(),
            cache: tempfile::tempdir().unwrap(),
        };
        for (name, text) in [
            ("k.cu", KERNEL),
            ("kernel.cu", ITERATE_KERNEL),
            ("step.cu", ITERATE_STEP),
        ] {
            std::fs::write(fixture.path(name), text).unwrap();
        }
        for line in [
            "compile k.cu --arch sm_90",
            "compile k.cu --arch compute_90 --emit ptx",
            "compile kernel.cu step.cu --arch sm_90 --rdc --emit ltoir",
        ] {
            let made = fixture.output(&words(line));
            assert!(made.status.success(), "{line}: {made:?}");
        }
        fixture
    }

    /// A file of the folder.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `cudyn ARGS...` in the folder, with its cache and standard input closed.
    pub fn cudyn<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
        let mut command = cudyn();
        command
            .current_dir(self.dir.path())
            .env("CUDYN_CACHE_DIR", self.cache.path())
            .env_remove("CUDYN_CACHE")
            .env_remove("RUST_BACKTRACE")
            .args(args)
            .stdin(Stdio::null());
        command
    }

    /// The output of `cudyn ARGS...`, which must not have panicked.
    pub fn output<S: AsRef<OsStr> + std::fmt::Debug>(&self, args: &[S]) -> Output {
        let output = self.cudyn(args).output().unwrap();
        assert_no_panic(&output, &format!("{args:?}"));
        output
    }
}

/// The words of `line`, a command line written as a shell would split it (`''` is an empty word).
pub fn words(line: &str) -> Vec<String> {
    shlex::split(line).unwrap_or_else(|| panic!("`{line}` is not a command line"))
}

/// What standard output is in a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sink {
    /// `/dev/full`: every write fails with ENOSPC.
    Full,
    /// A pipe whose reading end is closed: every write fails with EPIPE.
    ClosedPipe,
}

/// Runs `command` with standard output going to `sink`; standard error is kept.
pub fn run_into(mut command: Command, sink: Sink) -> Output {
    let stdout = match sink {
        Sink::Full => Stdio::from(std::fs::File::create("/dev/full").unwrap()),
        Sink::ClosedPipe => {
            let (reader, writer) = std::io::pipe().unwrap();
            drop(reader);
            Stdio::from(writer)
        }
    };
    let output = command
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    // `output` dropped the pipe's writing end of the parent with the command.
    output
}

/// Fails unless `output` is free of a Rust panic: no message, no status 101.
pub fn assert_no_panic(output: &Output, case: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    for text in [&stderr, &stdout] {
        assert!(
            !text.contains("panicked") && !text.contains("RUST_BACKTRACE"),
            "{case} panicked:\n{stderr}"
        );
    }
    assert_ne!(
        output.status.code(),
        Some(101),
        "{case}: status 101\n{stderr}"
    );
}

/// Standard error as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A child's exit status, the most memory it held and how long it ran.
#[derive(Debug)]
pub struct Measured {
    pub status: Option<i32>,
    pub stderr: String,
    pub max_rss_bytes: u64,
    pub elapsed: Duration,
}

/// Runs `command` (standard output discarded, standard error to a file) and measures it; kills it
/// after `limit`, which fails the test.
pub fn measure(mut command: Command, limit: Duration) -> Measured {
    let errors = tempfile::NamedTempFile::new().unwrap();
    let started = Instant::now();
    let child = command
        .stdout(Stdio::null())
        .stderr(errors.reopen().unwrap())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let (status, usage) = loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: waits for this test's own child, with valid pointers to the two results.
        let waited = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if waited == pid {
            break (status, usage);
        }
        if started.elapsed() > limit {
            // SAFETY: the child has not been waited for, so the pid is still this child's.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("{command:?} ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // The child is reaped above; `child` is dropped without another wait.
    drop(child);
    Measured {
        status: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        stderr: std::fs::read_to_string(errors.path()).unwrap(),
        // ru_maxrss is in KiB on Linux.
        max_rss_bytes: u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024,
        elapsed: started.elapsed(),
    }
}
