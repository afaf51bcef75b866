//! The one thread of the process that calls nvJitLink.
//!
//! nvJitLink 13.0 guards its work with a process-wide lock that some failed calls leave held by
//! the thread that made them (adding a cubin of another architecture than the link's, or a
//! damaged one): that thread's later calls go on, but every call from any other thread waits
//! forever. A program that links from several threads would hang after its first failed link.
//! So every nvJitLink call cudyn makes runs on one thread of cudyn's own, started at the first
//! link; a call is a hop to that thread and back, a few microseconds against the link's
//! milliseconds. nvJitLink works under that lock anyway, so no link ran in parallel before.

use std::any::Any;
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc::{self, Sender};
use std::sync::Mutex;

use crate::sys::nvjitlink::nvJitLinkHandle;

/// A job for the link thread, its lifetime erased (see [`run`]).
type Job = Box<dyn FnOnce() + Send + 'static>;

/// Where jobs go; `None` until the first link.
static JOBS: Mutex<Option<Sender<Job>>> = Mutex::new(None);

thread_local! {
    /// Whether this thread is the link thread.
    static ON_LINK_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// An nvJitLink handle, which only the link thread uses.
#[derive(Debug, Clone, Copy)]
pub(super) struct Handle(nvJitLinkHandle);

// SAFETY: a handle is only passed to nvJitLink inside jobs given to `run`, which all run on the
// one link thread; other threads only hold, move and share the pointer, never use it.
unsafe impl Send for Handle {}
// SAFETY: as for `Send`.
unsafe impl Sync for Handle {}

impl Handle {
    /// Wraps a handle nvJitLink made.
    pub(super) fn new(raw: nvJitLinkHandle) -> Handle {
        Handle(raw)
    }

    /// The handle, for a call on the link thread.
    pub(super) fn get(self) -> nvJitLinkHandle {
        self.0
    }
}

/// Runs `job` on the link thread and returns what it returns; a panic in it is resumed here.
/// A job that itself calls `run` runs in place.
pub(super) fn run<R: Send>(job: impl FnOnce() -> R + Send) -> R {
    if ON_LINK_THREAD.get() {
        return job();
    }
    let (done, result) = mpsc::channel::<Result<R, Box<dyn Any + Send>>>();
    let task: Box<dyn FnOnce() + Send + '_> = Box::new(move || {
        let _ = done.send(panic::catch_unwind(AssertUnwindSafe(job)));
    });
    // SAFETY: only the lifetime is changed. This function does not return before the task is
    // gone: `result.recv` returns once the task has sent its result, or once the task was
    // dropped without running (its sender with it), and the task runs on the link thread
    // within `catch_unwind`, so nothing it borrows is used after this returns.
    let task: Job = unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + '_>, Job>(task) };
    let sent = jobs().send(task);
    if let Err(mpsc::SendError(task)) = sent {
        // The link thread is gone (it never exits while the process runs): link here.
        task();
    }
    match result.recv() {
        Ok(Ok(value)) => value,
        Ok(Err(payload)) => panic::resume_unwind(payload),
        Err(mpsc::RecvError) => unreachable_link_thread(),
    }
}

/// The sender of the link thread, started on first use.
fn jobs() -> Sender<Job> {
    let mut jobs = JOBS.lock().unwrap_or_else(|poison| poison.into_inner());
    jobs.get_or_insert_with(|| {
        let (sender, receiver) = mpsc::channel::<Job>();
        let started = std::thread::Builder::new()
            .name("cudyn-nvjitlink".into())
            .spawn(move || {
                ON_LINK_THREAD.set(true);
                for job in receiver {
                    job();
                }
            });
        match started {
            Ok(_) => sender,
            // No thread to be had: the caller's thread links, as before this module.
            Err(_) => {
                let (sender, receiver) = mpsc::channel::<Job>();
                drop(receiver);
                sender
            }
        }
    })
    .clone()
}

/// A task dropped without sending its result: it never ran, so there is no result to return.
#[cold]
fn unreachable_link_thread() -> ! {
    panic!("cudyn: the nvJitLink thread dropped a job without running it")
}
