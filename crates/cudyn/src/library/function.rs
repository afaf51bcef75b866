//! Which handle a launch hands to `cuLaunchKernel`: the kernel's function in the current context
//! when cudyn knows it, else the kernel handle.
//!
//! A kernel handle is context-independent: the driver accepts it where a function is expected
//! and finds the kernel's function in the current context on every launch. Given the function,
//! an H200 launches an empty kernel 0.5-2.8% faster (about 50 ns of 3.5 µs). So a kernel
//! remembers its function (`cuKernelGetFunction`) in the first few contexts it is launched in,
//! each under the context's id (`cuCtxGetId`), never under its handle: a handle is reused by a
//! context made after another was destroyed, and a primary context keeps its handle through a
//! reset, which unloads every function of the context. An id is never reused, so a function kept
//! for a context that is gone is never launched again. Launches in further contexts, or where
//! the driver has no ids, hand over the kernel handle, as before.

use std::num::NonZeroU64;
use std::sync::OnceLock;

use crate::api::driver as api;
use crate::context::Current;
use crate::sys::driver::{CUfunction, CUkernel};

/// How many contexts a kernel remembers its function in: one per GPU of a typical machine, and
/// a primary context reset now and then.
const CONTEXTS: usize = 8;

/// A kernel's functions in the contexts it was launched in, each kept once found, by context id.
#[derive(Debug, Default)]
pub(crate) struct ContextFunctions {
    slots: [OnceLock<(NonZeroU64, Function)>; CONTEXTS],
}

/// A function handle, usable from any thread.
#[derive(Debug, Clone, Copy)]
struct Function(CUfunction);

// SAFETY: a function handle is an opaque driver handle, not tied to a host thread; the driver's
// launches are thread-safe.
unsafe impl Send for Function {}
// SAFETY: as above; sharing only copies the handle.
unsafe impl Sync for Function {}

impl ContextFunctions {
    /// What a launch of `kernel` in the context `current` passes as its function: the kernel's
    /// function there, found now if this is the context's first launch of it, else `kernel`
    /// itself (a context beyond the first few, no context id, or the driver could not give the
    /// function, whose launch then reports why).
    ///
    /// # Safety
    /// `kernel` belongs to a library that stays loaded while `self` lives (the functions kept
    /// are launched only then); `current` is the calling thread's current context.
    #[inline]
    pub(crate) unsafe fn for_launch(&self, kernel: CUkernel, current: &Current) -> CUfunction {
        let Some(id) = current.id else {
            return kernel.cast();
        };
        for slot in &self.slots {
            match slot.get() {
                Some(&(known, function)) if known == id => return function.0,
                Some(_) => continue,
                // SAFETY: the caller's contract.
                None => return unsafe { Self::find(slot, kernel, current, id) },
            }
        }
        kernel.cast()
    }

    /// Asks the driver for the function of `kernel` in the context `id` and keeps it in `slot`,
    /// unless another thread filled the slot first (for another context: this launch hands over
    /// the kernel handle, and the next finds a free slot).
    ///
    /// # Safety
    /// As [`ContextFunctions::for_launch`].
    #[cold]
    #[inline(never)]
    unsafe fn find(
        slot: &OnceLock<(NonZeroU64, Function)>,
        kernel: CUkernel,
        current: &Current,
        id: NonZeroU64,
    ) -> CUfunction {
        // SAFETY: the kernel's library is loaded and `current` is current (the caller's
        // contract).
        let Ok(function) = (unsafe { api::kernel_function(current.driver, kernel) }) else {
            return kernel.cast();
        };
        match slot.get_or_init(|| (id, Function(function))) {
            &(known, kept) if known == id => kept.0,
            _ => kernel.cast(),
        }
    }
}
