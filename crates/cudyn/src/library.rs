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

use std::ffi::{c_void, CString};
use std::io::Read;
use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::Arc;

use crate::compile::Compiled;
use crate::context::{self, Current};
use crate::device::initialized_driver;
use crate::error::{Error, Result};
use crate::image::{Image, ImageKind};
use crate::kernel::{params_from_image, Kernel, Param};
use crate::memory::{DeviceRepr, DeviceSlice, DeviceSliceMut};
use crate::sys::driver::{self, CUdeviceptr, CUlibrary};
use crate::sys::{self, call, runtime};

/// Which CUDA API loads and manages a library. Both give interchangeable handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The runtime's library API (`cudaLibraryLoadData`, ...), CUDA 12.8 or newer.
    Runtime,
    /// The driver's library API (`cuLibraryLoadData`, ...), CUDA 12.0 or newer.
    Driver,
}

impl Backend {
    /// The runtime when one with the library API is found, else the driver.
    pub fn preferred() -> Backend {
        match sys::runtime() {
            Ok(runtime) if runtime.has_library_api() => Backend::Runtime,
            _ => Backend::Driver,
        }
    }
}

/// Options for the JIT compiler, used when the library holds PTX that must be compiled for the
/// device (a cubin or a fatbin with SASS for the device is not compiled again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JitOptions {
    /// Optimization level, 0 to 4 (the JIT's default is 4).
    pub optimization_level: Option<u32>,
    /// Most registers a thread may use.
    pub max_registers: Option<u32>,
    /// Generate debug information.
    pub debug_info: bool,
    /// Generate line-number information.
    pub line_info: bool,
    /// Make the info log verbose.
    pub verbose_log: bool,
    /// Capacity of each of the two logs (info and error), in bytes.
    pub log_capacity: usize,
}

impl Default for JitOptions {
    fn default() -> Self {
        JitOptions {
            optimization_level: None,
            max_registers: None,
            debug_info: false,
            line_info: false,
            verbose_log: false,
            log_capacity: 16 * 1024,
        }
    }
}

/// Options for loading a library, beyond the JIT's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LibraryOptions {
    /// Let the driver use the loaded bytes in place instead of copying them
    /// (`CU_LIBRARY_BINARY_IS_PRESERVED`). cudyn then keeps its own copy of the bytes alive until
    /// the library is unloaded. Only for [`LibraryLoader::load`], not for files.
    pub preserve_binary: bool,
}

/// What the JIT compiler said while loading a library; empty for code that needed no JIT.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JitLog {
    /// The informational log.
    pub info: String,
    /// The error log. It can hold an error even when the load succeeded.
    pub error: String,
}

impl JitLog {
    /// Whether both logs are empty.
    pub fn is_empty(&self) -> bool {
        self.info.is_empty() && self.error.is_empty()
    }

    /// Both logs as one text for an error message, `None` when both are empty.
    pub fn text(&self) -> Option<String> {
        let parts: Vec<String> = [("error", &self.error), ("info", &self.info)]
            .into_iter()
            .filter(|(_, log)| !log.is_empty())
            .map(|(kind, log)| format!("JIT {kind} log: {}", log.trim_end()))
            .collect();
        (!parts.is_empty()).then(|| parts.join("\n"))
    }

    /// `error` with the logs attached, when it is a failed CUDA call without a log of its own.
    pub(crate) fn attach(&self, error: Error) -> Error {
        match error {
            Error::Cuda(mut call) if call.log.is_none() => {
                call.log = self.text();
                Error::Cuda(call)
            }
            other => other,
        }
    }
}

/// Loads a library with options; made by [`Library::loader`].
#[derive(Debug, Clone, Default)]
pub struct LibraryLoader {
    jit: JitOptions,
    options: LibraryOptions,
    backend: Option<Backend>,
    /// Name expressions (`saxpy<float>`) and the lowered names NVRTC gave them.
    names: Vec<(String, String)>,
}

impl LibraryLoader {
    /// Sets the JIT options.
    pub fn jit(mut self, jit: JitOptions) -> Self {
        self.jit = jit;
        self
    }

    /// Sets the library options.
    pub fn options(mut self, options: LibraryOptions) -> Self {
        self.options = options;
        self
    }

