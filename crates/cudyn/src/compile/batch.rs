//! Many programs compiled at once, across the machine's cores.
//!
//! A batch first looks every program up in the compile cache, in this process (a hit costs no
//! compile and starts nothing). The programs left are compiled by worker processes
//! ([`workers`](crate::workers): a compile server of cudyn's own starts one worker per core),
//! because NVRTC serializes much of its work inside one process: threads of one process
//! stop scaling at a few times one core's speed. When workers cannot be had, or the batch is too
//! small for them to pay off, the programs are compiled on this process's threads (rayon's
//! pools, kept between batches: a thread's first compiles cost several times its later ones).
//! [`compile_batch`] says which of these happened, and why.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use rayon::ThreadPool;

use super::cached::{self, Lookup, Miss};
use super::{Arch, Compiled, Program};
use crate::cache::resolved::ResolvedCompiler;
use crate::cache::Cache;
use crate::error::{Error, Result};
use crate::sys::{self, locate::Component};
use crate::workers::{Connection, NvrtcIdentity, Outcome, MIN_PROGRAMS};
// The worker settings at the paths they have always had; the module itself is `crate::workers`.
#[doc(hidden)]
pub use crate::workers;
pub use crate::workers::{set_job_time_limit, set_workers, WorkerSetting};

/// Compiles every program, in worker processes when that pays off, else on rayon's global pool
/// (a thread per core); see [`compile_batch`]. The results are in the programs' order; one failure
/// does not stop the others. A program without an architecture is compiled for the calling
/// thread's current device, as [`Program::compile`] would.
pub fn compile_all(programs: &[Program]) -> Vec<Result<Compiled>> {
    compile_batch(programs).results
}

/// Compiles every program on `threads` threads of this process (1: one after another, on this
/// thread), never in worker processes. The pool of each size is made once and kept.
pub fn compile_all_on(programs: &[Program], threads: usize) -> Vec<Result<Compiled>> {
    match pool_of(threads) {
        Some(pool) => {
            let default = callers_default(programs);
            pool.install(|| compile_in_parallel(programs, default))
        }
        None => programs.iter().map(Program::compile).collect(),
    }
}

/// The results of [`compile_batch`], and how they were made.
#[derive(Debug)]
#[non_exhaustive]
pub struct Batch {
    /// One result per program, in the programs' order.
    pub results: Vec<Result<Compiled>>,
    /// Where the programs that were not in the cache were compiled.
    pub run: BatchRun,
}

/// Where a batch's programs were compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BatchRun {
    /// Nothing needed compiling: every program was in the compile cache, or failed before.
    NothingToCompile,
    /// On this process's threads.
    InProcess {
        /// How many programs were compiled.
        programs: usize,
        /// Why not in worker processes.
        why: String,
    },
    /// Nowhere: [`compile_batch_isolated`] compiles in worker processes only, and none could be
    /// had; each program failed with [`Error::CompileWorker`].
    NoWorkers {
        /// How many programs were not compiled.
        programs: usize,
        /// Why there are no workers.
        why: String,
    },
    /// In worker processes of a compile server ([`workers`](crate::workers)).
    Workers {
        /// How many programs were compiled.
        programs: usize,
        /// How many workers the server runs.
        workers: usize,
        /// The `cudyn` executable that runs it.
        executable: PathBuf,
        /// The server's process id.
        server_pid: u32,
    },
}

/// Compiles every program as [`compile_all`] does, and says where: cached programs come from the
/// cache; the rest are compiled in worker processes ([`workers`](crate::workers)) when there are
/// at least [`MIN_PROGRAMS`] of them and a compile server can be had, else on this process's
/// threads.
pub fn compile_batch(programs: &[Program]) -> Batch {
    compile_batch_where(programs, Place::Best)
}

/// Compiles every program as [`compile_batch`] does, but every program not in the cache in a
/// compile worker, however few there are: the way to compile source this process did not write.
/// A compile that crashes NVRTC, or runs past the job time limit ([`set_job_time_limit`]: a
/// template recursion can keep NVRTC busy for minutes), fails alone with
/// [`Error::CompileWorker`], and the calling process lives on. Without a compile server (no
/// worker executable, workers turned off) each program fails with that error too, saying why,
/// rather than compile in this process.
pub fn compile_batch_isolated(programs: &[Program]) -> Batch {
    compile_batch_where(programs, Place::Workers)
}

/// Where a batch's programs may compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// In workers when that pays off, else in this process.
    Best,
    /// In workers only.
    Workers,
}

