//! The compile cache: NVRTC and nvJitLink results kept on disk and in memory, so that the second
//! start of a program costs reading a file instead of a compile.
//!
//! [`Program::compile`](crate::Program::compile), [`Program::load`](crate::Program::load) and
//! [`Linker::finish`](crate::Linker::finish) go through [`Cache::global`] unless turned off:
//!
//! - **Where**: the folder of the entries is `$CUDYN_CACHE_DIR`, else
//!   `$XDG_CACHE_HOME/cudyn/kernels`, else `~/.cache/cudyn/kernels`; [`set_dir`] moves it for the
//!   process, [`dir`] names it, [`Cache::open`] opens a cache in any folder the same way. A
//!   relative `CUDYN_CACHE_DIR` is refused (it would put a cache in every folder a program runs
//!   in). cudyn 0.1 kept the entries in a `kernels` folder inside `$CUDYN_CACHE_DIR`: that
//!   folder's contents are moved up the first time the cache is opened.
//! - **Off**: `CUDYN_CACHE=off` (or `0`, `false`), [`set_enabled(false)`](set_enabled), or
//!   [`Program::cache(false)`](crate::Program::cache) for one program.
//! - **Remote**: `CUDYN_CACHE_REMOTE=redis://host:port/db` with `CUDYN_CACHE_REMOTE_KEY_FILE`,
//!   or [`Cache::set_remote`], puts a Redis shared by a fleet behind memory and disk: a hit there
//!   is checked and written to disk (off the caller's path, by a thread of the cache's own that
//!   the cache's drop and the process's exit wait for, within a bound), a miss compiles and
//!   publishes, one host compiles a key while the others wait ([`remote`] says how, and what it
//!   trusts).
//! - **Size**: at most [`DEFAULT_MAX_BYTES`] (1 GiB) on disk, or `$CUDYN_CACHE_MAX_BYTES`, or
//!   [`Cache::set_max_bytes`]; least recently used entries are evicted first, by use times cudyn
//!   records itself. The total is kept in a ledger file that every write adds to, and the
//!   folder is listed (and evicted) when the ledger's total passes the cap or after 64 writes
//!   of any process: a write costs a few system calls whatever the cache's size, and the cap
//!   may be overshot by up to 64 entries for a while. In memory, at most 64 MiB of code per
//!   process.
//!
//! **The key** (blake3) covers a schema version, the compiler's identity (the path, size and
//! modification time of the NVRTC file the search order opens and its version, with CUDA's
//! header folders and their CUDA and CCCL versions when the program may include a header: one
//! whose texts never say `include` reads nothing from them; nvJitLink's file for links), the options
//! handed to the compiler (the header folders through that identity), the target, the source,
//! the in-memory headers, the name expressions and every file the compile reads from disk, with
//! its path and contents, found where NVRTC finds it (beside the program's name, in the current
//! folder for a bare name, in the `-I` folders, nested, pre-included;
//! [`Program::dependencies`](crate::compile::Program::dependencies) says how): CUDA's own headers
//! are keyed by their folders and versions, not their thousands of files. A program whose files
//! cannot all be known (a computed `#include MACRO`, an unreadable file, an option that reads or
//! writes files of its own, such as precompiled headers) is never answered from the cache nor
//! stored: it is compiled every time, and its result says why
//! ([`CacheUse::Uncacheable`](crate::compile::CacheUse::Uncacheable)). Editing a file inside
//! CUDA's own header folders, rather than installing another CUDA, is not noticed. PTX also keys on the driver's major
//! version. A link keys on nvJitLink's identity, its options and every input's kind, name and
//! bytes.
//!
//! **A hit never opens NVRTC**: the compiler is identified from its file, and the version and
//! lowered names a compile needs are in the entry. NVRTC's version is remembered in the cache
//! (`compilers/`) the first time it is opened, to find the same CUDA headers it would.
//!
//! **A hit walks no search either** (the direct mode, as ccache calls its own): finding NVRTC and
//! CUDA's headers through the search order of [`crate::locate`] takes dozens of `stat`
//! calls, directory listings and a read of `cuda.h`, more than the rest of a hit. So the outcome
//! (NVRTC's file and version, the header folders and their versions) is remembered in
//! `compilers/` (with the identity the key takes, computed once) under a fingerprint of
//! everything the search reads from the process: the
//! variables of [`SEARCH_ENV`](crate::locate::SEARCH_ENV) (`CUDYN_LIBRARY_PATH`,
//! `CUDA_PATH`, `CUDA_HOME`, `VIRTUAL_ENV`, `CONDA_PREFIX`, `PYTHONPATH`, `PATH`, `HOME`,
//! `XDG_CACHE_HOME`, `CUDYN_WHEELS_VENV`, `LD_LIBRARY_PATH`) and the folders of
//! [`crate::set_library_path`]. A later process with the same fingerprint trusts it after one
//! `stat` per file it was read from (NVRTC's file, and, once a program that may include a header
//! is compiled, the headers the folders' CUDA and CCCL versions were read from): a size,
//! modification time, change time or inode that differs (an upgrade in place,
//! a file replaced or removed) or another value of any of these variables means the search is
//! walked again. The trade-off: a hit does not look for what the search would find *new* with
//! nothing of that changed (a toolkit installed afterwards in a place searched earlier, or a
//! copy of NVRTC another library loaded into the process); it returns what the remembered,
//! unchanged NVRTC made of exactly these inputs. Every miss opens NVRTC through the full search
//! and compares: a different outcome replaces the remembered one, and a result compiled by
//! another NVRTC than its key names is not stored. `cudyn cache clear` forgets the remembered
//! outcomes too; files modified in the last two seconds are never trusted this way.
//!
//! **A process's first lookup reads one file and hashes nothing with blake3** (its direct name):
//! an entry holds the remembered toolchain of the compiler that made it and the program's own
//! inputs (everything the key takes of the program: options, source, headers, name
//! expressions), and once written, or found by key, it is also filed (a hard link, no copy)
//! under `direct/<environment>/<program>`, each part the xxh3-128 hash of the environment's
//! fingerprint or of those inputs: a name, not a key. A new process, which knows its environment
//! and the program but not yet its compiler, opens that name, compares the inputs the entry was
//! made from with its program's, byte for byte, and checks the entry's toolchain as a recall
//! would (one `stat` of NVRTC's file, and of the headers' files for a program that may include
//! one): the entry is then the one of the blake3 key that compiler and these inputs make, as
//! when it was stored, and the hit reads neither the remembered toolchain nor the compiler's
//! version, and computes no key (the process's first blake3 hash, CPU detection included, was
//! a fifth of a warm start on an H200 host). The toolchain is checked where it lies in the entry,
//! not decoded: the process keeps it, and decodes it only when a later compile needs the
//! compiler. Any doubt (no such name, a damaged or changed file, other inputs) is a lookup by
//! key as before, which files the name for the next process. Replacing the toolchain remembered
//! for an environment forgets the direct names filed under it; a name whose file is no longer an
//! entry (evicted, removed as damaged, replaced) is removed by the next eviction, `verify` or
//! `clear`. File systems without hard links go without direct names.
//!
//! **Entries** are one file each, the code and a manifest (kind, architecture, kernels with
//! their parameter layouts, lowered names, toolchain, creation time, and what cudyn's check
//! before a load found in the code, with the code's blake3 digest) sealed by a checksum (xxh3-128:
//! it finds damage; the folder's ownership keeps others out), verified on every read (length,
//! checksum, manifest); a damaged one is a miss and is rewritten. The code of a hit is therefore
//! loaded without being checked or hashed again. **Writes** are atomic and safe between threads, processes and hosts under the
//! file-system assumptions of [`store`]. **The folder** must belong to the user and be writable by
//! no one else; otherwise it is refused with a warning (printed once) and cudyn compiles without
//! the cache; a symbolic link in its place is refused too (it could lead anywhere).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use crate::error::{Error, Result};
use crate::image::ImageKind;
use crate::version::Version;

