//! Launching a [`Kernel`]: the configuration, typed arguments, and the checks made before
//! anything reaches the driver.
//!
//! [`Kernel::launch`] takes the arguments as a tuple of typed values — numbers and
//! [`DeviceRepr`] structs by value, device buffers and views by reference — and checks them
//! against the kernel's real parameter layout (count, and size and offset of every parameter,
//! from `cuKernelGetParamInfo`), and the configuration against the device's limits. A mismatch is
//! an [`Error::LaunchArguments`] or [`Error::LaunchConfig`] naming what differs, instead of a
//! corrupted launch or the driver's bare "invalid argument".
//!
//! The launch path allocates nothing: the layout and the device limits are cached after the
//! first launch, and the argument pointers are packed into an array on the stack. Launches go to
//! the driver's `cuLaunchKernel` on the kernel handle (the runtime's `cudaLaunchKernel` ends
//! there too), or `cuLaunchKernelEx` for clusters and cooperative launches.

use std::ffi::c_void;
use std::fmt;

use crate::context::{self, Current};
use crate::device::DeviceLimits;
use crate::error::{Error, Result};
use crate::kernel::{Kernel, KernelAttribute, Param};
use crate::memory::{DeviceBuffer, DeviceRepr, DeviceSlice, DeviceSliceMut};
use crate::stream::Stream;
use crate::sys::call;
use crate::sys::driver::{self, CUdeviceptr};

/// Most arguments a checked launch takes (tuples of up to 16 elements); pass more through a
/// `#[repr(C)]` struct or [`Kernel::launch_unchecked`].
pub const MAX_KERNEL_ARGS: usize = 16;

/// Grid or block dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// Extent along x.
    pub x: u32,
    /// Extent along y.
    pub y: u32,
    /// Extent along z.
    pub z: u32,
}

impl Dim3 {
    /// The number of elements (threads or blocks) the dimensions span.
    pub fn volume(&self) -> u64 {
        u64::from(self.x) * u64::from(self.y) * u64::from(self.z)
    }

    fn axes(&self) -> [u32; 3] {
        [self.x, self.y, self.z]
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Self {
        Dim3 { x, y: 1, z: 1 }
    }
}

impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Self {
        Dim3 { x, y, z: 1 }
    }
}

impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Self {
        Dim3 { x, y, z }
    }
}

/// How a kernel is launched: grid and block dimensions, dynamic shared memory, stream, cluster
/// dimensions and whether the launch is cooperative.
#[derive(Debug, Clone, Copy)]
pub struct LaunchConfig<'s> {
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads in a block.
    pub block: Dim3,
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
    /// The stream; `None` is the legacy default stream.
    pub stream: Option<&'s Stream>,
    /// Thread-block cluster dimensions (compute capability 9.0+); must divide the grid.
    pub cluster: Option<Dim3>,
    /// Launch cooperatively: all blocks resident at once, so they may synchronize grid-wide.
    pub cooperative: bool,
}

impl LaunchConfig<'static> {
    /// `grid` blocks of `block` threads, on the default stream, no dynamic shared memory.
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> Self {
        LaunchConfig {
            grid: grid.into(),
            block: block.into(),
            shared_mem_bytes: 0,
            stream: None,
            cluster: None,
            cooperative: false,
        }
    }

    /// A 1-D launch with one thread per element: enough blocks of `block` threads to cover
    /// `elements` (the kernel must ignore threads past the end).
    pub fn for_elements(elements: usize, block: u32) -> Self {
        let block = block.max(1);
        let blocks = elements.div_ceil(block as usize).max(1);
        Self::new(u32::try_from(blocks).unwrap_or(u32::MAX), block)
    }
}

impl<'s> LaunchConfig<'s> {
    /// Sets the dynamic shared memory per block.
    pub fn shared_mem(mut self, bytes: u32) -> Self {
        self.shared_mem_bytes = bytes;
        self
    }