fn compile_batch_where(programs: &[Program], place: Place) -> Batch {
    let default = callers_default(programs);
    let mut results: Vec<Option<Result<Compiled>>> = programs.iter().map(|_| None).collect();
    let mut pending = Vec::new();
    for (index, program) in programs.iter().enumerate() {
        let arch = match program.named_arch() {
            Some(arch) => Ok(arch),
            None => default.clone().unwrap_or_else(Arch::current),
        };
        let arch = match arch {
            Ok(arch) => arch,
            // The error as Program::compile reports it (a missing NVRTC first).
            Err(error) => {
                results[index] = Some(program.compile_or(|| Err(error)));
                continue;
            }
        };
        match Pending::of(index, program, arch) {
            Ok(Ok(pending_one)) => pending.push(pending_one),
            Ok(Err(hit)) => results[index] = Some(Ok(hit)),
            Err(error) => results[index] = Some(Err(error)),
        }
    }
    let run = compile_pending(programs, pending, &mut results, place);
    Batch {
        results: results
            .into_iter()
            .map(|result| result.expect("every program has a result"))
            .collect(),
        run,
    }
}

/// A program the cache does not hold.
#[derive(Debug)]
struct Pending {
    index: usize,
    arch: Arch,
    defaults: Vec<PathBuf>,
    /// The cache and the miss to store the result under, when the program uses the cache.
    miss: Option<(&'static Cache, Miss)>,
}

impl Pending {
    /// What compiling `program` for `arch` needs, or its result from the cache (`Ok(Err(_))`).
    fn of(index: usize, program: &Program, arch: Arch) -> Result<Result<Pending, Compiled>> {
        let Some(cache) = program.cache.then(Cache::global).flatten() else {
            let defaults = program.default_folders();
            return Ok(Ok(Pending {
                index,
                arch,
                defaults,
                miss: None,
            }));
        };
        Ok(match cached::look_up(program, cache, arch)? {
            Lookup::Hit(compiled) => Err(compiled),
            Lookup::Miss(miss) => Ok(Pending {
                index,
                arch,
                defaults: miss.defaults.clone(),
                miss: Some((cache, miss)),
            }),
        })
    }

