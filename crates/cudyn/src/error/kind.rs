//! [`ErrorKind`]: what kind of failure an [`Error`] is, as a plain enum to match on.

use super::Error;

/// What kind of failure an [`Error`] is: one kind per variant of [`Error`], without its data,
/// so that a program decides what to do with one `match` (or `==`) and no message parsing.
///
/// ```no_run
/// use cudyn::{ErrorKind, Library};
///
/// match Library::from_file("kernels.cubin") {
///     Ok(_) => println!("loaded"),
///     Err(error) if error.kind() == ErrorKind::LibraryNotFound => eprintln!("no CUDA: {error}"),
///     Err(error) => eprintln!("{error}"),
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// [`Error::LibraryNotFound`]: a CUDA library was found in none of the places searched.
    LibraryNotFound,
    /// [`Error::LibraryOpen`]: a CUDA library was found but the system loader could not open it.
    LibraryOpen,
    /// [`Error::MissingSymbol`].
    MissingSymbol,
    /// [`Error::VersionTooOld`]: an opened CUDA library is older than cudyn supports.
    VersionTooOld,
    /// [`Error::VersionUnreadable`].
    VersionUnreadable,
    /// [`Error::Cuda`]: a call into a CUDA library returned an error status.
    Cuda,
    /// [`Error::HeaderNotFound`].
    HeaderNotFound,
    /// [`Error::SearchPathFrozen`].
    SearchPathFrozen,
    /// [`Error::KernelNotInImage`].
    KernelNotInImage,
    /// [`Error::KernelNotFound`]: a library has no kernel of the name asked for.
    KernelNotFound,
    /// [`Error::KernelNotRegistered`].
    KernelNotRegistered,
    /// [`Error::LinkedKernel`].
    LinkedKernel,
    /// [`Error::KernelNotLinked`].
    KernelNotLinked,
    /// [`Error::VariableSize`].
    VariableSize,
    /// [`Error::LaunchArguments`].
    LaunchArguments,
    /// [`Error::LaunchConfig`].
    LaunchConfig,
    /// [`Error::ArchRequired`].
    ArchRequired,
    /// [`Error::ArchUnsupported`]: a compiler was asked for an architecture it does not know.
    ArchUnsupported,
    /// [`Error::InvalidArch`]: text that is not a GPU architecture was given as one.
    InvalidArch,
    /// [`Error::InvalidMacro`].
    InvalidMacro,
    /// [`Error::NulByte`].
    NulByte,
    /// [`Error::NonUtf8Path`]: a file name that nvJitLink cannot take.
    NonUtf8Path,
    /// [`Error::EmptyOutput`]: a compiler or linker reported success but produced nothing.
    EmptyOutput,
    /// [`Error::PtxNewerThanDriver`].
    PtxNewerThanDriver,
    /// [`Error::NotDeviceCode`].
    NotDeviceCode,
    /// [`Error::MalformedImage`].
    MalformedImage,
    /// [`Error::LinkInputKind`]: an input added to a link as one kind holds device code of another.
    LinkInputKind,
    /// [`Error::LinkArchMismatch`].
    LinkArchMismatch,
    /// [`Error::NotRelocatable`].
    NotRelocatable,
    /// [`Error::NotLoadable`].
    NotLoadable,
    /// [`Error::NeedsLinking`].
    NeedsLinking,
    /// [`Error::AmbiguousKernel`].
    AmbiguousKernel,
    /// [`Error::JitOptimizationLevel`]: a JIT option is outside the range the JIT accepts.
    JitOptimizationLevel,
    /// [`Error::RangeOutsideBuffer`]: a range of elements reaches outside a device buffer.
    RangeOutsideBuffer,
    /// [`Error::CopyLengthMismatch`]: a copy between device and host memory of different lengths.
    CopyLengthMismatch,
    /// [`Error::SizeOverflow`]: a buffer size in bytes does not fit the address space.
    SizeOverflow,
    /// [`Error::DeviceOutOfRange`]: a device ordinal names no device the driver reports.
    DeviceOutOfRange,
    /// [`Error::NotPrimaryContext`].
    NotPrimaryContext,
    /// [`Error::DeviceMismatch`]: two handles used together belong to different devices.
    DeviceMismatch,
    /// [`Error::DriverInconsistent`].
    DriverInconsistent,
    /// [`Error::ReadFile`]: a file could not be read.
    ReadFile,
    /// [`Error::CacheRefused`].
    CacheRefused,
    /// [`Error::CacheUnavailable`].
    CacheUnavailable,
    /// [`Error::CacheIo`]: the compile cache's folder could not be created or written.
    CacheIo,
    /// [`Error::CompileWorker`].
    CompileWorker,
    /// [`Error::CacheDirFrozen`].
    CacheDirFrozen,
    /// [`Error::CacheRemoteRefused`]: the remote tier of the compile cache is configured but
    /// cannot be used (no MAC key, say).
    CacheRemoteRefused,
    /// [`Error::LinkStopped`]: an isolated link was stopped by a signal or by one of its limits.
    LinkStopped,
}

