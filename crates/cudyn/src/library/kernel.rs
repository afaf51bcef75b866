//! [`Kernel`]: a kernel of a [`Library`]: its name, parameter layout and attributes, and its
//! raw handle, which the runtime and the driver share (`cudaKernel_t` is `CUkernel`).
//!
//! Launching is in [`crate::launch`].

use std::ffi::c_void;
use std::path::Path;
use std::sync::atomic::AtomicPtr;
use std::sync::{Arc, OnceLock};

use super::function::ContextFunctions;
use super::plan::ParamPlan;
use super::Library;
use crate::api::driver as api;
use crate::api::runtime as runtime_api;
use crate::context::{self, Current};
use crate::device::{initialized_driver, Device};
use crate::error::Result;
use crate::image::Image;
use crate::param::ParamLayout;
use crate::raw::{cudaError_t, cudaKernel_t, CUfunction, CUfunction_attribute, CUkernel};
use crate::sys::driver;
use crate::sys::{runtime, static_c_str, Api, ApiTable};

/// A kernel handle, cheap to clone. It keeps the [`Library`] it came from loaded.
///
/// The handle is context-independent: the same `Kernel` launches on any device, from any thread.
///
/// ```no_run
/// use cudyn::{Device, KernelAttribute, Library};
///
/// let library = Library::from_file("kernels.cubin")?;
/// let kernel = library.kernel("scale")?;
/// // The parameters as the driver reports them: what every checked launch compares against.
/// for (index, param) in kernel.params()?.iter().enumerate() {
///     println!("parameter {index}: {} bytes at offset {}", param.size, param.offset);
/// }
/// let registers = kernel.attribute(KernelAttribute::NumRegisters, Device::get(0)?)?;
/// println!("{} uses {registers} registers per thread", kernel.name()?);
/// # Ok::<(), cudyn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Kernel {
    inner: Arc<KernelState>,
    /// Keeps the library loaded; `None` for a handle from elsewhere (`Kernel::from_raw`).
    library: Option<Library>,
}

/// A kernel's handle and what was learned about it, shared by every `Kernel` of it: its
/// library keeps the state of each kernel looked up by name, so that a later lookup asks the
/// driver nothing, not even the parameter layout again. It does not keep the library loaded (the
/// library holds it).
#[derive(Debug)]
pub(crate) struct KernelState {
    raw: CUkernel,
    name: SuccessCache<String>,
    params: SuccessCache<ParamPlan>,
    /// The address of the last program-long argument description found to match `params` (see
    /// `KernelArgs::static_args`); null when none was.
    matched_args: AtomicPtr<c_void>,
    /// The kernel's function in the contexts it was launched in (see `library::function`).
    functions: ContextFunctions,
}

// SAFETY: a kernel handle is context-independent and not tied to a host thread; the driver's
// kernel calls and launches are thread-safe.
unsafe impl Send for KernelState {}
// SAFETY: shared access only reads the handle and the caches, which are thread-safe.
unsafe impl Sync for KernelState {}

impl KernelState {
    /// The state of kernel `raw`, looked up by its exact symbol `name`.
    pub(crate) fn named(raw: CUkernel, name: &str) -> Arc<KernelState> {
        // Known from the lookup: this saves a cuKernelGetName call, which drivers before 12.3
        // lack, and lets offline parameter layouts find the kernel there.
        KernelState::with_name(raw, SuccessCache::with(name.to_owned()))
    }

    fn with_name(raw: CUkernel, name: SuccessCache<String>) -> Arc<KernelState> {
        Arc::new(KernelState {
            raw,
            name,
            params: SuccessCache::new(),
            matched_args: AtomicPtr::new(std::ptr::null_mut()),
            functions: ContextFunctions::default(),
        })
    }

    /// Whether the kernel was looked up as `symbol`.
    pub(crate) fn is_named(&self, symbol: &str) -> bool {
        self.name.value.get().is_some_and(|name| name == symbol)
    }
}

