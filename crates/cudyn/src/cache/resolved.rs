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
//!
//! A program that includes no header cannot depend on CUDA's headers: its key takes NVRTC's
//! identity alone ([`ResolvedCompiler::nvrtc_identity`]), and recalling the toolchain for it
//! checks NVRTC's file only. The header files are checked when the first program that may
//! include one is keyed ([`ResolvedCompiler::with_headers_checked`]).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use super::key::{self, FieldSink, Fields, Key, KeyHasher};
use super::store;
use crate::codec::{self, Malformed, Reader, Writer};
use crate::sys::locate::{CudaHeaders, HeaderFolder, Origin, SEARCH_ENV};
use crate::sys::LibraryFile;
use crate::version::Version;

/// What a remembered toolchain's file starts with; another format is never read.
const MAGIC: &[u8; 8] = b"CUDYNTC4";

/// Files modified more recently than this are not trusted to show a later change.
const SETTLED: Duration = Duration::from_secs(2);

/// The NVRTC a process compiles with, identified without opening it, and the CUDA headers that
/// go with it.
#[derive(Debug, Clone)]
pub(crate) struct ResolvedCompiler {
    pub file: LibraryFile,
    pub version: Version,
    pub headers: CudaHeaders,
    /// What a cache key takes of all this (see [`ResolvedCompiler::new`]); remembered with the
    /// rest, so that a warm start keys its compile without formatting any of it.
    pub identity: Key,
    /// What the key of a program that includes no header takes: NVRTC's file and version alone.
    pub nvrtc_identity: Key,
    /// Files the headers were read from whose stamps are not checked yet: a recall for a
    /// program that includes no header checks NVRTC's file alone.
    unchecked: Vec<(PathBuf, Stamp)>,
    /// Its [`record`], once made: every entry this process stores carries it, and making it
    /// takes a `stat` of each of its files (NVRTC's and the headers' version files).
    record: OnceLock<Vec<u8>>,
}

impl ResolvedCompiler {
    /// The compiler of `file`, of `version`, with `headers`. Its identity covers NVRTC's file
    /// (path, size, modification time) and version, the header folders in their order, and
    /// their CUDA versions and CCCL's version.
    pub fn new(file: LibraryFile, version: Version, headers: CudaHeaders) -> ResolvedCompiler {
        let mut nvrtc = KeyHasher::new("nvrtc alone");
        key::add_library(&mut nvrtc, &file);
        nvrtc.field(version.dotted().as_bytes());
        let nvrtc_identity = nvrtc.finish();
        let mut hasher = KeyHasher::new("compiler");
        hasher.field(&nvrtc_identity.0);
        let folders = headers.include_folders();
        hasher.field(&(folders.len() as u64).to_le_bytes());
        for folder in folders {
            hasher.field(folder.as_os_str().as_bytes());
        }
        hasher.fields(&header_versions(&headers));
        let identity = hasher.finish();
        ResolvedCompiler {
            file,
            version,
            headers,
            identity,
            nvrtc_identity,
            unchecked: Vec::new(),
            record: OnceLock::new(),
        }
    }

    /// Whether the files the headers were read from are all known unchanged.
    pub fn headers_checked(&self) -> bool {
        self.unchecked.is_empty()
    }

    /// This compiler with the files its headers were read from checked: `None` when one of them
    /// changed, so that the search must be walked again.
    pub fn with_headers_checked(&self) -> Option<ResolvedCompiler> {
        for (file, expected) in &self.unchecked {
            (stamp(&std::fs::metadata(file).ok()?) == *expected).then_some(())?;
        }
        Some(ResolvedCompiler {
            unchecked: Vec::new(),
            ..self.clone()
        })
    }

    /// Whether both name the same NVRTC file (path, size, modification time) and version.
    pub fn same_compiler(&self, other: &ResolvedCompiler) -> bool {
        let identity = |c: &ResolvedCompiler| (c.file.path.clone(), c.file.size, c.file.modified);
        identity(self) == identity(other) && self.version == other.version
    }

