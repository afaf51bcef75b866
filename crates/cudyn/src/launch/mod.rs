//! Launching a [`Kernel`]: the configuration, typed arguments, the checks made before anything
//! reaches the driver, and the contract a caller keeps to launch soundly.
//!
//! # What cudyn checks
//!
//! [`Kernel::launch`] takes the arguments as a tuple of up to 32 typed values (numbers and
//! [`DeviceRepr`] structs by value, device buffers and views by reference) or, for any count,
//! an [`ArgList`] (built with [`args!`](crate::args), collected from an iterator, or with
//! [`ArgList::push`] and [`ArgList::extend`]). Arguments describe themselves as [`ParamLayout`]s,
//! the C layout of their values, and as [`ArgType`]s, the C type they mean (`i32` is `int`,
//! `&DeviceBuffer<f32>` is `const float*`), and the launch compares them with the kernel's real
//! parameters (from `cuKernelGetParamInfo`, or read offline from the device code): the count,
//! the size and offset of every parameter, and its C type where the device code says it
//! ([`Kernel::param_types`]: every type of a C++ kernel, from its mangled name; a width and float
//! or integer from PTX; nothing but sizes for an `extern "C"` kernel from a cubin). A type
//! mismatch names both types ("parameter 3 is `int` but an `f32` was given"); signed for
//! unsigned is refused unless wrapped in [`Reinterpret`]. [`Kernel::check`] runs every check
//! and launches nothing. The configuration is
//! checked against the device's limits, and a cooperative launch's grid against the blocks the
//! device holds at once for this kernel (its occupancy, asked of the driver for cooperative
//! launches only). A mismatch is an [`Error::LaunchArguments`] or
//! [`Error::LaunchConfig`] naming what differs, and nothing reaches the driver, instead of a
//! corrupted launch or the driver's bare "invalid argument".
//!
//! The launch path allocates nothing up to [`INLINE_ARGS`] arguments: the kernel's layout and
//! the device limits are cached after the first launch, a tuple's layout is computed at compile
//! time (and once found equal to a kernel's layout, recognized by its address afterwards), and
//! the argument pointers are packed on the stack. The type check costs nothing per launch of a
//! tuple: a tuple's types are a constant of its type, checked once per kernel and recognized
//! afterwards with its layout. Besides the launch, the only driver call of a
//! launch is `cuCtxGetId`, since another context may have been made current since the last
//! one. Launches go to the driver's `cuLaunchKernel` (the runtime's `cudaLaunchKernel` ends
//! there too), or `cuLaunchKernelEx` for clusters and cooperative launches, with the kernel's
//! function in the current context, asked of the driver once per context, which spares the
//! driver finding it from the kernel handle on every launch.
//!
//! # The launch-safety contract
//!
//! A launch runs device code that cudyn cannot see. That code may write through any address it
//! is given, whatever Rust type carried the address there (a `&DeviceBuffer`, or a `u64` where
//! the kernel expects a pointer), and it keeps running after the launch call returns. The checks
//! above prove that the bytes given have the shape of the kernel's parameters; they cannot prove
//! what the kernel does with them. So launching is `unsafe`, as it is in cudarc: [`Kernel::launch`]
//! and [`Kernel::launch_unchecked`] are where the caller takes responsibility for device code,
//! and no safe function of cudyn lets device code touch memory that Rust considers borrowed or
//! freed, provided every launch kept this contract. For each launch, the caller guarantees:
//!
//! 1. **Types, not just sizes.** Each argument has its parameter's type on the device: a pointer
//!    parameter receives the address of live device memory of the pointee type (a buffer or a
//!    view, not an integer that happens to be 8 bytes), a struct parameter a [`DeviceRepr`] type
//!    with the device struct's layout. cudyn checks this where the kernel's types are known and
//!    the argument says its meaning; the rest (an `extern "C"` kernel from a cubin, a struct
//!    without a `c_name`, a [`Reinterpret`]ed value) is the caller's to keep.
//! 2. **In bounds.** Every access the kernel makes, with these arguments and this configuration,
//!    lies inside the buffer or view it was given: the counts and indices passed alongside the
//!    buffers agree with their lengths, and dynamic shared memory use stays within
//!    [`LaunchConfig::shared_mem_bytes`].
//! 3. **Writes only where lent mutably.** The kernel writes only through arguments passed as
//!    `&mut DeviceBuffer` or [`DeviceSliceMut`] (or through raw addresses of memory the caller
//!    owns exclusively); buffers passed as `&DeviceBuffer` or [`DeviceSlice`] are only read. This
//!    keeps Rust's borrow rules true of device memory: no code can see a value it holds shared
//!    change under it.
//! 4. **Alive and unshared until it completes.** A launch is asynchronous: Rust's borrows of the
//!    arguments end when the call returns, the kernel's use of them ends when it completes on
//!    its stream. Until then, no memory the kernel uses is freed or reused (a [`DeviceBuffer`]
//!    dropped, a library unloaded), and nothing else (host code, a copy, a kernel on another
//!    stream) writes memory the kernel reads, or touches memory it writes, unless that work is
//!    ordered after the kernel: on the same stream, after an event the kernel's stream recorded,
//!    or after a synchronization ([`crate::synchronize`], [`Stream::synchronize`]).
//! 5. **No host memory behind Rust's back.** The kernel reaches host memory (mapped, managed or
//!    registered) only under the same rules: never memory that Rust code borrows or has freed.
//!
//! [`Kernel::launch_unchecked`] adds the checks' part to the contract: the pointers match the
//! parameters in count and size.
//!
//! Why here and not at one safe entry point: the conditions depend on the argument values of
//! each launch (is `n` within the buffer?) and on what the caller does until the kernel
//! completes, which no earlier point, such as loading a library or finding a kernel, can
//! vouch for. The way to offer a safe API over a kernel is a safe function per kernel that
//! establishes the contract itself (checks the lengths, borrows the buffers, synchronizes or
//! ties the work to a stream it owns) and calls `launch` inside one `unsafe` block.

