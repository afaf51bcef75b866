//! The longer messages of some errors, composed from their facts.

use super::CallError;
use crate::component::Component;

pub(super) fn not_found_message(component: Component, searched: &[String]) -> String {
    let mut text = format!(
        "{component} was not found (looked for {}).\nSearched, in order:\n",
        component.sonames().join(" or ")
    );
    for place in searched {
        text.push_str("  - ");
        text.push_str(place);
        text.push('\n');
    }
    text.push_str(component.install_hint());
    text
}

/// `cudaErrorNoKernelImageForDevice`: the code has no SASS for this GPU and no PTX it can JIT.
const NO_KERNEL_IMAGE_FOR_DEVICE: i32 = 209;

pub(super) fn linked_kernel_message(name: &str, call: &CallError) -> String {
    let fix = if call.code == NO_KERNEL_IMAGE_FOR_DEVICE {
        "build the kernel for this GPU's architecture too (nvcc `-arch=sm_XY` or \
         `-gencode`, cudyn_build::Build::arch), or add PTX the driver can compile: "
    } else {
        ""
    };
    format!("cannot take the handle of the linked kernel `{name}`: {fix}{call}")
}

pub(super) fn kernel_not_found_message(
    name: &str,
    available: &[String],
    log: Option<&str>,
) -> String {
    let mut text = format!("the library has no kernel named `{name}`");
    if available.is_empty() {
        text.push_str(" (it has no kernels)");
    } else {
        text.push_str("; it has, nearest first: ");
        text.push_str(&available.join(", "));
    }
    text.push_str(
        ". Ask for a kernel by its C++ name (`axpy<float>`, `scale(float*, int)`), by its symbol \
         (see Library::kernel_names), or declare it extern \"C\"",
    );
    if let Some(log) = log {
        text.push_str("\nJIT log:\n");
        text.push_str(log.trim_end());
    }
    text
}

/// Where the first NUL byte of `text` is, with up to 32 characters on either side of it.
pub(super) fn nul_in(text: &str) -> String {
    const AROUND: usize = 32;
    let Some(at) = text.find('\0') else {
        return format!("{text:?}");
    };
    let start = text[..at]
        .char_indices()
        .rev()
        .nth(AROUND - 1)
        .map_or(0, |(index, _)| index);
    let end = text[at..]
        .char_indices()
        .nth(AROUND + 1)
        .map_or(text.len(), |(index, _)| at + index);
    if start == 0 && end == text.len() {
        return format!("{text:?}");
    }
    format!(
        "at byte {at} of {} bytes, in {}{:?}{}",
        text.len(),
        if start > 0 { "..." } else { "" },
        &text[start..end],
        if end < text.len() { "..." } else { "" }
    )
}

/// What stopped a link in a link worker process ([`super::Error::LinkStopped`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkStop {
    /// The worker died of this signal: nvJitLink crashed (SIGSEGV, SIGBUS, SIGABRT, ...), or
    /// something outside cudyn killed it.
    Signal(i32),
    /// The link ran past its time limit ([`crate::compile::LinkOptions::time_limit`]) and its
    /// worker was killed.
    TimeLimit(std::time::Duration),
    /// The worker's memory grew past the limit, in bytes
    /// ([`crate::compile::LinkOptions::memory_limit`]), and it was killed.
    MemoryLimit(u64),
    /// The worker ended otherwise (an exit status, a broken pipe), or could not be started:
    /// what happened.
    Worker(String),
}

impl LinkStop {
    /// The message of a link of `inputs` stopped this way.
    pub(super) fn message(&self, inputs: &[String]) -> String {
        let files = inputs.join(", ");
        match self {
            LinkStop::Signal(signal) => match signal_name(*signal) {
                Some(name) if *signal != libc::SIGKILL => format!(
                    "nvJitLink crashed ({name}) while linking {files}: an input is probably \
                     damaged in a way cudyn's checks cannot see (LTO-IR is checked by its \
                     header alone); rebuild the inputs from their sources, or link fewer of \
                     them at a time to find the one at fault"
                ),
                Some(_) => format!(
                    "the link of {files} was killed (SIGKILL), by the system when memory ran \
                     out or by a user"
                ),
                None => format!("the link of {files} was ended by signal {signal}"),
            },
            LinkStop::TimeLimit(limit) => format!(
                "the link of {files} did not finish within its time limit of {} s and was \
                 stopped: nvJitLink can run for minutes on a damaged input; rebuild the inputs \
                 from their sources, or allow a large link more time",
                limit.as_secs_f64()
            ),
            LinkStop::MemoryLimit(bytes) => format!(
                "the link of {files} grew past its memory limit of {} MiB and was stopped: \
                 nvJitLink can take gigabytes on a damaged input; rebuild the inputs from their \
                 sources, or allow a large link more memory",
                bytes >> 20
            ),
            LinkStop::Worker(what) => format!("the link of {files} did not finish: {what}"),
        }
    }
}

/// The name of a signal that ends a crashed process, with what it means where that helps.
fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT, it aborted",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGKILL => "SIGKILL",
        _ => return None,
    })
}
