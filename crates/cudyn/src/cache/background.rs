//! Writes of the local disk cache done off the caller's path: an entry found in the remote tier
//! is handed to the caller at once and written to disk by a thread of the cache's own. On a
//! loaded host, creating, writing and renaming the entry's file and linking its direct name were
//! about half of a remote hit; the caller has the code already, and only the next start needs
//! the file.
//!
//! - **Order**: one thread, first in, first out: a direct name is linked after its entry's file
//!   is written.
//! - **Who waits**: nothing on the path of a compile. What reads the folder as a whole
//!   ([`Cache::stats`](super::Cache::stats), `entries`, `verify`, `prune`, `clear`,
//!   `remote_totals`) waits for the writes queued before it, and the end of a cache waits for
//!   every one: dropping a [`Cache`](super::Cache), and the exit of the process for the
//!   process-wide one. Each wait lasts at most [`DRAIN_BOUND`], so that a hung file system
//!   delays an exit by that much at worst; a process killed before its writes are done loses
//!   them, which costs its next start a remote hit instead of a disk hit.
//! - **The thread** is started by the first write and ends after [`IDLE`] without work; the next
//!   write starts another. Where no thread can be started, the write is done by the caller, as
//!   before.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The longest a cache's end, or a look at its folder, waits for the queued writes.
pub(crate) const DRAIN_BOUND: Duration = Duration::from_secs(2);

/// How long the thread waits for more work before it ends.
const IDLE: Duration = Duration::from_secs(1);

type Job = Box<dyn FnOnce() + Send>;

/// A queue of writes and the thread that does them.
#[derive(Default)]
pub(crate) struct Background {
    queue: Arc<Queue>,
}

impl std::fmt::Debug for Background {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.queue.lock();
        f.debug_struct("Background")
            .field("queued", &state.jobs.len())
            .field("running", &state.running)
            .finish()
    }
}

#[derive(Default)]
struct Queue {
    state: Mutex<State>,
    /// Wakes the thread: a job was queued.
    queued: Condvar,
    /// Wakes those waiting for the queue to be done.
    done: Condvar,
}

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    /// Whether the thread is doing a job it took off the queue.
    running: bool,
    /// The process whose thread serves the queue, while one does: a child forked meanwhile
    /// inherits the queue but not the thread.
    served_in: Option<u32>,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

impl Background {
    /// Queues `job`, starting the thread when none serves the queue in this process.
    pub(crate) fn submit(&self, job: impl FnOnce() + Send + 'static) {
        let mut state = self.queue.lock();
        state.jobs.push_back(Box::new(job));
        let me = std::process::id();
        if state.served_in == Some(me) {
            self.queue.queued.notify_one();
            return;
        }
        // A job a parent process was doing when this one forked is not being done here.
        state.running = false;
        let queue = Arc::clone(&self.queue);
        let started = std::thread::Builder::new()
            .name("cudyn-cache-write".into())
            .spawn(move || serve(&queue));
        match started {
            Ok(_) => state.served_in = Some(me),
            Err(_) => {
                // No thread to be had (a limit on threads): the caller writes, in order.
                let jobs = std::mem::take(&mut state.jobs);
                drop(state);
                for job in jobs {
                    job();
                }
            }
        }
    }

    /// Whether no write is queued or being done.
    pub(crate) fn is_idle(&self) -> bool {
        let state = self.queue.lock();
        state.jobs.is_empty() && !state.running
    }

    /// Waits until the writes queued are done, for at most `bound`; whether they are.
    pub(crate) fn wait(&self, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        let mut state = self.queue.lock();
        loop {
            if state.jobs.is_empty() && !state.running {
                return true;
            }
            // Queued in a parent process: no thread here does them.
            if state.served_in != Some(std::process::id()) {
                return false;
            }
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            state = self
                .queue
                .done
                .wait_timeout(state, left)
                .unwrap_or_else(|poison| poison.into_inner())
                .0;
        }
    }
}

/// The thread: does the queued jobs in order, and ends after [`IDLE`] without one.
fn serve(queue: &Queue) {
    let mut state = queue.lock();
    loop {
        if let Some(job) = state.jobs.pop_front() {
            state.running = true;
            drop(state);
            // A job that panics loses its write, not the thread or the writes after it.
            let _ = std::panic::catch_unwind(AssertUnwindSafe(job));
            state = queue.lock();
            state.running = false;
            if state.jobs.is_empty() {
                queue.done.notify_all();
            }
            continue;
        }
        let (next, waited) = queue
            .queued
            .wait_timeout(state, IDLE)
            .unwrap_or_else(|poison| poison.into_inner());
        state = next;
        if waited.timed_out() && state.jobs.is_empty() {
            state.served_in = None;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn jobs_run_in_order_off_the_caller_and_a_wait_sees_them_done() {
        let background = Background::default();
        let done = Arc::new(Mutex::new(Vec::new()));
        let caller = std::thread::current().id();
        for job in 0..20 {
            let done = Arc::clone(&done);
            background.submit(move || {
                assert_ne!(std::thread::current().id(), caller);
                std::thread::sleep(Duration::from_millis(1));
                done.lock().unwrap().push(job);
            });
        }
        assert!(background.wait(Duration::from_secs(10)));
        assert!(background.is_idle());
        assert_eq!(*done.lock().unwrap(), (0..20).collect::<Vec<_>>());
    }

    #[test]
    fn a_wait_is_bounded_and_a_panicking_job_loses_only_itself() {
        let background = Background::default();
        let ran = Arc::new(AtomicUsize::new(0));
        background.submit(|| panic!("a job that fails"));
        background.submit(|| std::thread::sleep(Duration::from_millis(300)));
        let after = Arc::clone(&ran);
        background.submit(move || {
            after.fetch_add(1, Ordering::Relaxed);
        });
        let start = Instant::now();
        assert!(!background.wait(Duration::from_millis(50)), "still writing");
        assert!(start.elapsed() < Duration::from_millis(250));
        assert!(background.wait(Duration::from_secs(10)));
        assert_eq!(ran.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn the_thread_ends_when_idle_and_the_next_job_starts_another() {
        let background = Background::default();
        background.submit(|| {});
        assert!(background.wait(Duration::from_secs(10)));
        std::thread::sleep(IDLE + Duration::from_millis(500));
        assert_eq!(background.queue.lock().served_in, None, "ended");
        let ran = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&ran);
        background.submit(move || {
            counted.fetch_add(1, Ordering::Relaxed);
        });
        assert!(background.wait(Duration::from_secs(10)));
        assert_eq!(ran.load(Ordering::Relaxed), 1);
    }
}