mod args;
mod check;
mod config;

use std::ffi::c_void;
use std::sync::atomic::Ordering;

pub use args::{ArgList, KernelArg, KernelArgs, ListArg, Reinterpret, StaticArgs, INLINE_ARGS};
pub use check::{check_arguments, check_types, ArgumentMismatch};
use config::within_limits;
pub use config::{check_config, check_cooperative_grid, ConfigViolation, Dim3, LaunchConfig};

use crate::api::driver as api;
use crate::context::{self, Current};
use crate::ctype::ArgType;
use crate::error::{Error, Result};
use crate::library::kernel::{Kernel, KernelAttribute};
use crate::library::plan::ParamPlan;
#[cfg(doc)]
use crate::memory::{DeviceBuffer, DeviceRepr, DeviceSlice, DeviceSliceMut};
use crate::param::ParamLayout;
use crate::stream::Stream;
use crate::sys::driver;

impl Kernel {
    /// Launches the kernel with `args` after checking them against its parameter layout and
    /// `config` against the current device's limits; nothing reaches the driver if a check
    /// fails.
    ///
    /// `args` is a tuple of up to 32 [`KernelArg`]s, `()` for none, or an [`ArgList`] of any
    /// length (see [`args!`](crate::args)).
    ///
    /// ```no_run
    /// use cudyn::{DeviceBuffer, LaunchConfig, Library};
    /// let saxpy = Library::from_file("saxpy.cubin")?.kernel("saxpy")?;
    /// let n = 1 << 20;
    /// let x = DeviceBuffer::from_slice(&vec![1.0f32; n])?;
    /// let mut y = DeviceBuffer::<f32>::zeroed(n)?;
    /// // extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned long long n)
    /// // SAFETY: saxpy reads x[i] and writes y[i] for i < n, and both buffers hold n floats;
    /// // y is read back below by a copy on the legacy default stream, ordered after the kernel,
    /// // and both buffers outlive it.
    /// let config = LaunchConfig::for_elements(n, 256);
    /// unsafe { saxpy.launch(&config, (2.0f32, &x, &mut y, n as u64)) }?;
    /// let y = y.to_vec()?;
    /// # Ok::<(), cudyn::Error>(())
    /// ```
    ///
    /// # Safety
    /// The launch-safety contract of [`crate::launch`]: with these arguments and this
    /// configuration, the kernel receives each argument as its parameter's type, accesses
    /// memory only inside the buffers and views it is given, writes only through those lent
    /// mutably (`&mut DeviceBuffer`, [`DeviceSliceMut`]), and until it completes no memory it
    /// uses is freed and no other work races with it on that memory.
    #[inline]
    pub unsafe fn launch<A: KernelArgs>(&self, config: &LaunchConfig<'_>, args: A) -> Result<()> {
        let known = args.static_args();
        args.with_pointers(|pointers| {
            // SAFETY: `KernelArgs` gives one pointer per layout, each to the argument's value,
            // alive for this call, and `static_args` holds the same layouts and types; the
            // caller keeps the launch-safety contract.
            unsafe {
                match known {
                    Some(known) => self.launch_known(config, known, pointers),
                    None => self.launch_listed(config, args.layouts(), args.types(), pointers),
                }
            }
        })
    }

