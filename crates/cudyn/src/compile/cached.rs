//! Compiles and links through the compile cache ([`crate::cache`]): the key is built without
//! opening NVRTC, a hit is returned without it, and a miss compiles and stores the result.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::compiled::{CacheUse, Compiled, Output};
use super::includes::{self, CudaFolders};
use super::program::Program;
use super::target::{Arch, PtxVerdict};
use crate::cache::entry::{Entry, Listed, Listing};
use crate::cache::key::{FieldSink, Fields};
use crate::cache::remote::{Expected, Found, Lease};
use crate::cache::resolved::{self, Fingerprint, ResolvedCompiler};
use crate::cache::{key, Cache, Key, KeyHasher};
use crate::error::Result;
use crate::image::{Checked, ImageKind};
use crate::shared_bytes::SharedBytes;
use crate::sys;
use crate::sys::locate::{Component, CudaHeaders};
use crate::version::Version;

/// The compiler this process compiles with, once known; replaced when a miss finds that the
/// search now resolves to another.
static COMPILER: Mutex<Option<Known>> = Mutex::new(None);

/// How the process knows its compiler.
#[derive(Clone)]
enum Known {
    /// Resolved, or decoded from a remembered toolchain.
    Compiler(Arc<ResolvedCompiler>),
    /// The toolchain record of the entry a direct name led to, whose files were checked then
    /// (see [`resolved::check_in_place`]): decoded when a later compile needs the compiler, so
    /// that a warm start that compiles one program never does.
    Record(SharedBytes),
}

fn current_compiler() -> std::sync::MutexGuard<'static, Option<Known>> {
    COMPILER.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// The fingerprint of what decides the search in this process (see [`resolved`]).
fn search_fingerprint() -> Fingerprint {
    resolved::fingerprint(
        |name| std::env::var_os(name),
        sys::library_path_override().as_deref(),
    )
}

/// The compiler: remembered by `cache` for this environment and unchanged on disk, else found
/// from its file and the version `cache` remembers for it, else by opening NVRTC once. `None`
/// when NVRTC's file cannot be identified. A compiler recalled for a program without includes
/// has had NVRTC's file checked alone; `with_headers` checks the headers' files too.
/// `fingerprint` is the environment's, when the caller computed it already.
fn compiler(
    cache: &Cache,
    with_headers: bool,
    fingerprint: Option<&Fingerprint>,
) -> Result<Option<Arc<ResolvedCompiler>>> {
    let current = current_compiler().clone();
    match current {
        Some(Known::Compiler(compiler)) => {
            if !with_headers || compiler.headers_checked() {
                return Ok(Some(compiler));
            }
            // Recalled for programs without includes: its headers' files are checked now, once.
            if let Some(checked) = compiler.with_headers_checked() {
                return Ok(Some(keep(checked)));
            }
        }
        // A record whose files changed since is no compiler: the search decides again.
        Some(Known::Record(record)) => {
            if let Some(compiler) = resolved::from_record(&record, with_headers) {
                return Ok(Some(keep(compiler)));
            }
        }
        None => {}
    }
    let fingerprint = fingerprint
        .cloned()
        .or_else(|| (!sys::is_open(Component::Nvrtc)).then(search_fingerprint));
    let recalled = fingerprint
        .as_ref()
        .and_then(|fingerprint| resolved::recall(cache.path(), &fingerprint.key(), with_headers));
    let compiler = match recalled {
        Some(compiler) => {
            sys::settle(Component::Nvrtc);
            compiler
        }
        None => {
            let Some(compiler) = search(cache)? else {
                return Ok(None);
            };
            if let Some(fingerprint) = &fingerprint {
                remember(cache, fingerprint, &compiler);
            }
            compiler
        }
    };
    Ok(Some(keep(compiler)))
}

/// A process's first lookup, before it knows its compiler: the environment's fingerprint,
/// under which the program's direct name is filed (see [`crate::cache`]). `None` once the
/// compiler is known, or when NVRTC is open already (then the search is not what decides the
/// compiler).
struct FirstLookup {
    fingerprint: Fingerprint,
}

impl FirstLookup {
    fn new() -> Option<FirstLookup> {
        if current_compiler().is_some() || sys::is_open(Component::Nvrtc) {
            return None;
        }
        Some(FirstLookup {
            fingerprint: search_fingerprint(),
        })
    }

