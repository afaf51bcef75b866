//! Damaged real images loaded through `Library::load`, in child processes, so that a crash inside
//! the driver is counted rather than hidden: cudyn must refuse whatever the driver cannot take.
//!
//! The parent compiles real device code (NVRTC cubin and PTX, nvFatbin fatbins plain, zstd and
//! LZ4, an nvcc fatbin and cubin), lists every damage of `fixtures::damage` (truncations, header
//! byte flips, size fields enlarged, flips in the symbol, relocation, attribute and call-graph
//! tables, inside the fatbins' cubins too), and shares the list among
//! worker processes: this test binary run again, filtered to this test, with [`WORK_ENV`] naming
//! the worker's work file.
//! A worker prints a line before each load and one after; when it dies, the parent records the
//! image it was loading and starts a new worker after it. Images cudyn accepts are loaded and
//! dropped, never launched.
//!
//! A crash can be replayed alone: write its line from the report (also under `$OUT`, with the
//! original image) to a file and run this test with `CUDYN_DAMAGED_IMAGES_WORK=<that file>`.

mod common;
mod fixtures;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cudyn::{Error, Library};
use fixtures::damage::{damages, table_damages, Damage, Depth};

/// Names a worker's work file; set only in workers.
const WORK_ENV: &str = "CUDYN_DAMAGED_IMAGES_WORK";

/// This test's name, for the workers' filter.
const TEST_NAME: &str = "damaged_images_never_crash_the_driver";

/// Marks the lines of the worker protocol among the test harness's own output.
const PREFIX: &str = "cudyn-damaged:";

/// Longest a single load may take before the worker counts as hung.
const LOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// A shard stops after this many crashes (each restart pays CUDA's initialization again), so that
/// a driver that crashes often still gives a report in minutes.
const MAX_CRASHES_PER_SHARD: usize = 50;

/// Fewest damaged images the test must load.
const MIN_IMAGES: usize = 10_000;

/// One damaged image: the original's file and the damage, as a line of a work file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Work {
    original: PathBuf,
    damage: Damage,
}

impl Work {
    fn to_line(&self) -> String {
        let damage = match self.damage {
            Damage::Truncate(len) => format!("truncate {len}"),
            Damage::Flip { at, mask } => format!("flip {at} {mask}"),
            Damage::Write { at, width, value } => format!("write {at} {width} {value}"),
        };
        format!("{}\t{damage}", self.original.display())
    }

    fn from_line(line: &str) -> Work {
        let (path, damage) = line.split_once('\t').expect("a work line: path<TAB>damage");
        let fields: Vec<&str> = damage.split(' ').collect();
        let number = |i: usize| fields[i].parse::<u64>().expect("a number in a work line");
        let damage = match fields[0] {
            "truncate" => Damage::Truncate(number(1) as usize),
            "flip" => Damage::Flip {
                at: number(1) as usize,
                mask: number(2) as u8,
            },
            "write" => Damage::Write {
                at: number(1) as usize,
                width: number(2) as usize,
                value: number(3),
            },
            other => panic!("unknown damage {other:?} in a work line"),
        };
        Work {
            original: PathBuf::from(path),
            damage,
        }
    }

    fn bytes(&self) -> Vec<u8> {
        let original = std::fs::read(&self.original).expect("the original image");
        self.damage.apply(&original)
    }
}

/// What loading one image did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    /// cudyn refused it before any CUDA call.
    RefusedByCudyn,
    /// The driver loaded it.
    Loaded,
    /// The driver refused it with an error status.
    RefusedByDriver,
}

impl Outcome {
    fn of(result: cudyn::Result<Library>) -> Outcome {
        match result {
            Ok(_) => Outcome::Loaded,
            Err(Error::Cuda(_)) => Outcome::RefusedByDriver,
            Err(_) => Outcome::RefusedByCudyn,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Outcome::RefusedByCudyn => "refused-by-cudyn",
            Outcome::Loaded => "loaded",
            Outcome::RefusedByDriver => "refused-by-driver",
        }
    }

    fn parse(name: &str) -> Option<Outcome> {
        [
            Outcome::RefusedByCudyn,
            Outcome::Loaded,
            Outcome::RefusedByDriver,
        ]
        .into_iter()
        .find(|outcome| outcome.name() == name)
    }
}

