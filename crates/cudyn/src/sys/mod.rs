//! The CUDA libraries, opened at run time: the only place cudyn calls C.
//!
//! Each library (driver, runtime, NVRTC, nvJitLink, nvFatbin) is found by [`locate`], opened on
//! first use, and kept open for the life of the process. Its entry points are resolved by name into
//! a table generated from the CUDA headers (`scripts/generate-bindings`); a missing entry point is
//! an [`Error::MissingSymbol`] when it is called, never a load failure, so an older library still
//! serves every call it supports.
//!
//! Opening is lazy and per library: a program that only loads prebuilt device code never pays for
//! opening NVRTC or nvJitLink (about 5 ms each with a warm page cache, 50 ms cold).
//!
//! This module is public for users who need a raw entry point cudyn does not wrap; everything in it
//! is as unsafe as the C API it mirrors.

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use crate::error::{CallError, Error, Result};

pub mod driver;
pub mod locate;
pub mod nvfatbin;
pub mod nvjitlink;
pub mod nvrtc;
pub mod runtime;

use locate::{Component, OpenedLibrary, SearchPath};

/// Declares a table of C entry points that are resolved by name from an opened library.
///
/// Each field is `Option<fn>`: `None` when the library lacks the symbol.
macro_rules! dynamic_api {
    (
        $(#[$meta:meta])*
        pub struct $api:ident {
            $( fn $name:ident ( $( $arg:ident : $ty:ty ),* $(,)? ) $( -> $ret:ty )? ; )*
        }
    ) => {
        $(#[$meta])*
        #[allow(non_snake_case)]
        #[derive(Debug, Clone, Copy)]
        pub struct $api {
            $(
                #[doc = concat!("`", stringify!($name), "`, if the library has it.")]
                pub $name: Option<unsafe extern "C" fn($($ty),*) $(-> $ret)?>,
            )*
        }

        impl $api {
            /// Resolves every entry point of the table in `library`.
            pub(crate) fn resolve(library: &libloading::Library) -> Self {
                $api {
                    $(
                        // SAFETY: the pointer type is the C declaration of this symbol, generated
                        // from the CUDA header by bindgen (see scripts/generate-bindings).
                        $name: unsafe {
                            library.get::<unsafe extern "C" fn($($ty),*) $(-> $ret)?>(
                                concat!(stringify!($name), "\0").as_bytes(),
                            )
                        }
                        .ok()
                        .map(|symbol| *symbol),
                    )*
                }
            }
        }
    };
}
pub(crate) use dynamic_api;

/// Calls an entry point of an opened CUDA library and turns its status into a `Result`.
///
/// `call!(driver, cuInit(0))` expands to the C call, so it must stand inside an `unsafe` block
/// whose `// SAFETY:` comment vouches for the arguments. A missing entry point is
/// [`Error::MissingSymbol`].
///
/// ```no_run
/// use cudyn::sys::{self, call};
/// let runtime = sys::runtime()?;
/// let mut count = 0;
/// // SAFETY: cudaGetDeviceCount writes one int.
/// unsafe { call!(runtime, cudaGetDeviceCount(&mut count)) }?;
/// # Ok::<(), cudyn::Error>(())
/// ```
#[doc(hidden)]
#[macro_export]
macro_rules! __cudyn_call {
    ($library:expr, $name:ident ( $($arg:expr),* $(,)? )) => {{
        let library = $library;
        match library.api.$name {
            Some(function) => $crate::sys::Api::check(library, stringify!($name), function($($arg),*)),
            None => Err($crate::sys::Api::missing(library, stringify!($name))),
        }
    }};
}
#[doc(inline)]
pub use crate::__cudyn_call as call;

/// What every opened CUDA library has in common: where it came from, its version and how its
/// status codes read.
pub trait Api {
    /// The status type its calls return.
    type Status: Copy + PartialEq;
    /// The status meaning success.
    const SUCCESS: Self::Status;

    /// The opened library.
    fn library(&self) -> &OpenedLibrary;

    /// The error for a failed `call` that returned `status`, with the library's own name and
    /// description of the status.
    fn error(&self, call: &'static str, status: Self::Status) -> CallError;

    /// `Ok` when `status` is success, else the error describing it.
    fn check(&self, call: &'static str, status: Self::Status) -> Result<()> {
        if status == Self::SUCCESS {
            Ok(())
        } else {
            Err(Error::Cuda(Box::new(self.error(call, status))))
        }
    }

    /// The error for an entry point this library lacks.
    fn missing(&self, symbol: &'static str) -> Error {
        let library = self.library();
        Error::MissingSymbol {
            component: library.component,
            path: library.path.clone(),
            symbol,
        }
    }
}

/// Reads a C string the CUDA library owns; `None` for a null pointer.
///
/// # Safety
/// `text` is null or points to a NUL-terminated string that lives as long as the library.
pub(crate) unsafe fn static_c_str(text: *const std::ffi::c_char) -> Option<String> {
    if text.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated by the caller's contract.
    Some(
        unsafe { std::ffi::CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// The override folders set through [`set_library_path`], if any.
static LIBRARY_PATH: Mutex<Option<Vec<PathBuf>>> = Mutex::new(None);

/// Makes cudyn search only `folders` for every CUDA library, ignoring `CUDYN_LIBRARY_PATH` and
/// every other rule of the search order (see [`locate`]).
///
/// Libraries are opened once per process, so this must come before the first call that needs
/// one; afterwards it returns [`Error::SearchPathFrozen`].
pub fn set_library_path<I, P>(folders: I) -> Result<()>
where
    I: IntoIterator<Item = P>,
    P: Into<PathBuf>,
{
    let mut slot = LIBRARY_PATH
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    if let Some(opened) = first_opened() {
        return Err(Error::SearchPathFrozen { opened });
    }
    *slot = Some(folders.into_iter().map(Into::into).collect());
    Ok(())
}

/// The search order in force for this process.
pub fn search_path() -> SearchPath {
    let slot = LIBRARY_PATH
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    match slot.as_ref() {
        Some(folders) => SearchPath::only(folders.iter().cloned()),
        None => SearchPath::from_environment(),
    }
}

static DRIVER: OnceLock<Result<driver::Driver>> = OnceLock::new();
static RUNTIME: OnceLock<Result<runtime::Runtime>> = OnceLock::new();
static NVRTC: OnceLock<Result<nvrtc::Nvrtc>> = OnceLock::new();
static NVJITLINK: OnceLock<Result<nvjitlink::NvJitLink>> = OnceLock::new();
static NVFATBIN: OnceLock<Result<nvfatbin::NvFatbin>> = OnceLock::new();

fn first_opened() -> Option<Component> {
    [
        (DRIVER.get().is_some(), Component::Driver),
        (RUNTIME.get().is_some(), Component::Runtime),
        (NVRTC.get().is_some(), Component::Nvrtc),
        (NVJITLINK.get().is_some(), Component::NvJitLink),
        (NVFATBIN.get().is_some(), Component::NvFatbin),
    ]
    .into_iter()
    .find_map(|(opened, component)| opened.then_some(component))
}

fn shared<T>(
    cell: &'static OnceLock<Result<T>>,
    open: impl FnOnce(&SearchPath) -> Result<T>,
) -> Result<&'static T> {
    cell.get_or_init(|| open(&search_path()))
        .as_ref()
        .map_err(Clone::clone)
}

/// The CUDA driver, opened on first use.
pub fn driver() -> Result<&'static driver::Driver> {
    shared(&DRIVER, driver::Driver::open)
}

/// The CUDA runtime, opened on first use.
pub fn runtime() -> Result<&'static runtime::Runtime> {
    shared(&RUNTIME, runtime::Runtime::open)
}

/// NVRTC, opened on first use (with its builtins library from the same folder).
pub fn nvrtc() -> Result<&'static nvrtc::Nvrtc> {
    shared(&NVRTC, nvrtc::Nvrtc::open)
}

/// nvJitLink, opened on first use.
pub fn nvjitlink() -> Result<&'static nvjitlink::NvJitLink> {
    shared(&NVJITLINK, nvjitlink::NvJitLink::open)
}

/// nvFatbin, opened on first use.
pub fn nvfatbin() -> Result<&'static nvfatbin::NvFatbin> {
    shared(&NVFATBIN, nvfatbin::NvFatbin::open)
}

/// `Err(VersionTooOld)` when `found` is older than `needed`.
fn require_version(
    library: &OpenedLibrary,
    found: crate::Version,
    needed: crate::Version,
) -> Result<()> {
    if found >= needed {
        Ok(())
    } else {
        Err(Error::VersionTooOld {
            component: library.component,
            path: library.path.clone(),
            found,
            needed,
        })
    }
}
