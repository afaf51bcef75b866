//! The cache's files on disk: a private folder, and entries written so that no reader ever sees
//! half of one.
//!
//! Every file is written to a temporary file in the same folder, then renamed over its final
//! name. This relies on POSIX `rename(2)` replacing the target atomically within one file system:
//! a reader opens either the old file or the new one, whole. Two writers of one key both rename
//! complete files and the last one wins; both hold the same result, so either is right.
//!
//! Nothing is flushed to disk before the rename (`fsync`). A crash of the machine may then leave a
//! renamed file empty or cut short, and every file here is checked when it is read (an entry by
//! its checksum, a record by its own check): such a file is a miss, and the next compile of it
//! replaces it. Losing an entry to a crash costs one compile; flushing would make every cold
//! compile wait for the disk. (ccache decides the same.)
//!
//! On network file systems (NFS) rename is atomic on the server but clients may cache directory
//! entries and attributes for a few seconds: another host may miss a fresh entry (and compile
//! again) or, with close-to-open consistency off, read a stale one, which the checksum then
//! rejects as damaged. Nothing is ever loaded unverified, so the worst outcome on such a file
//! system is a wasted compile.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};

/// The extension of entry files.
pub(crate) const EXTENSION: &str = "cudyn";

pub(crate) fn io_error(path: &Path, what: &'static str, error: std::io::Error) -> Error {
    Error::CacheIo {
        path: path.to_owned(),
        what,
        source: Arc::new(error),
    }
}

/// Creates `dir` private (0700) when missing, then refuses it unless this user owns it and no
/// one else may write to it.
pub(crate) fn prepare_folder(dir: &Path) -> Result<()> {
    prepare_folder_of(dir, this_user())
}

/// [`prepare_folder`] for the user `me`, asked once for several folders.
pub(crate) fn prepare_folder_of(dir: &Path, me: u32) -> Result<()> {
    if let Ok(metadata) = fs::symlink_metadata(dir) {
        return check_private(dir, &metadata, me);
    }
    if let Some(parent) = dir.parent() {
        fs::create_dir_all(parent)
            .map_err(|error| io_error(parent, "creating the folder", error))?;
    }
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        // Another process made it meanwhile: it is checked like any existing folder.
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(io_error(dir, "creating the folder", error)),
    }
    let metadata =
        fs::symlink_metadata(dir).map_err(|error| io_error(dir, "reading the folder", error))?;
    check_private(dir, &metadata, me)
}

/// `Ok` when `dir` exists and is a folder that [`prepare_folder`] accepts; creates nothing.
pub(crate) fn check_folder(dir: &Path) -> Result<()> {
    let metadata =
        fs::symlink_metadata(dir).map_err(|error| io_error(dir, "reading the folder", error))?;
    check_private(dir, &metadata, this_user())
}

/// `Ok` when `dir`, of `metadata` (not following links), is a folder owned by `me` and not
/// writable by group or others.
fn check_private(dir: &Path, metadata: &fs::Metadata, me: u32) -> Result<()> {
    let refuse = |reason: String| Error::CacheRefused {
        path: dir.to_owned(),
        reason,
    };
    if !metadata.is_dir() {
        return Err(refuse(
            "it is not a folder (or is a symbolic link, which could lead anywhere): move it \
             away, or point CUDYN_CACHE_DIR at another folder"
                .into(),
        ));
    }
    if me != metadata.uid() {
        return Err(refuse(format!(
            "it is owned by user {}, not by this process's user ({me}), who could not trust what \
             it holds: point CUDYN_CACHE_DIR at a folder of your own",
            metadata.uid()
        )));
    }
    let mode = metadata.permissions().mode();
    if mode & 0o022 != 0 {
        return Err(refuse(format!(
            "it is writable by group or others (mode {:o}), who could plant code in it: `chmod \
             700 {}` makes it private",
            mode & 0o777,
            dir.display()
        )));
    }
    Ok(())
}

/// The user this process runs as (its effective user), who owns the files it creates.
pub(crate) fn this_user() -> u32 {
    // SAFETY: geteuid takes nothing and cannot fail. (Asking the kernel directly rather than
    // stat'ing /proc/self saves a procfs path walk on every process's first cache use.)
    unsafe { libc::geteuid() }
}

/// Writes `bytes` as `path` atomically (see the module documentation).
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let (folder, temporary) = temporary_beside(path);
    let create = || {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)
    };
    let written = (|| {
        let mut file = match create() {
            // The folder was removed since the cache checked it (a `cache clear` of another
            // process, a user's `rm`): made again, private, rather than failing every write.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                fs::DirBuilder::new()
                    .mode(0o700)
                    .recursive(true)
                    .create(folder)?;
                create()?
            }
            opened => opened?,
        };
        file.write_all(bytes)?;
        fs::rename(&temporary, path)
    })();
    written.map_err(|error| {
        let _ = fs::remove_file(&temporary);
        io_error(path, "writing an entry", error)
    })
}