    /// Whether both compile alike: the same NVRTC and the same header folders and versions.
    pub fn same_as(&self, other: &ResolvedCompiler) -> bool {
        self.identity == other.identity
    }
}

/// The CUDA versions of the header folders and CCCL's version, empty where unknown.
fn header_versions(headers: &CudaHeaders) -> [String; 3] {
    let version = |found: &Option<HeaderFolder>| {
        found
            .as_ref()
            .and_then(|found| found.cuda_version)
            .map(|version| version.dotted())
            .unwrap_or_default()
    };
    [
        version(&headers.cuda),
        version(&headers.cccl),
        headers.cccl_version.clone().unwrap_or_default(),
    ]
}

/// What decides the search in a process, as the bytes of its fields: the toolchain remembered
/// for it is filed under their blake3 [key](Fingerprint::key), the direct names of entries
/// under their [name](Fingerprint::name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fingerprint(Fields);

impl Fingerprint {
    /// The key the toolchain remembered for this environment is filed under.
    pub(crate) fn key(&self) -> Key {
        KeyHasher::new("toolchain").field(&self.0 .0).finish()
    }

    /// The name of the folder of direct names filed under this environment (see
    /// [`Fields::name`]).
    pub(crate) fn name(&self) -> String {
        self.0.name()
    }
}

/// The fingerprint of what decides the search: the variables of `SEARCH_ENV` as `var` gives
/// them and the folders of `set_library_path`.
pub(crate) fn fingerprint(
    var: impl Fn(&str) -> Option<OsString>,
    library_path: Option<&[PathBuf]>,
) -> Fingerprint {
    let mut fields = Fields::with_capacity(4096);
    for name in SEARCH_ENV {
        match var(name) {
            Some(value) => fields.field(b"set").field(value.as_bytes()),
            None => fields.field(b"unset"),
        };
    }
    match library_path {
        Some(folders) => {
            fields.field(&(folders.len() as u64).to_le_bytes());
            for folder in folders {
                fields.field(folder.as_os_str().as_bytes());
            }
        }
        None => {
            fields.field(b"no override");
        }
    }
    Fingerprint(fields)
}

/// The file of the toolchain remembered under `fingerprint` in the cache folder `dir`.
fn path_of(dir: &Path, fingerprint: &Key) -> PathBuf {
    let mut name = String::from("toolchain-");
    name.push_str(&fingerprint.hex());
    dir.join("compilers").join(name)
}

/// The toolchain remembered under `fingerprint`, when NVRTC's file is unchanged and, when
/// `with_headers`, the files the headers were read from too (else they are left
/// [unchecked](ResolvedCompiler::with_headers_checked)).
pub(crate) fn recall(
    dir: &Path,
    fingerprint: &Key,
    with_headers: bool,
) -> Option<ResolvedCompiler> {
    let bytes = store::read_small(&path_of(dir, fingerprint))?;
    from_record(codec::unsealed(&bytes)?, with_headers)
}

/// The start of a [`record`]: the files it was read from with their stamps, then its two
/// identities (the whole compiler's, NVRTC's alone), and a reader of the rest.
type RecordHead<'a> = (Vec<(PathBuf, Stamp)>, Key, Key, Reader<'a>);

fn read_head(record: &[u8]) -> Option<RecordHead<'_>> {
    let mut record = Reader(record.strip_prefix(MAGIC)?);
    let stamped = record
        .list(|record| {
            let (file, stamp) = stamped_file(record)?;
            Ok((path(file), stamp))
        })
        .ok()?;
    let identity = Key(record.array().ok()?);
    let nvrtc_identity = Key(record.array().ok()?);
    Some((stamped, identity, nvrtc_identity, record))
}

/// The two identities a [`record`] holds (the whole compiler's, NVRTC's alone), unchecked; `None`
/// when it does not read.
pub(crate) fn identities_of(record: &[u8]) -> Option<[Key; 2]> {
    let (_, identity, nvrtc_identity, _) = read_head(record)?;
    Some([identity, nvrtc_identity])
}

