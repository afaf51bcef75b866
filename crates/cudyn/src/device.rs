//! GPUs, as the driver sees them.

use std::sync::OnceLock;

use crate::error::Result;
use crate::sys::driver::{self, Driver};
use crate::sys::{self, call};

/// A GPU, by ordinal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Device {
    ordinal: i32,
    raw: driver::CUdevice,
}

/// The driver, initialized once per process (`cuInit`).
pub(crate) fn initialized_driver() -> Result<&'static Driver> {
    static INIT: OnceLock<Result<()>> = OnceLock::new();
    let driver = sys::driver()?;
    INIT.get_or_init(|| {
        // SAFETY: cuInit takes flags, which must be 0.
        unsafe { call!(driver, cuInit(0)) }
    })
    .clone()?;
    Ok(driver)
}

impl Device {
    /// How many GPUs the driver sees.
    pub fn count() -> Result<usize> {
        let driver = initialized_driver()?;
        let mut count = 0;
        // SAFETY: writes one int.
        unsafe { call!(driver, cuDeviceGetCount(&mut count)) }?;
        Ok(count.max(0) as usize)
    }

    /// The GPU with this ordinal (0-based, in the driver's order).
    pub fn get(ordinal: usize) -> Result<Device> {
        let driver = initialized_driver()?;
        let ordinal = i32::try_from(ordinal).map_err(|_| {
            crate::Error::InvalidArgument(format!("device ordinal {ordinal} is out of range"))
        })?;
        let mut raw = 0;
        // SAFETY: writes one CUdevice; an out-of-range ordinal is an error status.
        unsafe { call!(driver, cuDeviceGet(&mut raw, ordinal)) }?;
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
    pub fn as_raw(&self) -> driver::CUdevice {
        self.raw
    }

    /// The GPU's name, e.g. "NVIDIA H200".
    pub fn name(&self) -> Result<String> {
        let driver = initialized_driver()?;
        let mut buffer = [0 as std::ffi::c_char; 256];
        // SAFETY: the driver writes at most `len` bytes, NUL-terminated.
        unsafe {
            call!(
                driver,
                cuDeviceGetName(buffer.as_mut_ptr(), buffer.len() as i32, self.raw)
            )
        }?;
        let bytes: Vec<u8> = buffer
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// An attribute of the GPU (`cuDeviceGetAttribute`).
    pub fn attribute(&self, attribute: driver::CUdevice_attribute) -> Result<i32> {
        let driver = initialized_driver()?;
        let mut value = 0;
        // SAFETY: writes one int; an unknown attribute is an error status.
        unsafe {
            call!(
                driver,
                cuDeviceGetAttribute(&mut value, attribute, self.raw)
            )
        }?;
        Ok(value)
    }

    /// The compute capability, `(major, minor)`: `(9, 0)` for an H100 or H200.
    pub fn compute_capability(&self) -> Result<(u32, u32)> {
        let major = self.attribute(driver::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = self.attribute(driver::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        Ok((major.max(0) as u32, minor.max(0) as u32))
    }

    /// The GPU's memory in bytes.
    pub fn total_memory(&self) -> Result<u64> {
        let driver = initialized_driver()?;
        let mut bytes = 0usize;
        // SAFETY: writes one size_t.
        unsafe { call!(driver, cuDeviceTotalMem_v2(&mut bytes, self.raw)) }?;
        Ok(bytes as u64)
    }
}

impl Device {
    /// The GPU whose driver handle is `raw`, e.g. the device of the current context.
    pub(crate) fn from_raw(raw: driver::CUdevice) -> Result<Device> {
        for ordinal in 0..Self::count()? {
            let device = Self::get(ordinal)?;
            if device.raw == raw {
                return Ok(device);
            }
        }
        Err(crate::Error::InvalidArgument(format!(
            "the driver reports device handle {raw}, which matches no device ordinal"
        )))
    }

    /// The launch limits of this GPU, read from the driver once per process.
    pub fn limits(&self) -> Result<&'static DeviceLimits> {
        static LIMITS: PerDevice<DeviceLimits> = PerDevice::new();
        LIMITS.get_or_init(*self, || DeviceLimits::query(self))
    }
}

/// What a GPU allows a launch, as checked before every launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}

impl DeviceLimits {
    fn query(device: &Device) -> Result<DeviceLimits> {
        let get = |attribute| -> Result<u32> { Ok(device.attribute(attribute)?.max(0) as u32) };
        Ok(DeviceLimits {
            max_threads_per_block: get(driver::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_block: [
                get(driver::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                get(driver::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                get(driver::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ],
            max_grid: [
                get(driver::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                get(driver::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                get(driver::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ],
            max_shared_per_block: get(driver::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
            max_shared_per_block_optin: get(
                driver::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )?,
            cooperative_launch: get(driver::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)? != 0,
            cluster_launch: get(driver::CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH)? != 0,
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
        let slot = slots.get(device.ordinal()).ok_or_else(|| {
            crate::Error::InvalidArgument(format!(
                "device {} is not among the {} devices the driver reported",
                device.ordinal(),
                slots.len()
            ))
        })?;
        slot.get_or_init(init).as_ref().map_err(Clone::clone)
    }
}
