//! GPUs, as the driver sees them.

use std::sync::OnceLock;

use crate::api::driver as api;
use crate::error::{Error, Result};
use crate::raw::CUdevice;

mod attribute;

pub(crate) use crate::api::driver::initialized as initialized_driver;
pub use attribute::DeviceAttribute;

/// A GPU, by ordinal.
///
/// ```no_run
/// use cudyn::Device;
///
/// for device in Device::all()? {
///     let (major, minor) = device.compute_capability()?;
///     let memory = device.memory_info()?;
///     println!(
///         "{}: {} (sm_{major}{minor}), {} of {} MiB free",
///         device.ordinal(),
///         device.name()?,
///         memory.free >> 20,
///         memory.total >> 20
///     );
/// }
/// # Ok::<(), cudyn::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Device {
    ordinal: i32,
    raw: CUdevice,
}

impl Device {
    /// How many GPUs the driver sees.
    pub fn count() -> Result<usize> {
        Ok(api::device_count(initialized_driver()?)?.max(0) as usize)
    }

    /// The GPU with this ordinal (0-based, in the driver's order); an ordinal past the last GPU
    /// is [`Error::DeviceOutOfRange`].
    pub fn get(ordinal: usize) -> Result<Device> {
        let driver = initialized_driver()?;
        let count = Self::count()?;
        let in_range = i32::try_from(ordinal).ok().filter(|_| ordinal < count);
        let Some(ordinal) = in_range else {
            return Err(Error::DeviceOutOfRange { ordinal, count });
        };
        let raw = api::device_get(driver, ordinal)?;
        Ok(Device { ordinal, raw })
    }

    /// Every GPU the driver sees.
    pub fn all() -> Result<Vec<Device>> {
        (0..Self::count()?).map(Self::get).collect()
    }

    /// The ordinal of this GPU.
    pub fn ordinal(&self) -> usize {
        self.ordinal as usize
    }

    /// The driver's handle of this GPU.
    pub fn as_raw(&self) -> CUdevice {
        self.raw
    }

    /// The GPU's name, e.g. "NVIDIA H200".
    pub fn name(&self) -> Result<String> {
        api::device_name(initialized_driver()?, self.raw)
    }

    /// An attribute of the GPU (`cuDeviceGetAttribute`).
    ///
    /// ```no_run
    /// use cudyn::{Device, DeviceAttribute};
    ///
    /// let l2 = Device::get(0)?.attribute(DeviceAttribute::L2CacheSize)?;
    /// println!("{} MiB of L2", l2 >> 20);
    /// # Ok::<(), cudyn::Error>(())
    /// ```
    pub fn attribute(&self, attribute: DeviceAttribute) -> Result<i32> {
        api::device_attribute(initialized_driver()?, attribute.as_raw(), self.raw)
    }

    /// The compute capability, `(major, minor)`: `(9, 0)` for an H100 or H200.
    pub fn compute_capability(&self) -> Result<(u32, u32)> {
        let major = self.attribute(DeviceAttribute::ComputeCapabilityMajor)?;
        let minor = self.attribute(DeviceAttribute::ComputeCapabilityMinor)?;
        Ok((major.max(0) as u32, minor.max(0) as u32))
    }

    /// The GPU's memory in bytes.
    pub fn total_memory(&self) -> Result<u64> {
        Ok(api::device_total_memory(initialized_driver()?, self.raw)? as u64)
    }
}

impl Device {
    /// The GPU whose driver handle is `raw`, e.g. the device of the current context.
    pub(crate) fn from_raw(raw: CUdevice) -> Result<Device> {
        for ordinal in 0..Self::count()? {
            let device = Self::get(ordinal)?;
            if device.raw == raw {
                return Ok(device);
            }
        }
        Err(Error::DriverInconsistent {
            what: format!("device handle {raw}, which matches no device ordinal"),
        })
    }

    /// The launch limits of this GPU, read from the driver once per process.
    pub fn limits(&self) -> Result<&'static DeviceLimits> {
        static LIMITS: PerDevice<DeviceLimits> = PerDevice::new();
        LIMITS.get_or_init(*self, || DeviceLimits::query(self))
    }
}

/// Free and total memory of a GPU, in bytes: [`Device::memory_info`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoryInfo {
    /// Bytes not allocated by anyone.
    pub free: u64,
    /// All the GPU's memory.
    pub total: u64,
}

impl MemoryInfo {
    /// Bytes allocated, by this process and any other.
    pub fn used(&self) -> u64 {
        self.total.saturating_sub(self.free)
    }
}

