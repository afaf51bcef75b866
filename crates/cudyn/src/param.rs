//! [`ParamLayout`]: where one kernel parameter lies in the kernel's parameter buffer.
//!
//! One type serves every place a layout comes from: the driver (`cuKernelGetParamInfo`), offline
//! inspection of a cubin's `.nv.info` or of PTX, and the C layout of the Rust arguments of a
//! launch. A launch is checked by comparing the kernel's layouts with the arguments' layouts.

/// Where one kernel parameter lies in the parameter buffer. A kernel's parameters are a slice of
/// these, in declaration order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ParamLayout {
    /// Byte offset from the start of the parameter buffer.
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
}
