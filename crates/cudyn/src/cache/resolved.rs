//! Direct mode: the NVRTC and CUDA header folders a process resolved, remembered in the cache,
//! so that the next process checks a few files instead of walking the search order.
//!
//! Finding NVRTC and CUDA's headers walks the search order of [`crate::locate`]: dozens of
//! `stat` calls over the environment's folders, directory listings, and the CUDA version read
//! out of `cuda.h`. That costs more than the rest of a cache hit together. Like ccache's direct
//! mode, cudyn remembers the outcome in the cache (`compilers/toolchain-<fingerprint>`) under a
//! fingerprint of everything the walk reads from the process: every variable of
//! [`SEARCH_ENV`](crate::locate::SEARCH_ENV) and the folders given to
//! [`crate::set_library_path`]. A later process with the same fingerprint takes the remembered
//! outcome after checking, with one `stat` each, that the files it was read from are unchanged
//! (size, modification and change times, inode): NVRTC's file and the headers the folders' CUDA
//! and CCCL versions were read from (an installation is upgraded or replaced whole). A changed variable is another fingerprint; a changed, replaced or
//! removed NVRTC or header file fails the check: the search is walked again.
//!
//! The trade-off: what the walk would find *new* is not looked for on a hit. A toolkit installed
//! later in a place searched earlier (`/usr/local/cuda` while the wheels are in use, say) with no
//! variable changed, or a copy of NVRTC that another library loaded into the process, is not
//! noticed by a hit, which returns what the remembered, unchanged NVRTC made of exactly these
//! inputs. Every miss opens NVRTC through the full search and compares: a different outcome
//! replaces the remembered one, and a result compiled by another NVRTC than its key names is not
//! stored. `cudyn cache clear` forgets remembered toolchains too. Files changed within the last
//! two seconds, whose time stamps may not show a change yet, are not remembered.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::key::{Key, KeyHasher};
use super::store;
use crate::sys::locate::{CudaHeaders, HeaderFolder, Origin, SEARCH_ENV};
use crate::sys::LibraryFile;
use crate::version::Version;

/// The first line of a remembered toolchain; another format is never read.
const FORMAT: &str = "cudyn-toolchain-1";

/// Files modified more recently than this are not trusted to show a later change.
const SETTLED: Duration = Duration::from_secs(2);

/// The NVRTC a process compiles with, identified without opening it, and the CUDA headers that
/// go with it.
#[derive(Debug, Clone)]
pub(crate) struct ResolvedCompiler {
    pub file: LibraryFile,
    pub version: Version,
    pub headers: CudaHeaders,
}

impl ResolvedCompiler {
    /// What the key takes of CUDA's headers besides their folders: their CUDA versions and
    /// CCCL's version.
    pub fn header_versions(&self) -> [String; 3] {
        let version = |found: &Option<HeaderFolder>| {
            found
                .as_ref()
                .and_then(|found| found.cuda_version)
                .map(|version| version.dotted())
                .unwrap_or_default()
        };
        [
            version(&self.headers.cuda),
            version(&self.headers.cccl),
            self.headers.cccl_version.clone().unwrap_or_default(),
        ]
    }

    /// Whether both name the same NVRTC file (path, size, modification time) and version.
    pub fn same_compiler(&self, other: &ResolvedCompiler) -> bool {
        let identity = |c: &ResolvedCompiler| (c.file.path.clone(), c.file.size, c.file.modified);
        identity(self) == identity(other) && self.version == other.version
    }

    /// Whether both compile alike: the same NVRTC and the same header folders and versions.
    pub fn same_as(&self, other: &ResolvedCompiler) -> bool {
        self.same_compiler(other)
            && self.headers.include_folders() == other.headers.include_folders()
            && self.header_versions() == other.header_versions()
    }
}

/// The fingerprint of what decides the search: the variables of `SEARCH_ENV` as `var` gives
/// them and the folders of `set_library_path`.
pub(crate) fn fingerprint(
    var: impl Fn(&str) -> Option<OsString>,
    library_path: Option<&[PathBuf]>,
) -> Key {
    let mut hasher = KeyHasher::new("toolchain");
    for name in SEARCH_ENV {
        match var(name) {
            Some(value) => hasher.field(b"set").field(value.as_bytes()),
            None => hasher.field(b"unset"),
        };
    }
    match library_path {
        Some(folders) => {
            hasher.field(&(folders.len() as u64).to_le_bytes());
            for folder in folders {
                hasher.field(folder.as_os_str().as_bytes());
            }
        }
        None => {
            hasher.field(b"no override");
        }
    }
    hasher.finish()
}