    /// The entry filed under the program's direct name, with its compiler's version, when it
    /// was made from exactly these `inputs` and that compiler's files are unchanged. Its key is
    /// then the one that compiler and these inputs make, as when it was stored: it is not hashed
    /// again. Otherwise the key of the entry found under the name, if one was (see [`Filed`]).
    fn hit(
        &self,
        cache: &Cache,
        inputs: &Fields,
        reads_headers: bool,
    ) -> Result<(Version, Entry), Filed> {
        let entry = cache
            .lookup_direct(&self.fingerprint, inputs)
            .ok_or(Filed(None))?;
        if *entry.inputs != *inputs.0 {
            return Err(Filed(Some(entry.key)));
        }
        match resolved::check_in_place(&entry.toolchain, reads_headers) {
            Some(version) => Ok((version, entry)),
            None => Err(Filed(Some(entry.key))),
        }
    }
}

/// What a direct name led to when it was no hit: the key of an intact entry, or nothing. A hit
/// by key files its entry under the name unless it is the entry the name already leads to, which
/// a later process would refuse again (its compiler's files changed, say), so that such a
/// process does not file it anew every time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Filed(Option<Key>);

impl Filed {
    /// Whether the entry of `key`, just found by key, should be filed under the direct name: it
    /// is not what the name leads to, and it holds what a direct lookup needs.
    fn wants(self, key: &Key, entry: &Entry) -> bool {
        self.0 != Some(*key) && !entry.toolchain.is_empty()
    }
}

/// Remembers `compiler` for the environment of `fingerprint`, in place of what was remembered
/// for it, and forgets the direct names filed under it, which name what that one made.
fn remember(cache: &Cache, fingerprint: &Fingerprint, compiler: &ResolvedCompiler) {
    resolved::remember(cache.path(), &fingerprint.key(), compiler);
    cache.forget_direct(fingerprint);
}

/// Makes `compiler` this process's compiler.
fn keep(compiler: ResolvedCompiler) -> Arc<ResolvedCompiler> {
    let compiler = Arc::new(compiler);
    *current_compiler() = Some(Known::Compiler(Arc::clone(&compiler)));
    compiler
}

/// The compiler found by walking the search order: NVRTC's file, its version as `cache`
/// remembers it (else NVRTC opened to ask), and the CUDA headers beside it.
fn search(cache: &Cache) -> Result<Option<ResolvedCompiler>> {
    let identified = sys::library_file(Component::Nvrtc)
        .filter(|_| !sys::is_open(Component::Nvrtc))
        .and_then(|file| Some((cache.remembered_version(&file)?, file)));
    if let Some((version, file)) = identified {
        let headers = CudaHeaders::find(
            Some((&file.path, file.origin)),
            Some(version),
            |name| std::env::var_os(name),
            Path::new("/"),
        );
        return Ok(Some(ResolvedCompiler::new(file, version, headers)));
    }
    let version = sys::nvrtc()?.version;
    let Some(file) = sys::library_file(Component::Nvrtc) else {
        return Ok(None);
    };
    if cache.remembered_version(&file) != Some(version) {
        cache.remember_version(&file, version);
    }
    let headers = CudaHeaders::for_this_process().clone();
    Ok(Some(ResolvedCompiler::new(file, version, headers)))
}

/// After a miss opened NVRTC: whether it is the compiler the key named. When the search now
/// resolves to another compiler or other headers, that replaces this process's compiler and
/// the one remembered for the environment.
fn confirm_compiler(cache: &Cache, keyed: &ResolvedCompiler) -> bool {
    let Ok(Some(found)) = search(cache) else {
        return false;
    };
    if found.same_as(keyed) {
        return true;
    }
    remember(cache, &search_fingerprint(), &found);
    let same_compiler = found.same_compiler(keyed);
    keep(found);
    same_compiler
}

/// Adds the driver's major version for PTX, which the driver JIT-compiles: an entry made under
/// one driver is not trusted under another. Nothing when there is no driver.
fn add_driver_for_ptx(hasher: &mut impl FieldSink, output: Output) {
    if output == Output::Ptx {
        let major = sys::driver().ok().map(|driver| driver.version.major);
        hasher.field(&major.unwrap_or(0).to_le_bytes());
    }
}

/// `program` compiled for `arch` through `cache`.
pub(super) fn compile(program: &Program, cache: &Cache, arch: Arch) -> Result<Compiled> {
    match look_up(program, cache, arch)? {
        Lookup::Hit(compiled) => Ok(compiled),
        Lookup::Miss(miss) => compile_miss(program, cache, arch, miss),
    }
}

