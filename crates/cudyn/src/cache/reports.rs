//! What a cache reports: its statistics, its entries, and what its upkeep (verify, prune,
//! clear) did.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

#[cfg(doc)]
use super::Cache;
use crate::image::ImageKind;

/// What a cache did in this process, and what it holds on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct CacheStats {
    /// Results found in this process's memory.
    pub memory_hits: u64,
    /// Results read from disk.
    pub disk_hits: u64,
    /// Results that had to be compiled.
    pub misses: u64,
    /// Entries written.
    pub writes: u64,
    /// Damaged entries found (and removed or rewritten).
    pub corrupt: u64,
    /// Entries evicted for the size cap.
    pub evictions: u64,
    /// Entries that could not be written (the compile's result was returned all the same; the
    /// first failure of a process is also printed as a warning).
    pub failed_writes: u64,
    /// Entries on disk.
    pub entries: u64,
    /// Their total size in bytes.
    pub bytes: u64,
    /// The size cap in bytes.
    pub max_bytes: u64,
    /// What the remote tier did in this process, when there is one.
    pub remote: Option<super::RemoteStats>,
}

/// One entry on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct EntryInfo {
    /// Its key, in hexadecimal.
    pub key: String,
    /// The kind of code.
    pub kind: ImageKind,
    /// The architecture: `sm_90` for machine code and LTO-IR, `compute_90` for PTX.
    pub arch: String,
    /// Its kernels (lowered names).
    pub kernels: Vec<String>,
    /// The file's size in bytes.
    pub size: u64,
    /// The entry's file, to copy, inspect or remove it.
    pub path: PathBuf,
    /// When it was made.
    pub created: SystemTime,
    /// When cudyn last read or wrote it.
    pub last_used: SystemTime,
}

/// What [`Cache::verify`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct VerifyReport {
    /// Entries read.
    pub checked: usize,
    /// The keys (or file names) of damaged entries, removed.
    pub removed: Vec<String>,
    /// The keys of entries in another cudyn version's file format, removed: no lookup of this
    /// version can hit them (its keys have another schema), so they only took space.
    pub outdated: Vec<String>,
    /// Damaged or outdated entries that could not be removed, and why: they are still there.
    pub not_removed: Vec<NotRemoved>,
}

/// What [`Cache::prune`] and [`Cache::clear`] removed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct PruneReport {
    /// Entries removed.
    pub removed: usize,
    /// Their bytes.
    pub freed_bytes: u64,
    /// The bytes left, those of the entries that could not be removed included.
    pub remaining_bytes: u64,
    /// Entries that were to go and could not be removed (a folder this user may not write, a
    /// read-only file system), and why: they are still there.
    pub not_removed: Vec<NotRemoved>,
}

/// An entry that could not be removed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct NotRemoved {
    /// Its key, in hexadecimal (or its file name).
    pub key: String,
    /// What the operating system said.
    pub reason: String,
}

impl NotRemoved {
    pub(super) fn new(path: &Path, error: &std::io::Error) -> NotRemoved {
        let key = path.file_stem().unwrap_or_default();
        NotRemoved {
            key: key.to_string_lossy().into_owned(),
            reason: error.to_string(),
        }
    }
}
