//! [`Library`]: device code (fatbin, cubin or PTX) loaded at run time, runtime-style.
//!
//! A library is context-independent: it is loaded once and usable on every device (the driver
//! loads it into a device's context when a kernel or variable is first needed there). Loading
//! goes through the CUDA runtime's library API (`cudaLibraryLoadData`, CUDA 12.8+) when such a
//! runtime is found, else through the driver's `cuLibrary*` API; both give the same handle.
//!
//! Every load captures the JIT's info and error logs. The driver may report success while the
//! error log holds an error (PTX newer than the driver: the failure surfaces only at the kernel
//! lookup), so the logs are kept with the library and attached to any later failure.
//!
//! # Loading identical code once
//!
//! Loads of the same device code with the same options share one loaded library: the second
//! `Library::load` of an image returns a handle to the library the first made (the same
//! [`Library::as_raw`]), so N loads cost the device and host memory of one. When the last user
//! of any of those loads is dropped (a `Library` or a clone, a [`Kernel`], a [`Global`], a handle
//! held through cudyn's C API), the library is unloaded, or kept loaded a while for a later load
//! of the same code (see [keeping released libraries](#keeping-released-libraries)). What counts
//! as "the same" is the image bytes and everything that changes the loaded result: the JIT
//! options, the library options, the backend and, for [`LibraryLoader::load_compiled`], the name
//! expressions.
//!
//! Sharing is observable in three ways, so it is chosen per load with
//! [`LibraryLoader::sharing`]:
//! - **Device variables are shared.** Two loads that share a library share its `__device__`,
//!   `__constant__` and `__managed__` variables: what one writes through [`Library::global`] (or
//!   a kernel writes) the other reads. So by default ([`Sharing::Auto`]) cudyn shares only images
//!   that define no such variable, and loads an image that defines one (or that cannot be
//!   inspected) separately each time, as two runtime loads would. [`Sharing::Always`] shares
//!   those too; [`Sharing::Never`] always loads a library of its own.
//! - **The JIT log is that of the load that happened**: a load served by an existing library
//!   reports that library's [`Library::jit_log`] (the options being equal, the JIT said the same).
//! - **Raw handles are equal** and the unload happens once, on the last drop of all sharers: a
//!   failure to unload is reported once, to the drop-error hook.
//!
//! What it costs: a load that may share hashes the image (blake3) and looks the hash up in a
//! process-wide table; whether the code defines variables is read while the image is checked. A
//! load that finds its library needs no check (the bytes are those checked before). A load with
//! [`Sharing::Never`] hashes nothing.
//!
//! # Keeping released libraries
//!
//! Code loaded, dropped and loaded again in one process (`Program::new(source).load()?` in a
//! function called repeatedly) would be loaded afresh each time if the last drop unloaded it. So
//! when the last user of a shared library is dropped, cudyn keeps it loaded in a short list, and
//! a later load of the same code with the same options takes it back at once (the same
//! [`Library::as_raw`], no driver call). Only libraries that later loads would share are kept:
//! never a load with [`Sharing::Never`], never code with `__device__`, `__constant__` or
//! `__managed__` variables loaded with [`Sharing::Auto`] (the default), whose values a later
//! load would otherwise find changed. Code with variables loaded with [`Sharing::Always`] is
//! kept with its variables' values, as its loads share them anyway, and counts with the memory
//! of its uninitialized variables (which its image holds no bytes for); PTX with variables,
//! whose size cudyn does not read, is not kept.
//!
//! At most [`Retention::DEFAULT`] are kept, 16 libraries and 64 MiB of images (and uninitialized
//! variables), the least recently released unloaded first. [`set_retained`] changes the limits (`set_retained(0)`
//! turns keeping off: each library is then unloaded with its last user), as do the environment
//! variables `CUDYN_RETAIN_LIBRARIES` (a number of libraries) and `CUDYN_RETAIN_MIB` (MiB of
//! images) when `set_retained` was not called; [`release_retained`] unloads every kept library
//! now, for instance before measuring device memory.
//!
//! # The parts
//!
//! [`loader`] (options, JIT logs, the checks before the driver sees any byte), `registry` (the
//! table of shared loads), `retention` (the released libraries kept loaded); the crate's `symbols` (kernel
//! names, C++ names, suggestions), [`global`] (device variables), and here the handle itself.