/// Compiles a program `cache` does not hold, in this process, and stores the result.
pub(super) fn compile_miss(
    program: &Program,
    cache: &Cache,
    arch: Arch,
    miss: Miss,
) -> Result<Compiled> {
    let mut compiled = program.compile_uncached(Ok(arch), &miss.defaults)?;
    miss.store(cache, &mut compiled, |keyed| confirm_compiler(cache, keyed));
    Ok(compiled)
}

/// What the cache holds for a program: its result, or what compiling it needs.
#[derive(Debug)]
pub(super) enum Lookup {
    /// The result, from memory or disk.
    Hit(Compiled),
    /// Not in the cache: compile it, then [`Miss::store`] the result.
    Miss(Miss),
}

/// A program the cache does not hold.
#[derive(Debug)]
pub(super) struct Miss {
    /// CUDA's header folders the compile searches after the program's own.
    pub(super) defaults: Vec<PathBuf>,
    /// What the result is stored under, with the compiler the key names; `None` when the
    /// result cannot be cached (NVRTC's file or the program's inputs cannot be identified).
    keyed: Option<Keyed>,
    /// Why the program's inputs cannot be known, when they cannot.
    uncacheable: Option<String>,
    /// This host's lease on the key in the remote tier, when it took one: other hosts wait for
    /// this compile. Released when the miss is dropped, after the result is published.
    #[allow(dead_code)] // held for its drop
    lease: Option<Lease>,
}

/// The key of a program, with what made it.
#[derive(Debug)]
struct Keyed {
    key: Key,
    compiler: Arc<ResolvedCompiler>,
    /// The program's own inputs (see [`program_inputs`]).
    inputs: Fields,
}

impl Miss {
    /// Stores `compiled` under the key when `confirm` says it was made by the compiler the key
    /// names, with what the check before a load finds in it, which `compiled` then carries too;
    /// files it under the program's direct name in this environment too.
    pub(super) fn store(
        self,
        cache: &Cache,
        compiled: &mut Compiled,
        confirm: impl FnOnce(&ResolvedCompiler) -> bool,
    ) {
        let Some(Keyed {
            key,
            compiler,
            inputs,
        }) = self.keyed
        else {
            compiled.cache_use = match self.uncacheable {
                Some(why) => CacheUse::Uncacheable(why),
                None => CacheUse::Miss,
            };
            return;
        };
        compiled.cache_use = CacheUse::Miss;
        if !confirm(&compiler) {
            return;
        }
        let kind = ImageKind::from(compiled.output);
        compiled.checked = Checked::compiler_output(&compiled.code, kind);
        let entry = Entry {
            key,
            output: compiled.output,
            arch: compiled.arch,
            log: compiled.log.clone(),
            lowered_names: compiled.lowered_names.clone(),
            listing: Listing::of(&Listed {
                name: compiled.name.clone(),
                toolchain: vec![format!("NVRTC {}", compiler.version)],
                kernels: Entry::kernels_of(&compiled.code),
                created: SystemTime::now(),
            }),
            code: compiled.code.clone(),
            checked: compiled.checked,
            toolchain: SharedBytes::default(),
            inputs: SharedBytes::default(),
        };
        if let Some(remote) = cache.remote() {
            remote.publish(&entry);
        }
        store_locally(cache, &compiler, &inputs, entry);
    }
}

/// Stores `entry`, made by `compiler` from `inputs`, with them, and files it under the program's
/// direct name in this environment too.
fn store_locally(cache: &Cache, compiler: &ResolvedCompiler, inputs: &Fields, mut entry: Entry) {
    let toolchain = resolved::record(compiler);
    entry.toolchain = toolchain.clone().unwrap_or_default().into();
    entry.inputs = inputs.0.clone().into();
    let key = entry.key;
    // A compiler with a record was found by this environment's search (not a copy already
    // loaded), which a later process with the same fingerprint walks to the same end.
    if cache.store(entry) && toolchain.is_some() {
        cache.link_direct(&key, &search_fingerprint(), inputs);
    }
}

