//! The CUDA libraries, opened at run time: their raw entry points, under the one-call-per-function
//! layer inside cudyn (its `api` module, one function per C call).
//!
//! Each library (driver, runtime, NVRTC, nvJitLink, nvFatbin) is found by [`locate`], opened on
//! first use, and kept open for the life of the process. Its entry points are resolved by name into
//! a table generated from the CUDA headers (`scripts/generate-bindings`); a missing entry point is
//! an [`Error::MissingSymbol`] when it is called, never a load failure, so an older library still
//! serves every call it supports. The one exception is the call that reports the version: every
//! library is opened the same way, by one function, from what its table's [`ApiTable`]
//! implementation says (which component it is, the oldest version accepted, how to ask for its
//! version), and a library without that call is [`Error::VersionUnreadable`].
//!
//! Opening is lazy and per library: a program that only loads prebuilt device code never pays for
//! opening NVRTC or nvJitLink (about 5 ms each with a warm page cache, 50 ms cold).
//!
//! **Not covered by semantic versioning**: this module is hidden from the documentation and may
//! change in any release, as the CUDA headers it is generated from do. It stays reachable for a
//! program that needs a raw entry point cudyn does not wrap; everything in it is as unsafe as the
//! C API it mirrors. The handle types of cudyn's own API are in [`crate::raw`], and the search
//! order in [`crate::locate`], both covered.

use std::fmt;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use crate::error::{CallError, Error, Result};
use crate::version::Version;

pub mod driver;
pub mod locate;
pub mod nvfatbin;
pub mod nvjitlink;
pub mod nvrtc;
pub mod runtime;

use locate::{Component, OpenedLibrary, SearchPath};