use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::api::library::LibraryApi;
use crate::ctype::CType;
use crate::error::{Error, Result};
use crate::formats::ptx;
use crate::memory::DeviceRepr;
use crate::param::ParamLayout;
use crate::raw::{cudaLibrary_t, CUlibrary};
use crate::sys::driver;
use kernel::{params_from_image, Kernel, KernelState};

mod function;
pub mod global;
mod jit;
pub mod kernel;
pub mod loader;
pub(crate) mod plan;
mod registry;
mod retention;

pub use crate::backend::Backend;
pub use crate::symbols::KernelName;
use crate::symbols::{self as lookup, Resolved};
pub use global::Global;
pub use loader::{JitLog, JitOptions, LibraryLoader, LibraryOptions, Sharing};
use registry::{Registry, Users};
pub use retention::{
    release_retained, retention, set_retained, Retention, RETAIN_LIBRARIES_ENV, RETAIN_MIB_ENV,
};

/// The loads shared by every thread of the process (see "Loading identical code once" above).
static SHARED: Registry<Inner> = Registry::new();

/// Device code loaded at run time: a handle shared by clones, unloaded when the last clone and
/// the last [`Kernel`] taken from it are dropped (or kept loaded a while for a later identical
/// load, see [keeping released libraries](self#keeping-released-libraries)). Loads of identical
/// device code share one handle (see [the module
/// documentation](self#loading-identical-code-once)).
///
/// ```no_run
/// let library = cudyn::Library::from_file("device.fatbin")?;
/// let hello = library.kernel("helloWorld")?;
/// // SAFETY: helloWorld takes no parameters and touches no memory of the program.
/// unsafe { hello.launch(&cudyn::LaunchConfig::new(1, 1), ()) }?;
/// cudyn::synchronize()?;
/// # Ok::<(), cudyn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Library {
    inner: Arc<Users<Inner>>,
}

#[derive(Debug)]
struct Inner {
    raw: CUlibrary,
    backend: Backend,
    /// Whether cudyn loaded it and so unloads it.
    owned: bool,
    log: JitLog,
    /// Name expressions and their lowered names, from [`LibraryLoader::load_compiled`].
    names: Vec<(String, String)>,
    /// The device code, kept only when the driver cannot report parameter layouts (before
    /// 12.4), when kernels read theirs offline from it, and when it is PTX, whose parameter
    /// types the driver does not report.
    offline_image: Option<Arc<[u8]>>,
    /// The bytes the driver may use in place (LibraryOptions::preserve_binary).
    _image: Option<Box<[u8]>>,
    /// The JIT's info and error log buffers handed to the load call (empty for a cubin's).
    _jit_buffers: [Vec<u8>; 2],
    /// Whether the load asked for [`Sharing::Always`].
    shared_always: bool,
    /// Whether the device code defines variables: then only loads that all asked for
    /// [`Sharing::Always`] share the library, and it is never kept after its last user.
    defines_variables: bool,
    /// The kernels looked up by symbol so far: a later lookup of one asks the driver nothing.
    kernels: Mutex<KnownKernels>,
}

/// The kernels a library looked up by symbol: the first in place, so that a library whose one
/// kernel is looked up allocates no list, then the others.
#[derive(Debug, Default)]
struct KnownKernels {
    first: Option<Arc<KernelState>>,
    more: Vec<Arc<KernelState>>,
}

impl KnownKernels {
    /// The kernel looked up as `symbol`, if any.
    fn find(&self, symbol: &str) -> Option<&Arc<KernelState>> {
        self.first
            .iter()
            .chain(&self.more)
            .find(|kernel| kernel.is_named(symbol))
    }

