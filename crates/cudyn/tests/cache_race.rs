//! Compiles of one source racing into one cache folder, from processes and from threads: at the
//! end the folder holds exactly one valid entry for the key and nothing else (no temporary file
//! left behind), and every compile returned the same bytes. Needs NVRTC, no GPU.
//!
//! The workers are this test binary run again, filtered to one test, with [`WORKER_ENV`] saying
//! what to do (`process` or `threads`) and where to write the code it got; `CUDYN_CACHE_DIR`
//! names the cache, so the user's own cache is never touched. Each worker opens NVRTC first,
//! says so with a file, and compiles only when the parent, having seen every worker ready,
//! creates the start file: the compiles overlap rather than run one after another.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use cudyn::{Arch, Cache, Output, Program};

/// Set only in workers: `process:<out file>:<start file>:<ready file>` or the same with
/// `threads`.
const WORKER_ENV: &str = "CUDYN_CACHE_RACE_WORKER";

/// Processes racing (the issue asks for at least 8), and threads racing in one process.
const RACERS: usize = 8;

/// Longest the workers may take, all together.
const TIMEOUT: Duration = Duration::from_secs(180);

const SAXPY: &str = r#"
extern "C" __global__ void saxpy(float a, const float *x, const float *y, float *out, size_t n) {
    size_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
"#;

fn program() -> Program {
    Program::new(SAXPY)
        .arch(Arch::new(9, 0))
        .output(Output::Cubin)
}

/// What a worker was told to do.
struct Work {
    threads: bool,
    out: PathBuf,
    start: PathBuf,
    ready: PathBuf,
}

impl Work {
    fn from_env() -> Option<Work> {
        let value = std::env::var(WORKER_ENV).ok()?;
        let mut fields = value.split('\n');
        let mut next = || PathBuf::from(fields.next().expect("a worker field"));
        let mode = next();
        Some(Work {
            threads: mode == Path::new("threads"),
            out: next(),
            start: next(),
            ready: next(),
        })
    }

    fn to_env(&self) -> String {
        let mode = if self.threads { "threads" } else { "process" };
        format!(
            "{mode}\n{}\n{}\n{}",
            self.out.display(),
            self.start.display(),
            self.ready.display()
        )
    }

    /// Opens NVRTC, signals ready, waits for the start, compiles (in `RACERS` threads released
    /// together when `threads`), and writes the code it got.
    fn run(&self) {
        cudyn::sys::nvrtc().expect("NVRTC opens");
        std::fs::write(&self.ready, b"").unwrap();
        while !self.start.exists() {
            std::thread::sleep(Duration::from_millis(1));
        }
        let code = if self.threads {
            let barrier = Arc::new(Barrier::new(RACERS));
            let racers: Vec<_> = (0..RACERS)
                .map(|_| {
                    let barrier = Arc::clone(&barrier);
                    std::thread::spawn(move || {
                        barrier.wait();
                        program().compile().expect("compiles").code().to_vec()
                    })
                })
                .collect();
            let codes: Vec<Vec<u8>> = racers.into_iter().map(|r| r.join().unwrap()).collect();
            assert!(
                codes.iter().all(|code| *code == codes[0]),
                "threads of one process got different code"
            );
            codes[0].clone()
        } else {
            program().compile().expect("compiles").code().to_vec()
        };
        std::fs::write(&self.out, code).unwrap();
        let cache = Cache::global().expect("the cache named by CUDYN_CACHE_DIR");
        std::fs::write(
            self.out.with_extension("cache"),
            cache.path().as_os_str().as_bytes(),
        )
        .unwrap();
    }
}

/// What a worker got: the code, and the folder of the cache's entries.
struct Outcome {
    code: Vec<u8>,
    entries: PathBuf,
}

/// Runs `workers` workers of `test` (each `threads` or not) on the cache `cache`, all released
/// together; returns what each got.
fn race(test: &str, cache: &Path, workers: usize, threads: bool) -> Vec<Outcome> {
    let scratch = tempfile::tempdir().unwrap();
    let start = scratch.path().join("start");
    let jobs: Vec<(Work, Child)> = (0..workers)
        .map(|i| {
            let work = Work {
                threads,
                out: scratch.path().join(format!("out-{i}")),
                start: start.clone(),
                ready: scratch.path().join(format!("ready-{i}")),
            };
            let child = Command::new(std::env::current_exe().unwrap())
                .args([test, "--exact", "--nocapture", "--test-threads", "1"])
                .env(WORKER_ENV, work.to_env())
                .env("CUDYN_CACHE_DIR", cache)
                .env_remove("CUDYN_CACHE")
                // The harness's lines of each worker; a failing worker's panic is on stderr.
                .stdout(Stdio::null())
                .spawn()
                .unwrap();
            (work, child)
        })
        .collect();
    let deadline = Instant::now() + TIMEOUT;
    while !jobs.iter().all(|(work, _)| work.ready.exists()) {
        assert!(Instant::now() < deadline, "workers never got ready");
        std::thread::sleep(Duration::from_millis(2));
    }
    std::fs::write(&start, b"").unwrap();
    jobs.into_iter()
        .map(|(work, mut child)| {
            let status = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break status;
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    panic!("a worker ran past {TIMEOUT:?}");
                }
                std::thread::sleep(Duration::from_millis(5));
            };
            assert!(status.success(), "a worker failed: {status}");
            let entries = std::fs::read(work.out.with_extension("cache")).unwrap();
            Outcome {
                code: std::fs::read(&work.out).unwrap(),
                entries: PathBuf::from(OsString::from_vec(entries)),
            }
        })
        .collect()
}