/// The file of the toolchain remembered under `fingerprint` in the cache folder `dir`.
fn path_of(dir: &Path, fingerprint: &Key) -> PathBuf {
    let mut name = String::from("toolchain-");
    name.push_str(&fingerprint.hex());
    dir.join("compilers").join(name)
}

/// The toolchain remembered under `fingerprint`, when every file it was read from is unchanged.
pub(crate) fn recall(dir: &Path, fingerprint: &Key) -> Option<ResolvedCompiler> {
    let (_, _, bytes) = store::read_whole(&path_of(dir, fingerprint))?;
    let (body, checksum) = bytes.split_at(bytes.len().checked_sub(CHECKSUM_LINE)?);
    (checksum_line(body).as_bytes() == checksum).then_some(())?;
    let mut lines = body.split(|&byte| byte == b'\n');
    (lines.next()? == FORMAT.as_bytes()).then_some(())?;
    let [origin, version, path] = fields(lines.next()?, "nvrtc")?;
    let (origin, version) = (decode_origin(origin)?, decode_version(version)?);
    let path = PathBuf::from(OsStr::from_bytes(path));
    let cuda = decode_folder(lines.next()?, "cuda")?;
    let cccl = decode_folder(lines.next()?, "cccl")?;
    let [cccl_version] = fields(lines.next()?, "cccl-version")?;
    let cccl_version = match cccl_version {
        b"-" => None,
        version => Some(String::from_utf8(version.to_vec()).ok()?),
    };
    let mut nvrtc = None;
    for line in lines.filter(|line| !line.is_empty()) {
        let [expected, file] = fields(line, "stamp")?;
        let file = Path::new(OsStr::from_bytes(file));
        let metadata = std::fs::metadata(file).ok()?;
        (stamp(&metadata) == decode_stamp(expected)?).then_some(())?;
        if file.as_os_str() == path.as_os_str() {
            nvrtc = Some(metadata);
        }
    }
    let metadata = nvrtc?;
    Some(ResolvedCompiler {
        file: LibraryFile {
            size: metadata.len(),
            modified: metadata.modified().ok()?,
            path,
            origin,
        },
        version,
        headers: CudaHeaders {
            cuda,
            cccl,
            cccl_version,
            nvrtc_version: Some(version),
            searched: Vec::new(),
        },
    })
}

/// Remembers `compiler` under `fingerprint`; nothing when it is this process's own (a copy
/// already loaded), one of its files changed too recently or a path holds a line break. A
/// failure only costs the next process a walk.
pub(crate) fn remember(dir: &Path, fingerprint: &Key, compiler: &ResolvedCompiler) {
    if compiler.file.origin == Origin::AlreadyLoaded {
        return;
    }
    let Some(text) = encode(compiler) else {
        return;
    };
    let _ = std::fs::create_dir_all(dir.join("compilers"));
    let _ = store::write_atomically(
        &path_of(dir, fingerprint),
        &text,
        store::Durability::RenameOnly,
    );
}

/// Forgets every remembered toolchain of the cache folder `dir`.
pub(crate) fn forget_all(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir.join("compilers"));
}

/// The record: the format's name, then one line per item (`<what> <words> <path>`, the path last
/// and as it is), then a checksum line.
fn encode(compiler: &ResolvedCompiler) -> Option<Vec<u8>> {
    let mut text = format!("{FORMAT}\n").into_bytes();
    let mut line = |words: &str, path: Option<&Path>| -> Option<()> {
        text.extend_from_slice(words.as_bytes());
        if let Some(path) = path {
            let path = path.as_os_str().as_bytes();
            (!path.contains(&b'\n')).then_some(())?;
            text.push(b' ');
            text.extend_from_slice(path);
        }
        text.push(b'\n');
        Some(())
    };
    let file = &compiler.file;
    let nvrtc = format!("nvrtc {} {}", origin_name(file.origin), compiler.version);
    line(&nvrtc, Some(&file.path))?;
    for (what, folder) in [
        ("cuda", &compiler.headers.cuda),
        ("cccl", &compiler.headers.cccl),
    ] {
        match folder {
            Some(found) => {
                let version = found
                    .cuda_version
                    .map_or_else(|| "-".to_owned(), |version| version.to_string());
                let words = format!("{what} {} {version}", origin_name(found.origin));
                line(&words, Some(&found.folder))?
            }
            None => line(&format!("{what} -"), None)?,
        }
    }
    let cccl_version = compiler.headers.cccl_version.as_deref().unwrap_or("-");
    line(&format!("cccl-version {cccl_version}"), None)?;
    let mut files = vec![file.path.clone()];
    files.extend(compiler.headers.source_files());
    files.sort();
    files.dedup();
    let now = SystemTime::now();
    for file in files {
        let metadata = std::fs::metadata(&file).ok()?;
        let modified = metadata.modified().ok()?;
        let settled = now.duration_since(modified).is_ok_and(|age| age >= SETTLED);
        settled.then_some(())?;
        let words = format!("stamp {}", encode_stamp(&stamp(&metadata)));
        line(&words, Some(&file))?;
    }
    text.extend_from_slice(checksum_line(&text).as_bytes());
    Some(text)
}