mod background;
pub(crate) mod entry;
mod evict;
mod folder;
pub mod key;
mod ledger;
mod memory;
pub mod remote;
mod reports;
pub(crate) mod resolved;
mod size;
pub mod store;

pub use evict::DEFAULT_MAX_BYTES;
pub use key::{Key, KeyHasher};
pub use remote::{
    Remote, RemoteConfig, RemoteStats, MAX_ENTRY_BYTES, REMOTE_ENV, REMOTE_KEY_FILE_ENV,
};
pub use reports::{CacheStats, EntryInfo, NotRemoved, PruneReport, VerifyReport};
use size::max_bytes_from_environment;
pub use size::{parse_bytes, SizeError};

use background::{Background, DRAIN_BOUND};
use entry::Entry;
use key::Fields;
use memory::{MemoryCache, DEFAULT_MEMORY_BYTES};
use resolved::Fingerprint;

/// The folder of the cache holding the direct names of entries, one folder per environment.
const DIRECT: &str = "direct";

/// The environment variable that moves the cache.
pub const DIR_ENV: &str = "CUDYN_CACHE_DIR";
/// The environment variable that turns the cache off (`off`, `0`, `false`).
pub const SWITCH_ENV: &str = "CUDYN_CACHE";
/// The environment variable that sets the disk cache's size cap: bytes, or with a suffix `K`,
/// `M` or `G` ([`parse_bytes`]).
pub const MAX_BYTES_ENV: &str = "CUDYN_CACHE_MAX_BYTES";

/// A compile cache in one folder. See the [module documentation](self).
///
/// ```no_run
/// use cudyn::Cache;
///
/// // The cache every compile and link uses, unless `CUDYN_CACHE=off`.
/// if let Some(cache) = Cache::global() {
///     let stats = cache.stats()?;
///     println!("{}: {} entries, {} bytes", cache.path().display(), stats.entries, stats.bytes);
///     cache.prune(256 << 20)?; // keep the most recently used 256 MiB
/// }
/// # Ok::<(), cudyn::Error>(())
/// ```
#[derive(Debug)]
pub struct Cache {
    /// What the writes done off the caller's path need too.
    shared: Arc<Shared>,
    /// The remote tier behind this cache, when there is one (see [`remote`]).
    remote: RwLock<Option<Arc<Remote>>>,
    /// The writes of entries found in the remote tier (see [`background`]).
    background: Background,
}