/// A value fetched on first use and kept once it was fetched successfully. A failure is
/// returned and not kept, so that the next use tries again: a transient error (no context yet,
/// a driver call interrupted) must not stick to a kernel handle for its whole life.
#[derive(Debug)]
struct SuccessCache<T> {
    value: OnceLock<T>,
}

impl<T> SuccessCache<T> {
    fn new() -> Self {
        SuccessCache {
            value: OnceLock::new(),
        }
    }

    /// A cache that holds `value` already, known without fetching.
    fn with(value: T) -> Self {
        SuccessCache {
            value: OnceLock::from(value),
        }
    }

    /// The kept value, or the one `fetch` returns, kept if it is `Ok`. Threads racing on the
    /// first fetch may each fetch; the first success is kept and returned to all.
    fn get_or_fetch(&self, fetch: impl FnOnce() -> Result<T>) -> Result<&T> {
        if let Some(value) = self.value.get() {
            return Ok(value);
        }
        let fetched = fetch()?;
        Ok(self.value.get_or_init(|| fetched))
    }
}

/// A kernel attribute, read per device with [`Kernel::attribute`]; the ones the driver lets
/// change are set with [`Kernel::set_attribute`].
///
/// ```no_run
/// use cudyn::{Device, KernelAttribute, Library};
///
/// let kernel = Library::from_file("kernels.cubin")?.kernel("tiled")?;
/// let device = Device::get(0)?;
/// // Opt in to more dynamic shared memory than the default 48 KiB.
/// kernel.set_attribute(KernelAttribute::MaxDynamicSharedSizeBytes, 100 * 1024, device)?;
/// # Ok::<(), cudyn::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KernelAttribute {
    /// Most threads per block this kernel can be launched with (registers limit it).
    MaxThreadsPerBlock,
    /// Statically allocated shared memory per block, in bytes.
    SharedSizeBytes,
    /// Constant memory used, in bytes.
    ConstSizeBytes,
    /// Local memory per thread, in bytes.
    LocalSizeBytes,
    /// Registers per thread.
    NumRegisters,
    /// PTX version the kernel was compiled from (e.g. 90 for 9.0).
    PtxVersion,
    /// SASS architecture of the binary (e.g. 90 for sm_90).
    BinaryVersion,
    /// Most dynamic shared memory a launch may ask for; settable, up to the device's opt-in limit.
    MaxDynamicSharedSizeBytes,
    /// Preferred shared memory carve-out, in percent of the L1/shared capacity; settable.
    PreferredSharedMemoryCarveout,
    /// Required cluster width, 0 when none; settable before first launch.
    RequiredClusterWidth,
    /// Required cluster height, 0 when none; settable before first launch.
    RequiredClusterHeight,
    /// Required cluster depth, 0 when none; settable before first launch.
    RequiredClusterDepth,
    /// Whether cluster sizes above the portable 8 blocks are allowed; settable.
    NonPortableClusterSizeAllowed,
}

impl KernelAttribute {
    /// The driver's attribute number (the runtime's `cudaFuncAttribute` uses the same numbers).
    pub fn as_raw(self) -> CUfunction_attribute {
        match self {
            Self::MaxThreadsPerBlock => driver::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            Self::SharedSizeBytes => driver::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
            Self::ConstSizeBytes => driver::CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES,
            Self::LocalSizeBytes => driver::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
            Self::NumRegisters => driver::CU_FUNC_ATTRIBUTE_NUM_REGS,
            Self::PtxVersion => driver::CU_FUNC_ATTRIBUTE_PTX_VERSION,
            Self::BinaryVersion => driver::CU_FUNC_ATTRIBUTE_BINARY_VERSION,
            Self::MaxDynamicSharedSizeBytes => {
                driver::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            }
            Self::PreferredSharedMemoryCarveout => {
                driver::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
            }
            Self::RequiredClusterWidth => driver::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
            Self::RequiredClusterHeight => driver::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT,
            Self::RequiredClusterDepth => driver::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH,
            Self::NonPortableClusterSizeAllowed => {
                driver::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
            }
        }
    }
}

