//! How a launch differs from what its kernel and device take: the arguments against the
//! parameters ([`ArgumentMismatch`]), the configuration against the limits
//! ([`ConfigViolation`]). Values that the launch checks make and errors carry.

use std::fmt;

use crate::ctype::{ArgType, CType};

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
    /// Parameter `index` has the C type `expected`, and the argument means another:
    /// an `f32` for an `int`, a read-only buffer for a pointer the kernel may write.
    Type {
        /// The parameter's index, from 0.
        index: usize,
        /// The parameter's C type, as the device code says it.
        expected: CType,
        /// What the argument means.
        given: ArgType,
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
                 {given}: an argument's alignment differs from its parameter's (match the \
                 device type's: for a float4, a #[derive(DeviceRepr)] #[repr(C, align(16))] \
                 struct rather than a [f32; 4])"
            ),
            Self::Type {
                index,
                ref expected,
                given,
            } => {
                write!(f, "parameter {index} is `{expected}` but {given} was given")?;
                f.write_str(type_hint(expected, &given))
            }
        }
    }
}

/// What to do about an argument of meaning `given` for a parameter of type `expected`.
fn type_hint(expected: &CType, given: &ArgType) -> &'static str {
    match (expected, given) {
        (
            CType::Pointer {
                is_const: false, ..
            },
            ArgType::Pointer {
                read_only: true, ..
            },
        ) => {
            ": the kernel may write through this pointer, so lend the buffer mutably \
             (`&mut buffer` or a `DeviceSliceMut`)"
        }
        (CType::Scalar(param), ArgType::Scalar(arg)) if param.same_width_integer(*arg) => {
            ": pass the parameter's type, or `cudyn::Reinterpret(value)` if the kernel is \
             meant to read these bits as its own integer type"
        }
        _ => ": pass a value of the parameter's type",
    }
}

impl std::error::Error for ArgumentMismatch {}

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
    /// A cooperative launch whose blocks cannot all be resident on the device at once, as a
    /// cooperative launch requires (the driver's `CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE`).
    CooperativeGridTooLarge {
        /// Blocks in the grid.
        blocks: u64,
        /// Most blocks resident at once: `per_multiprocessor * multiprocessors`.
        max: u64,
        /// Blocks of this kernel, with this block size and dynamic shared memory, resident on
        /// one multiprocessor at once (the driver's occupancy calculation).
        per_multiprocessor: u32,
        /// Multiprocessors on the device.
        multiprocessors: u32,
    },
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
            Self::CooperativeGridTooLarge {
                blocks,
                per_multiprocessor: 0,
                ..
            } => write!(
                f,
                "a cooperative launch needs all its blocks resident at once, but not even one \
                 block of this size fits on a multiprocessor, so none of the {blocks} can be: \
                 use fewer threads or less dynamic shared memory per block"
            ),
            Self::CooperativeGridTooLarge {
                blocks,
                max,
                per_multiprocessor,
                multiprocessors,
            } => write!(
                f,
                "a cooperative launch needs all its blocks resident at once, but {blocks} blocks \
                 exceed the {max} that fit ({per_multiprocessor} per multiprocessor of this \
                 kernel and block on {multiprocessors} multiprocessors): launch at most {max} \
                 blocks (Kernel::max_cooperative_grid gives the number), or use fewer threads \
                 or less dynamic shared memory per block to fit more"
            ),
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