/// A cache's folder, memory and counters.
#[derive(Debug)]
struct Shared {
    dir: PathBuf,
    memory: Mutex<MemoryCache>,
    max_bytes: AtomicU64,
    counters: Counters,
    warned_of_failed_write: AtomicBool,
}

#[derive(Debug, Default)]
struct Counters {
    memory_hits: AtomicU64,
    disk_hits: AtomicU64,
    misses: AtomicU64,
    writes: AtomicU64,
    corrupt: AtomicU64,
    evictions: AtomicU64,
    failed_writes: AtomicU64,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

impl Cache {
    /// The cache at `dir` (created 0700 if missing); refused ([`Error::CacheRefused`]) when the
    /// folder is owned by another user or writable by group or others.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Cache> {
        let dir = dir.into();
        store::prepare_folder(&dir)?;
        Ok(Cache::in_checked_folder(dir))
    }

    /// The cache at `dir`, a folder [`store::prepare_folder`] accepted.
    fn in_checked_folder(dir: PathBuf) -> Cache {
        Cache {
            shared: Arc::new(Shared {
                dir,
                memory: Mutex::new(MemoryCache::new(DEFAULT_MEMORY_BYTES)),
                max_bytes: AtomicU64::new(max_bytes_from_environment()),
                counters: Counters::default(),
                warned_of_failed_write: AtomicBool::new(false),
            }),
            remote: RwLock::new(None),
            background: Background::default(),
        }
    }