    /// Loads through `backend` instead of [`Backend::preferred`]; asking for the runtime fails
    /// when no runtime with the library API is found.
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = Some(backend);
        self
    }

    /// Loads what NVRTC compiled (a cubin or PTX); its name expressions then work as kernel
    /// names: `library.kernel("saxpy<float>")`.
    pub fn load_compiled(&self, compiled: &Compiled) -> Result<Library> {
        let loader = LibraryLoader {
            names: compiled
                .lowered_names()
                .map(|(expression, lowered)| (expression.to_owned(), lowered.to_owned()))
                .collect(),
            ..self.clone()
        };
        loader.load(compiled.code())
    }

    /// Loads a .fatbin, .cubin or .ptx file.
    pub fn from_file(&self, path: impl AsRef<Path>) -> Result<Library> {
        let path = path.as_ref();
        if self.options.preserve_binary {
            return Err(Error::InvalidArgument(
                "LibraryOptions::preserve_binary applies to loading bytes, not files".into(),
            ));
        }
        // The driver reads the file itself; cudyn reads its start to refuse anything that is not
        // loadable device code with its own error instead of the driver's.
        let mut head = Vec::with_capacity(DETECT_PREFIX);
        std::fs::File::open(path)
            .and_then(|file| Read::take(file, DETECT_PREFIX as u64).read_to_end(&mut head))
            .map_err(|error| Error::ReadFile {
                path: path.to_path_buf(),
                reason: error.to_string(),
            })?;
        let kind = require_loadable(&head, || path.display().to_string())?;
        let name = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| {
            Error::InvalidArgument(format!("the path {} contains a NUL byte", path.display()))
        })?;
        let offline_image = if driver_lacks_param_info() {
            let bytes = std::fs::read(path).map_err(|error| Error::ReadFile {
                path: path.to_path_buf(),
                reason: error.to_string(),
            })?;
            Some(Arc::from(bytes))
        } else {
            None
        };
        self.load_source(Source::File(&name), kind, None, offline_image)
    }

    /// Loads device code from memory: a cubin or fatbin, or PTX text (a terminating NUL is added
    /// when missing). Anything else (LTO-IR, a host program, garbage) is refused before CUDA sees
    /// it, with an error saying what it is.
    ///
    /// PTX is JIT-compiled during the load, into the current context, so PTX the JIT rejects (for
    /// one newer than the driver) fails here with the JIT's log rather than at the first kernel
    /// lookup or launch; cubins and fatbins load into contexts when the driver's module-loading
    /// mode says (lazily, by default).
    pub fn load(&self, image: impl AsRef<[u8]>) -> Result<Library> {
        let image = image.as_ref();
        let kind = crate::image::validate_loadable(image, &|| crate::image::bytes_given(image))?;
        let needs_nul = kind == ImageKind::Ptx && image.last() != Some(&0);
        let owned = (needs_nul || self.options.preserve_binary).then(|| {
            let mut owned = Vec::with_capacity(image.len() + 1);
            owned.extend_from_slice(image);
            if needs_nul {
                owned.push(0);
            }
            owned.into_boxed_slice()
        });
        // The boxed bytes do not move when the box does: `data` stays valid while `owned` lives,
        // which load_source guarantees for the whole call (and the library's life if preserved).
        let data = owned.as_deref().unwrap_or(image).as_ptr();
        let offline_image = driver_lacks_param_info().then(|| Arc::from(image));
        self.load_source(Source::Data(data.cast()), kind, owned, offline_image)
    }

    /// Loads `source`; `owned` holds the bytes `source` points into, when cudyn made a copy: it is
    /// kept alive through the call, and for the library's life when the binary is preserved.
    fn load_source(
        &self,
        source: Source<'_>,
        kind: ImageKind,
        owned: Option<Box<[u8]>>,
        offline_image: Option<Arc<[u8]>>,
    ) -> Result<Library> {
        let backend = match self.backend {
            Some(backend) => backend,
            None => Backend::preferred(),
        };
        let mut jit = JitArgs::new(&self.jit)?;
        let mut library_options = [driver::CU_LIBRARY_BINARY_IS_PRESERVED];
        // The option is a flag; its value is the flag's value.
        let mut library_values = [1usize as *mut c_void];
        let library_count = u32::from(self.options.preserve_binary && owned.is_some());
        let mut raw: CUlibrary = std::ptr::null_mut();
        let (options, values, count) = jit.raw();
        // Every load call takes the same option arrays after the handle slot and the source.
        macro_rules! load {
            ($api:expr, $function:ident, $out:expr, $source:expr) => {
                call!(
                    $api,
                    $function(
                        $out,
                        $source,
                        options,
                        values,
                        count,
                        library_options.as_mut_ptr(),
                        library_values.as_mut_ptr(),
                        library_count
                    )
                )
            };
        }
        // SAFETY: the handle slot takes one library handle (cudaLibrary_t and CUlibrary are the
        // same pointer); the option arrays hold `count` and `library_count` entries of the types
        // the header documents; the source is a NUL-terminated path or an image that outlives
        // the call (or the library, when preserved); the log buffers outlive the call.
        let status = unsafe {
            match (backend, source) {
                (Backend::Runtime, source) => {
                    let runtime = runtime_with_library_api()?;
                    let out = (&mut raw as *mut CUlibrary).cast::<runtime::cudaLibrary_t>();
                    match source {
                        Source::File(name) => {
                            load!(runtime, cudaLibraryLoadFromFile, out, name.as_ptr())
                        }
                        Source::Data(data) => load!(runtime, cudaLibraryLoadData, out, data),
                    }
                }
                (Backend::Driver, source) => {
                    let driver = initialized_driver()?;
                    match source {
                        Source::File(name) => {
                            load!(driver, cuLibraryLoadFromFile, &mut raw, name.as_ptr())
                        }
                        Source::Data(data) => load!(driver, cuLibraryLoadData, &mut raw, data),
                    }
                }
            }
        };
        if let Err(error) = status {
            return Err(jit.logs().attach(error));
        }
        let mut inner = Inner {
            raw,
            backend,
            owned: true,
            log: JitLog::default(),
            names: self.names.clone(),
            offline_image,
            _image: owned.filter(|_| self.options.preserve_binary),
            _jit_buffers: None,
        };
        // With lazy module loading (the driver's default) PTX would be compiled at the first
        // kernel lookup or launch, and a PTX the JIT rejects would load "successfully" and fail
        // later. Loading it into the current context now runs the JIT while the logs are
        // captured, so a failure is a load error carrying the JIT's log.
        if kind == ImageKind::Ptx {
            if let Err(error) = load_into_current_context(raw) {
                return Err(jit.logs().attach(error));
            }
        }
        inner.log = jit.logs();
        // A later lazy load into another context may still write the log buffers the driver was
        // given: they live as long as the library.
        inner._jit_buffers = Some(jit);
        Ok(Library {
            inner: Arc::new(inner),
        })
    }
}

