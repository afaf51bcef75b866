//! Device and host memory a process uses: `total - free` from `cuMemGetInfo` (as
//! `cudaMemGetInfo` reports it) through [`cudyn::Device::memory_info`], and the resident set
//! (`VmRSS` in /proc/self/status). Shared by tests/gpu_sharing_memory.rs and the cudyn-bench
//! program (through `#[path]`), so not every item is used by each.
#![allow(dead_code)]

use cudyn::Device;

/// Device and host memory in use, in bytes.
#[derive(Debug, Clone, Copy)]
pub struct Footprint {
    pub device: i64,
    pub host: i64,
}

impl Footprint {
    /// What the process uses now on `device` and on the host.
    pub fn now(device: Device) -> Result<Footprint, String> {
        let status = std::fs::read_to_string("/proc/self/status")
            .map_err(|e| format!("/proc/self/status: {e}"))?;
        let rss_kib: i64 = status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|rest| rest.trim().strip_suffix("kB"))
            .and_then(|kib| kib.trim().parse().ok())
            .ok_or("no VmRSS line in kB in /proc/self/status")?;
        let used = device.memory_info().map_err(|e| e.to_string())?.used();
        Ok(Footprint {
            device: used as i64,
            host: rss_kib * 1024,
        })
    }

    /// The growth from `baseline` to this footprint.
    pub fn since(self, baseline: Footprint) -> Footprint {
        Footprint {
            device: self.device - baseline.device,
            host: self.host - baseline.host,
        }
    }
}

/// Bytes in MiB.
pub fn mib(bytes: i64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}