/// Checks the files a [`record`] names, in place, without decoding the rest: NVRTC's file, and
/// the files the headers were read from when `with_headers`, must be unchanged. NVRTC's version
/// when they are. What a new process's hit through a direct name checks of the toolchain its
/// entry holds: it builds no paths and allocates nothing, and the record is decoded only when a
/// later compile of the process needs the compiler ([`from_record`]).
pub(crate) fn check_in_place(record: &[u8], with_headers: bool) -> Option<Version> {
    let mut rest = Reader(record.strip_prefix(MAGIC)?);
    let count = rest.count().ok()?;
    let mut files = rest.clone();
    for _ in 0..count {
        stamped_file(&mut rest).ok()?;
    }
    // The two identities and NVRTC's origin, then what is checked.
    for _ in 0..3 {
        rest.bytes().ok()?;
    }
    let version = read_version(&mut rest).ok()?;
    let nvrtc = rest.bytes().ok()?;
    let mut nvrtc_checked = false;
    for _ in 0..count {
        let (file, expected) = stamped_file(&mut files).ok()?;
        let is_nvrtc = file == nvrtc;
        if is_nvrtc || with_headers {
            let metadata = std::fs::metadata(OsStr::from_bytes(file)).ok()?;
            (stamp(&metadata) == expected).then_some(())?;
        }
        nvrtc_checked |= is_nvrtc;
    }
    nvrtc_checked.then_some(version)
}

/// One of the files a [`record`] names, with its stamp.
fn stamped_file<'a>(record: &mut Reader<'a>) -> Result<(&'a [u8], Stamp), Malformed> {
    let file = record.bytes()?;
    let mut stamp: Stamp = [0; 7];
    for field in &mut stamp {
        *field = record.u64()?;
    }
    Ok((file, stamp))
}

/// The toolchain a [`record`] describes, checked as [`recall`] checks it ([`check_in_place`]).
pub(crate) fn from_record(record: &[u8], with_headers: bool) -> Option<ResolvedCompiler> {
    let version = check_in_place(record, with_headers)?;
    let (stamped, identity, nvrtc_identity, mut record) = read_head(record)?;
    let origin = decode_origin(record.bytes().ok()?).ok()?;
    read_version(&mut record).ok()?;
    let nvrtc_path = record.path().ok()?;
    let cuda = record.optional(read_folder).ok()?;
    let cccl = record.optional(read_folder).ok()?;
    let cccl_version = record.optional(Reader::text).ok()?;
    record.end().ok()?;
    let mut nvrtc = None;
    let mut unchecked = Vec::new();
    for (file, stamp) in stamped {
        if file.as_os_str() == nvrtc_path.as_os_str() {
            nvrtc = Some(stamp);
        } else if !with_headers {
            unchecked.push((file, stamp));
        }
    }
    // Checked above: NVRTC's file is as its stamp says.
    let nvrtc = nvrtc?;
    Some(ResolvedCompiler {
        file: LibraryFile {
            size: nvrtc[0],
            modified: modified_of(&nvrtc)?,
            path: nvrtc_path,
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
        identity,
        nvrtc_identity,
        unchecked,
        record: OnceLock::new(),
    })
}

/// Remembers `compiler` under `fingerprint`; nothing when it has no [`record`]. A failure only
/// costs the next process a walk.
pub(crate) fn remember(dir: &Path, fingerprint: &Key, compiler: &ResolvedCompiler) {
    let Some(record) = record(compiler) else {
        return;
    };
    let _ = store::write_atomically(&path_of(dir, fingerprint), &codec::seal(record));
}

/// Forgets every remembered toolchain of the cache folder `dir`.
pub(crate) fn forget_all(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir.join("compilers"));
}