/// The parameter-info query stops at the first index the driver refuses; a kernel's parameter
/// buffer is at most 32 764 bytes, so no kernel has more parameters than this.
const MAX_PARAMS: usize = 32_768;

impl Kernel {
    pub(crate) fn new(raw: CUkernel, library: Option<Library>) -> Kernel {
        Kernel {
            inner: KernelState::with_name(raw, SuccessCache::new()),
            library,
        }
    }

    /// A kernel of `library` whose state the library keeps.
    pub(crate) fn of(state: Arc<KernelState>, library: Library) -> Kernel {
        Kernel {
            inner: state,
            library: Some(library),
        }
    }

    /// Wraps a kernel handle obtained elsewhere: from the runtime (`cudaLibraryGetKernel`,
    /// `cudaGetKernel`, cast to `CUkernel`), the driver, or another library or language. The
    /// handle is borrowed: [`Kernel::library`] is `None` and cudyn never unloads it. For a kernel
    /// compiled into this process, see [`Kernel::from_getter`] and [`Kernel::from_host_function`].
    ///
    /// # Safety
    /// `raw` is a valid kernel handle, and the library (or, for `cudaGetKernel`, the module of
    /// the program) it belongs to stays loaded as long as the returned `Kernel` and its clones
    /// live. cudyn never unloads it.
    pub unsafe fn from_raw(raw: CUkernel) -> Kernel {
        Kernel::new(raw, None)
    }

    /// The kernel of a `__global__` function linked into this process, from its host entry
    /// function: `cudaGetKernel` through the CUDA runtime cudyn uses.
    ///
    /// `entry` is the address C++ code passes as `vectorAdd` to `cudaGetKernel` or
    /// `cudaLaunchKernel`: the host stub nvcc generates for the kernel. cudaGetKernel only knows
    /// the functions registered with *its* runtime instance, so this works for code linked with
    /// `-cudart shared`, which registers its kernels in the one `libcudart.so` that cudyn opens too
    /// (cudyn takes a runtime the process has already loaded before searching for one; see
    /// [`locate`](crate::locate)). Code linked with `-cudart static` (nvcc's default)
    /// carries a runtime instance of its own, unknown to cudyn: take the handle there, with a
    /// getter compiled into the same code ([`Kernel::from_getter`]; cudyn-build generates one per
    /// kernel). A function this runtime does not know is [`Error::KernelNotRegistered`], which
    /// says so.
    ///
    /// The handle is borrowed, as with [`Kernel::from_raw`]: [`Kernel::library`] is `None` and
    /// cudyn never unloads it; the runtime that registered the kernel does, when the program or
    /// shared library holding it is unloaded.
    ///
    /// # Safety
    /// `entry` is an address in this process (any such address is safe to look up; an unknown one
    /// is an error), and the code that registered the kernel (the program, or a shared library)
    /// stays loaded as long as the returned `Kernel` and its clones live.
    ///
    /// [`Error::KernelNotRegistered`]: crate::Error::KernelNotRegistered
    pub unsafe fn from_host_function(entry: *const c_void) -> Result<Kernel> {
        // The driver first, as for every load: without it the runtime would only report
        // cudaErrorInsufficientDriver instead of where the driver was looked for.
        initialized_driver()?;
        let runtime = crate::sys::runtime()?;
        // SAFETY: the caller vouches that `entry` is an address in this process.
        let raw = unsafe { runtime_api::get_kernel(runtime, entry) }
            .map_err(|error| not_registered(error, entry, &runtime.library.path))?;
        Ok(Kernel::new(raw, None))
    }