/// Where device code is loaded from.
#[derive(Clone, Copy)]
enum Source<'a> {
    File(&'a CString),
    Data(*const c_void),
}

/// Loads `library` into the current context now (`cuLibraryGetModule`), making one current if
/// none is; for PTX this runs the JIT.
fn load_into_current_context(library: CUlibrary) -> Result<()> {
    let driver = context::current()?.driver;
    let mut module: driver::CUmodule = std::ptr::null_mut();
    // SAFETY: writes one module handle; the library is loaded and a context is current.
    unsafe { call!(driver, cuLibraryGetModule(&mut module, library)) }
}

/// Whether the driver lacks `cuKernelGetParamInfo` (before 12.4), so that launches must check
/// arguments against layouts read offline from the device code.
fn driver_lacks_param_info() -> bool {
    sys::driver().is_ok_and(|driver| driver.api.cuKernelGetParamInfo.is_none())
}

/// How much of a file is read to tell its kind before the driver loads it.
const DETECT_PREFIX: usize = 64 * 1024;

/// The kind of `image`, or an error when it is not device code the driver can load. `what` names
/// the image in the error.
fn require_loadable(image: &[u8], what: impl Fn() -> String) -> Result<ImageKind> {
    let kind = Image::detect(image).map_err(|error| match error {
        Error::NotDeviceCode { reason, .. } => Error::NotDeviceCode {
            what: what(),
            reason,
        },
        other => other,
    })?;
    if kind.is_loadable() {
        return Ok(kind);
    }
    let advice = match kind {
        ImageKind::LtoIr => "LTO-IR must be linked first: cudyn::compile::link_lto or Linker",
        _ => {
            "a host program is not loaded as a library; load its device code from \
              Image::embedded_fatbins"
        }
    };
    Err(Error::NotDeviceCode {
        what: what(),
        reason: format!("it is {kind}, which the driver cannot load: {advice}"),
    })
}

fn runtime_with_library_api() -> Result<&'static runtime::Runtime> {
    let runtime = sys::runtime()?;
    if runtime.has_library_api() {
        Ok(runtime)
    } else {
        Err(Error::VersionTooOld {
            component: sys::locate::Component::Runtime,
            path: runtime.library.path.clone(),
            found: runtime.version,
            needed: runtime::LIBRARY_API_VERSION,
        })
    }
}

/// The JIT option arrays of one load, with the log buffers they point into.
#[derive(Debug)]
struct JitArgs {
    options: [u32; JitArgs::MAX],
    values: [*mut c_void; JitArgs::MAX],
    count: usize,
    info: Vec<u8>,
    error: Vec<u8>,
}

