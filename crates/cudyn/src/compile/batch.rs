//! Many programs compiled at once, across the machine's cores.
//!
//! NVRTC is thread-safe and keeps no state between programs, so programs compiled on separate
//! threads run fully in parallel: each worker takes the next program from a shared counter until
//! none are left, which keeps every core busy even when programs differ widely in size.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::program::{Compiled, Program};
use crate::error::Result;

/// Compiles every program, on as many threads as the machine has cores (at most one per
/// program). The results are in the programs' order; one failure does not stop the others.
pub fn compile_all(programs: &[Program]) -> Vec<Result<Compiled>> {
    let threads = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    compile_all_on(programs, threads)
}

/// Compiles every program on at most `threads` threads (1: one after another, on this thread).
pub fn compile_all_on(programs: &[Program], threads: usize) -> Vec<Result<Compiled>> {
    let threads = threads.clamp(1, programs.len().max(1));
    if threads == 1 {
        return programs.iter().map(Program::compile).collect();
    }
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, Result<Compiled>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        let Some(program) = programs.get(index) else {
                            return done;
                        };
                        done.push((index, program.compile()));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    done.sort_by_key(|(index, _)| *index);
    done.into_iter().map(|(_, result)| result).collect()
}
