//! The size ledger: the total size of the entries on disk, kept without listing the folder.
//!
//! Evicting down to the size cap needs that total, and listing the folder costs a `stat` of
//! every entry (and of every direct name, which the eviction sweeps too): when every process
//! listed the folder at its first write, a new process's first compile into a cache of a few
//! thousand entries paid more for the listing than for all of the cache's other work.
//!
//! The ledger is one small file, `ledger` in the cache's folder, of 8-byte little-endian
//! records: the first is the total the last listing found, each later one the size of an entry
//! written since, appended by its writer (`O_APPEND`: one `write` of 8 bytes, which processes
//! do not interleave).
//! A write appends its record and reads the ledger back; when the total passes the cap, when
//! [`WRITES_BETWEEN_LISTINGS`] writes were recorded since the listing, or when there is no
//! ledger to read (a new folder, one an older cudyn wrote, a damaged ledger), the folder is
//! listed and evicted, and the ledger started again from what the listing found. So the total
//! is an estimate between listings: an entry written again under its key, or removed by hand, is
//! counted until the next one. A record appended while a listing replaces the ledger is lost,
//! which the next listing makes good.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::store;

/// Writes recorded after which the folder is listed again, whatever the total says.
pub(crate) const WRITES_BETWEEN_LISTINGS: usize = 64;

/// The ledger's file name inside the cache's folder.
const NAME: &str = "ledger";

/// One record: a size in bytes.
const RECORD: usize = std::mem::size_of::<u64>();

/// A ledger longer than this is read as damaged (listings keep it to a few hundred bytes).
const MAX_LEN: u64 = 64 * 1024;

/// What the ledger says after a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tally {
    /// The listed total plus every write recorded since.
    pub bytes: u64,
    /// Writes recorded since the listing.
    pub writes: usize,
}

impl Tally {
    /// Whether the folder must be listed now: the total passes `max_bytes`, or enough writes
    /// went unlisted.
    pub(crate) fn listing_due(self, max_bytes: u64) -> bool {
        self.bytes > max_bytes || self.writes >= WRITES_BETWEEN_LISTINGS
    }
}

fn path(dir: &Path) -> PathBuf {
    dir.join(NAME)
}

/// Records a write of `bytes` in the ledger of `dir` (the cache's folder) and returns the
/// tally after it; `None` when there is no ledger, or it cannot be read or written: the caller
/// then lists the folder, which starts one.
pub(crate) fn record_write(dir: &Path, bytes: u64) -> Option<Tally> {
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .open(path(dir))
        .ok()?;
    file.write_all(&bytes.to_le_bytes()).ok()?;
    let len = file.metadata().ok()?.len();
    if len > MAX_LEN {
        return None;
    }
    let mut contents = vec![0; usize::try_from(len).ok()?];
    file.read_exact_at(&mut contents, 0).ok()?;
    tally(&contents)
}

/// The tally of a ledger's `contents`; `None` when they are not whole records.
fn tally(contents: &[u8]) -> Option<Tally> {
    let (records, rest) = contents.as_chunks::<RECORD>();
    if records.is_empty() || !rest.is_empty() {
        return None;
    }
    let bytes = records.iter().try_fold(0u64, |total, record| {
        total.checked_add(u64::from_le_bytes(*record))
    })?;
    Some(Tally {
        bytes,
        writes: records.len() - 1,
    })
}

/// Starts the ledger of `dir` again from `total`, the bytes a listing found.
pub(crate) fn start(dir: &Path, total: u64) {
    // A ledger that cannot be written is none: the next write lists the folder again.
    let _ = store::write_atomically(&path(dir), &total.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_add_to_the_listed_total_until_a_listing_is_due() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            record_write(dir.path(), 10),
            None,
            "no ledger before a listing"
        );
        start(dir.path(), 1000);
        let first = record_write(dir.path(), 10).unwrap();
        assert_eq!(
            first,
            Tally {
                bytes: 1010,
                writes: 1
            }
        );
        assert!(!first.listing_due(1010) && first.listing_due(1009));
        let mut last = first;
        for _ in 1..WRITES_BETWEEN_LISTINGS {
            assert!(!last.listing_due(u64::MAX));
            last = record_write(dir.path(), 1).unwrap();
        }
        assert_eq!(last.writes, WRITES_BETWEEN_LISTINGS);
        assert!(last.listing_due(u64::MAX));
        start(dir.path(), 5);
        assert_eq!(
            record_write(dir.path(), 1).unwrap(),
            Tally {
                bytes: 6,
                writes: 1
            }
        );
    }

    #[test]
    fn a_damaged_ledger_is_none() {
        for contents in [&[][..], &[1, 2, 3], &[0; 12], &[0xff; 16]] {
            assert_eq!(tally(contents), None, "{contents:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(path(dir.path()), [7; 3]).unwrap();
        assert_eq!(record_write(dir.path(), 8), None, "a torn record");
    }
}
