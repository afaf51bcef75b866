//! The floor under a warm hit of the compile cache: the work any cache that keeps cudyn's
//! promises must do in a new process, written inline with `std` and `xxhash-rust`, for
//! `bench_cache`'s (f).
//!
//! The same steps as cudyn's hit, on the same files, without cudyn's code: read the cache's
//! settings from the environment; check the cache folder (owner and mode: a folder others may
//! write to is refused); name the variables the search for NVRTC reads
//! and the program (source and options) by a hash each, the entry's direct name; read the entry
//! through that name, hash it (its checksum, xxh3-128 as cudyn's), compare the source it was made
//! from with this one, `stat` NVRTC's file (and the headers' version files, for a source that may
//! include one), which the entry names, and copy its code out. What cudyn's hit costs beyond this
//! is its own code's, run for the first time in the process.

use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The files a hit of one warm cache reads, found by the parent (outside the clock).
pub struct Files {
    /// The cache's folder (`CUDYN_CACHE_DIR`), where the entries live.
    pub base: PathBuf,
    /// The remembered toolchain of this environment, which names the files a hit checks (read
    /// by [`Files::find`], not by a hit: an entry holds its toolchain).
    pub record: PathBuf,
    /// The entry of the benchmark's source, by its direct name.
    pub entry: PathBuf,
    /// The files of the remembered toolchain a hit checks: NVRTC's first, then those the
    /// headers were read from.
    pub stamps: Vec<PathBuf>,
}

impl Files {
    /// The files of the warm cache in `base`, which holds one entry and one toolchain record.
    pub fn find(base: &Path) -> Result<Files, String> {
        let only = |folder: PathBuf, wanted: &dyn Fn(&str) -> bool| {
            let listing = std::fs::read_dir(&folder).map_err(|e| format!("{folder:?}: {e}"))?;
            let mut found = listing
                .filter_map(|entry| Some(entry.ok()?.path()))
                .filter(|path| {
                    path.file_name()
                        .and_then(|name| name.to_str())
                        .is_some_and(wanted)
                });
            match (found.next(), found.next()) {
                (Some(path), None) => Ok(path),
                _ => Err(format!("{folder:?} does not hold exactly one such file")),
            }
        };
        let record = only(base.join("compilers"), &|name| {
            name.starts_with("toolchain-")
        })?;
        let environment = only(base.join("direct"), &|_| true)?;
        let entry = only(environment, &|name| name.ends_with(".cudyn"))?;
        let bytes = std::fs::read(&record).map_err(|e| e.to_string())?;
        let stamps = stamped_files(&bytes).ok_or("the toolchain record does not read")?;
        Ok(Files {
            base: base.to_owned(),
            record,
            entry,
            stamps,
        })
    }

    /// The files as one value of an environment variable, one path per line (the record refuses
    /// paths with line breaks).
    pub fn to_env(&self) -> String {
        let mut lines = vec![&self.base, &self.record, &self.entry];
        lines.extend(&self.stamps);
        let lines: Vec<_> = lines.iter().map(|path| path.to_string_lossy()).collect();
        lines.join("\n")
    }

    /// The files from [`Files::to_env`]'s value.
    pub fn from_env(value: &str) -> Result<Files, String> {
        let mut paths = value.lines().map(PathBuf::from);
        let mut next = || paths.next().ok_or("too few paths for the floor");
        Ok(Files {
            base: next()?,
            record: next()?,
            entry: next()?,
            stamps: paths.collect(),
        })
    }
}

/// The files a remembered toolchain names with their stamps, NVRTC's first. The record, after
/// its 8-byte magic: a count, then per file its path and seven numbers; the two identities, the
/// origin, the version (two numbers), NVRTC's path; every number a little-endian `u64` and every
/// byte string after its length.
fn stamped_files(record: &[u8]) -> Option<Vec<PathBuf>> {
    fn number(rest: &mut &[u8]) -> Option<usize> {
        let (head, tail) = rest.split_first_chunk::<8>()?;
        *rest = tail;
        usize::try_from(u64::from_le_bytes(*head)).ok()
    }
    fn bytes<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
        let len = number(rest)?;
        let (head, tail) = (rest.get(..len)?, rest.get(len..)?);
        *rest = tail;
        Some(head)
    }
    let path = |bytes: &[u8]| PathBuf::from(std::ffi::OsStr::from_bytes(bytes));
    let mut rest = record.get(8..)?;
    let count = number(&mut rest)?;
    let mut files = Vec::new();
    for _ in 0..count {
        files.push(path(bytes(&mut rest)?));
        rest = rest.get(7 * 8..)?;
    }
    for _ in 0..3 {
        bytes(&mut rest)?;
    }
    rest = rest.get(2 * 8..)?;
    let nvrtc = path(bytes(&mut rest)?);
    files.sort_by_key(|file| *file != nvrtc);
    (files.first() == Some(&nvrtc)).then_some(files)
}

