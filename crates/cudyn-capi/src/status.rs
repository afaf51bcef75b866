//! Status codes, the thread-local message of the last failure, and the one gate every entry
//! point goes through (`entry`), which turns errors and panics into a status and a message.

use std::any::Any;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use cudyn::{Component, Error};

/// What a cudyn C function returns: `CUDYN_SUCCESS` (0), or the kind of failure. On a failure
/// `cudyn_last_error()` holds cudyn's full message, which says what failed and what to do.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum cudyn_status {
    /// The call succeeded.
    CUDYN_SUCCESS = 0,
    /// An argument is invalid: a null pointer, a handle that is not live (freed, or not made by
    /// cudyn), text that is not UTF-8, a value out of range, a range outside a buffer. Nothing
    /// was done.
    CUDYN_ERROR_INVALID_ARGUMENT = 1,
    /// No usable GPU: the CUDA driver was not found, or it reports no device. Compiling for the
    /// current GPU needs one too (name an architecture instead).
    CUDYN_ERROR_NO_GPU = 2,
    /// A CUDA library cudyn needs (runtime, NVRTC, nvJitLink, ...) was not found, could not be
    /// opened, or is too old.
    CUDYN_ERROR_CUDA_LIBRARY = 3,
    /// Device code was refused before the driver saw it: not device code, damaged, or needing a
    /// link step first.
    CUDYN_ERROR_INVALID_IMAGE = 4,
    /// Compiling or linking failed; the message carries the compiler's log.
    CUDYN_ERROR_COMPILE = 5,
    /// No kernel of that name, or a name that fits several kernels.
    CUDYN_ERROR_KERNEL_NOT_FOUND = 6,
    /// A launch was refused by cudyn's checks (argument count or sizes, configuration beyond
    /// the device's limits): nothing was launched.
    CUDYN_ERROR_LAUNCH = 7,
    /// A CUDA call failed (the message names the call and the CUDA error).
    CUDYN_ERROR_CUDA = 8,
    /// A file could not be read, or the compile cache could not be used.
    CUDYN_ERROR_IO = 9,
    /// A bug in cudyn: a panic was caught at the C boundary. Please report the message.
    CUDYN_ERROR_INTERNAL = 10,
    /// Any other failure; the message says what.
    CUDYN_ERROR_OTHER = 11,
}

use cudyn_status::*;

impl cudyn_status {
    const ALL: [cudyn_status; 12] = [
        CUDYN_SUCCESS,
        CUDYN_ERROR_INVALID_ARGUMENT,
        CUDYN_ERROR_NO_GPU,
        CUDYN_ERROR_CUDA_LIBRARY,
        CUDYN_ERROR_INVALID_IMAGE,
        CUDYN_ERROR_COMPILE,
        CUDYN_ERROR_KERNEL_NOT_FOUND,
        CUDYN_ERROR_LAUNCH,
        CUDYN_ERROR_CUDA,
        CUDYN_ERROR_IO,
        CUDYN_ERROR_INTERNAL,
        CUDYN_ERROR_OTHER,
    ];

    fn name(self) -> &'static CStr {
        match self {
            CUDYN_SUCCESS => c"CUDYN_SUCCESS",
            CUDYN_ERROR_INVALID_ARGUMENT => c"CUDYN_ERROR_INVALID_ARGUMENT",
            CUDYN_ERROR_NO_GPU => c"CUDYN_ERROR_NO_GPU",
            CUDYN_ERROR_CUDA_LIBRARY => c"CUDYN_ERROR_CUDA_LIBRARY",
            CUDYN_ERROR_INVALID_IMAGE => c"CUDYN_ERROR_INVALID_IMAGE",
            CUDYN_ERROR_COMPILE => c"CUDYN_ERROR_COMPILE",
            CUDYN_ERROR_KERNEL_NOT_FOUND => c"CUDYN_ERROR_KERNEL_NOT_FOUND",
            CUDYN_ERROR_LAUNCH => c"CUDYN_ERROR_LAUNCH",
            CUDYN_ERROR_CUDA => c"CUDYN_ERROR_CUDA",
            CUDYN_ERROR_IO => c"CUDYN_ERROR_IO",
            CUDYN_ERROR_INTERNAL => c"CUDYN_ERROR_INTERNAL",
            CUDYN_ERROR_OTHER => c"CUDYN_ERROR_OTHER",
        }
    }
}

/// CUDA's `CUDA_ERROR_NO_DEVICE` (the runtime's `cudaErrorNoDevice` has the same number).
const CUDA_ERROR_NO_DEVICE: i32 = 100;