    /// The kernel of a `__global__` function linked into this process, its handle taken by
    /// `getter` inside the code that registered it, with that code's own CUDA runtime instance:
    /// what works for code linked with `-cudart static`, where [`Kernel::from_host_function`]
    /// cannot. `name` only names the kernel in errors.
    ///
    /// cudyn-build generates one such getter per kernel (`cudaError_t
    /// cudyn_kernel_<library>_vectorAdd(cudaKernel_t *kernel)`, calling `cudaGetKernel(kernel,
    /// vectorAdd)`) and a Rust function that calls this; a C++ library can export the same. The handle is
    /// borrowed, as with [`Kernel::from_raw`]: cudyn never unloads it.
    ///
    /// # Safety
    /// `getter` writes a valid kernel handle through its argument and returns `cudaSuccess`, or
    /// returns an error status; the code holding the kernel stays loaded as long as the returned
    /// `Kernel` and its clones live.
    pub unsafe fn from_getter(name: &str, getter: KernelGetter) -> Result<Kernel> {
        let mut raw: runtime::cudaKernel_t = std::ptr::null_mut();
        // SAFETY: one handle slot; the caller vouches for the getter.
        let status = unsafe { getter(&mut raw) };
        if status != runtime::cudaSuccess {
            return Err(getter_failed(name, status));
        }
        Ok(Kernel::new(raw.cast(), None))
    }

    /// The handle, as the driver types it. It stays valid while this `Kernel` lives.
    pub fn as_raw(&self) -> CUkernel {
        self.inner.raw
    }

    /// The handle, as the runtime types it: the same pointer as [`Kernel::as_raw`].
    pub fn as_runtime_raw(&self) -> cudaKernel_t {
        self.inner.raw.cast()
    }

    /// The handle cast to `CUfunction`, as `cuLaunchKernel` and `cuFuncGetAttribute` accept it
    /// (they then act on the kernel in the current context).
    pub fn as_function(&self) -> CUfunction {
        self.inner.raw.cast()
    }

    /// What a launch in the context `current` hands to the driver as the function: the
    /// kernel's function there once known, else the kernel handle (see `library::function`).
    #[inline]
    pub(crate) fn launch_function(&self, current: &Current) -> CUfunction {
        // SAFETY: `self` keeps its library loaded while the state lives (a `Kernel` holds the
        // library, or, from `from_raw`, its caller promised it stays loaded), and `current` is
        // the calling thread's current context.
        unsafe { self.inner.functions.for_launch(self.inner.raw, current) }
    }

    /// The handle as the `const void*` "function" the runtime's `cudaLaunchKernel` and
    /// `cudaFuncGetAttributes` accept for a kernel handle.
    pub fn as_function_ptr(&self) -> *const c_void {
        self.inner.raw.cast_const().cast()
    }

    /// The library this kernel came from; `None` for [`Kernel::from_raw`].
    pub fn library(&self) -> Option<&Library> {
        self.library.as_ref()
    }

    /// The kernel's name (`cuKernelGetName`), mangled if it lacks C linkage.
    pub fn name(&self) -> Result<&str> {
        let name = self.inner.name.get_or_fetch(|| {
            let driver = initialized_driver()?;
            // SAFETY: `self` keeps the kernel's library loaded, so the handle is alive and the
            // name the driver owns stays valid while it is copied here.
            unsafe {
                let name = api::kernel_name(driver, self.inner.raw)?;
                Ok(static_c_str(name).unwrap_or_default())
            }
        })?;
        Ok(name)
    }

    /// The address of the last program-long argument description found to match the kernel's
    /// parameters, which the launch reads and sets.
    pub(crate) fn matched_args(&self) -> &AtomicPtr<c_void> {
        &self.inner.matched_args
    }

    /// The kernel's name for messages, even when it cannot be read.
    pub(crate) fn display_name(&self) -> String {
        self.name()
            .map_or_else(|_| format!("{:p}", self.inner.raw), str::to_owned)
    }

    /// The parameter layout (`cuKernelGetParamInfo`): offset and size of every parameter, in
    /// order. Read from the driver once per kernel handle; with a driver older than 12.4, which
    /// lacks that query, read offline from the device code the library was loaded from. A
    /// failure is not kept: the next call asks again.
    #[inline]
    pub fn params(&self) -> Result<&[ParamLayout]> {
        Ok(&self.plan()?.layouts)
    }

    /// The parameters' layout and types, fetched once.
    #[inline]
    pub(crate) fn plan(&self) -> Result<&ParamPlan> {
        self.inner.params.get_or_fetch(|| {
            let layouts = self.query_params()?;
            Ok(ParamPlan::new(layouts, self.query_types()))
        })
    }