    /// The process-wide cache every compile uses: `$CUDYN_CACHE_DIR`, else
    /// `$XDG_CACHE_HOME/cudyn/kernels`, else `~/.cache/cudyn/kernels` (see [`dir`]); `None` when
    /// turned off (`CUDYN_CACHE=off`, or [`set_enabled(false)`](set_enabled)) or refused (then
    /// a warning says why, once per process). [`try_global`](Cache::try_global) says why there
    /// is none.
    pub fn global() -> Option<&'static Cache> {
        match Cache::try_global() {
            Ok(cache) => Some(cache),
            Err(error) => {
                static WARNED: AtomicBool = AtomicBool::new(false);
                let off = matches!(error, Error::CacheUnavailable { .. });
                if !off && !WARNED.swap(true, Ordering::Relaxed) {
                    crate::warn::warning!("cudyn: warning: compiling without a cache: {error}");
                }
                None
            }
        }
    }

    /// [`Cache::global`], or why there is none, with no warning printed:
    /// [`Error::CacheUnavailable`] when it is turned off or no folder can be named for it,
    /// [`Error::CacheRefused`] when its folder is unsafe to trust, [`Error::CacheIo`] when the
    /// folder cannot be made. The folder is made (private) when missing.
    pub fn try_global() -> Result<&'static Cache> {
        if !ENABLED.load(Ordering::Relaxed) {
            return Err(folder::turned_off_by_call());
        }
        GLOBAL
            .get_or_init(|| {
                folder::require_switched_on()?;
                let (dir, named) = folder::configured()?;
                store::prepare_folder(&dir)?;
                if named {
                    folder::adopt_earlier_layout(&dir);
                }
                let cache = Cache::in_checked_folder(dir);
                cache.adopt_remote_from_environment();
                Ok(cache)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Where the entries live.
    pub fn path(&self) -> &Path {
        &self.shared.dir
    }

    /// Puts the remote tier `config` describes behind this cache (see [`remote`]), or takes it
    /// away (`None`). Connects nothing: the first miss of the local tiers does.
    pub fn set_remote(&self, config: Option<RemoteConfig>) -> Result<()> {
        let remote = config
            .map(|config| {
                Remote::new(config).map(|remote| Arc::new(remote.tallied_in(&self.shared.dir)))
            })
            .transpose()?;
        *self
            .remote
            .write()
            .unwrap_or_else(|poison| poison.into_inner()) = remote;
        Ok(())
    }

    /// What the remote tier did for every process using this cache's folder, as far as their
    /// tally of it records (see [`remote`]): a close account, not an exact one. Its `url` is
    /// left empty.
    pub fn remote_totals(&self) -> RemoteStats {
        self.wait_for_writes();
        if let Some(remote) = self.remote() {
            remote.flush_tally();
        }
        remote::tally::totals(&self.shared.dir)
    }

    /// The remote tier behind this cache, if any.
    pub fn remote(&self) -> Option<Arc<Remote>> {
        self.remote
            .read()
            .unwrap_or_else(|poison| poison.into_inner())
            .clone()
    }

    /// The remote tier of `CUDYN_CACHE_REMOTE` ([`RemoteConfig::from_environment`]), for the
    /// process-wide cache; a refused one is a warning, printed once, and no remote tier.
    fn adopt_remote_from_environment(&self) {
        let adopted = RemoteConfig::from_environment().and_then(|config| self.set_remote(config));
        if let Err(error) = adopted {
            crate::warn::warning!("cudyn: warning: {error}");
        }
    }

    /// Sets the size cap of the disk cache, in bytes.
    pub fn set_max_bytes(&self, max_bytes: u64) {
        self.shared.max_bytes.store(max_bytes, Ordering::Relaxed);
    }

    /// Counters of this process and totals on disk.
    pub fn stats(&self) -> Result<CacheStats> {
        self.wait_for_writes();
        let files = evict::list(&self.shared.dir)?;
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        Ok(CacheStats {
            memory_hits: load(&self.shared.counters.memory_hits),
            disk_hits: load(&self.shared.counters.disk_hits),
            misses: load(&self.shared.counters.misses),
            writes: load(&self.shared.counters.writes),
            corrupt: load(&self.shared.counters.corrupt),
            evictions: load(&self.shared.counters.evictions),
            failed_writes: load(&self.shared.counters.failed_writes),
            entries: files.len() as u64,
            bytes: files.iter().map(|file| file.size).sum(),
            max_bytes: self.shared.max_bytes.load(Ordering::Relaxed),
            remote: self.remote().map(|remote| remote.stats()),
        })
    }

    /// Every intact entry on disk, most recently used first (damaged ones are skipped; see
    /// [`verify`](Self::verify)).
    pub fn entries(&self) -> Result<Vec<EntryInfo>> {
        self.wait_for_writes();
        Ok(evict::list(&self.shared.dir)?
            .into_iter()
            .filter_map(|file| {
                let entry = Entry::decode(std::fs::read(&file.path).ok()?)?;
                let listed = entry.listing.read()?;
                let kind = entry.image_kind();
                Some(EntryInfo {
                    key: entry.key.hex(),
                    kind,
                    // PTX is for a virtual architecture.
                    arch: match kind {
                        ImageKind::Ptx => entry.arch.compute(),
                        _ => entry.arch.sm(),
                    },
                    kernels: listed
                        .kernels
                        .into_iter()
                        .map(|kernel| kernel.name)
                        .collect(),
                    size: file.size,
                    path: file.path.clone(),
                    created: listed.created,
                    // The file's time comes from the kernel's coarse clock, which can read a
                    // few milliseconds behind the clock `created` was taken from; across a
                    // second boundary that would list a use before the entry was made.
                    last_used: file.last_used.max(listed.created),
                })
            })
            .collect())
    }

    /// Reads and checks every entry, more than a hit does (the listing decoded, the code's
    /// digest computed again, the key computed again from the compiler and the program's
    /// inputs the entry holds); damaged ones, and those of another version's format, are
    /// removed.
    pub fn verify(&self) -> Result<VerifyReport> {
        self.wait_for_writes();
        let mut report = VerifyReport {
            checked: 0,
            removed: Vec::new(),
            outdated: Vec::new(),
            not_removed: Vec::new(),
        };
        let mut kept = std::collections::BTreeSet::new();
        for file in evict::list(&self.shared.dir)? {
            report.checked += 1;
            let bytes = std::fs::read(&file.path).ok();
            let other_format = bytes.as_deref().is_some_and(Entry::is_other_format);
            let intact = bytes.and_then(Entry::decode).is_some_and(|entry| {
                Some(entry.key) == key_of_file(&file.path)
                    && entry.listing.read().is_some()
                    && entry.digest_matches()
                    && entry.key_matches_inputs()
            });
            if intact {
                kept.insert(file.file);
                continue;
            }
            match std::fs::remove_file(&file.path) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                    report.not_removed.push(NotRemoved::new(&file.path, &error));
                    kept.insert(file.file);
                    continue;
                }
                _ => {}
            }
            let stem = file.path.file_stem().unwrap_or_default();
            let stem = stem.to_string_lossy().into_owned();
            if other_format {
                report.outdated.push(stem);
            } else {
                bump(&self.shared.counters.corrupt, 1);
                report.removed.push(stem);
            }
        }
        evict::remove_orphaned_links(&self.shared.dir.join(DIRECT), &kept);
        Ok(report)
    }

    /// Evicts least recently used entries until the total is at most `max_bytes` (and removes
    /// temporary files that writers which died left over an hour ago). An entry that cannot be
    /// removed stays and is reported ([`PruneReport::not_removed`]); the next older one is tried.
    pub fn prune(&self, max_bytes: u64) -> Result<PruneReport> {
        self.wait_for_writes();
        self.shared.prune(max_bytes)
    }

    /// Removes every entry, on disk and in memory, with their direct names, the toolchains
    /// remembered in its `compilers/` folder and the remote tier's tally; reports what was
    /// removed and what could not be, as [`prune`](Cache::prune) does.
    pub fn clear(&self) -> Result<PruneReport> {
        self.wait_for_writes();
        self.lock_memory().clear();
        resolved::forget_all(&self.shared.dir);
        let _ = std::fs::remove_dir_all(self.shared.dir.join(DIRECT));
        let _ = std::fs::remove_file(self.shared.dir.join(remote::tally::NAME));
        self.prune(0)
    }

    fn lock_memory(&self) -> std::sync::MutexGuard<'_, MemoryCache> {
        self.shared.lock_memory()
    }

    fn entry_path(&self, key: &Key) -> PathBuf {
        self.shared.entry_path(key)
    }

    /// Waits (within [`DRAIN_BOUND`]) for the writes done off the caller's path that were
    /// queued before, so that what follows sees their files and counts.
    fn wait_for_writes(&self) {
        self.background.wait(DRAIN_BOUND);
    }

    /// What the end of a cache waits for: its queued writes (within [`DRAIN_BOUND`]), then the
    /// remote tier's events not yet added to the folder's tally.
    fn finish(&self) {
        self.wait_for_writes();
        if let Some(remote) = self.remote() {
            remote.flush_tally();
        }
    }

    /// Queues `write`, to be done off the caller's path (see [`background`]); the process-wide
    /// cache's first such write also has the process's exit wait for them.
    fn write_behind(&self, write: impl FnOnce() + Send + 'static) {
        let global = GLOBAL.get().and_then(|global| global.as_ref().ok());
        if global.is_some_and(|global| std::ptr::eq(global, self)) {
            static AT_EXIT: std::sync::Once = std::sync::Once::new();
            AT_EXIT.call_once(|| {
                // SAFETY: `finish_global_at_exit` is a plain function that takes nothing and
                // never unwinds (every lock it takes recovers from poison); a failure to
                // register it only leaves the writes to the thread, which the exit may cut short.
                unsafe { libc::atexit(finish_global_at_exit) };
            });
        }
        self.background.submit(write);
    }

    /// The entry of `key`, from memory or disk; a damaged file counts as corrupt and a miss.
    pub(crate) fn lookup(&self, key: &Key) -> Option<Arc<Entry>> {
        if let Some(entry) = self.lock_memory().get(key) {
            bump(&self.shared.counters.memory_hits, 1);
            return Some(entry);
        }
        let path = self.entry_path(key);
        let found = store::read_and_touch(&path).map(Entry::decode);
        match found {
            Some(Some(entry)) if entry.key == *key => {
                bump(&self.shared.counters.disk_hits, 1);
                let entry = Arc::new(entry);
                self.lock_memory().insert(Arc::clone(&entry));
                Some(entry)
            }
            Some(_) => {
                bump(&self.shared.counters.corrupt, 1);
                bump(&self.shared.counters.misses, 1);
                None
            }
            None => {
                bump(&self.shared.counters.misses, 1);
                None
            }
        }
    }

    /// The file of a program's direct name: named after its `inputs`, in the folder of the
    /// environment's `fingerprint` (see the [module documentation](self)).
    fn direct_path(&self, fingerprint: &Fingerprint, inputs: &Fields) -> PathBuf {
        // One buffer, built by hand: this is on the path of every warm start.
        let (environment, program) = (fingerprint.name(), inputs.name());
        let mut path = std::ffi::OsString::with_capacity(
            self.shared.dir.as_os_str().len()
                + DIRECT.len()
                + environment.len()
                + program.len()
                + 16,
        );
        path.push(self.shared.dir.as_os_str());
        for part in [
            "/",
            DIRECT,
            "/",
            &environment,
            "/",
            &program,
            ".",
            store::EXTENSION,
        ] {
            path.push(part);
        }
        PathBuf::from(path)
    }

    /// The entry filed under a direct name, read whole and intact, or `None`. Not yet a hit: the
    /// caller checks that it is the entry of its key, then [accepts](Cache::accept_direct) it.
    /// Reading it records a use of the entry, whose file this is.
    pub(crate) fn lookup_direct(
        &self,
        fingerprint: &Fingerprint,
        inputs: &Fields,
    ) -> Option<Entry> {
        Entry::decode(store::read_and_touch(
            &self.direct_path(fingerprint, inputs),
        )?)
    }

    /// Counts an entry found through its direct name as a disk hit and keeps it in memory.
    pub(crate) fn accept_direct(&self, entry: Entry) -> Arc<Entry> {
        bump(&self.shared.counters.disk_hits, 1);
        let entry = Arc::new(entry);
        self.lock_memory().insert(Arc::clone(&entry));
        entry
    }

    /// Files the entry of `key`, on disk, under a direct name too. A failure (a file system
    /// without hard links, the entry evicted meanwhile) only costs later processes the read of
    /// the remembered toolchain. Linked after the writes queued before it, when there are any
    /// (the entry's own among them, for an entry the remote tier handed over).
    pub(crate) fn link_direct(&self, key: &Key, fingerprint: &Fingerprint, inputs: &Fields) {
        let (entry, name) = (self.entry_path(key), self.direct_path(fingerprint, inputs));
        if self.background.is_idle() {
            let _ = store::link_atomically(&entry, &name);
        } else {
            self.write_behind(move || {
                let _ = store::link_atomically(&entry, &name);
            });
        }
    }

    /// Forgets the direct names filed under `fingerprint`: the toolchain remembered for it is
    /// being replaced, and they name what the one before made.
    pub(crate) fn forget_direct(&self, fingerprint: &Fingerprint) {
        let _ = std::fs::remove_dir_all(self.shared.dir.join(DIRECT).join(fingerprint.name()));
    }

    /// Stores an entry in memory and on disk, then evicts down to the size cap when the ledger
    /// says the total passes it or a listing is due; whether it was written. A failed write
    /// leaves the result uncached (the compile itself succeeded): it is counted, and the first
    /// one of the process printed as a warning. An entry the remote tier handed over is written
    /// off the caller's path (see [`background`]): then `true` says it was queued.
    pub(crate) fn store(&self, entry: Entry) -> bool {
        let entry = Arc::new(entry);
        self.lock_memory().insert(Arc::clone(&entry));
        // An entry the remote tier just handed over: the caller has its code, only the next
        // start needs the file, so it is written off the caller's path, with the hit's tally.
        match self
            .remote()
            .filter(|remote| remote.take_fetched(&entry.key))
        {
            Some(remote) => {
                let shared = Arc::clone(&self.shared);
                self.write_behind(move || {
                    shared.write(&entry);
                    remote.flush_tally();
                });
                true
            }
            None => self.shared.write(&entry),
        }
    }

    /// The version remembered for the library file `file`, if it was ever opened by a process
    /// using this cache.
    pub(crate) fn remembered_version(&self, file: &crate::sys::LibraryFile) -> Option<Version> {
        let text = std::fs::read_to_string(self.version_path(file)).ok()?;
        let (major, minor) = text.trim().split_once('.')?;
        Some(Version::new(major.parse().ok()?, minor.parse().ok()?))
    }

    /// Remembers the version of the library file `file`.
    pub(crate) fn remember_version(&self, file: &crate::sys::LibraryFile, version: Version) {
        let _ =
            store::write_atomically(&self.version_path(file), format!("{version}\n").as_bytes());
    }

    fn version_path(&self, file: &crate::sys::LibraryFile) -> PathBuf {
        let mut hasher = KeyHasher::new("library version");
        key::add_library(&mut hasher, file);
        self.shared
            .dir
            .join("compilers")
            .join(hasher.finish().hex())
    }
}

