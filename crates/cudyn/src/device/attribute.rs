//! [`DeviceAttribute`]: what [`Device::attribute`](super::Device::attribute) reads.

use crate::sys::driver;

/// A GPU attribute, read with [`Device::attribute`](super::Device::attribute)
/// (`cuDeviceGetAttribute`, the runtime's `cudaDeviceGetAttribute`).
///
/// The attributes most programs ask for are named; any other is read by its driver number with
/// [`DeviceAttribute::Other`].
///
/// ```no_run
/// use cudyn::{Device, DeviceAttribute};
///
/// let device = Device::get(0)?;
/// let multiprocessors = device.attribute(DeviceAttribute::MultiprocessorCount)?;
/// let warp = device.attribute(DeviceAttribute::WarpSize)?;
/// println!("{multiprocessors} multiprocessors, warps of {warp} threads");
/// # Ok::<(), cudyn::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeviceAttribute {
    /// Most threads in one block.
    MaxThreadsPerBlock,
    /// Most threads per block along x.
    MaxBlockDimX,
    /// Most threads per block along y.
    MaxBlockDimY,
    /// Most threads per block along z.
    MaxBlockDimZ,
    /// Most blocks per grid along x.
    MaxGridDimX,
    /// Most blocks per grid along y.
    MaxGridDimY,
    /// Most blocks per grid along z.
    MaxGridDimZ,
    /// Most shared memory (static + dynamic) a block gets without opting in, in bytes.
    MaxSharedMemoryPerBlock,
    /// Most shared memory a block may opt in to, in bytes
    /// ([`KernelAttribute::MaxDynamicSharedSizeBytes`](crate::KernelAttribute::MaxDynamicSharedSizeBytes)).
    MaxSharedMemoryPerBlockOptin,
    /// Shared memory of one multiprocessor, in bytes.
    MaxSharedMemoryPerMultiprocessor,
    /// Constant memory, in bytes.
    TotalConstantMemory,
    /// Threads per warp.
    WarpSize,
    /// 32-bit registers available to one block.
    MaxRegistersPerBlock,
    /// 32-bit registers of one multiprocessor.
    MaxRegistersPerMultiprocessor,
    /// Streaming multiprocessors on the GPU.
    MultiprocessorCount,
    /// Most threads resident on one multiprocessor.
    MaxThreadsPerMultiprocessor,
    /// Most blocks resident on one multiprocessor.
    MaxBlocksPerMultiprocessor,
    /// Major compute capability (9 for sm_90).
    ComputeCapabilityMajor,
    /// Minor compute capability (0 for sm_90).
    ComputeCapabilityMinor,
    /// L2 cache, in bytes.
    L2CacheSize,
    /// Width of the global memory bus, in bits.
    GlobalMemoryBusWidth,
    /// 1 when the GPU is integrated with the host's memory, 0 for a discrete GPU.
    Integrated,
    /// 1 when kernels of several streams may run at once.
    ConcurrentKernels,
    /// Copy engines able to overlap copies with kernels.
    AsyncEngineCount,
    /// 1 when ECC is enabled.
    EccEnabled,
    /// PCI bus of the GPU.
    PciBusId,
    /// PCI device (slot) of the GPU.
    PciDeviceId,
    /// PCI domain of the GPU.
    PciDomainId,
    /// 1 when the GPU shares one address space with the host.
    UnifiedAddressing,
    /// 1 when the GPU supports managed memory.
    ManagedMemory,
    /// 1 when the GPU and the host may access managed memory at the same time.
    ConcurrentManagedAccess,
    /// 1 when the GPU may access pageable host memory.
    PageableMemoryAccess,
    /// 1 when the GPU supports stream priorities.
    StreamPrioritiesSupported,
    /// 1 when the GPU runs cooperative launches.
    CooperativeLaunch,
    /// 1 when the GPU runs thread-block clusters (compute capability 9.0 and newer).
    ClusterLaunch,
    /// 1 when the GPU supports stream-ordered allocation (memory pools).
    MemoryPoolsSupported,
    /// An attribute not named here, by its driver number (`CUdevice_attribute`; the runtime's
    /// `cudaDeviceAttr` uses the same numbers). An unknown number is an [`Error`](crate::Error)
    /// from the driver when read, never undefined behaviour. `Other(16)` reads what
    /// [`MultiprocessorCount`](Self::MultiprocessorCount) reads, but the two values compare
    /// unequal: name an attribute by its variant where there is one.
    Other(u32),
}

impl DeviceAttribute {
    /// The driver's attribute number (`CUdevice_attribute`).
    ///
    /// ```
    /// use cudyn::DeviceAttribute;
    /// assert_eq!(DeviceAttribute::MultiprocessorCount.as_raw(), 16);
    /// assert_eq!(DeviceAttribute::Other(16).as_raw(), 16);
    /// ```
    pub fn as_raw(self) -> crate::raw::CUdevice_attribute {
        match self {
            Self::MaxThreadsPerBlock => driver::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            Self::MaxBlockDimX => driver::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X,
            Self::MaxBlockDimY => driver::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
            Self::MaxBlockDimZ => driver::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z,
            Self::MaxGridDimX => driver::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
            Self::MaxGridDimY => driver::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
            Self::MaxGridDimZ => driver::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z,
            Self::MaxSharedMemoryPerBlock => {
                driver::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK
            }
            Self::MaxSharedMemoryPerBlockOptin => {
                driver::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
            }
            Self::MaxSharedMemoryPerMultiprocessor => {
                driver::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
            }
            Self::TotalConstantMemory => driver::CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY,
            Self::WarpSize => driver::CU_DEVICE_ATTRIBUTE_WARP_SIZE,
            Self::MaxRegistersPerBlock => driver::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK,
            Self::MaxRegistersPerMultiprocessor => {
                driver::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR
            }
            Self::MultiprocessorCount => driver::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            Self::MaxThreadsPerMultiprocessor => {
                driver::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR
            }
            Self::MaxBlocksPerMultiprocessor => {
                driver::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR
            }
            Self::ComputeCapabilityMajor => driver::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            Self::ComputeCapabilityMinor => driver::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
            Self::L2CacheSize => driver::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE,
            Self::GlobalMemoryBusWidth => driver::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH,
            Self::Integrated => driver::CU_DEVICE_ATTRIBUTE_INTEGRATED,
            Self::ConcurrentKernels => driver::CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS,
            Self::AsyncEngineCount => driver::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT,
            Self::EccEnabled => driver::CU_DEVICE_ATTRIBUTE_ECC_ENABLED,
            Self::PciBusId => driver::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID,
            Self::PciDeviceId => driver::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID,
            Self::PciDomainId => driver::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID,
            Self::UnifiedAddressing => driver::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING,
            Self::ManagedMemory => driver::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY,
            Self::ConcurrentManagedAccess => driver::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
            Self::PageableMemoryAccess => driver::CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS,
            Self::StreamPrioritiesSupported => {
                driver::CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED
            }
            Self::CooperativeLaunch => driver::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH,
            Self::ClusterLaunch => driver::CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH,
            Self::MemoryPoolsSupported => driver::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
            Self::Other(raw) => raw,
        }
    }
}
