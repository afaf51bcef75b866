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
