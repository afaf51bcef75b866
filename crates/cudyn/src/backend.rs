//! Which CUDA API loads and manages a library: a value every layer from the C calls up names.

/// Which CUDA API loads and manages a library. Both give interchangeable handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// The runtime's library API (`cudaLibraryLoadData`, ...), CUDA 12.8 or newer.
    Runtime,
    /// The driver's library API (`cuLibraryLoadData`, ...), CUDA 12.0 or newer.
    Driver,
}