impl Shared {
    fn lock_memory(&self) -> std::sync::MutexGuard<'_, MemoryCache> {
        self.memory
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn entry_path(&self, key: &Key) -> PathBuf {
        // Built by hand: the formatting machinery's code would be a process's first touch of it
        // on the path of a warm start, which every page of new code slows down.
        let mut name = key.hex();
        name.push('.');
        name.push_str(store::EXTENSION);
        self.dir.join(name)
    }

    /// Writes `entry` to disk, then evicts down to the size cap when the ledger says the total
    /// passes it or a listing is due; whether it was written (see [`Cache::store`]).
    fn write(&self, entry: &Entry) -> bool {
        let path = self.entry_path(&entry.key);
        let bytes = entry.encode();
        match store::write_atomically(&path, &bytes) {
            Ok(()) => {
                bump(&self.counters.writes, 1);
                let max_bytes = self.max_bytes.load(Ordering::Relaxed);
                let listing_due = ledger::record_write(&self.dir, bytes.len() as u64)
                    .is_none_or(|tally| tally.listing_due(max_bytes));
                if listing_due {
                    let _ = self.prune(max_bytes);
                }
                true
            }
            Err(error) => {
                bump(&self.counters.failed_writes, 1);
                if !self.warned_of_failed_write.swap(true, Ordering::Relaxed) {
                    crate::warn::warning!(
                        "cudyn: warning: the compile cache could not store a result ({error}); \
                         free space or fix the folder's permissions, or move the cache with \
                         {DIR_ENV}. Compiles go on without storing; this is said once per \
                         process."
                    );
                }
                false
            }
        }
    }

