//! Every process cudyn starts dies with the process that started it.
//!
//! A compile server, a compile worker or a link worker left running after its parent was killed
//! would go on using cores and memory for nothing (nvJitLink on a damaged input can run for
//! minutes and take gigabytes). Each is therefore started with `PR_SET_PDEATHSIG`: the kernel
//! sends it SIGKILL when its parent ends, however it ends. The request is made in the child
//! between `fork` and `exec` (and survives the `exec`); a parent killed before the request took
//! effect is seen there too, since the child then has another parent, and the child exits at once.
//!
//! Linux ties the signal to the parent *thread*, not the process: a child started from a thread
//! that ends would be killed with it. A program's threads come and go (a batch on a thread pool,
//! a link on a short-lived thread), so the library starts its children from a thread of its own,
//! started once and never ended ([`spawn_tied`]). The compile server, single-threaded, starts its
//! workers from its main thread ([`tie`]).

use std::io;
use std::process::{Child, Command};
use std::sync::mpsc::{self, Sender};
use std::sync::Mutex;

/// A command to start, and where its child goes.
type Request = (Command, Sender<io::Result<Child>>);

/// Makes the process `command` starts die with this process's calling thread: see the module's
/// documentation.
#[cfg(target_os = "linux")]
pub(crate) fn tie(command: &mut Command) -> &mut Command {
    let parent = std::process::id();
    let tied = move || {
        // SAFETY: prctl and getppid take and return plain integers and are async-signal-safe,
        // as code between fork and exec must be.
        unsafe {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent died before the request took effect: the child belongs to another
            // process now, and must not run on.
            if libc::getppid() as u32 != parent {
                return Err(io::Error::other("the parent process ended"));
            }
        }
        Ok(())
    };
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure calls async-signal-safe functions only and allocates nothing on the
    // way that succeeds (the error paths allocate, and then `exec` is not reached anyway).
    unsafe { command.pre_exec(tied) }
}

/// Elsewhere than on Linux, children are not tied: they end when their input does.
#[cfg(not(target_os = "linux"))]
pub(crate) fn tie(command: &mut Command) -> &mut Command {
    command
}

/// Starts `command`, tied to this process ([`tie`]), from cudyn's thread for starting processes,
/// which lives as long as the process does, so that the child does not die with the calling
/// thread.
pub(crate) fn spawn_tied(mut command: Command) -> io::Result<Child> {
    static SPAWNER: Mutex<Option<Sender<Request>>> = Mutex::new(None);
    let sender = {
        let mut spawner = SPAWNER.lock().unwrap_or_else(|poison| poison.into_inner());
        match &*spawner {
            Some(sender) => sender.clone(),
            None => {
                let (sender, requests) = mpsc::channel::<Request>();
                std::thread::Builder::new()
                    .name("cudyn-spawner".into())
                    .spawn(move || {
                        for (mut command, reply) in requests {
                            let _ = reply.send(command.spawn());
                        }
                    })?;
                spawner.insert(sender).clone()
            }
        }
    };
    let (reply, child) = mpsc::channel();
    tie(&mut command);
    match sender.send((command, reply)) {
        Ok(()) => child
            .recv()
            .unwrap_or_else(|_| Err(io::Error::other("cudyn's spawner thread ended"))),
        // The thread is gone (it never ends while the process runs): start it from here.
        Err(mpsc::SendError((mut command, _))) => command.spawn(),
    }
}