impl JitArgs {
    const MAX: usize = 9;
    const INFO_SIZE_SLOT: usize = 1;
    const ERROR_SIZE_SLOT: usize = 3;

    fn new(jit: &JitOptions) -> Result<JitArgs> {
        let capacity = jit.log_capacity.clamp(1, u32::MAX as usize);
        let mut args = JitArgs {
            options: [0; Self::MAX],
            values: [std::ptr::null_mut(); Self::MAX],
            count: 0,
            info: vec![0; capacity],
            error: vec![0; capacity],
        };
        let info = args.info.as_mut_ptr().cast();
        let error = args.error.as_mut_ptr().cast();
        // The size slots are read back after the load: keep them at the indices named above.
        args.push(driver::CU_JIT_INFO_LOG_BUFFER, info);
        args.push(driver::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, capacity as _);
        args.push(driver::CU_JIT_ERROR_LOG_BUFFER, error);
        args.push(driver::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, capacity as _);
        if let Some(level) = jit.optimization_level {
            if level > 4 {
                return Err(Error::InvalidArgument(format!(
                    "JIT optimization level {level} is out of range: use 0 to 4"
                )));
            }
            args.push(driver::CU_JIT_OPTIMIZATION_LEVEL, level as _);
        }
        if let Some(registers) = jit.max_registers {
            args.push(driver::CU_JIT_MAX_REGISTERS, registers as _);
        }
        for (set, option) in [
            (jit.debug_info, driver::CU_JIT_GENERATE_DEBUG_INFO),
            (jit.line_info, driver::CU_JIT_GENERATE_LINE_INFO),
            (jit.verbose_log, driver::CU_JIT_LOG_VERBOSE),
        ] {
            if set {
                args.push(option, 1 as _);
            }
        }
        Ok(args)
    }

    /// Adds an option; scalar values travel in the pointer itself, as the JIT API specifies.
    fn push(&mut self, option: driver::CUjit_option, value: *mut c_void) {
        self.options[self.count] = option;
        self.values[self.count] = value;
        self.count += 1;
    }

    /// The arrays for the load call. cudaJitOption has the values of CUjit_option.
    fn raw<T>(&mut self) -> (*mut T, *mut *mut c_void, u32) {
        (
            self.options.as_mut_ptr().cast(),
            self.values.as_mut_ptr(),
            self.count as u32,
        )
    }

    fn logs(&self) -> JitLog {
        JitLog {
            info: read_log(&self.info, self.values[Self::INFO_SIZE_SLOT]),
            error: read_log(&self.error, self.values[Self::ERROR_SIZE_SLOT]),
        }
    }
}

/// The text in a log buffer: up to the size the JIT reports filled, the first NUL, or the end.
fn read_log(buffer: &[u8], filled: *mut c_void) -> String {
    let filled = (filled as usize).min(buffer.len());
    let text = &buffer[..filled];
    let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
    String::from_utf8_lossy(&text[..end]).trim_end().to_owned()
}

/// Device code loaded at run time: a handle shared by clones, unloaded when the last clone and
/// the last [`Kernel`] taken from it are dropped.
///
/// ```no_run
/// let library = cudyn::Library::from_file("device.fatbin")?;
/// let hello = library.kernel("helloWorld")?;
/// hello.launch(&cudyn::LaunchConfig::new(1, 1), ())?;
/// cudyn::synchronize()?;
/// # Ok::<(), cudyn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Library {
    inner: Arc<Inner>,
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
    /// 12.4): kernels then read theirs offline from it.
    offline_image: Option<Arc<[u8]>>,
    /// The bytes the driver may use in place (LibraryOptions::preserve_binary).
    _image: Option<Box<[u8]>>,
    /// The JIT option arrays and log buffers handed to the load call.
    _jit_buffers: Option<JitArgs>,
}

// SAFETY: a library handle is context-independent and not tied to a host thread; the driver and
// runtime library calls are thread-safe.
unsafe impl Send for Inner {}
// SAFETY: shared access only hands the handle to thread-safe calls.
unsafe impl Sync for Inner {}

impl Drop for Inner {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        // SAFETY: the handle came from a successful load and is unloaded once, by the API that
        // loaded it. A failure cannot be reported from drop and leaves nothing unsafe behind.
        let _ = match self.backend {
            Backend::Runtime => sys::runtime().and_then(|rt| {
                // SAFETY: see above.
                unsafe { call!(rt, cudaLibraryUnload(self.raw.cast())) }
            }),
            Backend::Driver => sys::driver().and_then(|driver| {
                // SAFETY: see above.
                unsafe { call!(driver, cuLibraryUnload(self.raw)) }
            }),
        };
    }
}

