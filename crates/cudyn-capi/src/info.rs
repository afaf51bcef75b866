//! The version, the toolchain report, devices, and the strings cudyn hands out.

use std::collections::BTreeMap;
use std::ffi::{c_char, CStr, CString};
use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};

use cudyn::{Device, ToolchainReport};

use crate::handles::entry_returning;
use crate::status::{cudyn_status, entry, Failure};

const VERSION: &CStr =
    match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(version) => version,
        Err(_) => panic!("the package version holds no NUL"),
    };

/// The version of cudyn, such as `"0.1.0"`. The text is static.
#[no_mangle]
pub extern "C" fn cudyn_version() -> *const c_char {
    VERSION.as_ptr()
}

/// The strings handed out and not yet freed, by address: freeing one drops it here, and
/// freeing anything else is refused instead of corrupting the heap.
static LIVE_STRINGS: Mutex<BTreeMap<usize, CString>> = Mutex::new(BTreeMap::new());

/// `text` as a C string the caller frees with `cudyn_string_free`.
pub(crate) fn give_string(text: &str) -> *mut c_char {
    let text = CString::new(text.replace('\0', "\\0")).unwrap_or_default();
    // The characters stay where they are when the CString moves into the map.
    let raw = text.as_ptr().cast_mut();
    LIVE_STRINGS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(raw.addr(), text);
    raw
}

/// Frees a string returned by a cudyn function (`cudyn_toolchain_report`, `cudyn_kernel_name`).
/// A null pointer is allowed and does nothing. Any other pointer, or a string freed already, is
/// `CUDYN_ERROR_INVALID_ARGUMENT` and is left alone.
#[no_mangle]
pub extern "C" fn cudyn_string_free(text: *mut c_char) -> cudyn_status {
    entry(|| {
        if text.is_null() {
            return Ok(());
        }
        let freed = LIVE_STRINGS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&text.addr());
        match freed {
            Some(_) => Ok(()),
            None => Err(Failure::invalid_argument(format!(
                "{text:p} is not a string cudyn returned, or it was freed already"
            ))),
        }
    })
}

/// What CUDA cudyn finds here, as text: each CUDA library with its version and path (or why it
/// is missing) and the GPUs, then any warnings; the `cudyn doctor` command prints more.
///
/// On success `*report` is a new string the caller frees with `cudyn_string_free`.
///
/// # Safety
/// `report` is null (refused) or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn cudyn_toolchain_report(report: *mut *mut c_char) -> cudyn_status {
    let compute = || {
        let text = report_text(&ToolchainReport::probe());
        Ok(give_string(&text))
    };
    // SAFETY: the caller vouches that `report` is null or writable.
    unsafe { entry_returning(report, "report", compute) }
}

fn report_text(report: &ToolchainReport) -> String {
    let mut text = String::new();
    for component in &report.components {
        let optional = if component.required || component.found.is_some() {
            ""
        } else {
            " (optional)"
        };
        let _ = writeln!(
            text,
            "{:<13} {}{optional}",
            component.component.name(),
            component.summary()
        );
    }
    if report.devices.is_empty() {
        let why = report.devices_error.as_deref().unwrap_or("none found");
        let _ = writeln!(
            text,
            "GPUs          none: {}",
            why.lines().next().unwrap_or_default()
        );
    }
    for device in &report.devices {
        let (major, minor) = device.compute_capability;
        let _ = writeln!(
            text,
            "GPU {:<9} {}, compute capability {major}.{minor}, {:.1} GiB",
            device.ordinal,
            device.name,
            device.total_memory as f64 / f64::from(1u32 << 30)
        );
    }
    for warning in &report.warnings {
        let _ = writeln!(text, "warning [{}] {}", warning.id, warning.message);
    }
    text
}

/// The number of GPUs the driver reports. Without a driver: `CUDYN_ERROR_NO_GPU`, with the
/// places searched in the message.
///
/// # Safety
/// `count` is null (refused) or valid for writing a `size_t`.
#[no_mangle]
pub unsafe extern "C" fn cudyn_device_count(count: *mut usize) -> cudyn_status {
    let compute = || {
        let devices = Device::count()?;
        Ok(devices)
    };
    // SAFETY: the caller vouches that `count` is null or writable.
    unsafe { entry_returning(count, "count", compute) }
}

/// Makes GPU `ordinal` the calling thread's current device: later allocations, streams, loads
/// and launches of this thread go to it.
#[no_mangle]
pub extern "C" fn cudyn_set_device(ordinal: usize) -> cudyn_status {
    entry(|| {
        cudyn::set_device(ordinal)?;
        Ok(())
    })
}

/// Waits until all work on the calling thread's current device is done, and reports the first
/// failure of that work (a kernel that faulted).
#[no_mangle]
pub extern "C" fn cudyn_synchronize() -> cudyn_status {
    entry(|| Ok(cudyn::synchronize()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_is_freed_once_and_only_if_cudyn_made_it() {
        let text = give_string("report");
        assert_eq!(cudyn_string_free(text), cudyn_status::CUDYN_SUCCESS);
        assert_eq!(
            cudyn_string_free(text),
            cudyn_status::CUDYN_ERROR_INVALID_ARGUMENT
        );
        let mine = CString::new("mine").unwrap();
        assert_eq!(
            cudyn_string_free(mine.as_ptr().cast_mut()),
            cudyn_status::CUDYN_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            cudyn_string_free(std::ptr::null_mut()),
            cudyn_status::CUDYN_SUCCESS
        );
    }

    #[test]
    fn the_version_is_the_package_version() {
        // SAFETY: a static NUL-terminated string.
        let version = unsafe { CStr::from_ptr(cudyn_version()) };
        assert_eq!(version.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    }
}