    /// Runs every check a launch of `args` with `config` makes, on the current device, and
    /// launches nothing: the arguments against the kernel's parameters (count, sizes, offsets,
    /// and C types where they are known) and the configuration against the device's and the
    /// kernel's limits. `Ok` when [`Kernel::launch`] would reach the driver.
    ///
    /// ```no_run
    /// use cudyn::{DeviceBuffer, Error, LaunchConfig, Library};
    /// // __global__ void scale(float* data, float factor, int n)
    /// let scale = Library::from_file("scale.cubin")?.kernel("scale(float*, float, int)")?;
    /// let mut data = DeviceBuffer::<f32>::zeroed(256)?;
    /// let config = LaunchConfig::new(1, 256);
    /// // An f32 where the kernel takes an int is refused, naming both types.
    /// let refused = scale.check(&config, &(&mut data, 2.0f32, 256.0f32)).unwrap_err();
    /// assert_eq!(refused.kind(), cudyn::ErrorKind::LaunchArguments);
    /// scale.check(&config, &(&mut data, 2.0f32, 256i32))?;
    /// # Ok::<(), cudyn::Error>(())
    /// ```
    pub fn check<A: KernelArgs>(&self, config: &LaunchConfig<'_>, args: &A) -> Result<()> {
        let plan = self.plan()?;
        self.compare(plan, args.layouts(), args.types())?;
        let current = context::current()?;
        self.check_config(config, &current)
    }

    /// The work of [`Kernel::launch`] for arguments described at compile time (a tuple), once
    /// for every type: the argument check, which a description found to match before passes by
    /// its address alone (the kernel's parameters and a constant never change, so neither is
    /// read again), then the rest of the launch.
    ///
    /// # Safety
    /// `pointers` holds one pointer per entry of `known.layouts`, pointer `i` to
    /// `known.layouts[i].size` bytes of argument `i`'s value, valid for the call; the
    /// launch-safety contract of [`crate::launch`] holds.
    unsafe fn launch_known(
        &self,
        config: &LaunchConfig<'_>,
        known: &'static StaticArgs,
        pointers: *mut *mut c_void,
    ) -> Result<()> {
        let address = std::ptr::from_ref(known).cast_mut().cast();
        if self.matched_args().load(Ordering::Relaxed) != address {
            self.check_first_time(known)?;
        }
        // SAFETY: the arguments match the kernel's parameters (checked above); the caller's
        // contract for the rest.
        unsafe { self.launch_after_check(config, pointers) }
    }

    /// The argument check of a compile-time description not yet seen to match: the whole
    /// comparison, and the description remembered when it passes.
    #[cold]
    #[inline(never)]
    fn check_first_time(&self, known: &'static StaticArgs) -> Result<()> {
        let plan = self.plan()?;
        self.compare(plan, known.layouts, known.types)?;
        let address = std::ptr::from_ref(known).cast_mut().cast();
        self.matched_args().store(address, Ordering::Relaxed);
        Ok(())
    }