    /// Launches on `stream`.
    pub fn stream<'t>(self, stream: &'t Stream) -> LaunchConfig<'t> {
        LaunchConfig {
            stream: Some(stream),
            ..self
        }
    }

    /// Sets the cluster dimensions.
    pub fn cluster(mut self, cluster: impl Into<Dim3>) -> Self {
        self.cluster = Some(cluster.into());
        self
    }

    /// Makes the launch cooperative.
    pub fn cooperative(mut self, cooperative: bool) -> Self {
        self.cooperative = cooperative;
        self
    }
}

/// Size and alignment of one argument as the kernel receives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArgLayout {
    /// Size in bytes.
    pub size: usize,
    /// Alignment in bytes.
    pub align: usize,
}

impl ArgLayout {
    /// The layout of a `T`.
    pub const fn of<T>() -> ArgLayout {
        ArgLayout {
            size: size_of::<T>(),
            align: align_of::<T>(),
        }
    }
}

/// One kernel argument.
///
/// Implemented for every [`DeviceRepr`] type (passed by value), for `&DeviceBuffer<T>` and
/// `&mut DeviceBuffer<T>` and for views (passed as the device pointer, a `T*` in the kernel).
///
/// # Safety
/// [`KernelArg::param`] points to [`KernelArg::LAYOUT`]`.size` readable bytes holding the value
/// the kernel receives, valid as long as `self` is borrowed.
pub unsafe trait KernelArg {
    /// Size and alignment of the value the kernel receives.
    const LAYOUT: ArgLayout;
    /// Where the value the kernel receives lies.
    fn param(&self) -> *mut c_void;
}

// SAFETY: the value itself is what the kernel receives.
unsafe impl<T: DeviceRepr> KernelArg for T {
    const LAYOUT: ArgLayout = ArgLayout::of::<T>();
    fn param(&self) -> *mut c_void {
        (self as *const T).cast_mut().cast()
    }
}

macro_rules! pointer_arg {
    ($($ty:ty),*) => { $(
        // SAFETY: the kernel receives the device address, which is the `ptr` field.
        unsafe impl<T: DeviceRepr> KernelArg for $ty {
            const LAYOUT: ArgLayout = ArgLayout::of::<CUdeviceptr>();
            fn param(&self) -> *mut c_void {
                (&self.ptr as *const CUdeviceptr).cast_mut().cast()
            }
        }
    )* };
}
pointer_arg!(
    &DeviceBuffer<T>,
    &mut DeviceBuffer<T>,
    DeviceSlice<'_, T>,
    DeviceSliceMut<'_, T>
);

/// The arguments of a launch: a tuple of up to [`MAX_KERNEL_ARGS`] [`KernelArg`]s, or `()`.
///
/// # Safety
/// `LAYOUTS` has one entry per element and `pack` writes exactly that many pointers, each from
/// the element's [`KernelArg::param`].
pub unsafe trait KernelArgs {
    /// Size and alignment of each argument, in order.
    const LAYOUTS: &'static [ArgLayout];
    /// Writes a pointer to each argument's value into the first `LAYOUTS.len()` slots.
    fn pack(&self, pointers: &mut [*mut c_void; MAX_KERNEL_ARGS]);
}

macro_rules! kernel_args {
    ($( ($($name:ident $index:tt),*) )*) => { $(
        // SAFETY: one layout and one pointer per element, in order.
        unsafe impl<$($name: KernelArg),*> KernelArgs for ($($name,)*) {
            const LAYOUTS: &'static [ArgLayout] = &[$($name::LAYOUT),*];
            #[allow(unused_variables)]
            fn pack(&self, pointers: &mut [*mut c_void; MAX_KERNEL_ARGS]) {
                $( pointers[$index] = self.$index.param(); )*
            }
        }
    )* };
}
kernel_args! {
    ()
    (A 0)
    (A 0, B 1)
    (A 0, B 1, C 2)
    (A 0, B 1, C 2, D 3)
    (A 0, B 1, C 2, D 3, E 4)
    (A 0, B 1, C 2, D 3, E 4, F 5)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13, O 14)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13, O 14, P 15)
}