/// The length of [`checksum_line`]'s text.
const CHECKSUM_LINE: usize = "checksum ".len() + 64 + 1;

/// The last line: the blake3 hash of everything before it.
fn checksum_line(body: &[u8]) -> String {
    let mut line = String::from("checksum ");
    line.push_str(&super::key::hex(blake3::hash(body).as_bytes()));
    line.push('\n');
    line
}

/// The `N` words of a line `<what> <word>...`, the last one the rest of the line.
fn fields<'a, const N: usize>(line: &'a [u8], what: &str) -> Option<[&'a [u8]; N]> {
    let rest = line.strip_prefix(what.as_bytes())?.strip_prefix(b" ")?;
    let mut words = rest.splitn(N, |&byte| byte == b' ');
    let found = [(); N].map(|()| words.next());
    found.iter().all(Option::is_some).then_some(())?;
    Some(found.map(Option::unwrap_or_default))
}

/// A file's size, modification and change times, device and inode.
type Stamp = [i64; 7];

fn stamp(metadata: &std::fs::Metadata) -> Stamp {
    [
        metadata.size() as i64,
        metadata.mtime(),
        metadata.mtime_nsec(),
        metadata.ctime(),
        metadata.ctime_nsec(),
        metadata.dev() as i64,
        metadata.ino() as i64,
    ]
}

fn encode_stamp(stamp: &Stamp) -> String {
    stamp.map(|field| field.to_string()).join(":")
}

fn decode_stamp(text: &[u8]) -> Option<Stamp> {
    let mut fields = std::str::from_utf8(text).ok()?.split(':');
    let stamp = [(); 7].map(|()| fields.next().and_then(|field| field.parse().ok()));
    (fields.next().is_none() && stamp.iter().all(Option::is_some)).then_some(())?;
    Some(stamp.map(Option::unwrap_or_default))
}

/// How the record names each rule of the search order.
fn origin_name(origin: Origin) -> &'static str {
    match origin {
        Origin::Override => "override",
        Origin::AlreadyLoaded => "already-loaded",
        Origin::CudaPath => "cuda-path",
        Origin::CudaHome => "cuda-home",
        Origin::PythonWheel => "python-wheel",
        Origin::CondaPrefix => "conda-prefix",
        Origin::DefaultToolkit => "default-toolkit",
        Origin::CudynWheels => "cudyn-wheels",
        Origin::SystemLoader => "system-loader",
    }
}

fn decode_origin(name: &[u8]) -> Option<Origin> {
    Origin::ALL
        .into_iter()
        .find(|&origin| origin_name(origin).as_bytes() == name)
}

fn decode_version(text: &[u8]) -> Option<Version> {
    let (major, minor) = std::str::from_utf8(text).ok()?.split_once('.')?;
    Some(Version::new(major.parse().ok()?, minor.parse().ok()?))
}

