//! Compiles and links through the compile cache ([`crate::cache`]): the key is built without
//! opening NVRTC, a hit is returned without it, and a miss compiles and stores the result.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::SystemTime;

use super::compiled::{Compiled, Output};
use super::program::Program;
use super::target::{Arch, PtxVerdict};
use crate::cache::entry::Entry;
use crate::cache::{key, Cache, Key, KeyHasher};
use crate::error::Result;
use crate::sys::locate::{Component, CudaHeaders};
use crate::sys::{self, LibraryFile};
use crate::version::Version;

/// The NVRTC this process compiles with, identified without opening it, and the CUDA headers that
/// go with it.
#[derive(Debug)]
struct Compiler {
    file: LibraryFile,
    version: Version,
    headers: CudaHeaders,
}

static COMPILER: OnceLock<Compiler> = OnceLock::new();

/// The compiler: from its file and the version `cache` remembers for it, else by opening NVRTC
/// once (and remembering its version). `None` when NVRTC's file cannot be identified.
fn compiler(cache: &Cache) -> Result<Option<&'static Compiler>> {
    if let Some(compiler) = COMPILER.get() {
        return Ok(Some(compiler));
    }
    let remembered = sys::library_file(Component::Nvrtc)
        .filter(|_| !sys::is_open(Component::Nvrtc))
        .and_then(|file| Some((cache.remembered_version(&file)?, file)));
    let (version, file, headers) = match remembered {
        Some((version, file)) => {
            let headers = CudaHeaders::find(
                Some((&file.path, file.origin)),
                Some(version),
                |name| std::env::var_os(name),
                Path::new("/"),
            );
            (version, file, headers)
        }
        None => {
            let version = sys::nvrtc()?.version;
            let Some(file) = sys::library_file(Component::Nvrtc) else {
                return Ok(None);
            };
            cache.remember_version(&file, version);
            (version, file, CudaHeaders::for_this_process().clone())
        }
    };
    Ok(Some(COMPILER.get_or_init(|| Compiler {
        file,
        version,
        headers,
    })))
}

/// Adds the driver's major version for PTX, which the driver JIT-compiles: an entry made under
/// one driver is not trusted under another. Nothing when there is no driver.
fn add_driver_for_ptx(hasher: &mut KeyHasher, output: Output) {
    if output == Output::Ptx {
        let major = sys::driver().ok().map(|driver| driver.version.major);
        hasher.field(&major.unwrap_or(0).to_le_bytes());
    }
}

/// `program` compiled for `arch` through `cache`.
pub(super) fn compile(program: &Program, cache: &Cache, arch: Arch) -> Result<Compiled> {
    let Some(compiler) = compiler(cache)? else {
        return program.compile_uncached(Ok(arch), &program_defaults(program, None));
    };
    let defaults = program_defaults(program, Some(&compiler.headers));
    let Some(key) = program_key(program, compiler, arch, &defaults) else {
        return program.compile_uncached(Ok(arch), &defaults);
    };
    if program.output == Output::Ptx {
        PtxVerdict::here(compiler.version)
            .require_loadable(Component::Nvrtc, program.allow_newer_ptx)?;
    }
    if let Some(entry) = cache.lookup(&key) {
        return Ok(Compiled {
            name: program.name.clone(),
            output: entry.output,
            arch: entry.arch,
            code: entry.code.clone(),
            log: entry.log.clone(),
            lowered_names: entry.lowered_names.clone(),
        });
    }
    let compiled = program.compile_uncached(Ok(arch), &defaults)?;
    cache.store(Entry {
        key,
        output: compiled.output,
        arch: compiled.arch,
        name: compiled.name.clone(),
        log: compiled.log.clone(),
        lowered_names: compiled.lowered_names.clone(),
        toolchain: vec![format!("NVRTC {}", compiler.version)],
        kernels: Entry::kernels_of(&compiled.code),
        created: SystemTime::now(),
        code: compiled.code.clone(),
    });
    Ok(compiled)
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

/// The key of `program` (see [`crate::cache`]); `None` when its inputs cannot be known.
fn program_key(
    program: &Program,
    compiler: &Compiler,
    arch: Arch,
    defaults: &[PathBuf],
) -> Option<Key> {
    let mut hasher = KeyHasher::new("nvrtc");
    key::add_library(&mut hasher, &compiler.file);
    hasher
        .fields(&program.options_with(arch, defaults))
        .field(program.output.extension().as_bytes())
        .field(program.name.as_bytes())
        .field(program.source.as_bytes())
        .fields(&program.name_expressions);
    hasher.field(&(program.headers.len() as u64).to_le_bytes());
    for (name, text) in &program.headers {
        hasher.field(name.as_bytes()).field(text.as_bytes());
    }
    if program.default_includes {
        let headers = &compiler.headers;
        let versions = [&headers.cuda, &headers.cccl].map(|found| {
            found
                .as_ref()
                .and_then(|found| found.cuda_version)
                .map(|version| version.to_string())
                .unwrap_or_default()
        });
        hasher
            .fields(&versions)
            .field(headers.cccl_version.as_deref().unwrap_or("").as_bytes());
    }
    add_driver_for_ptx(&mut hasher, program.output);
    key::add_disk_includes(
        &mut hasher,
        &program.source,
        &program.headers,
        &program.include_folders,
    )?;
    Some(hasher.finish())
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