/// Every file under `folder`, relative to it.
fn files_under(folder: &Path) -> BTreeSet<PathBuf> {
    fn walk(root: &Path, folder: &Path, files: &mut BTreeSet<PathBuf>) {
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, files);
            } else {
                files.insert(path.strip_prefix(root).unwrap().to_owned());
            }
        }
    }
    let mut files = BTreeSet::new();
    walk(folder, folder, &mut files);
    files
}

/// The racers all got the code one uncontended compile makes, and the cache they shared holds
/// the files that compile leaves: one valid entry, no temporary file (its direct name may be
/// missing, as said below).
fn check_race(test: &str, workers: usize, threads: bool) {
    let alone = tempfile::tempdir().unwrap();
    let reference = race(test, alone.path(), 1, false).remove(0);
    let inspection = cudyn::Image::new(&reference.code)
        .unwrap()
        .inspect()
        .unwrap();
    assert_eq!(inspection.kind, cudyn::ImageKind::Cubin);

    let shared = tempfile::tempdir().unwrap();
    let outcomes = race(test, shared.path(), workers, threads);
    for (i, outcome) in outcomes.iter().enumerate() {
        assert!(
            outcome.code == reference.code,
            "worker {i} got other code than a compile alone"
        );
        assert_eq!(outcome.entries, outcomes[0].entries);
    }
    assert!(outcomes[0].entries.starts_with(shared.path()));

    let cache = Cache::open(outcomes[0].entries.clone()).unwrap();
    let entries = cache.entries().unwrap();
    assert_eq!(entries.len(), 1, "{entries:#?}");
    assert_eq!(entries[0].kernels, ["saxpy"], "{entries:#?}");
    let verified = cache.verify().unwrap();
    assert_eq!(verified.checked, 1, "{verified:?}");
    assert!(verified.removed.is_empty(), "{verified:?}");

    let expected = files_under(alone.path());
    assert!(
        !expected.is_empty(),
        "a compile alone stored nothing in the cache"
    );
    // A direct name is a second link to the entry file. A racer that replaces the entry after
    // another filed the name leaves that name linked to the replaced file, and the next
    // prune removes it as orphaned (as the cache documents): the name may then be missing,
    // which costs a later process the lookup by key, never a wrong answer.
    let is_direct = |path: &PathBuf| path.starts_with("direct");
    let raced = files_under(shared.path());
    let (raced_direct, raced_rest): (BTreeSet<_>, BTreeSet<_>) =
        raced.into_iter().partition(is_direct);
    let (expected_direct, expected_rest): (BTreeSet<_>, BTreeSet<_>) =
        expected.into_iter().partition(is_direct);
    assert_eq!(
        raced_rest, expected_rest,
        "the raced cache holds other files than a compile alone leaves"
    );
    assert!(
        raced_direct.is_subset(&expected_direct),
        "the raced cache holds direct names a compile alone does not: {raced_direct:?}"
    );
}

#[test]
fn processes_racing_on_one_key_leave_one_valid_entry() {
    const TEST: &str = "processes_racing_on_one_key_leave_one_valid_entry";
    match Work::from_env() {
        Some(work) => work.run(),
        None => check_race(TEST, RACERS, false),
    }
}

#[test]
fn threads_racing_on_one_key_leave_one_valid_entry() {
    const TEST: &str = "threads_racing_on_one_key_leave_one_valid_entry";
    match Work::from_env() {
        Some(work) => work.run(),
        None => check_race(TEST, 1, true),
    }
}
