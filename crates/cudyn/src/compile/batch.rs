//! Many programs compiled at once, across the machine's cores.
//!
//! NVRTC is thread-safe and keeps no state between programs, so programs compiled on separate
//! threads run in parallel. The threads are kept between batches (rayon's pools): measured on an
//! H200 host with NVRTC 13.0 (docs/BENCHMARKS.md), a thread's first few compiles took about 250 ms
//! each and later ones about 14 ms, so threads started afresh for every batch would pay that warm-up every time. Work is shared
//! by stealing, which keeps every core busy when programs differ widely in size.

use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use rayon::ThreadPool;

use super::{Arch, Compiled, Program};
use crate::error::Result;

/// Compiles every program on rayon's global pool (a thread per core). The results are in the
/// programs' order; one failure does not stop the others. A program without an architecture is
/// compiled for the calling thread's current device, as [`Program::compile`] would.
pub fn compile_all(programs: &[Program]) -> Vec<Result<Compiled>> {
    compile_in_parallel(programs, callers_default(programs))
}

/// Compiles every program on `threads` threads (1: one after another, on this thread). The pool
/// of each size is made once and kept.
pub fn compile_all_on(programs: &[Program], threads: usize) -> Vec<Result<Compiled>> {
    match pool_of(threads) {
        Some(pool) => {
            let default = callers_default(programs);
            pool.install(|| compile_in_parallel(programs, default))
        }
        None => programs.iter().map(Program::compile).collect(),
    }
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