    /// [`Cache::prune`], without waiting for queued writes: the writes call it.
    fn prune(&self, max_bytes: u64) -> Result<PruneReport> {
        evict::remove_stale_temporaries(&self.dir);
        let files = evict::list(&self.dir)?;
        let evicted = evict::evict(&files, max_bytes);
        let mut memory = self.lock_memory();
        for file in &evicted.removed {
            if let Some(key) = key_of_file(&file.path) {
                memory.remove(&key);
            }
        }
        drop(memory);
        let mut kept: std::collections::BTreeSet<_> = files.iter().map(|file| file.file).collect();
        for file in &evicted.removed {
            kept.remove(&file.file);
        }
        evict::remove_orphaned_links(&self.dir.join(DIRECT), &kept);
        bump(&self.counters.evictions, evicted.removed.len() as u64);
        ledger::start(&self.dir, evicted.remaining);
        Ok(PruneReport {
            removed: evicted.removed.len(),
            freed_bytes: evicted.removed.iter().map(|file| file.size).sum(),
            remaining_bytes: evicted.remaining,
            not_removed: evicted
                .failed
                .iter()
                .map(|(file, error)| NotRemoved::new(&file.path, error))
                .collect(),
        })
    }
}

impl Drop for Cache {
    /// Waits for the writes still queued (entries found in the remote tier, written to disk off
    /// the caller's path), for at most 2 s, so that the next start finds them on disk.
    fn drop(&mut self) {
        self.finish();
    }
}