/// What a later process needs to take `compiler` without a search: the magic, the files it
/// was read from with their stamps (first, so that a reader can list them alone), the two
/// identities, then NVRTC (origin, version, path), the two header folders (origin, CUDA
/// version, folder) and CCCL's version. Unsealed: its file, or the entry holding it, seals it.
/// `None` when the compiler is this process's own (a copy already loaded, which another process
/// would not find) or one of its files changed too recently to trust a later check of it.
///
/// Made once per compiler: the stamps it holds are of the files this compiler was identified
/// from, which a later process checks against the files as they are then.
pub(crate) fn record(compiler: &ResolvedCompiler) -> Option<Vec<u8>> {
    if let Some(record) = compiler.record.get() {
        return Some(record.clone());
    }
    let record = make_record(compiler)?;
    Some(compiler.record.get_or_init(|| record).clone())
}

fn make_record(compiler: &ResolvedCompiler) -> Option<Vec<u8>> {
    if compiler.file.origin == Origin::AlreadyLoaded {
        return None;
    }
    let mut files = vec![compiler.file.path.clone()];
    files.extend(compiler.headers.source_files());
    files.sort();
    files.dedup();
    let mut record = Writer(MAGIC.to_vec());
    record.u64(files.len() as u64);
    let now = SystemTime::now();
    for file in files {
        let metadata = std::fs::metadata(&file).ok()?;
        let modified = metadata.modified().ok()?;
        let settled = now.duration_since(modified).is_ok_and(|age| age >= SETTLED);
        settled.then_some(())?;
        record.path(&file);
        for field in stamp(&metadata) {
            record.u64(field);
        }
    }
    record
        .bytes(compiler.identity.as_bytes())
        .bytes(compiler.nvrtc_identity.as_bytes())
        .text(origin_name(compiler.file.origin));
    write_version(&mut record, compiler.version);
    record.path(&compiler.file.path);
    for folder in [&compiler.headers.cuda, &compiler.headers.cccl] {
        record.optional(folder.as_ref(), |record, found| {
            record
                .text(origin_name(found.origin))
                .optional(found.cuda_version, write_version)
                .path(&found.folder);
        });
    }
    record.optional(
        compiler.headers.cccl_version.as_deref(),
        |record, version| {
            record.text(version);
        },
    );
    Some(record.0)
}

/// A file's size, modification and change times, device and inode (the signed times as their
/// two's complement).
type Stamp = [u64; 7];

fn stamp(metadata: &std::fs::Metadata) -> Stamp {
    [
        metadata.size(),
        metadata.mtime() as u64,
        metadata.mtime_nsec() as u64,
        metadata.ctime() as u64,
        metadata.ctime_nsec() as u64,
        metadata.dev(),
        metadata.ino(),
    ]
}

/// The modification time a [`Stamp`] holds, as `std::fs::Metadata::modified` gives it.
fn modified_of(stamp: &Stamp) -> Option<SystemTime> {
    let (seconds, nanos) = (stamp[1] as i64, u32::try_from(stamp[2]).ok()?);
    let whole = Duration::from_secs(seconds.unsigned_abs());
    let at = if seconds >= 0 {
        SystemTime::UNIX_EPOCH.checked_add(whole)?
    } else {
        SystemTime::UNIX_EPOCH.checked_sub(whole)?
    };
    at.checked_add(Duration::from_nanos(u64::from(nanos)))
}

fn path(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(bytes))
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

fn decode_origin(name: &[u8]) -> Result<Origin, Malformed> {
    Origin::ALL
        .into_iter()
        .find(|&origin| origin_name(origin).as_bytes() == name)
        .ok_or(Malformed::Unknown("origin"))
}

fn write_version(record: &mut Writer, version: Version) {
    record
        .u64(u64::from(version.major))
        .u64(u64::from(version.minor));
}

fn read_version(record: &mut Reader) -> Result<Version, Malformed> {
    let mut part = || u32::try_from(record.u64()?).map_err(|_| Malformed::Unknown("version"));
    Ok(Version::new(part()?, part()?))
}