/// Looks `program`, compiled for `arch`, up in `cache`, without opening NVRTC when the compiler
/// is known. A process's first lookup tries the program's direct name first: a hit there reads
/// one file and checks NVRTC's, where a lookup by key also reads the remembered toolchain; a
/// hit by key files the entry under the direct name for the next process.
pub(super) fn look_up(program: &Program, cache: &Cache, arch: Arch) -> Result<Lookup> {
    let reads_headers = may_read_headers(program);
    let inputs = program_inputs(program, arch, reads_headers);
    let first = inputs.as_ref().ok().and_then(|_| FirstLookup::new());
    let mut filed = Filed(None);
    if let (Some(first), Ok(inputs)) = (&first, &inputs) {
        match first.hit(cache, inputs, reads_headers) {
            Ok((version, entry)) => {
                require_loadable(program, version)?;
                sys::settle(Component::Nvrtc);
                *current_compiler() = Some(Known::Record(entry.toolchain.clone()));
                return Ok(Lookup::Hit(hit(program, &cache.accept_direct(entry))));
            }
            Err(found) => filed = found,
        }
    }
    let fingerprint = first.as_ref().map(|first| &first.fingerprint);
    let Some(compiler) = compiler(cache, reads_headers, fingerprint)? else {
        return Ok(Lookup::Miss(Miss {
            defaults: program_defaults(program, None),
            keyed: None,
            uncacheable: inputs.err(),
            lease: None,
        }));
    };
    let inputs = match inputs {
        Ok(inputs) => inputs,
        Err(why) => {
            return Ok(Lookup::Miss(Miss {
                defaults: program_defaults(program, Some(&compiler.headers)),
                keyed: None,
                uncacheable: Some(why),
                lease: None,
            }))
        }
    };
    let key = program_key(&inputs, &compiler, reads_headers);
    require_loadable(program, compiler.version)?;
    if let Some(entry) = cache.lookup(&key) {
        if let Some(first) = first.as_ref().filter(|_| filed.wants(&key, &entry)) {
            cache.link_direct(&key, &first.fingerprint, &inputs);
        }
        return Ok(Lookup::Hit(hit(program, &entry)));
    }
    let mut lease = None;
    if let Some(remote) = cache.remote() {
        let expected = Expected {
            key,
            output: program.output,
            arch,
        };
        match remote.find(&expected) {
            Found::Hit(entry) => {
                let compiled = hit(program, &entry);
                store_locally(cache, &compiler, &inputs, *entry);
                return Ok(Lookup::Hit(compiled));
            }
            Found::Miss(taken) => lease = taken,
        }
    }
    Ok(Lookup::Miss(Miss {
        defaults: program_defaults(program, Some(&compiler.headers)),
        keyed: Some(Keyed {
            key,
            compiler,
            inputs,
        }),
        uncacheable: None,
        lease,
    }))
}

/// Refuses PTX output that NVRTC's `version` makes newer than the driver can load, unless the
/// program allows it.
fn require_loadable(program: &Program, version: Version) -> Result<()> {
    if program.output == Output::Ptx {
        PtxVerdict::here(version).require_loadable(Component::Nvrtc, program.allow_newer_ptx)?;
    }
    Ok(())
}

/// The result of `program` that `entry` holds.
fn hit(program: &Program, entry: &Entry) -> Compiled {
    Compiled {
        name: program.name.clone(),
        output: entry.output,
        arch: entry.arch,
        code: entry.code.clone(),
        log: entry.log.clone(),
        lowered_names: entry.lowered_names.clone(),
        checked: entry.checked,
        cache_use: CacheUse::Hit,
    }
}

/// CUDA's header folders for `program`: from `headers` when given, else as found for this process.
fn program_defaults(program: &Program, headers: Option<&CudaHeaders>) -> Vec<PathBuf> {
    if !program.default_includes {
        return Vec::new();
    }
    let headers = headers.unwrap_or_else(|| CudaHeaders::for_this_process());
    headers
        .include_folders()
        .into_iter()
        .map(Path::to_path_buf)
        .collect()
}

/// Whether compiling `program` may read a header: its source or an in-memory header may say
/// `#include` (or `__has_include`), or one of its extra options may pre-include one
/// (`--pre-include`). A program that cannot reads nothing from CUDA's header folders, whatever
/// they hold.
fn may_read_headers(program: &Program) -> bool {
    includes::may_include(&program.source)
        || program
            .headers
            .iter()
            .any(|(_, text)| includes::may_include(text))
        || program
            .extra
            .iter()
            .any(|option| includes::may_include(option))
}