impl Library {
    /// Loads a .fatbin, .cubin or .ptx file with default options (`cudaLibraryLoadFromFile`).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Library> {
        Self::loader().from_file(path)
    }

    /// Loads device code from memory with default options (`cudaLibraryLoadData`): a cubin, a
    /// fatbin or PTX text.
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

    /// Links LTO-IR pieces for this GPU with link-time optimization (nvJitLink) and loads the
    /// result: the pieces of a program compiled with `Program::output(Output::LtoIr)` and
    /// `relocatable(true)`, in one call.
    pub fn from_lto_ir(pieces: &[&[u8]]) -> Result<Library> {
        crate::compile::link_lto(pieces, None)?.load()
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
            inner: Arc::new(Inner {
                raw,
                backend,
                owned: false,
                log: JitLog::default(),
                names: Vec::new(),
                offline_image: None,
                _image: None,
                _jit_buffers: None,
            }),
        }
    }

    /// The handle, as the driver types it. It stays valid while this `Library` (or a clone, or a
    /// kernel from it) lives.
    pub fn as_raw(&self) -> CUlibrary {
        self.inner.raw
    }

    /// The handle, as the runtime types it: the same pointer as [`Library::as_raw`].
    pub fn as_runtime_raw(&self) -> runtime::cudaLibrary_t {
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

    /// The parameter layout of kernel `name` read from the device code, when the library kept
    /// it (only when the driver cannot report layouts itself).
    pub(crate) fn offline_params(&self, name: &str) -> Option<Result<Box<[Param]>>> {
        let image = self.inner.offline_image.as_deref()?;
        Some(params_from_image(image, name).map_err(|error| self.inner.log.attach(error)))
    }

    /// The kernel named `name` (`cudaLibraryGetKernel`). An unknown name is
    /// [`Error::KernelNotFound`], listing the kernels the library has, nearest first.
    ///
    /// A kernel without C linkage (`__global__ void helloWorld()` compiled as C++) is found by
    /// its plain name too, when exactly one kernel of the library is a global function of that
    /// name (`_Z10helloWorldv`); overloads must be asked for by their mangled names. A library
    /// loaded from NVRTC output ([`LibraryLoader::load_compiled`], [`Program::load`]) also finds
    /// kernels by the name expressions compiled with it (`saxpy<float>`).
    ///
    /// [`Program::load`]: crate::Program::load
    pub fn kernel(&self, name: &str) -> Result<Kernel> {
        let name = self
            .inner
            .names
            .iter()
            .find(|(expression, _)| expression == name)
            .map_or(name, |(_, lowered)| lowered.as_str());
        match self.kernel_exact(name) {
            Ok(kernel) => Ok(kernel),
            Err(error) => match self.lookup_failure(name, error) {
                Lookup::Mangled(mangled) => self.kernel_exact(&mangled),
                Lookup::Failed(error) => Err(error),
            },
        }
    }

    fn kernel_exact(&self, name: &str) -> Result<Kernel> {
        let c_name = c_name(name)?;
        let mut raw: driver::CUkernel = std::ptr::null_mut();
        let status = match self.inner.backend {
            Backend::Runtime => {
                let out = (&mut raw as *mut driver::CUkernel).cast::<runtime::cudaKernel_t>();
                runtime_with_library_api().and_then(|rt| {
                    // SAFETY: writes one kernel handle (cudaKernel_t is CUkernel); the library
                    // is loaded and the name NUL-terminated.
                    unsafe {
                        call!(
                            rt,
                            cudaLibraryGetKernel(out, self.as_runtime_raw(), c_name.as_ptr())
                        )
                    }
                })
            }
            Backend::Driver => initialized_driver().and_then(|driver| {
                // SAFETY: as above, through the driver.
                unsafe {
                    call!(
                        driver,
                        cuLibraryGetKernel(&mut raw, self.inner.raw, c_name.as_ptr())
                    )
                }
            }),
        };
        status.map_err(|error| self.inner.log.attach(error))?;
        Ok(Kernel::named(raw, self.clone(), name))
    }

    /// The number of kernels in the library.
    pub fn kernel_count(&self) -> Result<usize> {
        let mut count = 0u32;
        let status = match self.inner.backend {
            Backend::Runtime => runtime_with_library_api().and_then(|rt| {
                // SAFETY: writes one unsigned int; the library is loaded.
                unsafe {
                    call!(
                        rt,
                        cudaLibraryGetKernelCount(&mut count, self.as_runtime_raw())
                    )
                }
            }),
            Backend::Driver => initialized_driver().and_then(|driver| {
                // SAFETY: as above, through the driver.
                unsafe { call!(driver, cuLibraryGetKernelCount(&mut count, self.inner.raw)) }
            }),
        };
        status.map_err(|error| self.inner.log.attach(error))?;
        Ok(count as usize)
    }

    /// Every kernel in the library.
    pub fn kernels(&self) -> Result<Vec<Kernel>> {
        let count = self.kernel_count()?;
        let mut raw: Vec<driver::CUkernel> = vec![std::ptr::null_mut(); count];
        if count > 0 {
            let status = match self.inner.backend {
                Backend::Runtime => runtime_with_library_api().and_then(|rt| {
                    // SAFETY: the array has room for `count` handles (cudaKernel_t is CUkernel).
                    unsafe {
                        call!(
                            rt,
                            cudaLibraryEnumerateKernels(
                                raw.as_mut_ptr().cast(),
                                count as u32,
                                self.as_runtime_raw()
                            )
                        )
                    }
                }),
                Backend::Driver => initialized_driver().and_then(|driver| {
                    // SAFETY: the array has room for `count` handles.
                    unsafe {
                        call!(
                            driver,
                            cuLibraryEnumerateKernels(
                                raw.as_mut_ptr(),
                                count as u32,
                                self.inner.raw
                            )
                        )
                    }
                }),
            };
            status.map_err(|error| self.inner.log.attach(error))?;
        }
        Ok(raw
            .into_iter()
            .map(|raw| Kernel::new(raw, Some(self.clone())))
            .collect())
    }

    /// The names of every kernel in the library (mangled for kernels without C linkage).
    pub fn kernel_names(&self) -> Result<Vec<String>> {
        self.kernels()?
            .iter()
            .map(|kernel| kernel.name().map(str::to_owned))
            .collect()
    }

    /// The `__device__` or `__constant__` variable `name` on the current device, read and
    /// written as a `T` of exactly the variable's size.
    pub fn global<T: DeviceRepr>(&self, name: &str) -> Result<Global<T>> {
        self.variable(name, false)
    }

    /// The `__managed__` variable `name`, read and written as a `T` of exactly its size.
    pub fn managed<T: DeviceRepr>(&self, name: &str) -> Result<Global<T>> {
        self.variable(name, true)
    }

    fn variable<T: DeviceRepr>(&self, name: &str, managed: bool) -> Result<Global<T>> {
        let c_name = c_name(name)?;
        // Variables live in a context: the library is loaded into the current one if needed.
        let Current { driver, .. } = context::current()?;
        let mut ptr: CUdeviceptr = 0;
        let mut bytes = 0usize;
        let status = match (self.inner.backend, managed) {
            (Backend::Runtime, managed) => runtime_with_library_api().and_then(|rt| {
                let out = (&mut ptr as *mut CUdeviceptr).cast::<*mut c_void>();
                let lib = self.as_runtime_raw();
                // SAFETY: writes one pointer (a CUdeviceptr is pointer-sized on 64-bit hosts)
                // and one size; the library is loaded and the name NUL-terminated.
                unsafe {
                    if managed {
                        call!(
                            rt,
                            cudaLibraryGetManaged(out, &mut bytes, lib, c_name.as_ptr())
                        )
                    } else {
                        call!(
                            rt,
                            cudaLibraryGetGlobal(out, &mut bytes, lib, c_name.as_ptr())
                        )
                    }
                }
            }),
            // SAFETY: as above, through the driver.
            (Backend::Driver, managed) => unsafe {
                let lib = self.inner.raw;
                if managed {
                    call!(
                        driver,
                        cuLibraryGetManaged(&mut ptr, &mut bytes, lib, c_name.as_ptr())
                    )
                } else {
                    call!(
                        driver,
                        cuLibraryGetGlobal(&mut ptr, &mut bytes, lib, c_name.as_ptr())
                    )
                }
            },
        };
        status.map_err(|error| self.inner.log.attach(error))?;
        if bytes != size_of::<T>() {
            return Err(Error::VariableSize {
                name: name.to_owned(),
                device_bytes: bytes,
                rust_type: std::any::type_name::<T>(),
                rust_bytes: size_of::<T>(),
            });
        }
        Ok(Global {
            ptr,
            managed,
            _library: self.clone(),
            _type: std::marker::PhantomData,
        })
    }

    /// The error for a failed kernel lookup: [`Error::KernelNotFound`] when the library has no
    /// such kernel, else the failure itself with the JIT logs attached.
    fn lookup_failure(&self, name: &str, error: Error) -> Lookup {
        let names = match self.kernel_names() {
            Ok(names) if !names.iter().any(|known| known == name) => names,
            _ => return Lookup::Failed(error),
        };
        let mut mangled = names
            .iter()
            .filter(|known| itanium_function_name(known) == Some(name));
        match (mangled.next(), mangled.next()) {
            (Some(only), None) => Lookup::Mangled(only.clone()),
            _ => Lookup::Failed(Error::KernelNotFound {
                name: name.to_owned(),
                available: nearest_first(name, names),
                log: self.inner.log.text(),
            }),
        }
    }
}