/// The folder of `path` and a temporary name in it, unique to this thread's write.
fn temporary_beside(path: &Path) -> (&Path, std::path::PathBuf) {
    let folder = path.parent().unwrap_or(Path::new("."));
    let temporary = folder.join(format!(
        ".{}.{}.{}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id(),
        unique_suffix()
    ));
    (folder, temporary)
}

/// Makes `path` a second name of the file `existing` (a hard link), atomically replacing what
/// `path` named: linked under a temporary name, then renamed. The folder of `path` is made
/// (private) when missing. File systems without hard links refuse it; the caller does without.
pub(crate) fn link_atomically(existing: &Path, path: &Path) -> std::io::Result<()> {
    let (folder, temporary) = temporary_beside(path);
    let linked = match fs::hard_link(existing, &temporary) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound && !folder.exists() => {
            fs::DirBuilder::new()
                .mode(0o700)
                .recursive(true)
                .create(folder)?;
            fs::hard_link(existing, &temporary)
        }
        linked => linked,
    };
    linked?;
    let renamed = fs::rename(&temporary, path);
    // A rename between two links of one file does nothing and succeeds (POSIX), which leaves
    // the temporary name behind when `path` already named this file (another process filed it
    // meanwhile): it goes here in every case.
    let _ = fs::remove_file(&temporary);
    renamed
}

/// A suffix that differs between the threads of one process.
fn unique_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    COUNTER.fetch_add(1, Ordering::Relaxed) << 32 | u64::from(nanos)
}

/// A file of the cache, open, with its metadata and its bytes: one read of the length the
/// metadata gives (the cache's files are replaced whole, never written in place).
pub(crate) fn read_whole(path: &Path) -> Option<(File, fs::Metadata, Vec<u8>)> {
    let file = File::open(path).ok()?;
    let metadata = file.metadata().ok()?;
    let bytes = read_exactly(&file, usize::try_from(metadata.len()).ok()?)?;
    Some((file, metadata, bytes))
}

/// The next `len` bytes of `file`, or `None` when it ends before them or a read fails. Read
/// into memory not zeroed first: an entry is read on every warm start, and zeroing its buffer
/// costs as much as the read's copy (std's safe reads either zero the buffer or, to read
/// uninitialised memory, cut it into 8 KiB reads or ask for the file's size again).
fn read_exactly(file: &File, len: usize) -> Option<Vec<u8>> {
    use std::os::fd::AsRawFd as _;
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(len).ok()?;
    while bytes.len() < len {
        let (done, wanted) = (bytes.len(), len - bytes.len());
        let spare = &mut bytes.spare_capacity_mut()[..wanted];
        // SAFETY: `read` writes at most `wanted` bytes from `spare`'s start, memory the vector
        // owns (its spare capacity, at least `wanted` long), which nothing else refers to
        // meanwhile; `file` keeps the descriptor open for the call.
        let read = unsafe { libc::read(file.as_raw_fd(), spare.as_mut_ptr().cast(), wanted) };
        match usize::try_from(read) {
            // The file is shorter than its metadata said: replaced meanwhile, or cut short.
            Ok(0) => return None,
            // SAFETY: the kernel wrote the `read` bytes after the vector's length (never more
            // than it was asked for, `wanted`), so the first `done + read` are initialised.
            Ok(read) => unsafe { bytes.set_len(done + read.min(wanted)) },
            Err(_) if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {
            }
            Err(_) => return None,
        }
    }
    Some(bytes)
}

/// A small file of the cache whole, or `None`: one `read` into a buffer larger than such files
/// usually are, more only when it fills, so that a warm start asks for no metadata of a file
/// whose contents check themselves. A read of a regular file returns less than asked only at its
/// end; were it otherwise, the bytes would fail the file's checksum, as a damaged file does.
pub(crate) fn read_small(path: &Path) -> Option<Vec<u8>> {
    const FIRST_READ: usize = 2 << 10;
    let mut file = File::open(path).ok()?;
    let mut bytes = vec![0; FIRST_READ];
    let read = file.read(&mut bytes).ok()?;
    if read < FIRST_READ {
        bytes.truncate(read);
    } else {
        file.read_to_end(&mut bytes).ok()?;
    }
    Some(bytes)
}

/// Uses closer together than this are one use for eviction: a hit within it of the last
/// recorded use does not record another (a write to the file system saved).
pub(crate) const USE_RESOLUTION: Duration = Duration::from_secs(60);