/// How launch arguments differ from the kernel's parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArgumentMismatch {
    /// The kernel takes `expected` parameters; `given` arguments were passed.
    Count {
        /// Parameters the kernel takes.
        expected: usize,
        /// Arguments passed.
        given: usize,
    },
    /// Parameter `index` is `expected` bytes; the argument is `given` bytes.
    Size {
        /// The parameter's index, from 0.
        index: usize,
        /// The parameter's size.
        expected: usize,
        /// The argument's size.
        given: usize,
    },
    /// Parameter `index` lies at byte `expected` of the parameter buffer, but the arguments'
    /// sizes and alignments put it at `given`: an argument's alignment differs from its
    /// parameter's (a `float4` needs a 16-byte-aligned type, for example).
    Offset {
        /// The parameter's index, from 0.
        index: usize,
        /// The parameter's offset.
        expected: usize,
        /// The offset the arguments give it.
        given: usize,
    },
}

impl fmt::Display for ArgumentMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Count { expected, given } => write!(
                f,
                "the kernel takes {expected} parameters but {given} arguments were given"
            ),
            Self::Size {
                index,
                expected,
                given,
            } => write!(
                f,
                "parameter {index} is {expected} bytes but the argument given for it is {given} \
                 bytes: pass a value of the parameter's type"
            ),
            Self::Offset {
                index,
                expected,
                given,
            } => write!(
                f,
                "parameter {index} lies at byte offset {expected} but the arguments put it at \
                 {given}: an argument's alignment differs from its parameter's (use a \
                 #[repr(C, align(N))] type matching the device type)"
            ),
        }
    }
}

impl std::error::Error for ArgumentMismatch {}

/// Checks launch arguments against a kernel's parameter layout: the count, then the size and
/// offset of each parameter, where an argument's offset is the C layout of the arguments (each
/// aligned to its own alignment, in order).
///
/// Pure and allocation-free, so it runs on every launch.
pub fn check_arguments(params: &[Param], args: &[ArgLayout]) -> Result<(), ArgumentMismatch> {
    if params.len() != args.len() {
        return Err(ArgumentMismatch::Count {
            expected: params.len(),
            given: args.len(),
        });
    }
    let mut offset = 0usize;
    for (index, (param, arg)) in params.iter().zip(args).enumerate() {
        if param.size != arg.size {
            return Err(ArgumentMismatch::Size {
                index,
                expected: param.size,
                given: arg.size,
            });
        }
        offset = align_up(offset, arg.align);
        if param.offset != offset {
            return Err(ArgumentMismatch::Offset {
                index,
                expected: param.offset,
                given: offset,
            });
        }
        offset += arg.size;
    }
    Ok(())
}

/// `offset` rounded up to a multiple of `align`. Launches run this per parameter, and a division
/// costs tens of cycles, so the power-of-two alignments of Rust types take a mask instead.
fn align_up(offset: usize, align: usize) -> usize {
    if align.is_power_of_two() {
        (offset + align - 1) & !(align - 1)
    } else {
        offset.next_multiple_of(align.max(1))
    }
}