/// What the key of `program`, compiled for `arch`, takes of the program itself (see
/// [`crate::cache`]): everything but the compiler, as bytes; why not when its inputs cannot be
/// known (see [`includes`]).
///
/// CUDA's header folders, which the compile searches after the program's own when it uses
/// them, are keyed through the compiler's identity, which covers them with their versions
/// ([`program_key`]); a program that reads no header (`reads_headers`, what
/// [`may_read_headers`] says of it) is keyed on NVRTC's identity alone.
fn program_inputs(
    program: &Program,
    arch: Arch,
    reads_headers: bool,
) -> std::result::Result<Fields, String> {
    if let Some(why) = includes::uncacheable_option(&program.extra) {
        return Err(why);
    }
    // Sized for what is written below but the options and the includes, which rarely outgrow
    // the margin: a warm start grows no buffer.
    let texts: usize = program.headers.iter().map(|(n, t)| n.len() + t.len()).sum();
    let mut inputs = Fields::with_capacity(program.source.len() + texts + 1024);
    inputs
        .texts_of_pieces(|option| program.each_option(arch, &[], option))
        .field(&[u8::from(program.default_includes), u8::from(reads_headers)])
        .field(program.output.extension().as_bytes())
        .field(program.name.as_bytes())
        .field(program.source.as_bytes())
        .fields(&program.name_expressions);
    inputs.field(&(program.headers.len() as u64).to_le_bytes());
    for (name, text) in &program.headers {
        inputs.field(name.as_bytes()).field(text.as_bytes());
    }
    add_driver_for_ptx(&mut inputs, program.output);
    // A program that cannot include a header has no includes to add: its texts were searched
    // for the word once, by `may_read_headers`.
    if reads_headers {
        let cuda = if program.default_includes {
            CudaFolders::Keyed
        } else {
            CudaFolders::Known(&[])
        };
        let found = includes::resolve(&program.include_request(cuda), &mut inputs);
        if let Some(why) = found.unknown {
            return Err(why);
        }
    }
    Ok(inputs)
}

/// The key of a program of `inputs`, compiled by `compiler`.
fn program_key(inputs: &Fields, compiler: &ResolvedCompiler, reads_headers: bool) -> Key {
    let identity = if reads_headers {
        &compiler.identity
    } else {
        &compiler.nvrtc_identity
    };
    key::nvrtc_key(identity, &inputs.0)
}

