//! The arguments of the launch rows' kernels (`crates/cudyn-bench/kernels/peers.cu`) that are
//! not buffers: the struct `scale` takes by value and the scalars of `args21`. Shared by the
//! cudyn-bench program and its `bench_launch_host` (through `#[path]`), so not every item is
//! used by each.

use cudyn::DeviceRepr;

/// The struct argument of `scale`: 24 bytes, 8-byte aligned, no padding.
#[repr(C)]
#[derive(Debug, Clone, Copy, DeviceRepr)]
pub struct Scale {
    pub x: u64,
    pub out: u64,
    pub a: f32,
    pub n: u32,
}

// SAFETY: a #[repr(C)] struct of plain numbers without padding, laid out as the kernel's `Scale`.
unsafe impl cudarc::driver::DeviceRepr for Scale {}

/// The 20 scalars of `args21`: five rounds of (int, unsigned long long, float, double).
#[rustfmt::skip]
pub type Scalars = (
    i32, u64, f32, f64, i32, u64, f32, f64, i32, u64, f32, f64, i32, u64, f32, f64,
    i32, u64, f32, f64,
);

/// The scalars `args21` gets.
#[rustfmt::skip]
pub const SCALARS: Scalars = (
    1, 11, 0.5, 0.25, 2, 12, 1.0, 0.5, 3, 13, 1.5, 0.75, 4, 14, 2.0, 1.0,
    5, 15, 2.5, 1.25,
);

/// The sum `args21` writes for [`SCALARS`]: 15 + 65 + 7.5 + 3.75, exact in a float.
pub const SCALARS_SUM: f32 = 91.25;
