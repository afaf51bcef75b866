//! One function per C call, a level above [`crate::sys`]: each turns the call's status into a
//! [`Result`](crate::Result), takes and returns raw handles, and does nothing else. The safe types
//! (`Library`, `DeviceBuffer`, `Program`, `Linker`, ...) are written on top of these functions and
//! never call C themselves; this is the layer cudarc calls `result`.
//!
//! A function whose arguments the compiler cannot check (a handle that must still be alive, a host
//! pointer the library writes through) is an `unsafe fn` whose `# Safety` section says what the
//! caller vouches for.

pub(crate) mod driver;
pub(crate) mod library;
pub(crate) mod nvjitlink;
pub(crate) mod nvrtc;