/// How a launch configuration exceeds what the device or the kernel allows.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigViolation {
    /// A grid or block dimension is 0.
    Empty {
        /// "grid" or "block".
        what: &'static str,
    },
    /// The block has more threads than the device allows.
    BlockTooLarge {
        /// Threads in the block.
        threads: u64,
        /// The device's limit.
        max: u32,
    },
    /// The block has more threads than this kernel allows (its register use limits it).
    BlockTooLargeForKernel {
        /// Threads in the block.
        threads: u64,
        /// The kernel's limit on this device.
        max: u32,
    },
    /// A block or grid dimension exceeds the device's limit along that axis.
    Dimension {
        /// "grid" or "block".
        what: &'static str,
        /// 'x', 'y' or 'z'.
        axis: char,
        /// The extent asked for.
        given: u32,
        /// The device's limit.
        max: u32,
    },
    /// More dynamic shared memory than the device gives a block even with opt-in.
    SharedMemory {
        /// Bytes asked for.
        given: u32,
        /// The device's opt-in limit.
        max: u32,
    },
    /// More dynamic shared memory than the kernel is set up for.
    SharedMemoryNotOptedIn {
        /// Bytes asked for.
        given: u32,
        /// The kernel's `MaxDynamicSharedSizeBytes` on this device.
        allowed: u32,
    },
    /// The device does not run cooperative launches.
    CooperativeUnsupported,
    /// The device does not run thread-block clusters.
    ClusterUnsupported,
    /// The cluster dimensions do not divide the grid.
    ClusterDoesNotDivideGrid {
        /// 'x', 'y' or 'z'.
        axis: char,
        /// Grid extent along the axis.
        grid: u32,
        /// Cluster extent along the axis.
        cluster: u32,
    },
}

impl fmt::Display for ConfigViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Empty { what } => write!(f, "every {what} dimension must be at least 1"),
            Self::BlockTooLarge { threads, max } => write!(
                f,
                "a block of {threads} threads is too large: the device allows {max} per block"
            ),
            Self::BlockTooLargeForKernel { threads, max } => write!(
                f,
                "a block of {threads} threads is too large for this kernel: its register use \
                 allows {max} per block on this device"
            ),
            Self::Dimension {
                what,
                axis,
                given,
                max,
            } => write!(
                f,
                "{what} dimension {axis} = {given} exceeds the device's limit of {max}"
            ),
            Self::SharedMemory { given, max } => write!(
                f,
                "{given} bytes of dynamic shared memory exceed the device's limit of {max} per block"
            ),
            Self::SharedMemoryNotOptedIn { given, allowed } => write!(
                f,
                "{given} bytes of dynamic shared memory exceed the {allowed} the kernel allows: \
                 raise KernelAttribute::MaxDynamicSharedSizeBytes with Kernel::set_attribute"
            ),
            Self::CooperativeUnsupported => {
                write!(f, "the device does not support cooperative launches")
            }
            Self::ClusterUnsupported => {
                write!(f, "the device does not support thread-block clusters (needs sm_90+)")
            }
            Self::ClusterDoesNotDivideGrid {
                axis,
                grid,
                cluster,
            } => write!(
                f,
                "cluster dimension {axis} = {cluster} does not divide grid dimension {grid}"
            ),
        }
    }
}

impl std::error::Error for ConfigViolation {}

/// Checks a launch configuration against a device's limits. Pure and allocation-free.
pub fn check_config(
    config: &LaunchConfig<'_>,
    limits: &DeviceLimits,
) -> Result<(), ConfigViolation> {
    if within_limits(config, limits) {
        return Ok(());
    }
    first_violation(config, limits)
}

/// Whether a configuration without clusters is within every limit: the launch path's common
/// case, decided without branching on each limit (`&` evaluates them all) and without building
/// an error. Anything else goes to [`first_violation`], which finds and names the problem.
fn within_limits(config: &LaunchConfig<'_>, limits: &DeviceLimits) -> bool {
    let (grid, block) = (config.grid, config.block);
    let dims = |dims: Dim3, max: [u32; 3]| {
        (dims.x != 0)
            & (dims.y != 0)
            & (dims.z != 0)
            & (dims.x <= max[0])
            & (dims.y <= max[1])
            & (dims.z <= max[2])
    };
    dims(grid, limits.max_grid)
        & dims(block, limits.max_block)
        & (block.volume() <= u64::from(limits.max_threads_per_block))
        & (config.shared_mem_bytes <= limits.max_shared_per_block_optin)
        & (!config.cooperative | limits.cooperative_launch)
        & config.cluster.is_none()
}