/// The header folder of a line `<what> <origin> <CUDA version or -> <folder>`, or `<what> -` for
/// none: `Some(None)` for none, `None` when unreadable.
fn decode_folder(line: &[u8], what: &str) -> Option<Option<HeaderFolder>> {
    if fields::<1>(line, what)? == [b"-"] {
        return Some(None);
    }
    let [origin, version, folder] = fields(line, what)?;
    let cuda_version = match version {
        b"-" => None,
        version => Some(decode_version(version)?),
    };
    Some(Some(HeaderFolder {
        folder: PathBuf::from(OsStr::from_bytes(folder)),
        origin: decode_origin(origin)?,
        cuda_version,
        note: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    /// Sets a file's modification time to an hour ago, as for files installed long before.
    fn settle(path: &Path) {
        let file = fs::File::options().write(true).open(path).unwrap();
        file.set_modified(SystemTime::now() - Duration::from_secs(3600))
            .unwrap();
    }

    /// A fake NVRTC and CUDA 13 headers (CCCL in `include/cccl`) under `root`, settled.
    fn installation(root: &Path) -> ResolvedCompiler {
        let include = root.join("include");
        let files = [
            (root.join("lib64/libnvrtc.so.13"), "nvrtc"),
            (include.join("cuda_fp16.h"), ""),
            (include.join("cuda.h"), "#define CUDA_VERSION 13000\n"),
            (include.join("cccl/cuda/std/version"), ""),
            (
                include.join("cccl/cuda/std/__cccl/version.h"),
                "#define CCCL_VERSION 3000001\n",
            ),
        ];
        for (path, text) in &files {
            write(path, text);
            settle(path);
        }
        let nvrtc = &files[0].0;
        let metadata = fs::metadata(nvrtc).unwrap();
        let version = Version::new(13, 0);
        ResolvedCompiler {
            file: LibraryFile {
                path: nvrtc.clone(),
                origin: Origin::CudaHome,
                size: metadata.len(),
                modified: metadata.modified().unwrap(),
            },
            version,
            headers: CudaHeaders::find(
                Some((nvrtc, Origin::CudaHome)),
                Some(version),
                |_| None,
                root,
            ),
        }
    }

    fn environment(cuda_home: &Path) -> Key {
        let cuda_home = cuda_home.as_os_str().to_owned();
        fingerprint(
            |name| (name == "CUDA_HOME").then(|| cuda_home.clone()),
            None,
        )
    }

    #[test]
    fn a_remembered_toolchain_is_recalled_whole() {
        let (cache, install) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let compiler = installation(install.path());
        assert_eq!(compiler.headers.include_folders().len(), 2);
        let key = environment(install.path());
        remember(cache.path(), &key, &compiler);
        let recalled = recall(cache.path(), &key).expect("recalled");
        assert!(recalled.same_as(&compiler));
        assert_eq!(recalled.file, compiler.file);
        assert_eq!(recalled.header_versions(), ["13.0", "13.0", "3.0.1"]);
    }

    #[test]
    fn another_environment_or_override_is_another_fingerprint() {
        let install = tempfile::tempdir().unwrap();
        let key = environment(install.path());
        assert_eq!(key, environment(install.path()));
        assert_ne!(key, environment(&install.path().join("other")));
        assert_ne!(key, fingerprint(|_| None, None));
        let folders = [install.path().to_owned()];
        assert_ne!(
            fingerprint(|_| None, Some(&folders)),
            fingerprint(|_| None, None)
        );
    }

    #[test]
    fn a_touched_replaced_or_removed_file_is_not_recalled() {
        let (cache, install) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let compiler = installation(install.path());
        let key = environment(install.path());
        let nvrtc = compiler.file.path.clone();
        let cuda_h = install.path().join("include/cuda.h");
        let version_h = install
            .path()
            .join("include/cccl/cuda/std/__cccl/version.h");

        remember(cache.path(), &key, &compiler);
        fs::File::options()
            .write(true)
            .open(&nvrtc)
            .unwrap()
            .set_modified(SystemTime::now() - Duration::from_secs(60))
            .unwrap();
        assert!(recall(cache.path(), &key).is_none(), "NVRTC touched");

        let compiler = installation(install.path());
        remember(cache.path(), &key, &compiler);
        assert!(recall(cache.path(), &key).is_some());
        // Replaced by a file of the same size and modification time: another inode.
        let metadata = fs::metadata(&cuda_h).unwrap();
        let replacement = install.path().join("cuda.h.new");
        fs::write(&replacement, fs::read(&cuda_h).unwrap()).unwrap();
        fs::File::options()
            .write(true)
            .open(&replacement)
            .unwrap()
            .set_modified(metadata.modified().unwrap())
            .unwrap();
        fs::rename(&replacement, &cuda_h).unwrap();
        assert!(recall(cache.path(), &key).is_none(), "cuda.h replaced");

        let compiler = installation(install.path());
        remember(cache.path(), &key, &compiler);
        fs::remove_file(&version_h).unwrap();
        assert!(recall(cache.path(), &key).is_none(), "CCCL removed");
    }

    #[test]
    fn fresh_files_and_a_damaged_record_are_not_trusted() {
        let (cache, install) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let compiler = installation(install.path());
        let key = environment(install.path());
        fs::write(
            install.path().join("include/cuda.h"),
            "#define CUDA_VERSION 13000\n",
        )
        .unwrap();
        remember(cache.path(), &key, &compiler);
        assert!(recall(cache.path(), &key).is_none(), "cuda.h just written");

        settle(&install.path().join("include/cuda.h"));
        remember(cache.path(), &key, &compiler);
        let path = path_of(cache.path(), &key);
        let text = fs::read_to_string(&path).unwrap();
        fs::write(&path, text.replacen("13.0", "12.0", 1)).unwrap();
        assert!(text.contains("13.0"));
        assert!(recall(cache.path(), &key).is_none(), "record altered");
        forget_all(cache.path());
        assert!(!cache.path().join("compilers").exists());
    }
}