    /// Adds `state`, of a kernel not looked up before.
    fn push(&mut self, state: Arc<KernelState>) {
        if self.first.is_none() {
            self.first = Some(state);
        } else {
            self.more.push(state);
        }
    }
}

impl Inner {
    /// The kernel looked up as `symbol` before, if any.
    fn known_kernel(&self, symbol: &str) -> Option<Arc<KernelState>> {
        self.known_kernels().find(symbol).cloned()
    }

    /// Keeps `state`, of the kernel looked up as `symbol`, unless another thread kept one of that
    /// symbol meanwhile; the state kept.
    fn keep_kernel(&self, state: Arc<KernelState>, symbol: &str) -> Arc<KernelState> {
        let mut known = self.known_kernels();
        if let Some(first) = known.find(symbol) {
            return Arc::clone(first);
        }
        known.push(Arc::clone(&state));
        state
    }

    /// The kernels looked up so far. Nothing panics while holding the lock, so a poisoned one
    /// still holds a consistent list.
    fn known_kernels(&self) -> std::sync::MutexGuard<'_, KnownKernels> {
        self.kernels
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

// SAFETY: a library handle is context-independent and not tied to a host thread; the driver and
// runtime library calls are thread-safe.
unsafe impl Send for Inner {}
// SAFETY: shared access only hands the handle to thread-safe calls.
unsafe impl Sync for Inner {}

impl Drop for Inner {
    /// No user is left, and the library is not kept for later loads: unloaded.
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let unloaded = LibraryApi::new(self.backend).and_then(|api| {
            // SAFETY: the handle came from a successful load through this backend, and this is
            // the last user of it: it is unloaded once.
            unsafe { api.unload(self.raw) }
        });
        if let Err(error) = unloaded {
            crate::context::report_drop_error("Library", &error);
        }
    }
}

impl Library {
    /// Loads a .fatbin, .cubin or .ptx file with default options; see [`LibraryLoader::from_file`].
    pub fn from_file(path: impl AsRef<Path>) -> Result<Library> {
        Self::loader().from_file(path)
    }

    /// Loads device code from memory with default options (`cudaLibraryLoadData`): a cubin, a
    /// fatbin or PTX text. Code loaded already (and still in use) with the same options is
    /// shared, unless it defines variables: see
    /// [loading identical code once](self#loading-identical-code-once).
    pub fn load(image: impl AsRef<[u8]>) -> Result<Library> {
        Self::loader().load(image)
    }

    /// A loader, to set JIT options, library options or the backend.
    ///
    /// ```no_run
    /// use cudyn::{Backend, JitOptions, Library};
    /// let mut jit = JitOptions::default();
    /// jit.max_registers = Some(32);
    /// let library = Library::loader().jit(jit).backend(Backend::Driver).from_file("k.ptx")?;
    /// println!("{}", library.jit_log().info);
    /// # Ok::<(), cudyn::Error>(())
    /// ```
    pub fn loader() -> LibraryLoader {
        LibraryLoader::default()
    }

    /// Wraps a library loaded elsewhere (by the runtime, the driver or another library). cudyn
    /// never unloads it.
    ///
    /// # Safety
    /// `raw` is a loaded library handle (a `CUlibrary` or a `cudaLibrary_t`, which are the same),
    /// and it stays loaded as long as the returned `Library`, its clones and every [`Kernel`] or
    /// [`Global`] taken from them live.
    pub unsafe fn from_raw(raw: CUlibrary, backend: Backend) -> Library {
        Library {
            inner: Users::own(Inner {
                raw,
                backend,
                owned: false,
                log: JitLog::default(),
                names: Vec::new(),
                offline_image: None,
                _image: None,
                _jit_buffers: Default::default(),
                shared_always: false,
                defines_variables: false,
                kernels: Mutex::default(),
            }),
        }
    }

    /// The handle, as the driver types it. It stays valid while this `Library` (or a clone, or a
    /// kernel from it) lives.
    pub fn as_raw(&self) -> CUlibrary {
        self.inner.raw
    }