    fn query_params(&self) -> Result<Box<[ParamLayout]>> {
        let driver = context::current()?.driver;
        if driver.api.cuKernelGetParamInfo.is_none() {
            let missing = || Api::missing(driver, "cuKernelGetParamInfo");
            let (Some(library), Ok(name)) = (self.library(), self.name()) else {
                return Err(missing());
            };
            return library
                .offline_params(name)
                .unwrap_or_else(|| Err(missing()));
        }
        let mut params = Vec::new();
        for index in 0..MAX_PARAMS {
            // SAFETY: `self` keeps the kernel's library loaded; an index past the last parameter
            // is an error status.
            match unsafe { api::kernel_param_info(driver, self.inner.raw, index) } {
                Ok((offset, size)) => params.push(ParamLayout { offset, size }),
                Err(error)
                    if error.cuda_code() == Some(driver::CUDA_ERROR_INVALID_VALUE as i32) =>
                {
                    break
                }
                Err(error) => return Err(self.with_library_log(error)),
            }
        }
        Ok(params.into_boxed_slice())
    }

    /// An attribute of the kernel on `device` (`cuKernelGetAttribute`), asked with that device's
    /// primary context current, whatever the calling thread's current device is.
    pub fn attribute(&self, attribute: KernelAttribute, device: Device) -> Result<i32> {
        // The kernel is loaded into the device's context to answer: that context must exist.
        context::in_device(device, |driver| {
            // SAFETY: `self` keeps the kernel's library loaded; the device handle came from the
            // driver.
            unsafe {
                api::kernel_attribute(driver, attribute.as_raw(), self.inner.raw, device.as_raw())
            }
        })
        .map_err(|error| self.with_library_log(error))
    }

    /// Sets an attribute of the kernel on `device` (`cuKernelSetAttribute`), e.g.
    /// [`KernelAttribute::MaxDynamicSharedSizeBytes`] before a launch with more than 48 KiB of
    /// dynamic shared memory. Each device keeps its own values: setting one on device 1 leaves
    /// device 0's as it was.
    pub fn set_attribute(
        &self,
        attribute: KernelAttribute,
        value: i32,
        device: Device,
    ) -> Result<()> {
        context::in_device(device, |driver| {
            // SAFETY: `self` keeps the kernel's library loaded; the device handle came from the
            // driver; a bad attribute or value is an error status.
            unsafe {
                api::kernel_set_attribute(
                    driver,
                    attribute.as_raw(),
                    value,
                    self.inner.raw,
                    device.as_raw(),
                )
            }
        })
        .map_err(|error| self.with_library_log(error))
    }

    /// How many blocks of `block_threads` threads, each with `shared_mem_bytes` of dynamic shared
    /// memory, can be resident at once on one multiprocessor of the current device
    /// (`cuOccupancyMaxActiveBlocksPerMultiprocessor`). The kernel's registers and static shared
    /// memory count as well; 0 when not even one such block fits.
    pub fn max_active_blocks_per_multiprocessor(
        &self,
        block_threads: u32,
        shared_mem_bytes: u32,
    ) -> Result<u32> {
        self.active_blocks_per_multiprocessor(&context::current()?, block_threads, shared_mem_bytes)
    }

