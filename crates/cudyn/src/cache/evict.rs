//! Eviction: the entries on disk, least recently used removed first until the total fits a cap.
//!
//! The time of last use is the entry file's modification time, which cudyn sets itself when it
//! reads the entry, to the minute ([`read_and_touch`](super::store::read_and_touch)): access
//! times are unreliable (`noatime`, `relatime`).

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::store::{io_error, EXTENSION};
use crate::error::Result;

/// The default size cap of the disk cache: 1 GiB, unless `CUDYN_CACHE_MAX_BYTES` says otherwise.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;

/// A file as the file system knows it, whatever its names: its device and inode.
pub(crate) type FileId = (u64, u64);

/// An entry file with its size and time of last use.
#[derive(Debug, Clone)]
pub(crate) struct OnDisk {
    pub path: PathBuf,
    pub file: FileId,
    pub size: u64,
    pub last_used: SystemTime,
}

/// Every entry file in `dir`, most recently used first; none when `dir` is missing (it is made
/// at the first write).
pub(crate) fn list(dir: &Path) -> Result<Vec<OnDisk>> {
    let read = match fs::read_dir(dir) {
        Ok(read) => read,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(io_error(dir, "listing entries", error)),
    };
    let mut files: Vec<OnDisk> = read
        .filter_map(|item| item.ok())
        .filter(|item| {
            item.path()
                .extension()
                .is_some_and(|extension| extension == EXTENSION)
        })
        .filter_map(|item| {
            let metadata = item.metadata().ok()?;
            Some(OnDisk {
                path: item.path(),
                file: (metadata.dev(), metadata.ino()),
                size: metadata.len(),
                last_used: metadata.modified().ok()?,
            })
        })
        .collect();
    files.sort_by_key(|file| std::cmp::Reverse(file.last_used));
    Ok(files)
}

/// Temporary files older than this are left over from a writer that died before its rename.
const STALE_TEMPORARY: Duration = Duration::from_secs(3600);

/// Removes the temporary files of writers that died before renaming them.
pub(crate) fn remove_stale_temporaries(dir: &Path) {
    let Ok(read) = fs::read_dir(dir) else {
        return;
    };
    let now = SystemTime::now();
    for item in read.filter_map(|item| item.ok()) {
        let path = item.path();
        let temporary = path.extension().is_some_and(|extension| extension == "tmp");
        let stale = item
            .metadata()
            .and_then(|metadata| metadata.modified())
            .is_ok_and(|modified| {
                now.duration_since(modified)
                    .is_ok_and(|age| age > STALE_TEMPORARY)
            });
        if temporary && stale {
            let _ = fs::remove_file(path);
        }
    }
}

/// Removes the direct names under `direct` (a folder per environment; see [`super`]) whose
/// file is not one of `entries`, the entry files left in the cache: a name is a second link to
/// an entry file, so one whose file is not among them names an entry that was evicted, removed
/// as damaged or replaced, and only holds its space. Leftover temporaries go too, and folders
/// left empty. A name filed by another process after `entries` were listed may go as well,
/// which costs a later process only the slower lookup by key.
pub(crate) fn remove_orphaned_links(direct: &Path, entries: &BTreeSet<FileId>) {
    let Ok(environments) = fs::read_dir(direct) else {
        return;
    };
    let file_id = |metadata: fs::Metadata| (metadata.dev(), metadata.ino());
    for environment in environments.filter_map(|item| item.ok()) {
        let folder = environment.path();
        remove_stale_temporaries(&folder);
        let Ok(names) = fs::read_dir(&folder) else {
            continue;
        };
        for name in names.filter_map(|name| name.ok()) {
            let path = name.path();
            let is_name = path
                .extension()
                .is_some_and(|extension| extension == EXTENSION);
            let orphaned = name
                .metadata()
                .is_ok_and(|metadata| !entries.contains(&file_id(metadata)));
            if is_name && orphaned {
                let _ = fs::remove_file(path);
            }
        }
        // Fails, as it should, unless the folder is empty now.
        let _ = fs::remove_dir(&folder);
    }
}

/// What [`evict`] did: the entries it removed, those it could not remove, with why, and the
/// bytes left.
pub(crate) struct Evicted<'f> {
    pub removed: Vec<&'f OnDisk>,
    pub failed: Vec<(&'f OnDisk, std::io::Error)>,
    pub remaining: u64,
}

/// Removes the least recently used entries of `files` (most recent first) until the rest fit in
/// `max_bytes`. An entry another process removed meanwhile frees its space without counting as
/// removed here; one that cannot be removed (a folder this user may not write) stays, counted in
/// what remains, and the next older one is tried.
pub(crate) fn evict(files: &[OnDisk], max_bytes: u64) -> Evicted<'_> {
    let mut evicted = Evicted {
        removed: Vec::new(),
        failed: Vec::new(),
        remaining: files.iter().map(|file| file.size).sum(),
    };
    for file in files.iter().rev() {
        if evicted.remaining <= max_bytes {
            break;
        }
        match fs::remove_file(&file.path) {
            Ok(()) => {
                evicted.remaining -= file.size;
                evicted.removed.push(file);
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                evicted.remaining -= file.size;
            }
            Err(error) => evicted.failed.push((file, error)),
        }
    }
    evicted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_old_temporary_files_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let (old, fresh, entry) = (
            dir.path().join(".a.cudyn.1.2.tmp"),
            dir.path().join(".b.cudyn.1.2.tmp"),
            dir.path().join(format!("c.{EXTENSION}")),
        );
        for path in [&old, &fresh, &entry] {
            fs::write(path, b"x").unwrap();
        }
        let file = fs::File::options().write(true).open(&old).unwrap();
        file.set_modified(SystemTime::now() - 2 * STALE_TEMPORARY)
            .unwrap();
        fs::File::options()
            .write(true)
            .open(&entry)
            .unwrap()
            .set_modified(SystemTime::now() - 2 * STALE_TEMPORARY)
            .unwrap();
        remove_stale_temporaries(dir.path());
        assert!(!old.exists());
        assert!(fresh.exists() && entry.exists());
    }

    #[test]
    fn the_least_recently_used_entries_go_until_the_rest_fits() {
        let dir = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        for (name, age) in [("old", 300), ("new", 0), ("mid", 100)] {
            let path = dir.path().join(format!("{name}.{EXTENSION}"));
            fs::write(&path, [0u8; 100]).unwrap();
            let file = fs::File::options().write(true).open(&path).unwrap();
            file.set_modified(now - Duration::from_secs(age)).unwrap();
        }
        fs::write(dir.path().join("not-an-entry.tmp"), [0u8; 1000]).unwrap();
        let files = list(dir.path()).unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|file| file.path.file_stem().unwrap().to_str().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["new", "mid", "old"]);
        let evicted = evict(&files, 150);
        assert_eq!(evicted.removed.len(), 2);
        assert!(evicted.failed.is_empty());
        assert_eq!(evicted.remaining, 100);
        assert!(dir.path().join(format!("new.{EXTENSION}")).exists());
        assert!(!dir.path().join(format!("mid.{EXTENSION}")).exists());
    }
}