/// What a failed exact kernel lookup leads to.
enum Lookup {
    /// The one kernel whose mangled name is a global function of the name asked for.
    Mangled(String),
    /// The error to report (with the JIT logs already attached).
    Failed(Error),
}

/// The name of a global (non-namespaced) function from its Itanium C++ mangled name:
/// `_Z10helloWorldv` gives `helloWorld`.
fn itanium_function_name(mangled: &str) -> Option<&str> {
    let rest = mangled.strip_prefix("_Z")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let len: usize = rest[..digits].parse().ok()?;
    rest[digits..].get(..len)
}

fn c_name(name: &str) -> Result<CString> {
    CString::new(name)
        .map_err(|_| Error::InvalidArgument(format!("the name {name:?} contains a NUL byte")))
}

/// `names` sorted by edit distance to `wanted`, nearest first, ties by name.
fn nearest_first(wanted: &str, mut names: Vec<String>) -> Vec<String> {
    names.sort_by_cached_key(|name| (strsim::levenshtein(wanted, name), name.clone()));
    names
}

/// A `__device__`, `__constant__` or `__managed__` variable of a [`Library`], typed as a `T` of
/// the variable's exact size. It keeps its library loaded.
#[derive(Debug)]
pub struct Global<T: DeviceRepr> {
    ptr: CUdeviceptr,
    managed: bool,
    _library: Library,
    _type: std::marker::PhantomData<T>,
}