    /// The most blocks a cooperative launch ([`LaunchConfig::cooperative`]) of this kernel may
    /// have on the current device with blocks of `block_threads` threads and `shared_mem_bytes`
    /// of dynamic shared memory: [`Kernel::max_active_blocks_per_multiprocessor`] times the
    /// device's multiprocessors. A grid of this size fills the device, every block resident at
    /// once, which a grid-wide synchronization (`cooperative_groups::this_grid().sync()`) needs;
    /// a cooperative launch of more blocks is refused before the driver
    /// ([`ConfigViolation::CooperativeGridTooLarge`]). 0 when not even one block fits: use
    /// fewer threads or less shared memory per block.
    ///
    /// ```no_run
    /// use cudyn::{Library, LaunchConfig};
    /// let kernel = Library::from_file("grid_sum.cubin")?.kernel("grid_sum")?;
    /// let block = 256;
    /// let grid = kernel.max_cooperative_grid(block, 0)?;
    /// let config = LaunchConfig::new(grid, block).cooperative(true);
    /// # Ok::<(), cudyn::Error>(())
    /// ```
    ///
    /// [`LaunchConfig::cooperative`]: crate::LaunchConfig::cooperative
    /// [`ConfigViolation::CooperativeGridTooLarge`]: crate::ConfigViolation::CooperativeGridTooLarge
    pub fn max_cooperative_grid(&self, block_threads: u32, shared_mem_bytes: u32) -> Result<u32> {
        let current = context::current()?;
        let per_multiprocessor =
            self.active_blocks_per_multiprocessor(&current, block_threads, shared_mem_bytes)?;
        let blocks = u64::from(per_multiprocessor) * u64::from(current.limits.multiprocessors);
        Ok(u32::try_from(blocks).unwrap_or(u32::MAX))
    }

    /// [`Kernel::max_active_blocks_per_multiprocessor`] in the context `current`.
    pub(crate) fn active_blocks_per_multiprocessor(
        &self,
        current: &Current,
        block_threads: u32,
        shared_mem_bytes: u32,
    ) -> Result<u32> {
        // Beyond i32::MAX threads no block fits; the driver says so for i32::MAX too.
        let block_threads = i32::try_from(block_threads).unwrap_or(i32::MAX);
        // SAFETY: `self` keeps the kernel's library loaded, and the driver accepts a kernel
        // handle as the function, computing for the current context, which `current` made
        // current on this thread.
        let blocks = unsafe {
            api::occupancy_max_active_blocks(
                current.driver,
                self.as_function(),
                block_threads,
                shared_mem_bytes as usize,
            )
        }
        .map_err(|error| self.with_library_log(error))?;
        Ok(blocks.max(0) as u32)
    }

    /// `error` with the JIT logs of the kernel's library attached.
    pub(crate) fn with_library_log(&self, error: crate::Error) -> crate::Error {
        match &self.library {
            Some(library) => library.jit_log().attach(error),
            None => error,
        }
    }
}

/// A function that takes the handle of one kernel inside the code that registered it (calling
/// `cudaGetKernel` with that code's CUDA runtime instance): `cudaError_t get(cudaKernel_t *out)`.
/// See [`Kernel::from_getter`].
pub type KernelGetter = unsafe extern "C" fn(*mut cudaKernel_t) -> cudaError_t;

/// The statuses with which `cudaGetKernel` says it knows no kernel for an address: the documented
/// `cudaErrorInvalidDeviceFunction`, and the two other "no such thing" statuses of the runtime.
const NOT_REGISTERED: [runtime::cudaError_t; 3] = [
    runtime::cudaErrorInvalidDeviceFunction,
    runtime::cudaErrorInvalidValue,
    runtime::cudaErrorSymbolNotFound,
];

/// [`crate::Error::KernelNotRegistered`] for a `cudaGetKernel` of `entry` that failed with a status
/// of [`NOT_REGISTERED`] in the runtime opened from `runtime`; any other error as it is.
fn not_registered(error: crate::Error, entry: *const c_void, runtime: &Path) -> crate::Error {
    match error {
        crate::Error::Cuda(call) if NOT_REGISTERED.iter().any(|&code| call.code == code as i32) => {
            crate::Error::KernelNotRegistered {
                entry: entry as usize,
                runtime: runtime.to_path_buf(),
                call,
            }
        }
        other => other,
    }
}