/// Includes the generated bindings of one library (`generated/<file>`), whose names follow the C
/// headers, and re-exports them.
macro_rules! bindings {
    ($file:literal) => {
        #[allow(
            non_camel_case_types,
            non_snake_case,
            non_upper_case_globals,
            missing_docs,
            dead_code,
            clippy::all,
            clippy::undocumented_unsafe_blocks,
            missing_debug_implementations
        )]
        mod generated {
            include!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/src/sys/generated/",
                $file
            ));
        }
        pub use generated::*;
    };
}
use bindings;

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

        impl $crate::sys::Resolve for $api {
            fn resolve(library: &libloading::Library) -> Self {
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

/// Defines, for each pair of size and copy entry points of NVRTC or nvJitLink, an unsafe function
/// that reads that output of a handle (code or log) into bytes: `sized_outputs! { nvrtc:
/// nvrtcProgram; /// doc \n get_ptx(nvrtcGetPTXSize, nvrtcGetPTX); }`.
macro_rules! sized_outputs {
    ($library:ident: $handle:ty; $( $(#[$doc:meta])* $name:ident($size:ident, $copy:ident); )*) => {
        $(
            $(#[$doc])*
            ///
            /// # Safety
            /// The handle is live (created and not yet destroyed).
            pub unsafe fn $name(handle: $handle) -> $crate::error::Result<Vec<u8>> {
                let library = $crate::sys::$library()?;
                let mut size = 0;
                // SAFETY: the handle is live (the caller's contract); writes one size_t.
                unsafe { $crate::sys::call!(library, $size(handle, &mut size)) }?;
                // One byte more than asked for: a log's size may or may not count its NUL, which
                // is written either way (nvJitLink reports an empty log as 0 bytes and writes the
                // NUL).
                let mut bytes = vec![0u8; size + 1];
                // SAFETY: the buffer holds the `size` bytes the library copies into it, and a NUL.
                unsafe { $crate::sys::call!(library, $copy(handle, bytes.as_mut_ptr().cast())) }?;
                bytes.truncate(size);
                Ok(bytes)
            }
        )*
    };
}
pub(crate) use sized_outputs;

/// A table of C entry points resolved by name from an opened library; `dynamic_api!` writes
/// the implementation.
pub trait Resolve {
    /// Resolves every entry point of the table in `library`; the ones it lacks are `None`.
    fn resolve(library: &libloading::Library) -> Self;
}

/// One CUDA library's table of entry points, with what opening that library needs to know:
/// which component it is, the oldest version cudyn accepts, how its statuses read and how to ask
/// it for its version. The five libraries are opened by one function from these facts.
pub trait ApiTable: Resolve + Sized + fmt::Debug + Send + Sync + 'static {
    /// The library.
    const COMPONENT: Component;
    /// The oldest version cudyn opens.
    const MIN_VERSION: Version;
    /// The status type its calls return.
    type Status: Copy + PartialEq;
    /// The status meaning success.
    const SUCCESS: Self::Status;

    /// The error for a failed `call` that returned `status`, with the library's own name and
    /// description of the status.
    fn error(&self, call: &'static str, status: Self::Status) -> CallError;

    /// Asks the library for its version. A missing entry point ([`Error::MissingSymbol`]) means
    /// the library predates the version call and is reported as [`Error::VersionUnreadable`].
    fn read_version(library: &Unversioned<'_, Self>) -> Result<Version>;

    /// Opens the libraries this one loads by soname itself and cannot find on its own (NVRTC's
    /// builtins); none for most.
    fn open_companions(_library: &OpenedLibrary, _version: Version) -> Result<Vec<Companion>> {
        Ok(Vec::new())
    }
}

/// An opened CUDA library: where it came from, its entry points and its version.
#[derive(Debug)]
pub struct Opened<T> {
    /// Where it was opened from.
    pub library: OpenedLibrary,
    /// Its entry points.
    pub api: T,
    /// Its version, as the library itself reports it.
    pub version: Version,
    /// The libraries opened beside it (see [`ApiTable::open_companions`]).
    pub companions: Vec<Companion>,
}

/// A library opened beside a CUDA library because that library opens it by soname, which the
/// system loader cannot resolve from a wheel's folder. Kept open for the life of the process.
#[derive(Debug)]
pub struct Companion {
    /// The file opened.
    pub path: PathBuf,
    _library: libloading::Library,
}

impl Companion {
    pub(crate) fn new(path: PathBuf, library: libloading::Library) -> Self {
        Companion {
            path,
            _library: library,
        }
    }
}

/// A library whose entry points are resolved but whose version is not known yet: what
/// [`ApiTable::read_version`] calls through.
#[derive(Debug)]
pub struct Unversioned<'a, T> {
    /// Where it was opened from.
    pub library: &'a OpenedLibrary,
    /// Its entry points.
    pub api: &'a T,
}

/// What [`call!`] needs of a library: its table, to read statuses, and where it was opened from,
/// to name it in errors.
pub trait Api {
    /// The table of entry points.
    type Table: ApiTable;

    /// The opened library.
    fn library(&self) -> &OpenedLibrary;

    /// Its entry points.
    fn table(&self) -> &Self::Table;

    /// `Ok` when `status` is success, else the error describing it. Inlined into every call,
    /// so the success test is all a call pays; the error is built out of line.
    #[inline]
    fn check(&self, call: &'static str, status: <Self::Table as ApiTable>::Status) -> Result<()> {
        if status == Self::Table::SUCCESS {
            Ok(())
        } else {
            Err(self.failure(call, status))
        }
    }

    /// The error for a `call` that returned the failed `status`.
    #[cold]
    #[inline(never)]
    fn failure(&self, call: &'static str, status: <Self::Table as ApiTable>::Status) -> Error {
        Error::Cuda(Box::new(self.table().error(call, status)))
    }

    /// The error for an entry point this library lacks.
    #[cold]
    #[inline(never)]
    fn missing(&self, symbol: &'static str) -> Error {
        let library = self.library();
        Error::MissingSymbol {
            component: library.component,
            path: library.path.clone(),
            symbol,
        }
    }
}

impl<T: ApiTable> Api for Opened<T> {
    type Table = T;

    fn library(&self) -> &OpenedLibrary {
        &self.library
    }

    fn table(&self) -> &T {
        &self.api
    }
}

impl<T: ApiTable> Api for Unversioned<'_, T> {
    type Table = T;

    fn library(&self) -> &OpenedLibrary {
        self.library
    }

    fn table(&self) -> &T {
        self.api
    }
}

/// Finds, opens and checks the library of table `T`: the one way every CUDA library is opened.
fn open<T: ApiTable>(search: &SearchPath) -> Result<Opened<T>> {
    let library = locate::open(search, T::COMPONENT)?;
    let api = T::resolve(&library.library);
    with_table(library, api)
}

/// Checks the version of an opened library through its resolved entry points `api` (given
/// separately so that tests can take entry points away).
fn with_table<T: ApiTable>(library: OpenedLibrary, api: T) -> Result<Opened<T>> {
    let probe = Unversioned {
        library: &library,
        api: &api,
    };
    let version = T::read_version(&probe).map_err(|error| match error {
        Error::MissingSymbol {
            component,
            path,
            symbol,
        } => Error::VersionUnreadable {
            component,
            path,
            symbol,
            needed: T::MIN_VERSION,
        },
        other => other,
    })?;
    if version < T::MIN_VERSION {
        return Err(Error::VersionTooOld {
            component: T::COMPONENT,
            path: library.path.clone(),
            found: version,
            needed: T::MIN_VERSION,
        });
    }
    let companions = T::open_companions(&library, version)?;
    Ok(Opened {
        library,
        api,
        version,
        companions,
    })
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

/// The folders given to [`set_library_path`], when it was called: with the environment, what
/// decides the search order (the compile cache remembers its outcome under them).
pub(crate) fn library_path_override() -> Option<Vec<PathBuf>> {
    LIBRARY_PATH
        .lock()
        .unwrap_or_else(|poison| poison.into_inner())
        .clone()
}

/// Settles `component`'s search order as opening it does: [`set_library_path`] then returns
/// [`Error::SearchPathFrozen`]. For a library identified without opening it.
pub(crate) fn settle(component: Component) {
    let mut identified = IDENTIFIED
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    if !identified.contains(&component) {
        identified.push(component);
    }
}

/// The search order in force for this process.
///
/// The environment's order is read once per process, at the first search: the libraries a
/// search finds are opened once and kept, so a later change of the variables it reads could not
/// take effect anyway, and reading them again lists Python's library folders and looks along
/// `PATH` each time, which a cold compile with the cache on did twice: to identify NVRTC for the
/// cache's key, then to open it.
pub fn search_path() -> SearchPath {
    let slot = LIBRARY_PATH
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    match slot.as_ref() {
        Some(folders) => SearchPath::only(folders.iter().cloned()),
        None => ENVIRONMENT_SEARCH
            .get_or_init(SearchPath::from_environment)
            .clone(),
    }
}

/// The search order the environment gives, read at the first search (see [`search_path`]).
static ENVIRONMENT_SEARCH: OnceLock<SearchPath> = OnceLock::new();

static DRIVER: OnceLock<Result<driver::Driver>> = OnceLock::new();
static RUNTIME: OnceLock<Result<runtime::Runtime>> = OnceLock::new();
static NVRTC: OnceLock<Result<nvrtc::Nvrtc>> = OnceLock::new();
static NVJITLINK: OnceLock<Result<nvjitlink::NvJitLink>> = OnceLock::new();
static NVFATBIN: OnceLock<Result<nvfatbin::NvFatbin>> = OnceLock::new();

/// The libraries [`library_file`] identified for the compile cache without opening them: the
/// search order is settled for them as for an opened one.
static IDENTIFIED: Mutex<Vec<Component>> = Mutex::new(Vec::new());

fn first_opened() -> Option<Component> {
    let identified = IDENTIFIED
        .lock()
        .unwrap_or_else(|poison| poison.into_inner())
        .first()
        .copied();
    identified.or_else(first_loaded)
}

fn first_loaded() -> Option<Component> {
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

/// The library of table `T`, opened on first use and shared for the life of the process.
fn shared<T: ApiTable>(cell: &'static OnceLock<Result<Opened<T>>>) -> Result<&'static Opened<T>> {
    opening(cell).as_ref().map_err(Clone::clone)
}

/// What opening the library of table `T` gave, on first use and kept for the process.
fn opening<T: ApiTable>(cell: &'static OnceLock<Result<Opened<T>>>) -> &'static Result<Opened<T>> {
    cell.get_or_init(|| open(&search_path()))
}

/// The CUDA driver, opened on first use.
pub fn driver() -> Result<&'static driver::Driver> {
    shared(&DRIVER)
}

/// The CUDA runtime, opened on first use.
pub fn runtime() -> Result<&'static runtime::Runtime> {
    shared(&RUNTIME)
}

/// The CUDA runtime, opened on first use, or `None` when it could not be: for a caller that only
/// asks whether there is one, which [`runtime`] would answer with a clone of the error each time.
pub(crate) fn runtime_if_found() -> Option<&'static runtime::Runtime> {
    opening(&RUNTIME).as_ref().ok()
}

/// NVRTC, opened on first use (with its builtins library from the same folder).
pub fn nvrtc() -> Result<&'static nvrtc::Nvrtc> {
    shared(&NVRTC)
}

/// nvJitLink, opened on first use.
pub fn nvjitlink() -> Result<&'static nvjitlink::NvJitLink> {
    shared(&NVJITLINK)
}

/// nvFatbin, opened on first use.
pub fn nvfatbin() -> Result<&'static nvfatbin::NvFatbin> {
    shared(&NVFATBIN)
}

/// The file a CUDA library is (or would be) opened from, identified without opening it: what the
/// compile cache keys on, so that a cached compile never pays for loading NVRTC (over 100 MB).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryFile {
    /// The file.
    pub path: PathBuf,
    /// The rule of the search order that found it.
    pub origin: locate::Origin,
    /// Its size in bytes.
    pub size: u64,
    /// Its modification time.
    pub modified: std::time::SystemTime,
}

/// Whether `component` has been opened in this process (successfully or not).
pub fn is_open(component: Component) -> bool {
    match component {
        Component::Driver => DRIVER.get().is_some(),
        Component::Runtime => RUNTIME.get().is_some(),
        Component::Nvrtc => NVRTC.get().is_some(),
        Component::NvJitLink => NVJITLINK.get().is_some(),
        Component::NvFatbin => NVFATBIN.get().is_some(),
    }
}

/// The file NVRTC or nvJitLink is opened from when already open, else the file the search order
/// would open, without opening it. `None` when only the system loader could find it (then only
/// opening it tells which file it is) or for another component. Once identified, the library's
/// search order is settled: [`set_library_path`] then returns [`Error::SearchPathFrozen`], as
/// after opening it.
pub fn library_file(component: Component) -> Option<LibraryFile> {
    let opened = match component {
        Component::Nvrtc => NVRTC
            .get()
            .map(|opened| opened.as_ref().map(|o| &o.library)),
        Component::NvJitLink => NVJITLINK
            .get()
            .map(|opened| opened.as_ref().map(|o| &o.library)),
        _ => return None,
    };
    let (path, origin) = match opened {
        Some(Ok(library)) => (library.path.clone(), library.origin),
        _ => {
            let found = search_path().locate(component)?;
            (found.path, found.origin)
        }
    };
    let metadata = std::fs::metadata(&path).ok()?;
    settle(component);
    Some(LibraryFile {
        path,
        origin,
        size: metadata.len(),
        modified: metadata.modified().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvjitlink::NvJitLinkApi;

    fn nvjitlink_library() -> OpenedLibrary {
        locate::open(&search_path(), Component::NvJitLink)
            .expect("nvJitLink is installed (the pinned wheel)")
    }

    #[test]
    fn nvjitlink_without_its_version_entry_point_is_refused_without_a_guessed_version() {
        let library = nvjitlink_library();
        let mut api = NvJitLinkApi::resolve(&library.library);
        assert!(api.nvJitLinkVersion.is_some());
        // What nvJitLink 12.2 and older look like: no version entry point.
        api.nvJitLinkVersion = None;
        let error = with_table(library, api).unwrap_err();
        assert!(
            matches!(
                &error,
                Error::VersionUnreadable {
                    component: Component::NvJitLink,
                    symbol: "nvJitLinkVersion",
                    needed,
                    ..
                } if *needed == Version::new(12, 3)
            ),
            "{error:?}"
        );
        let message = error.to_string();
        for needle in [
            "too old",
            "nvJitLinkVersion",
            "cannot be read",
            "12.3 or newer",
        ] {
            assert!(message.contains(needle), "`{needle}` missing in: {message}");
        }
        assert!(!message.contains("12.2"), "{message}");
    }

    #[test]
    fn nvjitlink_with_its_version_entry_point_reports_its_own_version() {
        let library = nvjitlink_library();
        let api = NvJitLinkApi::resolve(&library.library);
        let opened = with_table(library, api).unwrap();
        assert!(
            opened.version >= nvjitlink::MIN_VERSION,
            "{}",
            opened.version
        );
        assert!(opened.companions.is_empty());
    }
}