/// The kind of failure `error` is.
fn status_of(error: &Error) -> cudyn_status {
    match error {
        Error::LibraryNotFound { component, .. } | Error::LibraryOpen { component, .. }
            if *component == Component::Driver =>
        {
            CUDYN_ERROR_NO_GPU
        }
        Error::ArchRequired { .. } => CUDYN_ERROR_NO_GPU,
        Error::Cuda(call)
            if call.code == CUDA_ERROR_NO_DEVICE
                && matches!(call.api, Component::Driver | Component::Runtime) =>
        {
            CUDYN_ERROR_NO_GPU
        }
        Error::LibraryNotFound { .. }
        | Error::LibraryOpen { .. }
        | Error::MissingSymbol { .. }
        | Error::VersionTooOld { .. }
        | Error::VersionUnreadable { .. } => CUDYN_ERROR_CUDA_LIBRARY,
        Error::Cuda(call) if matches!(call.api, Component::Nvrtc | Component::NvJitLink) => {
            CUDYN_ERROR_COMPILE
        }
        Error::HeaderNotFound { .. }
        | Error::ArchUnsupported { .. }
        | Error::EmptyOutput { .. }
        | Error::PtxNewerThanDriver { .. }
        | Error::LinkArchMismatch { .. } => CUDYN_ERROR_COMPILE,
        Error::Cuda(_) => CUDYN_ERROR_CUDA,
        Error::NotDeviceCode { .. }
        | Error::MalformedImage { .. }
        | Error::NotLoadable { .. }
        | Error::NeedsLinking { .. } => CUDYN_ERROR_INVALID_IMAGE,
        Error::KernelNotFound { .. }
        | Error::AmbiguousKernel { .. }
        | Error::KernelNotInImage { .. } => CUDYN_ERROR_KERNEL_NOT_FOUND,
        Error::LaunchArguments { .. } | Error::LaunchConfig { .. } => CUDYN_ERROR_LAUNCH,
        Error::InvalidArch { .. }
        | Error::NulByte { .. }
        | Error::InvalidMacro { .. }
        | Error::NonUtf8Path { .. }
        | Error::JitOptimizationLevel { .. }
        | Error::RangeOutsideBuffer { .. }
        | Error::CopyLengthMismatch { .. }
        | Error::SizeOverflow { .. }
        | Error::DeviceOutOfRange { .. }
        | Error::SearchPathFrozen { .. }
        | Error::CacheDirFrozen { .. } => CUDYN_ERROR_INVALID_ARGUMENT,
        Error::ReadFile { .. }
        | Error::CacheRefused { .. }
        | Error::CacheIo { .. }
        | Error::CacheUnavailable { .. }
        | Error::CacheRemoteRefused { .. } => CUDYN_ERROR_IO,
        _ => CUDYN_ERROR_OTHER,
    }
}

/// A failed call as the C caller sees it: a status and a message.
#[derive(Debug)]
pub(crate) struct Failure {
    status: cudyn_status,
    message: String,
}

impl Failure {
    /// An invalid argument, described by `message` (what is wrong and what to pass instead).
    pub(crate) fn invalid_argument(message: impl Into<String>) -> Failure {
        Failure {
            status: CUDYN_ERROR_INVALID_ARGUMENT,
            message: message.into(),
        }
    }
}

impl From<Error> for Failure {
    fn from(error: Error) -> Failure {
        // The whole chain: some errors (a missing architecture) keep the details in a source.
        let mut message = match &error {
            // The library's text names its Rust setters and the command line's option; a C
            // caller's setting is the compile options' `arch`.
            Error::ArchRequired { reason, .. } => format!(
                "no target architecture: set cudyn_compile_options.arch (e.g. \"sm_90\"). \
                 Without one cudyn compiles for the current GPU, but {reason}"
            ),
            other => other.to_string(),
        };
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            message.push_str("\ncaused by: ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        Failure {
            status: status_of(&error),
            message,
        }
    }
}

/// What an entry point's body returns.
pub(crate) type Outcome = Result<(), Failure>;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: &str) {
    // A C string cannot hold a NUL; one inside the message (from a log) is shown escaped.
    let text = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    // During thread teardown the slot may be gone; the status still says what happened.
    let _ = LAST_ERROR.try_with(|last| *last.borrow_mut() = text);
}

/// Runs an entry point's body: its outcome becomes the status, a failure's message the
/// thread's last error, and a panic is caught here, never unwinding into C.
pub(crate) fn entry(body: impl FnOnce() -> Outcome) -> cudyn_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => CUDYN_SUCCESS,
        Ok(Err(failure)) => {
            set_last_error(&failure.message);
            failure.status
        }
        Err(payload) => {
            set_last_error(&format!(
                "internal error in cudyn (please report it): {}",
                panic_message(payload)
            ));
            CUDYN_ERROR_INTERNAL
        }
    }
}

/// The text a panic was raised with. The payload is dropped here, and a payload whose drop
/// panics in turn is leaked rather than let unwind.
fn panic_message(payload: Box<dyn Any + Send>) -> String {
    let message = payload
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned());
    if let Err(second) = catch_unwind(AssertUnwindSafe(|| drop(payload))) {
        std::mem::forget(second);
    }
    message
}