impl Error {
    /// What kind of failure this is, to match on (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::LibraryNotFound { .. } => ErrorKind::LibraryNotFound,
            Error::LibraryOpen { .. } => ErrorKind::LibraryOpen,
            Error::MissingSymbol { .. } => ErrorKind::MissingSymbol,
            Error::VersionTooOld { .. } => ErrorKind::VersionTooOld,
            Error::VersionUnreadable { .. } => ErrorKind::VersionUnreadable,
            Error::Cuda { .. } => ErrorKind::Cuda,
            Error::HeaderNotFound { .. } => ErrorKind::HeaderNotFound,
            Error::SearchPathFrozen { .. } => ErrorKind::SearchPathFrozen,
            Error::KernelNotInImage { .. } => ErrorKind::KernelNotInImage,
            Error::KernelNotFound { .. } => ErrorKind::KernelNotFound,
            Error::KernelNotRegistered { .. } => ErrorKind::KernelNotRegistered,
            Error::LinkedKernel { .. } => ErrorKind::LinkedKernel,
            Error::KernelNotLinked { .. } => ErrorKind::KernelNotLinked,
            Error::VariableSize { .. } => ErrorKind::VariableSize,
            Error::LaunchArguments { .. } => ErrorKind::LaunchArguments,
            Error::LaunchConfig { .. } => ErrorKind::LaunchConfig,
            Error::ArchRequired { .. } => ErrorKind::ArchRequired,
            Error::ArchUnsupported { .. } => ErrorKind::ArchUnsupported,
            Error::InvalidArch { .. } => ErrorKind::InvalidArch,
            Error::InvalidMacro { .. } => ErrorKind::InvalidMacro,
            Error::NulByte { .. } => ErrorKind::NulByte,
            Error::NonUtf8Path { .. } => ErrorKind::NonUtf8Path,
            Error::EmptyOutput { .. } => ErrorKind::EmptyOutput,
            Error::PtxNewerThanDriver { .. } => ErrorKind::PtxNewerThanDriver,
            Error::NotDeviceCode { .. } => ErrorKind::NotDeviceCode,
            Error::MalformedImage { .. } => ErrorKind::MalformedImage,
            Error::LinkInputKind { .. } => ErrorKind::LinkInputKind,
            Error::LinkArchMismatch { .. } => ErrorKind::LinkArchMismatch,
            Error::NotRelocatable { .. } => ErrorKind::NotRelocatable,
            Error::NotLoadable { .. } => ErrorKind::NotLoadable,
            Error::NeedsLinking { .. } => ErrorKind::NeedsLinking,
            Error::AmbiguousKernel { .. } => ErrorKind::AmbiguousKernel,
            Error::JitOptimizationLevel { .. } => ErrorKind::JitOptimizationLevel,
            Error::RangeOutsideBuffer { .. } => ErrorKind::RangeOutsideBuffer,
            Error::CopyLengthMismatch { .. } => ErrorKind::CopyLengthMismatch,
            Error::SizeOverflow { .. } => ErrorKind::SizeOverflow,
            Error::DeviceOutOfRange { .. } => ErrorKind::DeviceOutOfRange,
            Error::NotPrimaryContext { .. } => ErrorKind::NotPrimaryContext,
            Error::DeviceMismatch { .. } => ErrorKind::DeviceMismatch,
            Error::DriverInconsistent { .. } => ErrorKind::DriverInconsistent,
            Error::ReadFile { .. } => ErrorKind::ReadFile,
            Error::CacheRefused { .. } => ErrorKind::CacheRefused,
            Error::CacheUnavailable { .. } => ErrorKind::CacheUnavailable,
            Error::CacheIo { .. } => ErrorKind::CacheIo,
            Error::CompileWorker { .. } => ErrorKind::CompileWorker,
            Error::CacheDirFrozen { .. } => ErrorKind::CacheDirFrozen,
            Error::CacheRemoteRefused { .. } => ErrorKind::CacheRemoteRefused,
            Error::LinkStopped { .. } => ErrorKind::LinkStopped,
        }
    }
}