/// The code of an entry, where it was read: in the entry's bytes, not copied out.
pub struct Code {
    entry: Vec<u8>,
    range: std::ops::Range<usize>,
}

impl AsRef<[u8]> for Code {
    fn as_ref(&self) -> &[u8] {
        &self.entry[self.range.clone()]
    }
}

/// The essential work of a hit, `source` compiled for `arch` (e.g. `sm_90`): the entry's code,
/// ready for `cudaLibraryLoadData`.
pub fn hit(files: &Files, source: &str, arch: &str) -> Result<Code, String> {
    for name in ["CUDYN_CACHE", "CUDYN_CACHE_DIR"] {
        std::hint::black_box(std::env::var_os(name));
    }
    // SAFETY: geteuid takes nothing and cannot fail.
    let me = unsafe { libc::geteuid() };
    let folder = &files.base;
    let metadata = std::fs::symlink_metadata(folder).map_err(|e| e.to_string())?;
    if !metadata.is_dir() || metadata.uid() != me || metadata.mode() & 0o022 != 0 {
        return Err(format!("{folder:?} is not a private folder"));
    }
    // The environment and the program as bytes, each named by a hash for the entry's file name.
    let mut fingerprint = Vec::new();
    for name in cudyn::locate::SEARCH_ENV {
        match std::env::var_os(name) {
            Some(value) => fingerprint.extend_from_slice(value.as_encoded_bytes()),
            None => fingerprint.extend_from_slice(b"unset"),
        };
    }
    let inputs = [b"-arch=", arch.as_bytes(), source.as_bytes()].concat();
    std::hint::black_box(xxhash_rust::xxh3::xxh3_128(&fingerprint));
    std::hint::black_box(xxhash_rust::xxh3::xxh3_128(&inputs));
    let entry = read_whole(&files.entry)?;
    std::hint::black_box(xxhash_rust::xxh3::xxh3_128(&entry));
    // The program the entry was made from, compared with this one: its manifest ends with the
    // source, then two empty lists (name expressions, headers), each a count of 0 as an 8-byte
    // field.
    let empty_list = [8u64.to_le_bytes(), 0u64.to_le_bytes()].concat();
    if !manifest_of(&entry).is_some_and(|manifest| {
        manifest
            .strip_suffix([empty_list.as_slice(), &empty_list].concat().as_slice())
            .is_some_and(|rest| rest.ends_with(source.as_bytes()))
    }) {
        return Err(format!("{:?} was not made from this source", files.entry));
    }
    // A source that includes nothing cannot read CUDA's headers: NVRTC's file alone is checked.
    let checked = if source.contains("include") {
        &files.stamps[..]
    } else {
        &files.stamps[..1]
    };
    let mut stamps = 0;
    for file in checked {
        let metadata = std::fs::metadata(file).map_err(|e| format!("{file:?}: {e}"))?;
        stamps ^= metadata.size() ^ metadata.ino() ^ metadata.mtime() as u64;
    }
    std::hint::black_box(stamps);
    let code = code_of(&entry).ok_or_else(|| format!("{:?} is not an entry", files.entry))?;
    let start = code.as_ptr() as usize - entry.as_ptr() as usize;
    let range = start..start + code.len();
    Ok(Code { entry, range })
}

/// A field after its length (a little-endian `u64`), and what follows it.
fn length_prefixed(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = bytes.split_first_chunk::<8>()?;
    let len = usize::try_from(u64::from_le_bytes(*len)).ok()?;
    (len <= rest.len()).then(|| rest.split_at(len))
}

/// The manifest of an entry file: after the 8-byte magic, the manifest and the code, each after
/// its length, then the checksum. Its last field is the program's inputs, ending with the source,
/// then its name expressions and in-memory headers (see `hit`).
fn manifest_of(entry: &[u8]) -> Option<&[u8]> {
    Some(length_prefixed(entry.get(8..)?)?.0)
}

/// The code of an entry file (see [`manifest_of`]).
fn code_of(entry: &[u8]) -> Option<&[u8]> {
    let (_manifest, rest) = length_prefixed(entry.get(8..)?)?;
    Some(length_prefixed(rest)?.0)
}

/// A whole entry, read as cudyn reads it: its length (and its time of last use) from its
/// metadata, one read.
fn read_whole(path: &Path) -> Result<Vec<u8>, String> {
    let read = || {
        let mut file = std::fs::File::open(path)?;
        let mut bytes = vec![0; file.metadata()?.len() as usize];
        file.read_exact(&mut bytes)?;
        Ok::<_, std::io::Error>(bytes)
    };
    read().map_err(|e| format!("{path:?}: {e}"))
}