    /// The handle, as the runtime types it: the same pointer as [`Library::as_raw`].
    pub fn as_runtime_raw(&self) -> cudaLibrary_t {
        self.inner.raw.cast()
    }

    /// The API that loaded the library and serves its lookups.
    pub fn backend(&self) -> Backend {
        self.inner.backend
    }

    /// What the JIT said while loading the library.
    pub fn jit_log(&self) -> &JitLog {
        &self.inner.log
    }

    /// The API serving this library's calls.
    fn api(&self) -> Result<LibraryApi> {
        LibraryApi::new(self.inner.backend)
    }

    /// The parameter layout of kernel `name` read from the device code, when the library kept
    /// it (only when the driver cannot report layouts itself).
    pub(crate) fn offline_params(&self, name: &str) -> Option<Result<Box<[ParamLayout]>>> {
        let image = self.inner.offline_image.as_deref()?;
        Some(params_from_image(image, name).map_err(|error| self.inner.log.attach(error)))
    }

    /// The parameter types of kernel `name` that the library's PTX declares, when it was
    /// loaded from PTX (see [`CType::from_ptx`]).
    pub(crate) fn ptx_param_types(&self, name: &str) -> Option<Vec<Option<CType>>> {
        let image = self.inner.offline_image.as_deref()?;
        if !ptx::looks_like_ptx(image) {
            return None;
        }
        let module = ptx::parse(image).ok()?;
        Some(
            module
                .entry(name)?
                .params
                .iter()
                .map(ptx::PtxParam::c_type)
                .collect(),
        )
    }

    /// The kernel named `name` (`cudaLibraryGetKernel`).
    ///
    /// The name is, in this order: a name expression the library was compiled with by NVRTC
    /// ([`LibraryLoader::load_compiled`], [`Program::load`]); the kernel's symbol (its plain name
    /// for `extern "C"` kernels, else its mangled name); or its C++ name, read by demangling the
    /// library's symbols: `axpy<float>`, `ns::scale`, `scale(float*, int)` or the whole signature
    /// with its return type (spaces do not matter). This last form finds kernels compiled by nvcc
    /// or by NVRTC, from a file as well as from memory.
    ///
    /// A C++ name that fits several kernels (an overload set, or a template's name without its
    /// arguments when several instantiations exist) is [`Error::AmbiguousKernel`], listing them;
    /// a name that fits none is [`Error::KernelNotFound`], listing the library's kernels nearest
    /// first.
    ///
    /// [`Program::load`]: crate::Program::load
    pub fn kernel(&self, name: &str) -> Result<Kernel> {
        let symbol = self
            .inner
            .names
            .iter()
            .find(|(expression, _)| expression == name)
            .map_or(name, |(_, lowered)| lowered.as_str());
        let error = match self.kernel_exact(symbol) {
            Ok(kernel) => return Ok(kernel),
            Err(error) => error,
        };
        // The driver's failure stands when the library cannot be listed, or when it does have a
        // kernel of that symbol (the lookup failed for another reason, such as the JIT).
        let symbols = match self.kernel_names() {
            Ok(symbols) if !symbols.iter().any(|known| known == symbol) => symbols,
            _ => return Err(error),
        };
        match lookup::resolve(name, &symbols) {
            Resolved::One(found) => self.kernel_exact(&found),
            Resolved::Ambiguous(candidates) => Err(Error::AmbiguousKernel {
                name: name.to_owned(),
                candidates,
            }),
            Resolved::NotFound => Err(Error::KernelNotFound {
                name: name.to_owned(),
                available: lookup::nearest_first(name, symbols),
                log: self.inner.log.text(),
            }),
        }
    }