/// The error for a kernel getter of kernel `name` that returned `status`, named and described by
/// the runtime cudyn uses (every runtime instance of one major version numbers its errors alike).
/// A runtime without a driver only says `cudaErrorInsufficientDriver`: cudyn's own search for the
/// driver then says where it was looked for.
fn getter_failed(name: &str, status: runtime::cudaError_t) -> crate::Error {
    if status == runtime::cudaErrorInsufficientDriver {
        if let Err(no_driver) = initialized_driver() {
            return no_driver;
        }
    }
    let call = match crate::sys::runtime() {
        Ok(runtime) => runtime.api.error("cudaGetKernel", status),
        Err(_) => crate::error::CallError {
            api: crate::Component::Runtime,
            call: "cudaGetKernel",
            code: status as i32,
            name: format!("cudaError {status}"),
            message: "no CUDA runtime was found to describe this status".to_owned(),
            log: None,
            hint: None,
        },
    };
    crate::Error::LinkedKernel {
        name: name.to_owned(),
        call: Box::new(call),
    }
}

/// The parameter layout of `kernel` read offline from device code (a cubin's `.nv.info`, or PTX):
/// what [`Kernel::params`] uses when the driver cannot be asked.
pub(crate) fn params_from_image(image: &[u8], kernel: &str) -> Result<Box<[ParamLayout]>> {
    Ok(Image::new(image)?.param_layout(kernel)?.into_boxed_slice())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::{Arch, Output, Program};
    use crate::error::Error;

    const SAXPY: &str = r#"
        extern "C" __global__ void saxpy(float a, const float *x, const float *y, float *out,
                                         size_t n) {
            size_t i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) out[i] = a * x[i] + y[i];
        }"#;

    #[test]
    fn a_failed_fetch_is_not_kept_and_the_next_use_tries_again() {
        let cache = SuccessCache::new();
        let fetches = std::cell::Cell::new(0);
        let fetch = |outcome: Result<u32>| {
            fetches.set(fetches.get() + 1);
            outcome
        };
        let failure = cache.get_or_fetch(|| {
            fetch(Err(Error::SearchPathFrozen {
                opened: crate::Component::Driver,
            }))
        });
        assert!(matches!(failure, Err(Error::SearchPathFrozen { .. })));
        assert_eq!(cache.get_or_fetch(|| fetch(Ok(7))).ok(), Some(&7));
        // Kept now: a later failure of the source is not even asked about.
        assert_eq!(
            cache
                .get_or_fetch(|| fetch(Err(Error::SearchPathFrozen {
                    opened: crate::Component::Driver,
                })))
                .ok(),
            Some(&7)
        );
        assert_eq!(fetches.get(), 2);
        assert_eq!(
            SuccessCache::with(3).get_or_fetch(|| fetch(Ok(4))).ok(),
            Some(&3)
        );
        assert_eq!(fetches.get(), 2);
    }

    /// A getter as a library built with `-cudart static` compiled for another GPU answers.
    unsafe extern "C" fn getter_without_image(
        _: *mut runtime::cudaKernel_t,
    ) -> runtime::cudaError_t {
        209
    }

    /// A stand-in handle: the test only checks that the getter's handle is the kernel's.
    const FAKE_HANDLE: usize = 0x5eed_0000;

    unsafe extern "C" fn getter_with_handle(
        out: *mut runtime::cudaKernel_t,
    ) -> runtime::cudaError_t {
        // SAFETY: Kernel::from_getter passes one writable handle slot.
        unsafe { *out = FAKE_HANDLE as runtime::cudaKernel_t };
        runtime::cudaSuccess
    }

    #[test]
    fn a_failing_getter_is_an_error_naming_the_kernel_the_status_and_the_fix() {
        // SAFETY: the getter writes nothing and returns an error status.
        let error = unsafe { Kernel::from_getter("vectorAdd", getter_without_image) }.unwrap_err();
        assert!(
            matches!(&error, Error::LinkedKernel { name, call }
                if name == "vectorAdd" && call.call == "cudaGetKernel" && call.code == 209),
            "{error:?}"
        );
        assert_eq!(error.cuda_code(), Some(209));
        let message = error.to_string();
        for needle in [
            "linked kernel `vectorAdd`",
            "for this GPU's architecture",
            // Named by the runtime of the CUDA wheels.
            "cudaErrorNoKernelImageForDevice",
        ] {
            assert!(message.contains(needle), "`{needle}` missing in: {message}");
        }
    }

    unsafe extern "C" fn getter_without_driver(
        _: *mut runtime::cudaKernel_t,
    ) -> runtime::cudaError_t {
        runtime::cudaErrorInsufficientDriver
    }

    #[test]
    fn a_getter_without_a_driver_says_where_the_driver_was_looked_for() {
        // SAFETY: the getter writes nothing and returns an error status.
        let error = unsafe { Kernel::from_getter("vectorAdd", getter_without_driver) }.unwrap_err();
        match initialized_driver() {
            Err(no_driver) => {
                assert_eq!(error.to_string(), no_driver.to_string());
                assert!(
                    matches!(
                        &error,
                        Error::LibraryNotFound {
                            component: crate::Component::Driver,
                            ..
                        } | Error::LibraryOpen {
                            component: crate::Component::Driver,
                            ..
                        } | Error::Cuda(_)
                    ),
                    "{error:?}"
                );
            }
            // With a working driver the getter's status is reported as it is.
            Ok(_) => assert!(
                matches!(&error, Error::LinkedKernel { call, .. } if call.code == 35),
                "{error:?}"
            ),
        }
    }

    #[test]
    fn a_getter_s_handle_is_borrowed_not_owned() {
        // SAFETY: the getter writes one handle; the kernel is only compared, never used.
        let kernel = unsafe { Kernel::from_getter("vectorAdd", getter_with_handle) }.unwrap();
        assert_eq!(kernel.as_raw() as usize, FAKE_HANDLE);
        assert_eq!(kernel.as_runtime_raw() as usize, FAKE_HANDLE);
        assert!(kernel.library().is_none());
    }

    fn failed_get_kernel(code: u32) -> Error {
        Error::Cuda(Box::new(crate::error::CallError {
            api: crate::Component::Runtime,
            call: "cudaGetKernel",
            code: code as i32,
            name: "cudaErrorInvalidDeviceFunction".to_owned(),
            message: "invalid device function".to_owned(),
            log: None,
            hint: None,
        }))
    }

    #[test]
    fn an_unknown_host_function_says_which_runtime_was_asked_and_what_to_do() {
        let runtime = Path::new("/opt/cuda/lib64/libcudart.so.13");
        let entry = 0x1234 as *const c_void;
        let error = not_registered(
            failed_get_kernel(runtime::cudaErrorInvalidDeviceFunction),
            entry,
            runtime,
        );
        assert!(
            matches!(&error, Error::KernelNotRegistered { entry: 0x1234, runtime: path, .. }
                if path == runtime),
            "{error:?}"
        );
        assert_eq!(error.cuda_code(), Some(98));
        let message = error.to_string();
        for needle in [
            "no kernel is registered for the host function at 0x1234",
            "/opt/cuda/lib64/libcudart.so.13",
            "Kernel::from_getter",
            "-cudart shared",
            "cudaErrorInvalidDeviceFunction",
        ] {
            assert!(message.contains(needle), "`{needle}` missing in: {message}");
        }
        // Any other failure (no device, an old driver) is not blamed on the registration.
        let other = not_registered(failed_get_kernel(100), entry, runtime);
        assert!(
            matches!(&other, Error::Cuda(call) if call.code == 100),
            "{other:?}"
        );
    }

    #[test]
    fn offline_layouts_follow_the_c_abi_of_the_signature() {
        // float at 0; three pointers and a size_t, 8-byte aligned, at 8, 16, 24 and 32.
        let expected = [(0, 4), (8, 8), (16, 8), (24, 8), (32, 8)];
        for output in [Output::Cubin, Output::Ptx] {
            let compiled = Program::new(SAXPY)
                .arch(Arch::new(9, 0))
                .output(output)
                .compile()
                .expect("NVRTC compiles (run scripts/cuda-wheels and activate its venv)");
            let params = params_from_image(compiled.code(), "saxpy").unwrap();
            let layout: Vec<(usize, usize)> = params.iter().map(|p| (p.offset, p.size)).collect();
            assert_eq!(layout, expected, "{output:?}");
        }
        assert!(params_from_image(b"garbage", "saxpy").is_err());
    }
}