/// The first limit `config` exceeds, in the order users think of them, or `Ok` when there is
/// none.
fn first_violation(
    config: &LaunchConfig<'_>,
    limits: &DeviceLimits,
) -> Result<(), ConfigViolation> {
    // The thread count first: a block of 2048 threads is "too many threads", the limit users
    // know, before it is "x exceeds 1024".
    let threads = config.block.volume();
    if threads > u64::from(limits.max_threads_per_block) {
        return Err(ConfigViolation::BlockTooLarge {
            threads,
            max: limits.max_threads_per_block,
        });
    }
    for (what, dims, max) in [
        ("grid", config.grid, limits.max_grid),
        ("block", config.block, limits.max_block),
    ] {
        if dims.volume() == 0 {
            return Err(ConfigViolation::Empty { what });
        }
        for ((axis, given), max) in ['x', 'y', 'z'].into_iter().zip(dims.axes()).zip(max) {
            if given > max {
                return Err(ConfigViolation::Dimension {
                    what,
                    axis,
                    given,
                    max,
                });
            }
        }
    }
    if config.shared_mem_bytes > limits.max_shared_per_block_optin {
        return Err(ConfigViolation::SharedMemory {
            given: config.shared_mem_bytes,
            max: limits.max_shared_per_block_optin,
        });
    }
    if config.cooperative && !limits.cooperative_launch {
        return Err(ConfigViolation::CooperativeUnsupported);
    }
    if let Some(cluster) = config.cluster {
        if !limits.cluster_launch {
            return Err(ConfigViolation::ClusterUnsupported);
        }
        if cluster.volume() == 0 {
            return Err(ConfigViolation::Empty { what: "cluster" });
        }
        for ((axis, grid), cluster) in ['x', 'y', 'z']
            .into_iter()
            .zip(config.grid.axes())
            .zip(cluster.axes())
        {
            if grid % cluster != 0 {
                return Err(ConfigViolation::ClusterDoesNotDivideGrid {
                    axis,
                    grid,
                    cluster,
                });
            }
        }
    }
    Ok(())
}

impl Kernel {
    /// Launches the kernel with `args` after checking them against its parameter layout and
    /// `config` against the current device's limits; nothing reaches the driver if a check fails.
    ///
    /// ```no_run
    /// use cudyn::{DeviceBuffer, LaunchConfig, Library};
    /// let saxpy = Library::from_file("saxpy.cubin")?.kernel("saxpy")?;
    /// let n = 1 << 20;
    /// let x = DeviceBuffer::from_slice(&vec![1.0f32; n])?;
    /// let mut y = DeviceBuffer::<f32>::zeroed(n)?;
    /// // extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned long long n)
    /// saxpy.launch(&LaunchConfig::for_elements(n, 256), (2.0f32, &x, &mut y, n as u64))?;
    /// # Ok::<(), cudyn::Error>(())
    /// ```
    pub fn launch<A: KernelArgs>(&self, config: &LaunchConfig<'_>, args: A) -> Result<()> {
        let params = self.params()?;
        if let Err(mismatch) = check_arguments(params, A::LAYOUTS) {
            return Err(Error::LaunchArguments {
                kernel: self.display_name(),
                mismatch,
            });
        }
        let current = context::current()?;
        self.check_config(config, &current)?;
        let mut pointers = [std::ptr::null_mut(); MAX_KERNEL_ARGS];
        args.pack(&mut pointers);
        // SAFETY: the pointers match the kernel's parameters in number and size (checked above)
        // and point into `args`, which lives until the call returns.
        unsafe { self.launch_on(current, config, pointers.as_mut_ptr()) }
    }

    /// Launches the kernel with no check at all: the escape hatch for argument lists a tuple
    /// cannot express.
    ///
    /// # Safety
    /// `params` points to one pointer per kernel parameter, each to a value of exactly the
    /// parameter's size, valid for the call; device pointers among them stay valid until the
    /// kernel completes; `config` is within the device's limits.
    pub unsafe fn launch_unchecked(
        &self,
        config: &LaunchConfig<'_>,
        params: *mut *mut c_void,
    ) -> Result<()> {
        let current = context::current()?;
        // SAFETY: the caller's contract.
        unsafe { self.launch_on(current, config, params) }
    }