/// What a GPU allows a launch, as checked before every launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceLimits {
    /// Most threads in one block.
    pub max_threads_per_block: u32,
    /// Most threads per block along x, y and z.
    pub max_block: [u32; 3],
    /// Most blocks per grid along x, y and z.
    pub max_grid: [u32; 3],
    /// Most shared memory (static + dynamic) a block gets without opting in, in bytes.
    pub max_shared_per_block: u32,
    /// Most shared memory a block may opt in to (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`).
    pub max_shared_per_block_optin: u32,
    /// Whether the GPU runs cooperative launches.
    pub cooperative_launch: bool,
    /// Whether the GPU runs thread-block clusters (compute capability 9.0 and newer).
    pub cluster_launch: bool,
    /// Streaming multiprocessors on the GPU: a cooperative launch's blocks must all be resident
    /// on them at once.
    pub multiprocessors: u32,
}

impl DeviceLimits {
    /// What a GPU of compute capability 9.0 reports, with the 132 multiprocessors of an H100 SXM
    /// or H200: launch configurations can be checked against it without a GPU
    /// ([`crate::launch::check_config`]).
    pub const SM_90: DeviceLimits = DeviceLimits {
        max_threads_per_block: 1024,
        max_block: [1024, 1024, 64],
        max_grid: [i32::MAX as u32, 65535, 65535],
        max_shared_per_block: 48 * 1024,
        max_shared_per_block_optin: 227 * 1024,
        cooperative_launch: true,
        cluster_launch: true,
        multiprocessors: 132,
    };

    /// What every GPU of compute capability `major.minor` reports, as the CUDA C++ Programming
    /// Guide's technical specifications give it, to check launch configurations for such a GPU
    /// without one ([`crate::launch::check_config`]); `None` for a compute capability cudyn has
    /// no figures for. `multiprocessors`, which differs between GPUs of one architecture, is 0.
    ///
    /// ```
    /// use cudyn::device::DeviceLimits;
    ///
    /// let ampere = DeviceLimits::of_compute_capability(8, 0).unwrap();
    /// assert_eq!(ampere.max_shared_per_block_optin, 163 * 1024);
    /// assert!(!ampere.cluster_launch);
    /// assert_eq!(DeviceLimits::of_compute_capability(9, 0).unwrap().max_grid[0], i32::MAX as u32);
    /// assert!(DeviceLimits::of_compute_capability(3, 5).is_none());
    /// ```
    pub fn of_compute_capability(major: u32, minor: u32) -> Option<DeviceLimits> {
        let optin_kib = match (major, minor) {
            (7, 0) | (7, 2) => 96,
            (7, 5) => 64,
            (8, 0) | (8, 7) => 163,
            (8, 6) | (8, 9) | (12, 0) => 99,
            (9, 0) | (10, 0) => 227,
            _ => return None,
        };
        Some(DeviceLimits {
            max_shared_per_block_optin: optin_kib * 1024,
            cluster_launch: major >= 9,
            multiprocessors: 0,
            ..DeviceLimits::SM_90
        })
    }

    fn query(device: &Device) -> Result<DeviceLimits> {
        let get = |attribute| -> Result<u32> { Ok(device.attribute(attribute)?.max(0) as u32) };
        Ok(DeviceLimits {
            max_threads_per_block: get(DeviceAttribute::MaxThreadsPerBlock)?,
            max_block: [
                get(DeviceAttribute::MaxBlockDimX)?,
                get(DeviceAttribute::MaxBlockDimY)?,
                get(DeviceAttribute::MaxBlockDimZ)?,
            ],
            max_grid: [
                get(DeviceAttribute::MaxGridDimX)?,
                get(DeviceAttribute::MaxGridDimY)?,
                get(DeviceAttribute::MaxGridDimZ)?,
            ],
            max_shared_per_block: get(DeviceAttribute::MaxSharedMemoryPerBlock)?,
            max_shared_per_block_optin: get(DeviceAttribute::MaxSharedMemoryPerBlockOptin)?,
            cooperative_launch: get(DeviceAttribute::CooperativeLaunch)? != 0,
            cluster_launch: get(DeviceAttribute::ClusterLaunch)? != 0,
            multiprocessors: get(DeviceAttribute::MultiprocessorCount)?,
        })
    }
}

/// One lazily computed value per GPU, shared by the whole process (primary contexts, limits).
///
/// A failure is kept like a success: the runtime, too, makes device initialization errors sticky.
pub(crate) struct PerDevice<T> {
    slots: OnceLock<Result<Slots<T>>>,
}

/// One slot per device ordinal.
type Slots<T> = Box<[OnceLock<Result<T>>]>;

impl<T> PerDevice<T> {
    pub(crate) const fn new() -> Self {
        PerDevice {
            slots: OnceLock::new(),
        }
    }

    pub(crate) fn get_or_init(
        &self,
        device: Device,
        init: impl FnOnce() -> Result<T>,
    ) -> Result<&T> {
        let slots = self
            .slots
            .get_or_init(|| Ok((0..Device::count()?).map(|_| OnceLock::new()).collect()))
            .as_ref()
            .map_err(Clone::clone)?;
        let slot = slots.get(device.ordinal()).ok_or(Error::DeviceOutOfRange {
            ordinal: device.ordinal(),
            count: slots.len(),
        })?;
        slot.get_or_init(init).as_ref().map_err(Clone::clone)
    }
}