/// Registered with `atexit` by the process-wide cache's first write off the caller's path:
/// the process-wide cache is never dropped.
extern "C" fn finish_global_at_exit() {
    if let Some(Ok(cache)) = GLOBAL.get() {
        cache.finish();
    }
}

fn key_of_file(path: &Path) -> Option<Key> {
    Key::from_hex(path.file_stem()?.to_str()?)
}

static ENABLED: AtomicBool = AtomicBool::new(true);
static GLOBAL: OnceLock<Result<Cache>> = OnceLock::new();

/// The folder of the process-wide cache's entries, as [`set_dir`], else `$CUDYN_CACHE_DIR`,
/// else `$XDG_CACHE_HOME/cudyn/kernels`, else `~/.cache/cudyn/kernels` name it, without opening
/// or making it: the folder [`Cache::global`] opens and [`Cache::path`] gives, the same that
/// [`Cache::open`] takes. [`Error::CacheUnavailable`] when the cache is turned off or no folder
/// can be named (no `HOME`), [`Error::CacheRefused`] for a relative `CUDYN_CACHE_DIR`.
pub fn dir() -> Result<PathBuf> {
    if !ENABLED.load(Ordering::Relaxed) {
        return Err(folder::turned_off_by_call());
    }
    if let Some(Ok(cache)) = GLOBAL.get() {
        return Ok(cache.path().to_owned());
    }
    folder::require_switched_on()?;
    folder::configured().map(|(dir, _)| dir)
}

/// Turns the process-wide cache on or off; compiles after this call follow it.
pub fn set_enabled(enabled: bool) {
    ENABLED.store(enabled, Ordering::Relaxed);
}