impl<T: DeviceRepr> Global<T> {
    /// The variable's value, copied from the device once preceding work on the default stream is
    /// done.
    pub fn read(&self) -> Result<T> {
        let mut value = MaybeUninit::<T>::uninit();
        // SAFETY: the view covers exactly the variable (its size was checked against T); the
        // copy fills every byte of `value`, and any bytes are a valid T (DeviceRepr).
        unsafe {
            self.view().copy_to_raw(value.as_mut_ptr())?;
            Ok(value.assume_init())
        }
    }

    /// Sets the variable, copied to the device once preceding work on the default stream is done.
    pub fn write(&self, value: &T) -> Result<()> {
        // SAFETY: as in `view`.
        unsafe { DeviceSliceMut::from_raw_parts(self.ptr, 1) }
            .copy_from(std::slice::from_ref(value))
    }

    /// The variable's device address (for a managed variable, also valid on the host).
    pub fn as_raw(&self) -> CUdeviceptr {
        self.ptr
    }

    /// Whether this is a `__managed__` variable.
    pub fn is_managed(&self) -> bool {
        self.managed
    }

    fn view(&self) -> DeviceSlice<'_, T> {
        // SAFETY: the variable is one T (size checked) and lives while the library does, which
        // `self` keeps loaded.
        unsafe { DeviceSlice::from_raw_parts(self.ptr, 1) }
    }
}

// SAFETY: the variable's address is usable from any thread; copies are thread-safe driver calls.
unsafe impl<T: DeviceRepr> Send for Global<T> {}
// SAFETY: as above.
unsafe impl<T: DeviceRepr> Sync for Global<T> {}