/// A header folder as [`record`] wrote it.
fn read_folder(record: &mut Reader) -> Result<HeaderFolder, Malformed> {
    Ok(HeaderFolder {
        origin: decode_origin(record.bytes()?)?,
        cuda_version: record.optional(read_version)?,
        folder: record.path()?,
        note: None,
    })
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

    /// Sets a file's modification time to a minute ago: a change a recall must notice.
    fn touch(path: &Path) {
        let file = fs::File::options().write(true).open(path).unwrap();
        file.set_modified(SystemTime::now() - Duration::from_secs(60))
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
        let file = LibraryFile {
            path: nvrtc.clone(),
            origin: Origin::CudaHome,
            size: metadata.len(),
            modified: metadata.modified().unwrap(),
        };
        let headers = CudaHeaders::find(
            Some((nvrtc, Origin::CudaHome)),
            Some(version),
            |_| None,
            root,
        );
        ResolvedCompiler::new(file, version, headers)
    }

    fn environment(cuda_home: &Path) -> Key {
        let cuda_home = cuda_home.as_os_str().to_owned();
        fingerprint(
            |name| (name == "CUDA_HOME").then(|| cuda_home.clone()),
            None,
        )
        .key()
    }

    #[test]
    fn a_remembered_toolchain_is_recalled_whole() {
        let (cache, install) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let compiler = installation(install.path());
        assert_eq!(compiler.headers.include_folders().len(), 2);
        let key = environment(install.path());
        remember(cache.path(), &key, &compiler);
        let recalled = recall(cache.path(), &key, true).expect("recalled");
        assert!(recalled.same_as(&compiler));
        assert_eq!(recalled.file, compiler.file);
        assert_eq!(
            recalled.headers.include_folders(),
            compiler.headers.include_folders()
        );
        assert_eq!(
            header_versions(&recalled.headers),
            ["13.0", "13.0", "3.0.1"]
        );
        // The identity is what it would be computed afresh from what was recalled.
        let again = ResolvedCompiler::new(recalled.file, recalled.version, recalled.headers);
        assert_eq!(again.identity, compiler.identity);
    }

    #[test]
    fn the_identity_changes_with_the_file_the_version_the_folders_and_their_versions() {
        let install = tempfile::tempdir().unwrap();
        let compiler = installation(install.path());
        let with = |change: &dyn Fn(&mut ResolvedCompiler)| {
            let mut changed = compiler.clone();
            change(&mut changed);
            ResolvedCompiler::new(changed.file, changed.version, changed.headers).identity
        };
        assert_eq!(with(&|_| {}), compiler.identity);
        let changes: [&dyn Fn(&mut ResolvedCompiler); 6] = [
            &|c| c.file.size += 1,
            &|c| c.file.modified += Duration::from_secs(1),
            &|c| c.version = Version::new(13, 1),
            &|c| c.headers.cccl_version = Some("3.0.2".into()),
            &|c| c.headers.cuda.as_mut().unwrap().cuda_version = Some(Version::new(12, 9)),
            &|c| c.headers.cccl = None,
        ];
        for (i, change) in changes.into_iter().enumerate() {
            assert_ne!(with(change), compiler.identity, "change {i}");
        }
    }

    #[test]
    fn another_environment_or_override_is_another_fingerprint() {
        let install = tempfile::tempdir().unwrap();
        let key = environment(install.path());
        assert_eq!(key, environment(install.path()));
        assert_ne!(key, environment(&install.path().join("other")));
        assert_ne!(key, fingerprint(|_| None, None).key());
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
        touch(&nvrtc);
        assert!(recall(cache.path(), &key, true).is_none(), "NVRTC touched");

        let compiler = installation(install.path());
        remember(cache.path(), &key, &compiler);
        assert!(recall(cache.path(), &key, true).is_some());
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
        assert!(
            recall(cache.path(), &key, true).is_none(),
            "cuda.h replaced"
        );

        let compiler = installation(install.path());
        remember(cache.path(), &key, &compiler);
        fs::remove_file(&version_h).unwrap();
        assert!(recall(cache.path(), &key, true).is_none(), "CCCL removed");
    }

    #[test]
    fn a_recall_for_a_program_without_includes_checks_nvrtc_and_leaves_the_headers_for_later() {
        let (cache, install) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let compiler = installation(install.path());
        let key = environment(install.path());
        remember(cache.path(), &key, &compiler);
        let record = record(&compiler).unwrap();
        assert_eq!(check_in_place(&record, true), Some(compiler.version));
        let recalled = recall(cache.path(), &key, false).expect("recalled");
        assert_eq!(recalled.nvrtc_identity, compiler.nvrtc_identity);
        assert_eq!(recalled.identity, compiler.identity);
        assert!(!recalled.headers_checked());
        assert!(recalled.with_headers_checked().unwrap().headers_checked());
        assert!(recall(cache.path(), &key, true).unwrap().headers_checked());

        // A header file changed: still recalled for a program without includes, but the check
        // the first program with includes makes fails, as a full recall does.
        let cuda_h = install.path().join("include/cuda.h");
        touch(&cuda_h);
        let recalled = recall(cache.path(), &key, false).expect("NVRTC unchanged");
        assert!(recalled.with_headers_checked().is_none(), "cuda.h touched");
        assert!(recall(cache.path(), &key, true).is_none());
        // The check a direct hit makes of the record its entry holds says the same.
        assert_eq!(check_in_place(&record, false), Some(compiler.version));
        assert_eq!(check_in_place(&record, true), None);

        // NVRTC changed: recalled for no program.
        touch(&compiler.file.path);
        assert!(recall(cache.path(), &key, false).is_none(), "NVRTC touched");
        assert_eq!(check_in_place(&record, false), None);
        // A record cut short names no file to check.
        for len in [0, 8, 16, record.len() / 2, record.len() - 1] {
            assert_eq!(check_in_place(&record[..len], false), None, "{len} bytes");
        }
    }

    #[test]
    fn nvrtc_alone_is_identified_by_its_file_and_version() {
        let install = tempfile::tempdir().unwrap();
        let compiler = installation(install.path());
        let mut headers = compiler.headers.clone();
        headers.cccl = None;
        headers.cccl_version = None;
        let other_headers = ResolvedCompiler::new(compiler.file.clone(), compiler.version, headers);
        assert_ne!(other_headers.identity, compiler.identity);
        assert_eq!(other_headers.nvrtc_identity, compiler.nvrtc_identity);
        let other_version = ResolvedCompiler::new(
            compiler.file.clone(),
            Version::new(13, 1),
            compiler.headers.clone(),
        );
        assert_ne!(other_version.nvrtc_identity, compiler.nvrtc_identity);
        let mut file = compiler.file.clone();
        file.size += 1;
        let other_file = ResolvedCompiler::new(file, compiler.version, compiler.headers.clone());
        assert_ne!(other_file.nvrtc_identity, compiler.nvrtc_identity);
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
        assert!(
            recall(cache.path(), &key, true).is_none(),
            "cuda.h just written"
        );

        settle(&install.path().join("include/cuda.h"));
        remember(cache.path(), &key, &compiler);
        let path = path_of(cache.path(), &key);
        let bytes = fs::read(&path).unwrap();
        assert!(recall(cache.path(), &key, true).is_some());
        for at in [0, MAGIC.len() + 3, bytes.len() / 2, bytes.len() - 1] {
            let mut altered = bytes.clone();
            altered[at] ^= 1;
            fs::write(&path, altered).unwrap();
            assert!(
                recall(cache.path(), &key, true).is_none(),
                "byte {at} altered"
            );
        }
        fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        assert!(
            recall(cache.path(), &key, true).is_none(),
            "record truncated"
        );
        // A record of an earlier cudyn (text, `cudyn-toolchain-1`) is not read, and the next
        // remember replaces it.
        fs::write(
            &path,
            "cudyn-toolchain-1\nnvrtc cuda-home 13.0 /x\nchecksum 0\n",
        )
        .unwrap();
        assert!(
            recall(cache.path(), &key, true).is_none(),
            "an earlier format"
        );
        remember(cache.path(), &key, &compiler);
        assert!(recall(cache.path(), &key, true).is_some(), "replaced");
        forget_all(cache.path());
        assert!(!cache.path().join("compilers").exists());
    }
}