/// The worker: loads every image of its work file, announcing each before the load.
fn work(file: &Path) {
    let lines = std::fs::read_to_string(file).expect("the work file");
    let mut out = std::io::stdout().lock();
    for (index, line) in lines.lines().enumerate() {
        writeln!(out, "{PREFIX} start {index}").unwrap();
        out.flush().unwrap();
        let outcome = Outcome::of(Library::load(Work::from_line(line).bytes()));
        writeln!(out, "{PREFIX} done {index} {}", outcome.name()).unwrap();
    }
    writeln!(out, "{PREFIX} finished").unwrap();
    out.flush().unwrap();
}

/// An image whose load killed or hung its worker.
#[derive(Debug)]
struct Crash {
    work: Work,
    how: String,
}

/// What one shard's workers reported.
#[derive(Debug, Default)]
struct ShardReport {
    outcomes: BTreeMap<Outcome, usize>,
    crashes: Vec<Crash>,
    workers: usize,
    /// Images not tried because the shard stopped after too many crashes.
    untried: usize,
    /// Workers that finished every image and then died on the way out.
    bad_exits: Vec<String>,
}

/// Runs `items` through workers, one after another: a new worker resumes after an image on which
/// the previous one died.
fn run_shard(items: &[Work], dir: &Path, shard: usize) -> ShardReport {
    let mut report = ShardReport::default();
    let mut next = 0;
    while next < items.len() {
        let file = dir.join(format!("shard-{shard}-{next}.txt"));
        let text: Vec<String> = items[next..].iter().map(Work::to_line).collect();
        std::fs::write(&file, text.join("\n")).unwrap();
        report.workers += 1;
        let errors = file.with_extension("stderr");
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([TEST_NAME, "--exact", "--include-ignored", "--nocapture"])
            .args(["--test-threads", "1"])
            .env(WORK_ENV, &file)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&errors).unwrap())
            .spawn()
            .expect("cannot start a worker");
        let (lines_tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines_tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut loading = None;
        let mut finished = false;
        let mut hung = false;
        loop {
            match lines.recv_timeout(LOAD_TIMEOUT) {
                Ok(line) => {
                    // The test harness may print its own text on the same line first.
                    let Some(message) = line.find(PREFIX).map(|at| &line[at + PREFIX.len()..])
                    else {
                        continue;
                    };
                    let words: Vec<&str> = message.split_whitespace().collect();
                    match words[..] {
                        ["start", index] => loading = Some(next + index.parse::<usize>().unwrap()),
                        ["done", _, outcome] => {
                            *report
                                .outcomes
                                .entry(Outcome::parse(outcome).unwrap())
                                .or_default() += 1;
                            loading = None;
                        }
                        ["finished"] => finished = true,
                        _ => panic!("unexpected worker line {line:?}"),
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    hung = true;
                    // The worker is this test's own child; it is stopped by its handle.
                    let _ = child.kill();
                    break;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        let status = child.wait().expect("cannot wait for a worker");
        let stderr = std::fs::read_to_string(&errors).unwrap_or_default();
        let tail_start = (stderr.len().saturating_sub(600)..stderr.len())
            .find(|&at| stderr.is_char_boundary(at))
            .unwrap_or(stderr.len());
        let stderr_tail = stderr[tail_start..].trim();
        match loading {
            Some(index) => {
                let how = if hung {
                    format!("no answer in {LOAD_TIMEOUT:?}")
                } else {
                    format!("worker died: {status}; its stderr ends: {stderr_tail}")
                };
                report.crashes.push(Crash {
                    work: items[index].clone(),
                    how,
                });
                next = index + 1;
                if report.crashes.len() >= MAX_CRASHES_PER_SHARD {
                    report.untried = items.len() - next;
                    break;
                }
            }
            None if finished => {
                if !status.success() {
                    report
                        .bad_exits
                        .push(format!("{status}; its stderr ends: {stderr_tail}"));
                }
                next = items.len();
            }
            None => panic!(
                "a worker ended ({status}) between images, without finishing: is the test \
                 filter {TEST_NAME:?} still this test's name?"
            ),
        }
    }
    report
}

#[test]
#[ignore = "gpu: loads thousands of damaged images through the driver, in worker processes"]
fn damaged_images_never_crash_the_driver() {
    if let Some(file) = std::env::var_os(WORK_ENV) {
        return work(Path::new(&file));
    }
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let mut items = Vec::new();
    let mut originals = fixtures::loadable_images();
    // nvcc's own containers too: a fatbin (SASS and PTX, compressed as nvcc does by default) and
    // a cubin, of the same kernels.
    for (name, output) in [
        ("nvcc.fatbin", common::Output::Fatbin),
        ("nvcc.cubin", common::Output::Cubin),
    ] {
        originals.push((name, common::compile(fixtures::SOURCE, output).bytes()));
    }
    for (name, bytes) in originals {
        Library::load(&bytes).unwrap_or_else(|error| panic!("the undamaged {name}: {error}"));
        let original = dir.path().join(name);
        std::fs::write(&original, &bytes).unwrap();
        let tables = table_damages(&bytes, Depth::Nested);
        for damage in damages(&bytes, 53, Depth::Nested).into_iter().chain(tables) {
            items.push(Work {
                original: original.clone(),
                damage,
            });
        }
    }
    assert!(
        items.len() >= MIN_IMAGES,
        "only {} damaged images",
        items.len()
    );
    let workers = std::thread::available_parallelism().map_or(8, |n| n.get().min(16));
    let reports: Vec<ShardReport> = std::thread::scope(|scope| {
        let shards: Vec<_> = (0..workers)
            .map(|shard| {
                let mine: Vec<Work> = items.iter().skip(shard).step_by(workers).cloned().collect();
                let dir = dir.path();
                scope.spawn(move || run_shard(&mine, dir, shard))
            })
            .collect();
        shards.into_iter().map(|s| s.join().unwrap()).collect()
    });
    let mut outcomes: BTreeMap<Outcome, usize> = BTreeMap::new();
    let mut crashes = Vec::new();
    let mut worker_count = 0;
    let mut untried = 0;
    let mut bad_exits = Vec::new();
    for report in reports {
        untried += report.untried;
        bad_exits.extend(report.bad_exits);
        for (outcome, count) in report.outcomes {
            *outcomes.entry(outcome).or_default() += count;
        }
        crashes.extend(report.crashes);
        worker_count += report.workers;
    }
    let count = |outcome| outcomes.get(&outcome).copied().unwrap_or(0);
    eprintln!(
        "{} damaged images in {:?} by {worker_count} workers: {} refused by cudyn, {} loaded, {} \
         refused by the driver, {} crashed, {untried} not tried after too many crashes",
        items.len(),
        started.elapsed(),
        count(Outcome::RefusedByCudyn),
        count(Outcome::Loaded),
        count(Outcome::RefusedByDriver),
        crashes.len()
    );
    let out = std::env::var_os("OUT").map(PathBuf::from);
    for (index, crash) in crashes.iter().enumerate() {
        eprintln!("crash {index}: {} ({})", crash.work.to_line(), crash.how);
        if let Some(out) = &out {
            let name = crash.work.original.file_name().unwrap();
            std::fs::copy(&crash.work.original, out.join(name)).unwrap();
            std::fs::write(out.join(format!("crash-{index}.bin")), crash.work.bytes()).unwrap();
            let line = Work {
                original: out.join(name),
                damage: crash.work.damage,
            };
            std::fs::write(out.join(format!("crash-{index}.work")), line.to_line()).unwrap();
        }
    }
    assert_eq!(
        count(Outcome::RefusedByCudyn)
            + count(Outcome::Loaded)
            + count(Outcome::RefusedByDriver)
            + crashes.len()
            + untried,
        items.len(),
        "every image has an outcome"
    );
    assert!(count(Outcome::Loaded) > 0, "no damaged image loaded at all");
    assert!(
        bad_exits.is_empty(),
        "workers died on the way out after their last image: {bad_exits:?}"
    );
    assert!(
        crashes.is_empty(),
        "{} damaged images crashed or hung the driver (listed above; replay one with {WORK_ENV}=\
         <its .work file>)",
        crashes.len()
    );
}