    /// The work of [`Kernel::launch`] for arguments listed at run time (an [`ArgList`]): the
    /// whole argument check, then the rest of the launch.
    ///
    /// # Safety
    /// As [`Kernel::launch_known`], for `layouts`.
    unsafe fn launch_listed(
        &self,
        config: &LaunchConfig<'_>,
        layouts: &[ParamLayout],
        types: &[&'static ArgType],
        pointers: *mut *mut c_void,
    ) -> Result<()> {
        let plan = self.plan()?;
        self.compare(plan, layouts, types)?;
        // SAFETY: as in `launch_known`.
        unsafe { self.launch_after_check(config, pointers) }
    }

    /// The configuration check and the launch, after the arguments passed theirs.
    ///
    /// # Safety
    /// The arguments behind `pointers` match the kernel's parameters; the launch-safety contract
    /// of [`crate::launch`] holds.
    #[inline]
    unsafe fn launch_after_check(
        &self,
        config: &LaunchConfig<'_>,
        pointers: *mut *mut c_void,
    ) -> Result<()> {
        let current = context::current()?;
        self.check_config(config, &current)?;
        // SAFETY: the caller's contract.
        unsafe { self.launch_on(&current, config, pointers) }
    }

    /// Launches the kernel with no check at all: the escape hatch for arguments cudyn cannot
    /// describe, such as a parameter buffer built by other code.
    ///
    /// # Safety
    /// `params` points to one pointer per kernel parameter, each to a value of exactly the
    /// parameter's size, valid for the call; `config` is within the device's limits; and the
    /// launch-safety contract of [`crate::launch`] holds, as for [`Kernel::launch`].
    #[inline]
    pub unsafe fn launch_unchecked(
        &self,
        config: &LaunchConfig<'_>,
        params: *mut *mut c_void,
    ) -> Result<()> {
        let current = context::current()?;
        // SAFETY: the caller's contract.
        unsafe { self.launch_on(&current, config, params) }
    }

    /// The comparison of arguments with the plan: sizes and offsets, then, when the kernel's
    /// types are known, types.
    #[inline]
    fn compare(
        &self,
        plan: &ParamPlan,
        layouts: &[ParamLayout],
        types: &[&'static ArgType],
    ) -> Result<()> {
        let checked = check_arguments(&plan.layouts, layouts).and_then(|()| {
            if plan.typed {
                check_types(&plan.types, types)
            } else {
                Ok(())
            }
        });
        checked.map_err(|mismatch| self.arguments_error(mismatch))
    }

    #[cold]
    #[inline(never)]
    fn arguments_error(&self, mismatch: ArgumentMismatch) -> Error {
        Error::LaunchArguments {
            kernel: self.display_name(),
            mismatch,
        }
    }

    /// The configuration check of every launch: the common launch (within the device's limits,
    /// no more shared memory than a block gets without opting in, not cooperative) is decided
    /// by one test; anything else is checked in full out of line.
    #[inline]
    fn check_config(&self, config: &LaunchConfig<'_>, current: &Current) -> Result<()> {
        let limits = current.limits;
        if within_limits(config, limits)
            & (config.shared_mem_bytes <= limits.max_shared_per_block)
            & !config.cooperative
        {
            return Ok(());
        }
        self.check_config_in_full(config, current)
    }

    #[cold]
    #[inline(never)]
    fn check_config_in_full(&self, config: &LaunchConfig<'_>, current: &Current) -> Result<()> {
        let violation = match check_config(config, current.limits) {
            Err(violation) => Some(violation),
            Ok(()) => self.violation_per_kernel(config, current)?,
        };
        match violation {
            Some(violation) => Err(Error::LaunchConfig {
                kernel: self.display_name(),
                violation,
            }),
            None => Ok(()),
        }
    }

    /// The limits of this kernel that only the driver knows, each asked only of the launches it
    /// concerns: above the default shared memory limit the kernel must have been opted in, and
    /// a cooperative grid must fit on the device at once (the occupancy for this block and
    /// shared memory, times the multiprocessors), which the driver would otherwise refuse with
    /// a bare `CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE`.
    #[cold]
    fn violation_per_kernel(
        &self,
        config: &LaunchConfig<'_>,
        current: &Current,
    ) -> Result<Option<ConfigViolation>> {
        if config.shared_mem_bytes > current.limits.max_shared_per_block {
            let allowed =
                self.attribute(KernelAttribute::MaxDynamicSharedSizeBytes, current.device)?;
            let allowed = allowed.max(0) as u32;
            if config.shared_mem_bytes > allowed {
                return Ok(Some(ConfigViolation::SharedMemoryNotOptedIn {
                    given: config.shared_mem_bytes,
                    allowed,
                }));
            }
        }
        if config.cooperative {
            // The block has at most the device's threads per block: check_config passed.
            let block_threads = config.block.volume() as u32;
            let per_multiprocessor = self.active_blocks_per_multiprocessor(
                current,
                block_threads,
                config.shared_mem_bytes,
            )?;
            let fits = check_cooperative_grid(
                config.grid,
                per_multiprocessor,
                current.limits.multiprocessors,
            );
            return Ok(fits.err());
        }
        Ok(None)
    }

    /// # Safety
    /// As [`Kernel::launch_unchecked`]; a context is current (`current`).
    #[inline]
    unsafe fn launch_on(
        &self,
        current: &Current,
        config: &LaunchConfig<'_>,
        params: *mut *mut c_void,
    ) -> Result<()> {
        if config.cluster.is_some() | config.cooperative {
            // SAFETY: the caller's contract.
            return unsafe { self.launch_with_attributes(current, config, params) };
        }
        let (grid, block) = (config.grid, config.block);
        let shape = api::LaunchShape {
            grid: [grid.x, grid.y, grid.z],
            block: [block.x, block.y, block.z],
            shared_mem_bytes: config.shared_mem_bytes,
        };
        let stream = config.stream.map_or(std::ptr::null_mut(), Stream::as_raw);
        let function = self.launch_function(current);
        // SAFETY: `function` is the kernel's function in the current context, or the kernel
        // handle, which cuLaunchKernel accepts as its function; the stream is borrowed by
        // `config`; the caller vouches for `params`.
        let status = unsafe { api::launch_kernel(current.driver, function, shape, stream, params) };
        match status {
            Ok(()) => Ok(()),
            Err(error) => Err(self.explain_launch_failure(error, config, current)),
        }
    }

    /// A launch with clusters or a cooperative one: `cuLaunchKernelEx` with its attributes.
    ///
    /// # Safety
    /// As [`Kernel::launch_on`].
    #[cold]
    #[inline(never)]
    unsafe fn launch_with_attributes(
        &self,
        current: &Current,
        config: &LaunchConfig<'_>,
        params: *mut *mut c_void,
    ) -> Result<()> {
        let driver = current.driver;
        let (grid, block) = (config.grid, config.block);
        let mut attributes = [driver::CUlaunchAttribute::default(); 2];
        let mut count = 0;
        if let Some(cluster) = config.cluster {
            attributes[count].id = driver::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
            attributes[count].value.clusterDim =
                driver::CUlaunchAttributeValue_union__bindgen_ty_1 {
                    x: cluster.x,
                    y: cluster.y,
                    z: cluster.z,
                };
            count += 1;
        }
        if config.cooperative {
            attributes[count].id = driver::CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
            attributes[count].value.cooperative = 1;
            count += 1;
        }
        let launch = driver::CUlaunchConfig {
            gridDimX: grid.x,
            gridDimY: grid.y,
            gridDimZ: grid.z,
            blockDimX: block.x,
            blockDimY: block.y,
            blockDimZ: block.z,
            sharedMemBytes: config.shared_mem_bytes,
            hStream: config.stream.map_or(std::ptr::null_mut(), Stream::as_raw),
            attrs: attributes.as_mut_ptr(),
            numAttrs: count as u32,
        };
        let function = self.launch_function(current);
        // SAFETY: `launch` and its `count` attributes live until the call returns; `function`
        // is the kernel's function in the current context or the kernel handle, which the
        // driver accepts as a CUfunction; the caller vouches for `params`.
        unsafe { api::launch_kernel_ex(driver, &launch, function, params) }
            .map_err(|error| self.explain_launch_failure(error, config, current))
    }

    /// A launch the driver refused for its resources gets the kernel's own limit, when the block
    /// exceeds it; otherwise the driver's error, with the library's JIT logs.
    #[cold]
    #[inline(never)]
    fn explain_launch_failure(
        &self,
        error: Error,
        config: &LaunchConfig<'_>,
        current: &Current,
    ) -> Error {
        let resources = [
            driver::CUDA_ERROR_INVALID_VALUE,
            driver::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
        ];
        if resources
            .iter()
            .any(|&code| error.cuda_code() == Some(code as i32))
        {
            let threads = config.block.volume();
            if let Ok(max) = self.attribute(KernelAttribute::MaxThreadsPerBlock, current.device) {
                if threads > u64::from(max.max(0) as u32) {
                    return Error::LaunchConfig {
                        kernel: self.display_name(),
                        violation: ConfigViolation::BlockTooLargeForKernel {
                            threads,
                            max: max.max(0) as u32,
                        },
                    };
                }
            }
        }
        self.with_library_log(error)
    }
}