/// Moves the process-wide cache to `dir`, the folder of its entries (an absolute path, or one
/// relative to the current folder at the first compile). Must come before the first compile;
/// afterwards it is [`Error::CacheDirFrozen`].
pub fn set_dir(dir: impl Into<PathBuf>) -> Result<()> {
    let mut chosen = folder::CHOSEN
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    if let Some(opened) = GLOBAL.get() {
        return Err(Error::CacheDirFrozen {
            opened: opened
                .as_ref()
                .map_or_else(|_| PathBuf::new(), |cache| cache.path().to_owned()),
        });
    }
    *chosen = Some(dir.into());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use entry::tests::sample;
    use std::time::SystemTime;

    #[test]
    fn a_cache_is_shared_between_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<Cache>();
    }

    #[test]
    fn a_use_is_recorded_as_the_entry_files_time() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let key = Key([9; 32]);
        cache.store(sample(key, 10));
        let path = cache.entry_path(&key);
        let long_ago = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000);
        std::fs::File::open(&path)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
        cache.lock_memory().clear();
        assert!(cache.lookup(&key).is_some());
        let used = std::fs::metadata(&path).unwrap().modified().unwrap();
        assert!(used > long_ago + std::time::Duration::from_secs(1000));
        assert_eq!(cache.entries().unwrap()[0].last_used, used);
    }

    #[test]
    fn an_entry_is_never_listed_as_used_before_it_was_made() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let key = Key([7; 32]);
        let entry = sample(key, 10);
        let created = entry.listing.read().unwrap().created;
        cache.store(entry);
        std::fs::File::open(cache.entry_path(&key))
            .unwrap()
            .set_modified(created - std::time::Duration::from_millis(3))
            .unwrap();
        let listed = &cache.entries().unwrap()[0];
        assert_eq!(listed.created, created);
        assert_eq!(listed.last_used, created);
    }

    #[test]
    fn every_process_writes_to_one_ledger_which_says_when_to_evict() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let one_entry = sample(Key([0; 32]), 100).encode().len() as u64;
        cache.set_max_bytes(3 * one_entry);
        cache.store(sample(Key([1; 32]), 100));
        // Another process's writes count as this one's.
        let other = Cache::open(dir.path()).unwrap();
        other.store(sample(Key([2; 32]), 100));
        other.store(sample(Key([3; 32]), 100));
        assert_eq!(cache.stats().unwrap().entries, 3, "three fit the cap");
        cache.store(sample(Key([4; 32]), 100));
        let stats = cache.stats().unwrap();
        assert_eq!((stats.entries, stats.evictions), (3, 1));
    }

    #[test]
    fn a_write_lists_the_folder_only_when_the_ledger_says_to() {
        let dir = tempfile::tempdir().unwrap();
        let one_entry = sample(Key([0; 32]), 100).encode().len() as u64;
        let first = Cache::open(dir.path()).unwrap();
        first.set_max_bytes(3 * one_entry);
        // No ledger yet: this write lists the folder and starts one.
        first.store(sample(Key([1; 32]), 100));
        // What a listing removes: a writer's temporary file left over two hours ago.
        let stale = dir.path().join(".left-over.cudyn.1.1.tmp");
        let file = std::fs::File::create(&stale).unwrap();
        let two_hours_ago = SystemTime::now() - std::time::Duration::from_secs(7200);
        file.set_modified(two_hours_ago).unwrap();
        // A new process's first write, under the cap: the ledger answers for the folder.
        let later = Cache::open(dir.path()).unwrap();
        later.set_max_bytes(3 * one_entry);
        later.store(sample(Key([2; 32]), 100));
        assert!(stale.exists(), "a write under the cap listed the folder");
        later.store(sample(Key([3; 32]), 100));
        // Over the cap: listed and evicted.
        later.store(sample(Key([4; 32]), 100));
        assert!(
            !stale.exists(),
            "a write over the cap left the folder unlisted"
        );
    }

    #[test]
    fn a_failed_write_is_counted_and_the_result_kept_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path().join("kernels")).unwrap();
        // A file where the folder was: no write can succeed, nor make the folder again.
        std::fs::remove_dir(dir.path().join("kernels")).unwrap();
        std::fs::write(dir.path().join("kernels"), b"").unwrap();
        let key = Key([7; 32]);
        cache.store(sample(key, 10));
        cache.store(sample(Key([8; 32]), 10));
        assert_eq!(
            cache.shared.counters.failed_writes.load(Ordering::Relaxed),
            2
        );
        assert_eq!(cache.shared.counters.writes.load(Ordering::Relaxed), 0);
        assert!(cache.shared.warned_of_failed_write.load(Ordering::Relaxed));
        assert!(cache.lookup(&key).is_some());
    }

    #[test]
    fn sizes_read_as_bytes_or_with_a_binary_suffix() {
        assert_eq!(parse_bytes("1048576"), Ok(1 << 20));
        assert_eq!(parse_bytes(" 200M "), Ok(200 << 20));
        assert_eq!(parse_bytes("4k"), Ok(4096));
        assert_eq!(parse_bytes("2G"), Ok(2 << 30));
        assert_eq!(parse_bytes("0"), Ok(0));
        for bad in ["", "12X", "M", "-1", "1.5G", "99999999999G", "two"] {
            assert!(parse_bytes(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_damaged_entry_is_a_miss_and_verify_removes_it() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path().join("kernels")).unwrap();
        let (good, bad) = (Key([1; 32]), Key([2; 32]));
        let environment = resolved::fingerprint(|_| None, None);
        let (good_name, bad_name) = (Fields(b"good".to_vec()), Fields(b"bad".to_vec()));
        for (key, name) in [(good, &good_name), (bad, &bad_name)] {
            assert!(cache.store(sample(key, 50)));
            cache.link_direct(&key, &environment, name);
        }
        cache.lock_memory().clear();
        let path = cache.entry_path(&bad);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[40] ^= 4;
        std::fs::write(&path, bytes).unwrap();
        assert!(cache.lookup(&bad).is_none());
        assert!(
            cache.lookup_direct(&environment, &bad_name).is_none(),
            "one file"
        );
        assert_eq!(cache.lookup(&good).unwrap().code, sample(good, 50).code);
        let report = cache.verify().unwrap();
        assert_eq!(report.checked, 2);
        assert_eq!(report.removed, [bad.hex()]);
        let stats = cache.stats().unwrap();
        assert_eq!((stats.entries, stats.corrupt, stats.disk_hits), (1, 2, 1));
        // The removed entry's direct name went with it; the good one's still reads.
        assert!(!cache.direct_path(&environment, &bad_name).exists());
        assert_eq!(
            cache.lookup_direct(&environment, &good_name),
            Some(sample(good, 50))
        );
        cache.forget_direct(&environment);
        assert_eq!(cache.lookup_direct(&environment, &good_name), None);
        assert!(cache.lookup(&good).is_some(), "the entry itself stays");
    }

    #[test]
    fn the_size_cap_evicts_the_least_recently_used() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let one_entry = sample(Key([0; 32]), 1000).encode().len() as u64;
        cache.set_max_bytes(2 * one_entry);
        let keys = [Key([1; 32]), Key([2; 32]), Key([3; 32])];
        cache.store(sample(keys[0], 1000));
        cache.store(sample(keys[1], 1000));
        // Used long ago: the first to go.
        let old = std::fs::File::open(cache.entry_path(&keys[1])).unwrap();
        old.set_modified(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000))
            .unwrap();
        cache.store(sample(keys[2], 1000));
        let left: Vec<String> = cache
            .entries()
            .unwrap()
            .into_iter()
            .map(|e| e.key)
            .collect();
        assert_eq!(left.len(), 2);
        assert!(!left.contains(&keys[1].hex()), "{left:?}");
        assert_eq!(cache.stats().unwrap().evictions, 1);
        assert_eq!(cache.clear().unwrap().removed, 2);
        assert!(cache.lookup(&keys[0]).is_none());
    }
}