/// `Library` and `Kernel` are shared across threads (the issue's 8-thread test does so on the
/// GPU); this fails to compile if either stops being `Send + Sync`.
const _: () = {
    const fn shareable<T: Send + Sync>() {}
    shareable::<Library>();
    shareable::<Kernel>();
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_kernel_names_are_listed_nearest_first() {
        let names = ["saxpy_f64", "reduce", "saxpy", "scale"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            nearest_first("saxpi", names),
            ["saxpy", "scale", "saxpy_f64", "reduce"]
        );
    }

    #[test]
    fn plain_names_are_read_from_itanium_mangled_ones() {
        assert_eq!(itanium_function_name("_Z10helloWorldv"), Some("helloWorld"));
        assert_eq!(itanium_function_name("_Z5saxpyfPKfPfi"), Some("saxpy"));
        assert_eq!(itanium_function_name("_ZN2ns5saxpyEf"), None);
        assert_eq!(itanium_function_name("saxpy"), None);
        assert_eq!(itanium_function_name("_Z99short"), None);
    }

    #[test]
    fn only_loadable_device_code_reaches_the_driver() {
        let ptx = b"//\n.version 9.0\n.target sm_90\n.address_size 64\n";
        assert_eq!(
            require_loadable(ptx, || "ptx".into()).unwrap(),
            ImageKind::Ptx
        );
        let garbage = require_loadable(b"hello, world", || "greeting.bin".into()).unwrap_err();
        assert!(
            matches!(&garbage, Error::NotDeviceCode { what, .. } if what == "greeting.bin"),
            "{garbage:?}"
        );
        // The NVVM container magic of LTO-IR, which needs nvJitLink before it can load.
        let ltoir = [0xed, 0x43, 0x4e, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let error = require_loadable(&ltoir, || "piece.ltoir".into()).unwrap_err();
        assert!(error.to_string().contains("link"), "{error}");
        // Refused before any CUDA library is needed: this runs without a GPU.
        let refused = Library::load(b"not device code").unwrap_err();
        assert!(
            matches!(refused, Error::NotDeviceCode { .. }),
            "{refused:?}"
        );
    }

    #[test]
    fn jit_options_fill_the_arrays_the_header_describes() {
        let jit = JitOptions {
            optimization_level: Some(2),
            max_registers: Some(40),
            line_info: true,
            log_capacity: 128,
            ..JitOptions::default()
        };
        let args = JitArgs::new(&jit).unwrap();
        let options = &args.options[..args.count];
        assert_eq!(
            options,
            [
                driver::CU_JIT_INFO_LOG_BUFFER,
                driver::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                driver::CU_JIT_ERROR_LOG_BUFFER,
                driver::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                driver::CU_JIT_OPTIMIZATION_LEVEL,
                driver::CU_JIT_MAX_REGISTERS,
                driver::CU_JIT_GENERATE_LINE_INFO,
            ]
        );
        assert_eq!(args.values[0], args.info.as_ptr() as *mut c_void);
        assert_eq!(args.values[1] as usize, 128);
        assert_eq!(args.values[2], args.error.as_ptr() as *mut c_void);
        assert_eq!(args.values[4] as usize, 2);
        assert_eq!(args.values[5] as usize, 40);
        assert_eq!(args.values[6] as usize, 1);
        // The runtime's option numbers are the driver's.
        assert_eq!(
            runtime::cudaJitOptimizationLevel,
            driver::CU_JIT_OPTIMIZATION_LEVEL
        );
        assert_eq!(
            runtime::cudaJitErrorLogBuffer,
            driver::CU_JIT_ERROR_LOG_BUFFER
        );
        assert_eq!(
            runtime::cudaJitGenerateLineInfo,
            driver::CU_JIT_GENERATE_LINE_INFO
        );
    }

    #[test]
    fn out_of_range_optimization_level_is_refused() {
        let jit = JitOptions {
            optimization_level: Some(5),
            ..JitOptions::default()
        };
        assert!(matches!(JitArgs::new(&jit), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn logs_stop_at_the_filled_size_or_the_first_nul() {
        let mut buffer = b"ptxas error   : Unsupported .version 9.5\0garbage".to_vec();
        assert_eq!(
            read_log(&buffer, 44 as *mut c_void),
            "ptxas error   : Unsupported .version 9.5"
        );
        assert_eq!(read_log(&buffer, 5 as *mut c_void), "ptxas");
        buffer.clear();
        assert_eq!(read_log(&buffer, 100 as *mut c_void), "");
    }

    #[test]
    fn logs_are_attached_to_call_errors_without_one() {
        let log = JitLog {
            info: String::new(),
            error: "ptxas fatal: Unsupported .version 9.5".into(),
        };
        let error = Error::Cuda(Box::new(crate::error::CallError {
            api: sys::locate::Component::Runtime,
            call: "cudaLibraryGetKernel",
            code: 222,
            name: "cudaErrorUnsupportedPtxVersion".into(),
            message: "the provided PTX was compiled with an unsupported toolchain".into(),
            log: None,
        }));
        let error = log.attach(error);
        assert_eq!(
            error.log(),
            Some("JIT error log: ptxas fatal: Unsupported .version 9.5")
        );
        assert!(error.to_string().contains("Unsupported .version 9.5"));
    }
}