/// The message of the last failed cudyn call on this thread: what failed and what to do, with
/// any compiler or JIT log. An empty string when no call on this thread has failed.
///
/// The text belongs to cudyn and stays valid until the next failing cudyn call on this thread;
/// successful calls leave it as it is. Copy it to keep it longer.
#[no_mangle]
pub extern "C" fn cudyn_last_error() -> *const c_char {
    catch_unwind(|| {
        LAST_ERROR
            .try_with(|last| last.borrow().as_ptr())
            .unwrap_or(c"".as_ptr())
    })
    .unwrap_or(c"".as_ptr())
}

/// The name of a status code, such as `"CUDYN_ERROR_LAUNCH"`; `"CUDYN_STATUS_UNKNOWN"` for a
/// number that is no status. The text is static.
#[no_mangle]
pub extern "C" fn cudyn_status_name(status: c_int) -> *const c_char {
    cudyn_status::ALL
        .iter()
        .find(|known| **known as c_int == status)
        .map_or(c"CUDYN_STATUS_UNKNOWN", |known| known.name())
        .as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last_error() -> String {
        // SAFETY: cudyn_last_error returns a NUL-terminated string valid until the next failure.
        unsafe { CStr::from_ptr(cudyn_last_error()) }
            .to_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn a_panic_becomes_an_internal_error_with_its_message() {
        let status = entry(|| panic!("the body broke: {}", 42));
        assert_eq!(status, CUDYN_ERROR_INTERNAL);
        assert_eq!(
            last_error(),
            "internal error in cudyn (please report it): the body broke: 42"
        );
        let status = entry(|| std::panic::panic_any(7u32));
        assert_eq!(status, CUDYN_ERROR_INTERNAL);
        assert!(last_error().ends_with("a panic without a message"));
    }

    #[test]
    fn a_failure_sets_the_message_and_a_success_keeps_it() {
        let status = entry(|| Err(Failure::invalid_argument("`out` is a null pointer")));
        assert_eq!(status, CUDYN_ERROR_INVALID_ARGUMENT);
        assert_eq!(last_error(), "`out` is a null pointer");
        assert_eq!(entry(|| Ok(())), CUDYN_SUCCESS);
        assert_eq!(last_error(), "`out` is a null pointer");
    }

    #[test]
    fn the_message_is_per_thread() {
        entry(|| Err(Failure::invalid_argument("on the main thread")));
        std::thread::spawn(|| {
            assert_eq!(last_error(), "");
            entry(|| Err(Failure::invalid_argument("on another thread")));
            assert_eq!(last_error(), "on another thread");
        })
        .join()
        .unwrap();
        assert_eq!(last_error(), "on the main thread");
    }

    #[test]
    fn a_nul_inside_a_message_is_escaped_not_cut() {
        entry(|| Err(Failure::invalid_argument("log: a\0b")));
        assert_eq!(last_error(), "log: a\\0b");
    }

    #[test]
    fn cudyn_errors_keep_their_full_text_and_their_kind() {
        let arch = Error::arch_required(Error::DeviceOutOfRange {
            ordinal: 3,
            count: 1,
        });
        let failure = Failure::from(arch.clone());
        assert_eq!(failure.status, CUDYN_ERROR_NO_GPU);
        // In the C caller's terms, not the Rust setters' or the command line's.
        assert!(
            failure.message.starts_with(
                "no target architecture: set cudyn_compile_options.arch (e.g. \"sm_90\"). \
                 Without one cudyn compiles for the current GPU, but "
            ),
            "{}",
            failure.message
        );
        assert!(
            !failure.message.contains("Program::arch") && !failure.message.contains("--arch"),
            "{}",
            failure.message
        );
        assert!(
            failure
                .message
                .ends_with("caused by: device 3 does not exist: the driver reports 1 device(s), 0 to count - 1"),
            "{}",
            failure.message
        );
        let launch = Error::LaunchArguments {
            kernel: "saxpy".to_owned(),
            mismatch: cudyn::ArgumentMismatch::Count {
                expected: 5,
                given: 4,
            },
        };
        assert_eq!(status_of(&launch), CUDYN_ERROR_LAUNCH);
        let missing_driver = Error::LibraryNotFound {
            component: Component::Driver,
            searched: Vec::new(),
        };
        assert_eq!(status_of(&missing_driver), CUDYN_ERROR_NO_GPU);
        let missing_nvrtc = Error::LibraryNotFound {
            component: Component::Nvrtc,
            searched: Vec::new(),
        };
        assert_eq!(status_of(&missing_nvrtc), CUDYN_ERROR_CUDA_LIBRARY);
    }

    #[test]
    fn every_status_has_its_own_name() {
        for status in cudyn_status::ALL {
            // SAFETY: static NUL-terminated names.
            let name = unsafe { CStr::from_ptr(cudyn_status_name(status as c_int)) };
            assert_eq!(name, status.name());
            assert_eq!(format!("{status:?}"), name.to_str().unwrap());
        }
        // SAFETY: as above.
        let unknown = unsafe { CStr::from_ptr(cudyn_status_name(99)) };
        assert_eq!(unknown, c"CUDYN_STATUS_UNKNOWN");
    }
}