    /// The kernel whose symbol is exactly `symbol`: the one looked up before, else the driver's.
    fn kernel_exact(&self, symbol: &str) -> Result<Kernel> {
        if let Some(known) = self.inner.known_kernel(symbol) {
            return Ok(Kernel::of(known, self.clone()));
        }
        let raw = crate::api::with_c_string("kernel name", symbol, |c_symbol| {
            // SAFETY: the library is loaded while `self` lives.
            self.api()
                .and_then(|api| unsafe { api.kernel(self.inner.raw, c_symbol) })
                .map_err(|error| self.inner.log.attach(error))
        })?;
        let state = self
            .inner
            .keep_kernel(KernelState::named(raw, symbol), symbol);
        Ok(Kernel::of(state, self.clone()))
    }

    /// The `__device__` or `__constant__` variable `name` on the current device, read and
    /// written as a `T` of exactly the variable's size.
    pub fn global<T: DeviceRepr>(&self, name: &str) -> Result<Global<T>> {
        global::variable(self, name, false)
    }

    /// The `__managed__` variable `name`, read and written as a `T` of exactly its size.
    pub fn managed<T: DeviceRepr>(&self, name: &str) -> Result<Global<T>> {
        global::variable(self, name, true)
    }

    /// The number of kernels in the library.
    pub fn kernel_count(&self) -> Result<usize> {
        // SAFETY: the library is loaded while `self` lives.
        let count = self
            .api()
            .and_then(|api| unsafe { api.kernel_count(self.inner.raw) })
            .map_err(|error| self.inner.log.attach(error))?;
        Ok(count as usize)
    }

    /// Every kernel in the library.
    pub fn kernels(&self) -> Result<Vec<Kernel>> {
        let mut raw: Vec<driver::CUkernel> = vec![std::ptr::null_mut(); self.kernel_count()?];
        if !raw.is_empty() {
            // SAFETY: the library is loaded while `self` lives.
            let listed = self
                .api()
                .and_then(|api| unsafe { api.enumerate_kernels(self.inner.raw, &mut raw) });
            listed.map_err(|error| self.inner.log.attach(error))?;
        }
        Ok(raw
            .into_iter()
            .map(|raw| Kernel::new(raw, Some(self.clone())))
            .collect())
    }

    /// The symbols of every kernel in the library (mangled for kernels without C linkage).
    /// [`Library::kernel_list`] gives their C++ names and signatures too.
    pub fn kernel_names(&self) -> Result<Vec<String>> {
        self.kernels()?
            .iter()
            .map(|kernel| kernel.name().map(str::to_owned))
            .collect()
    }

    /// Every kernel in the library with its symbol, C++ name and signature (see
    /// [`KernelName`]), sorted by C++ name, then signature, then symbol. Each listed signature
    /// (or symbol, for `extern "C"` kernels) finds its kernel with [`Library::kernel`].
    ///
    /// These are the kernels of the code the driver loaded: of a fatbin, the one module it chose
    /// for the GPU. [`Image::kernel_list`](crate::Image::kernel_list) lists them offline, from
    /// every module of the image.
    ///
    /// ```no_run
    /// let library = cudyn::Library::from_file("kernels.fatbin")?;
    /// for listed in library.kernel_list()? {
    ///     let kernel = library.kernel(&listed.to_string())?;
    ///     println!("{listed}: {} parameters", kernel.params()?.len());
    /// }
    /// # Ok::<(), cudyn::Error>(())
    /// ```
    pub fn kernel_list(&self) -> Result<Vec<KernelName>> {
        Ok(lookup::kernel_list(self.kernel_names()?))
    }
}

/// `Library` and `Kernel` are shared across threads; this fails to compile if either stops being
/// `Send + Sync`.
const _: () = {
    const fn shareable<T: Send + Sync>() {}
    shareable::<Library>();
    shareable::<Kernel>();
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_kernels_are_found_by_symbol_in_place_or_in_the_list() {
        let mut known = KnownKernels::default();
        assert!(known.find("scale").is_none());
        for symbol in ["scale", "saxpy", "empty"] {
            known.push(KernelState::named(std::ptr::null_mut(), symbol));
        }
        for symbol in ["scale", "saxpy", "empty"] {
            let found = known.find(symbol).expect("a kernel looked up before");
            assert!(found.is_named(symbol));
        }
        assert!(known.find("args21").is_none());
    }
}