    fn check_config(&self, config: &LaunchConfig<'_>, current: &Current) -> Result<()> {
        let violation = match check_config(config, current.limits) {
            Err(violation) => Some(violation),
            // Above the default limit the kernel must have been opted in; asking the driver
            // costs a call, so only launches that need it pay.
            Ok(()) if config.shared_mem_bytes > current.limits.max_shared_per_block => {
                let allowed =
                    self.attribute(KernelAttribute::MaxDynamicSharedSizeBytes, current.device)?;
                let allowed = allowed.max(0) as u32;
                (config.shared_mem_bytes > allowed).then_some(
                    ConfigViolation::SharedMemoryNotOptedIn {
                        given: config.shared_mem_bytes,
                        allowed,
                    },
                )
            }
            Ok(()) => None,
        };
        match violation {
            Some(violation) => Err(Error::LaunchConfig {
                kernel: self.display_name(),
                violation,
            }),
            None => Ok(()),
        }
    }

    /// # Safety
    /// As [`Kernel::launch_unchecked`]; a context is current (`current`).
    unsafe fn launch_on(
        &self,
        current: Current,
        config: &LaunchConfig<'_>,
        params: *mut *mut c_void,
    ) -> Result<()> {
        let driver = current.driver;
        let stream = config.stream.map_or(std::ptr::null_mut(), Stream::as_raw);
        let (grid, block) = (config.grid, config.block);
        let status = if config.cluster.is_none() && !config.cooperative {
            // SAFETY: a CUkernel may be passed as the CUfunction of cuLaunchKernel; the caller
            // vouches for `params`; `extra` is null.
            unsafe {
                call!(
                    driver,
                    cuLaunchKernel(
                        self.as_function(),
                        grid.x,
                        grid.y,
                        grid.z,
                        block.x,
                        block.y,
                        block.z,
                        config.shared_mem_bytes,
                        stream,
                        params,
                        std::ptr::null_mut()
                    )
                )
            }
        } else {
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
                hStream: stream,
                attrs: attributes.as_mut_ptr(),
                numAttrs: count as u32,
            };
            // SAFETY: `launch` and its `count` attributes live until the call returns; the
            // kernel handle is accepted as a CUfunction; the caller vouches for `params`.
            unsafe {
                call!(
                    driver,
                    cuLaunchKernelEx(&launch, self.as_function(), params, std::ptr::null_mut())
                )
            }
        };
        status.map_err(|error| self.explain_launch_failure(error, config, &current))
    }

    /// A launch the driver refused for its resources gets the kernel's own limit, when the block
    /// exceeds it; otherwise the driver's error, with the library's JIT logs.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout of `extern "C" __global__ void k(float a, const float* x, float* y, int n)`.
    const SAXPY: [Param; 4] = [
        Param { offset: 0, size: 4 },
        Param { offset: 8, size: 8 },
        Param {
            offset: 16,
            size: 8,
        },
        Param {
            offset: 24,
            size: 4,
        },
    ];

    type SaxpyArgs<'a> = (f32, &'a DeviceBuffer<f32>, &'a mut DeviceBuffer<f32>, i32);

    #[test]
    fn matching_arguments_pass() {
        assert_eq!(check_arguments(&SAXPY, SaxpyArgs::LAYOUTS), Ok(()));
        assert_eq!(check_arguments(&[], <()>::LAYOUTS), Ok(()));
    }

    #[test]
    fn a_wrong_count_names_both_counts() {
        let given = <(f32, &DeviceBuffer<f32>, &DeviceBuffer<f32>)>::LAYOUTS;
        assert_eq!(
            check_arguments(&SAXPY, given),
            Err(ArgumentMismatch::Count {
                expected: 4,
                given: 3
            })
        );
    }

    #[test]
    fn a_wrong_size_names_the_parameter_and_both_sizes() {
        // f64 where the kernel takes a float.
        let given = <(f64, &DeviceBuffer<f32>, &DeviceBuffer<f32>, i32)>::LAYOUTS;
        let mismatch = check_arguments(&SAXPY, given).unwrap_err();
        assert_eq!(
            mismatch,
            ArgumentMismatch::Size {
                index: 0,
                expected: 4,
                given: 8
            }
        );
        assert!(mismatch.to_string().contains("parameter 0 is 4 bytes"));
        // usize where the kernel takes an int.
        let given = <(f32, &DeviceBuffer<f32>, &DeviceBuffer<f32>, usize)>::LAYOUTS;
        assert_eq!(
            check_arguments(&SAXPY, given),
            Err(ArgumentMismatch::Size {
                index: 3,
                expected: 4,
                given: 8
            })
        );
    }

    #[test]
    fn a_misaligned_argument_of_the_right_size_is_caught_by_its_offset() {
        // void k(int n, float4 v): float4 is 16-byte aligned, so it lies at offset 16.
        let params = [
            Param { offset: 0, size: 4 },
            Param {
                offset: 16,
                size: 16,
            },
        ];
        assert_eq!(
            check_arguments(&params, <(i32, [f32; 4])>::LAYOUTS),
            Err(ArgumentMismatch::Offset {
                index: 1,
                expected: 16,
                given: 4
            })
        );
        #[repr(C, align(16))]
        #[derive(Clone, Copy)]
        struct Float4([f32; 4]);
        // SAFETY: repr(C), four floats, any bit pattern valid.
        unsafe impl DeviceRepr for Float4 {}
        assert_eq!(check_arguments(&params, <(i32, Float4)>::LAYOUTS), Ok(()));
    }

    #[test]
    fn user_structs_and_views_are_arguments() {
        #[repr(C)]
        #[derive(Clone, Copy)]
        struct Params {
            scale: f64,
            count: u32,
        }
        // SAFETY: repr(C), numbers only.
        unsafe impl DeviceRepr for Params {}
        type Args<'a> = (Params, DeviceSlice<'a, u8>, DeviceSliceMut<'a, u8>);
        assert_eq!(
            Args::LAYOUTS,
            [
                ArgLayout { size: 16, align: 8 },
                ArgLayout { size: 8, align: 8 },
                ArgLayout { size: 8, align: 8 },
            ]
        );
    }

    #[test]
    fn the_fast_check_agrees_with_the_full_one() {
        // Each axis 0, at its limit, just past it, or anywhere below.
        fn dim(rng: &mut fastrand::Rng, max: u32) -> Dim3 {
            let mut pick = || match rng.u8(0..4) {
                0 => 0,
                1 => max,
                2 => max + 1,
                _ => rng.u32(1..=max),
            };
            Dim3 {
                x: pick(),
                y: pick(),
                z: pick(),
            }
        }
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..20_000 {
            let config = LaunchConfig::new(dim(&mut rng, 70_000), dim(&mut rng, 1024))
                .shared_mem(rng.u32(0..240 * 1024))
                .cooperative(rng.bool());
            let limits = DeviceLimits {
                cooperative_launch: rng.bool(),
                ..H200
            };
            assert_eq!(
                within_limits(&config, &limits),
                first_violation(&config, &limits).is_ok(),
                "{config:?}"
            );
        }
    }

    #[test]
    fn offsets_round_up_to_any_alignment() {
        assert_eq!(align_up(0, 8), 0);
        assert_eq!(align_up(4, 8), 8);
        assert_eq!(align_up(9, 4), 12);
        assert_eq!(align_up(16, 16), 16);
        assert_eq!(align_up(5, 1), 5);
        // A hand-made layout may carry any alignment; 0 means none.
        assert_eq!(align_up(7, 6), 12);
        assert_eq!(align_up(7, 0), 7);
    }

    #[test]
    fn packing_points_at_each_value() {
        let args = (1.5f32, 7u64, [1u8, 2, 3]);
        let mut pointers = [std::ptr::null_mut(); MAX_KERNEL_ARGS];
        args.pack(&mut pointers);
        // SAFETY: the pointers point into `args`, alive here, at values of these types.
        unsafe {
            assert_eq!(*pointers[0].cast::<f32>(), 1.5);
            assert_eq!(*pointers[1].cast::<u64>(), 7);
            assert_eq!(*pointers[2].cast::<[u8; 3]>(), [1, 2, 3]);
        }
        assert!(pointers[3].is_null());
    }

    const H200: DeviceLimits = DeviceLimits {
        max_threads_per_block: 1024,
        max_block: [1024, 1024, 64],
        max_grid: [i32::MAX as u32, 65535, 65535],
        max_shared_per_block: 48 * 1024,
        max_shared_per_block_optin: 227 * 1024,
        cooperative_launch: true,
        cluster_launch: true,
    };

    #[test]
    fn configurations_within_the_limits_pass() {
        assert_eq!(check_config(&LaunchConfig::new(1, 1), &H200), Ok(()));
        let big = LaunchConfig::new((1 << 20, 2, 2), (32, 32, 1))
            .shared_mem(100 * 1024)
            .cluster((2, 1, 1))
            .cooperative(true);
        assert_eq!(check_config(&big, &H200), Ok(()));
    }

    #[test]
    fn configurations_beyond_the_limits_name_the_limit() {
        let cases = [
            (
                LaunchConfig::new(1, 1025),
                ConfigViolation::BlockTooLarge {
                    threads: 1025,
                    max: 1024,
                },
            ),
            (
                LaunchConfig::new(1, (1, 1, 65)),
                ConfigViolation::Dimension {
                    what: "block",
                    axis: 'z',
                    given: 65,
                    max: 64,
                },
            ),
            (
                LaunchConfig::new(1, (64, 32, 1)),
                ConfigViolation::BlockTooLarge {
                    threads: 2048,
                    max: 1024,
                },
            ),
            (
                LaunchConfig::new((1, 70_000), 1),
                ConfigViolation::Dimension {
                    what: "grid",
                    axis: 'y',
                    given: 70_000,
                    max: 65535,
                },
            ),
            (
                LaunchConfig::new(0, 1),
                ConfigViolation::Empty { what: "grid" },
            ),
            (
                LaunchConfig::new(1, 1).shared_mem(228 * 1024),
                ConfigViolation::SharedMemory {
                    given: 228 * 1024,
                    max: 227 * 1024,
                },
            ),
            (
                LaunchConfig::new(6, 1).cluster(4),
                ConfigViolation::ClusterDoesNotDivideGrid {
                    axis: 'x',
                    grid: 6,
                    cluster: 4,
                },
            ),
        ];
        for (config, violation) in cases {
            assert_eq!(check_config(&config, &H200), Err(violation));
        }
        let old = DeviceLimits {
            cooperative_launch: false,
            cluster_launch: false,
            ..H200
        };
        assert_eq!(
            check_config(&LaunchConfig::new(1, 1).cooperative(true), &old),
            Err(ConfigViolation::CooperativeUnsupported)
        );
        assert_eq!(
            check_config(&LaunchConfig::new(2, 1).cluster(2), &old),
            Err(ConfigViolation::ClusterUnsupported)
        );
    }

    #[test]
    fn for_elements_covers_every_element() {
        let config = LaunchConfig::for_elements(1000, 256);
        assert_eq!(config.grid, Dim3 { x: 4, y: 1, z: 1 });
        assert_eq!(config.block, Dim3 { x: 256, y: 1, z: 1 });
        assert_eq!(LaunchConfig::for_elements(0, 256).grid.x, 1);
    }
}