/// Reads an entry file and records the use as its modification time, which is the access time
/// cudyn evicts by (file systems mounted `noatime` keep no reliable access time of their own),
/// unless a use was recorded less than [`USE_RESOLUTION`] ago. A file changed meanwhile fails
/// its checksum.
pub(crate) fn read_and_touch(path: &Path) -> Option<Vec<u8>> {
    let (file, metadata, bytes) = read_whole(path)?;
    let now = SystemTime::now();
    let recent = metadata.modified().is_ok_and(|used| {
        now.duration_since(used)
            .is_ok_and(|age| age < USE_RESOLUTION)
    });
    if !recent {
        // The owner may set the times through a read-only handle; a failure only ages the entry.
        let _ = file.set_modified(now);
    }
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_others_may_write_is_refused_and_a_new_one_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let error = prepare_folder(&open).unwrap_err();
        assert!(matches!(&error, Error::CacheRefused { .. }), "{error:?}");
        assert!(error.to_string().contains("writable by group or others"));
        fs::set_permissions(&open, fs::Permissions::from_mode(0o755)).unwrap();
        prepare_folder(&open).unwrap();

        let fresh = dir.path().join("a/b/kernels");
        prepare_folder(&fresh).unwrap();
        let mode = fs::metadata(&fresh).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn a_read_records_a_use_unless_one_was_recorded_just_before() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("entry.cudyn");
        write_atomically(&path, b"entry").unwrap();
        let set_age = |age: Duration| {
            let time = SystemTime::now() - age;
            File::open(&path).unwrap().set_modified(time).unwrap();
            fs::metadata(&path).unwrap().modified().unwrap()
        };
        let modified = |path: &Path| fs::metadata(path).unwrap().modified().unwrap();
        let recent = set_age(USE_RESOLUTION / 2);
        assert_eq!(read_and_touch(&path).unwrap(), b"entry");
        assert_eq!(modified(&path), recent);
        let old = set_age(USE_RESOLUTION * 2);
        assert_eq!(read_and_touch(&path).unwrap(), b"entry");
        assert!(modified(&path) > old + USE_RESOLUTION);
    }

    #[test]
    fn a_write_makes_its_missing_folder_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kernels/entry.cudyn");
        write_atomically(&path, b"entry").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"entry");
        let mode = fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn a_whole_read_returns_files_of_any_size_and_refuses_one_cut_short() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("entry.cudyn");
        for size in [0, 1, 4095, 4096, 13464, (1 << 20) + 3] {
            let bytes: Vec<u8> = (0..size).map(|i| (i * 13 + size) as u8).collect();
            fs::write(&path, &bytes).unwrap();
            let (_, metadata, read) = read_whole(&path).unwrap();
            assert_eq!((metadata.len(), read), (size as u64, bytes), "{size} bytes");
        }
        assert!(read_whole(&dir.path().join("missing")).is_none());
        // Fewer bytes than asked for: the file ended early.
        fs::write(&path, b"short").unwrap();
        assert_eq!(
            read_exactly(&File::open(&path).unwrap(), 5).unwrap(),
            b"short"
        );
        assert!(read_exactly(&File::open(&path).unwrap(), 6).is_none());
    }

    #[test]
    fn a_small_read_returns_files_of_any_size_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("record");
        for size in [0, 1, 1004, 2047, 2048, 2049, 4096, 3 * 4096 + 5] {
            let bytes: Vec<u8> = (0..size).map(|i| (i * 7 + size) as u8).collect();
            fs::write(&path, &bytes).unwrap();
            assert_eq!(read_small(&path).unwrap(), bytes, "{size} bytes");
        }
        assert!(read_small(&dir.path().join("missing")).is_none());
    }

    #[test]
    fn an_atomic_write_leaves_only_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("entry.cudyn");
        write_atomically(&path, b"one").unwrap();
        write_atomically(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_link_makes_its_folder_replaces_the_old_name_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let (one, two) = (dir.path().join("one"), dir.path().join("two"));
        write_atomically(&one, b"one").unwrap();
        write_atomically(&two, b"two").unwrap();
        let names = dir.path().join("names/env");
        let name = names.join("name.cudyn");
        link_atomically(&one, &name).unwrap();
        assert_eq!(fs::read(&name).unwrap(), b"one");
        let mode = fs::metadata(dir.path().join("names")).unwrap().mode();
        assert_eq!(mode & 0o777, 0o700);
        // The same file again (the rename does nothing), then another file.
        link_atomically(&one, &name).unwrap();
        link_atomically(&two, &name).unwrap();
        assert_eq!(fs::read(&name).unwrap(), b"two");
        assert_eq!(
            fs::read_dir(&names).unwrap().count(),
            1,
            "no temporary left"
        );
        assert_eq!(fs::metadata(&one).unwrap().nlink(), 1);
        assert!(link_atomically(&dir.path().join("gone"), &name).is_err());
        assert_eq!(fs::read(&name).unwrap(), b"two");
    }
}