    /// Compiles in this process, storing the result as [`Program::compile`] would.
    fn compile_here(self, program: &Program) -> Result<Compiled> {
        match self.miss {
            Some((cache, miss)) => cached::compile_miss(program, cache, self.arch, miss),
            None => program.compile_uncached(Ok(self.arch), &self.defaults),
        }
    }
}

fn compile_pending(
    programs: &[Program],
    pending: Vec<Pending>,
    results: &mut [Option<Result<Compiled>>],
    place: Place,
) -> BatchRun {
    let count = pending.len();
    if count == 0 {
        return BatchRun::NothingToCompile;
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    // Workers pay off only for enough programs on more than one core, unless asked for.
    let not_worth_it = match count {
        _ if place == Place::Workers => None,
        _ if cores < 2 => Some("one core: worker processes would not compile in parallel".into()),
        count if count < MIN_PROGRAMS => Some(format!(
            "{count} program(s) to compile, fewer than the {MIN_PROGRAMS} for which worker \
             processes pay off"
        )),
        _ => None,
    };
    let server = match not_worth_it {
        Some(why) => Err(why),
        None => workers::server().and_then(|server| {
            same_nvrtc_here(&server.nvrtc)?;
            Ok(server)
        }),
    };
    match server {
        Ok(server) => {
            compile_on_workers(&server, programs, pending, results);
            BatchRun::Workers {
                programs: count,
                workers: server.workers,
                executable: server.executable.clone(),
                server_pid: server.pid,
            }
        }
        Err(why) if place == Place::Workers => {
            for pending in pending {
                let program = &programs[pending.index];
                let what = format!("no compile worker could be had: {why}");
                results[pending.index] = Some(Err(lost(program, &what)));
            }
            BatchRun::NoWorkers {
                programs: count,
                why,
            }
        }
        Err(why) => {
            let compiled: Vec<(usize, Result<Compiled>)> = pending
                .into_par_iter()
                .map(|pending| {
                    let index = pending.index;
                    (index, pending.compile_here(&programs[index]))
                })
                .collect();
            for (index, result) in compiled {
                results[index] = Some(result);
            }
            BatchRun::InProcess {
                programs: count,
                why,
            }
        }
    }
}

/// Fails when the server compiles with another NVRTC than this process would open: its results
/// would not be what this process's compile makes.
fn same_nvrtc_here(server: &NvrtcIdentity) -> std::result::Result<(), String> {
    let Some(ours) = sys::library_file(Component::Nvrtc) else {
        return Ok(());
    };
    if (&ours.path, ours.size, ours.modified) == (&server.path, server.size, server.modified) {
        return Ok(());
    }
    Err(format!(
        "the compile server uses the NVRTC at {}, but this process would use the one at {} \
         (or a changed file)",
        server.path.display(),
        ours.path.display()
    ))
}

fn compile_on_workers(
    server: &Connection,
    programs: &[Program],
    pending: Vec<Pending>,
    results: &mut [Option<Result<Compiled>>],
) {
    let submitted = server.submit(
        pending
            .iter()
            .map(|p| (p.arch, p.defaults.clone(), &programs[p.index]))
            .collect(),
    );
    let mut waiting: HashMap<u64, Pending> = submitted.ids.iter().copied().zip(pending).collect();
    while !waiting.is_empty() {
        let (id, outcome) = server.next_outcome(&submitted);
        let Some(pending) = waiting.remove(&id) else {
            // The outcomes' channel closed early: nothing more will come.
            for pending in waiting.into_values() {
                let program = &programs[pending.index];
                results[pending.index] = Some(Err(lost(program, "its outcome never came")));
            }
            return;
        };
        let index = pending.index;
        let program = &programs[index];
        results[index] = Some(match outcome {
            Outcome::Compiled(mut compiled) => match check(&compiled, program, pending.arch) {
                Ok(()) => {
                    if let Some((cache, miss)) = pending.miss {
                        miss.store(cache, &mut compiled, |keyed| {
                            same_nvrtc(keyed, &server.nvrtc)
                        });
                    }
                    Ok(compiled)
                }
                Err(why) => Err(lost(program, &why)),
            },
            Outcome::Failed(error) => Err(error),
            // An error the pipe does not carry: this process's own compile makes it exactly.
            Outcome::FailedOtherwise(_) => pending.compile_here(program),
            Outcome::Lost(what) => Err(lost(program, &what)),
        });
    }
}

fn lost(program: &Program, what: &str) -> Error {
    Error::CompileWorker {
        program: program.name.clone(),
        what: what.to_owned(),
    }
}

/// Whether `compiled` answers the job of `program` for `arch`.
fn check(compiled: &Compiled, program: &Program, arch: Arch) -> std::result::Result<(), String> {
    let expressions = compiled.lowered_names.iter().map(|(given, _)| given);
    if compiled.name != program.name
        || compiled.output != program.output
        || compiled.arch != arch
        || !expressions.eq(program.name_expressions.iter())
    {
        return Err(format!(
            "the compile worker answered with another program's result ({} for {})",
            compiled.name, program.name
        ));
    }
    Ok(())
}

/// Whether the server's NVRTC is the compiler a cache key names.
fn same_nvrtc(keyed: &ResolvedCompiler, server: &NvrtcIdentity) -> bool {
    (
        &keyed.file.path,
        keyed.file.size,
        keyed.file.modified,
        keyed.version,
    ) == (&server.path, server.size, server.modified, server.version)
}

/// The calling thread's default target, when a program needs one. It is taken here, once: the
/// pool's threads have current devices of their own (device 0), not the caller's.
fn callers_default(programs: &[Program]) -> Option<Result<Arch>> {
    programs
        .iter()
        .any(|program| program.named_arch().is_none())
        .then(Arch::current)
}

fn compile_in_parallel(
    programs: &[Program],
    default: Option<Result<Arch>>,
) -> Vec<Result<Compiled>> {
    programs
        .par_iter()
        .map(|program| program.compile_or(|| default.clone().unwrap_or_else(Arch::current)))
        .collect()
}

/// The kept pool of `threads` workers; `None` for one thread, or when the system refuses to
/// start threads (then the caller compiles on its own thread).
fn pool_of(threads: usize) -> Option<Arc<ThreadPool>> {
    static POOLS: Mutex<Vec<(usize, Arc<ThreadPool>)>> = Mutex::new(Vec::new());
    if threads <= 1 {
        return None;
    }
    let mut pools = POOLS.lock().unwrap_or_else(|poison| poison.into_inner());
    if let Some((_, pool)) = pools.iter().find(|(size, _)| *size == threads) {
        return Some(Arc::clone(pool));
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|index| format!("cudyn-compile-{index}"))
        .build()
        .ok()?;
    let pool = Arc::new(pool);
    pools.push((threads, Arc::clone(&pool)));
    Some(pool)
}