/// A link's key as its inputs arrive: nvJitLink's identity and options first.
pub(super) fn link_hasher(options: &[String], ptx: bool) -> Option<KeyHasher> {
    Cache::global()?;
    let file = sys::library_file(Component::NvJitLink)?;
    let mut hasher = KeyHasher::new("nvjitlink");
    key::add_library(&mut hasher, &file);
    hasher.fields(options);
    add_driver_for_ptx(&mut hasher, if ptx { Output::Ptx } else { Output::Cubin });
    Some(hasher)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::image::Facts;
    use crate::Library;

    /// A kernel and a variable with no initializer: facts a load must get right.
    const SOURCE: &str = "__device__ int table[1000];\n\
                          extern \"C\" __global__ void fill(int v) { table[threadIdx.x] = v; }\n";

    fn program() -> Program {
        Program::new(SOURCE).arch(Arch::new(9, 0))
    }

    /// What the check before a load finds in `code`, as if it had never been checked.
    fn found_in(code: &[u8]) -> Checked {
        let facts =
            crate::image::validate_compiler_output(code, ImageKind::Cubin.into(), &String::new);
        Checked {
            facts: facts.unwrap(),
            digest: crate::image::digest(code),
        }
    }

    #[test]
    fn results_stored_and_read_back_carry_what_the_check_before_a_load_finds() {
        let dir = tempfile::tempdir().unwrap();
        let stored = program()
            .compile_in(&Cache::open(dir.path()).unwrap())
            .unwrap();
        let expected = found_in(stored.code());
        assert_eq!(
            expected.facts,
            Facts {
                defines_variables: true,
                uninitialized_bytes: Some(4000),
            }
        );
        assert_eq!(stored.checked, Some(expected));
        // A new cache of the same folder: read from disk, not memory.
        let cache = Cache::open(dir.path()).unwrap();
        let read = program().compile_in(&cache).unwrap();
        assert_eq!(cache.stats().unwrap().disk_hits, 1);
        assert_eq!(read, stored);
        assert_eq!(read.checked, Some(expected));
    }

    #[test]
    fn only_a_program_that_may_include_a_header_is_keyed_on_cudas_headers() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let compiler = compiler(&cache, true, None)
            .unwrap()
            .expect("NVRTC identified");
        let mut headers = compiler.headers.clone();
        headers.cccl_version = Some("0.0.0".into());
        let other_headers = ResolvedCompiler::new(compiler.file.clone(), compiler.version, headers);
        assert_ne!(other_headers.identity, compiler.identity);
        let arch = Arch::new(9, 0);
        let key = |program: &Program, compiler: &ResolvedCompiler| {
            let reads_headers = may_read_headers(program);
            let inputs = program_inputs(program, arch, reads_headers).unwrap();
            program_key(&inputs, compiler, reads_headers)
        };

        let plain = program();
        assert!(!may_read_headers(&plain));
        assert_eq!(key(&plain, &compiler), key(&plain, &other_headers));

        let including = [
            Program::new(format!("#include <cuda/std/cstdint>\n{SOURCE}")),
            Program::new(format!("#if __has_include(<x.h>)\n#endif\n{SOURCE}")),
            Program::new(SOURCE).header("h.cuh", "#include <cuda_fp16.h>\n"),
            Program::new(SOURCE).option("--pre-include=cuda_fp16.h"),
        ];
        for program in &including {
            assert!(may_read_headers(program), "{program:?}");
            assert_ne!(
                key(program, &compiler),
                key(program, &other_headers),
                "{program:?}"
            );
        }
    }

    #[test]
    fn a_direct_name_is_a_hit_only_for_the_program_its_entry_was_made_from() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let arch = Arch::new(9, 0);
        let other = Program::new(format!("{SOURCE}// another program\n")).arch(arch);
        let stored = program().compile_in(&cache).unwrap();
        let inputs = program_inputs(&program(), arch, false).unwrap();
        let other_inputs = program_inputs(&other, arch, false).unwrap();
        let first = FirstLookup {
            fingerprint: search_fingerprint(),
        };
        let (version, entry) = first
            .hit(&cache, &inputs, false)
            .expect("filed by the miss");
        let compiler = resolved::from_record(&entry.toolchain, false).unwrap();
        assert_eq!(version, compiler.version);
        // Nothing under a name never filed.
        let unfiled = Fields(b"a program never compiled".to_vec());
        assert_eq!(first.hit(&cache, &unfiled, false).err(), Some(Filed(None)));
        assert_eq!(*entry.code, *stored.code());
        assert_eq!(entry.key, program_key(&inputs, &compiler, false));
        // Another program's name leading to this entry (a name collision, a file moved by
        // hand): its inputs differ, so it is no hit.
        cache.link_direct(&entry.key, &first.fingerprint, &other_inputs);
        assert!(cache
            .lookup_direct(&first.fingerprint, &other_inputs)
            .is_some());
        let refused = first.hit(&cache, &other_inputs, false).err();
        assert_eq!(refused, Some(Filed(Some(entry.key))));
        // The other program's own entry, found by key, would replace the name; this entry, which
        // the name leads to already, would not be filed again.
        assert!(!refused.unwrap().wants(&entry.key, &entry));
        assert!(refused.unwrap().wants(&Key([1; 32]), &entry));
    }

    #[test]
    fn verify_removes_an_entry_whose_key_is_not_that_of_its_inputs() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        program().compile_in(&cache).unwrap();
        let key = cache.entries().unwrap()[0].key.clone();
        let file = cache.path().join(format!("{key}.cudyn"));
        let mut entry = Entry::decode(std::fs::read(&file).unwrap()).unwrap();
        assert!(entry.key_matches_inputs());
        // The same entry sealed again with other inputs: whole, but not what its key says.
        entry.inputs = b"another program".to_vec().into();
        assert!(!entry.key_matches_inputs());
        std::fs::write(&file, entry.encode()).unwrap();
        let report = cache.verify().unwrap();
        assert_eq!(report.removed, [entry.key.hex()]);
    }

    #[test]
    fn a_cached_relocatable_cubin_carries_nothing_and_its_load_is_still_refused() {
        let dir = tempfile::tempdir().unwrap();
        let relocatable = || program().relocatable(true);
        relocatable()
            .compile_in(&Cache::open(dir.path()).unwrap())
            .unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let read = relocatable().compile_in(&cache).unwrap();
        assert_eq!(cache.stats().unwrap().disk_hits, 1);
        assert_eq!(read.checked, None);
        let refused = Library::loader().load_compiled(&read).unwrap_err();
        assert!(matches!(refused, Error::NeedsLinking { .. }), "{refused:?}");
    }
}
