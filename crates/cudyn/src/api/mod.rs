//! One safe-signature function per C call of the CUDA libraries, the layer between the raw
//! entry points of [`crate::sys`] and cudyn's types: each turns the status into a `Result`, takes
//! and returns raw handles, and states in a `# Safety` section what the C call needs of them.

pub mod nvjitlink;
pub mod nvrtc;
