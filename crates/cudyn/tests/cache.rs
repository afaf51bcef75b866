//! The compile cache on real NVRTC and nvJitLink output, on the CPU (the pinned wheels of
//! scripts/cuda-wheels are needed; without them these tests fail and say so).
//!
//! Every test uses a cache in a temporary folder: either its own [`Cache`] through
//! [`Program::compile_in`] (a fresh `Cache` of the same folder stands for a new process, with an
//! empty memory), or the process-wide cache of a child process of this test binary, pointed at a
//! temporary folder with `CUDYN_CACHE_DIR` (for what only a new process shows: NVRTC unopened,
//! the switches, a refused folder).

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Barrier};

use cudyn::cache::{self, Cache, CacheStats};
use cudyn::compile::{Arch, InputKind, LinkOptions, Output, Program};
use cudyn::{Component, Error};

const SM_90: Arch = Arch::new(9, 0);

/// The environment variable that tells a child of this binary what to do.
const ROLE: &str = "CUDYN_CACHE_TEST_ROLE";

/// A templated kernel, made unique by `tag` so that no two tests share a key.
fn source(tag: &str) -> String {
    format!(
        "template <typename T> __global__ void scale_{tag}(T *p, T by) {{ p[threadIdx.x] *= by; }}\n"
    )
}

fn program(tag: &str) -> Program {
    Program::new(source(tag))
        .arch(SM_90)
        .name_expression(format!("scale_{tag}<float>"))
}

fn stats(cache: &Cache) -> CacheStats {
    cache.stats().expect("stats")
}

fn entry_files(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "cudyn"))
        .collect()
}

#[test]
fn a_repeat_is_a_hit_from_memory_then_from_disk_with_the_same_code_and_names() {
    let dir = tempfile::tempdir().unwrap();
    let reference = program("hit").cache(false).compile().expect("NVRTC");
    let first = Cache::open(dir.path()).unwrap();
    let cold = program("hit").compile_in(&first).unwrap();
    let warm = program("hit").compile_in(&first).unwrap();
    let s = stats(&first);
    assert_eq!((s.misses, s.writes, s.memory_hits, s.entries), (1, 1, 1, 1));

    let second = Cache::open(dir.path()).unwrap();
    let from_disk = program("hit").compile_in(&second).unwrap();
    let s = stats(&second);
    assert_eq!((s.misses, s.disk_hits, s.writes), (0, 1, 0));
    for compiled in [&cold, &warm, &from_disk] {
        assert_eq!(compiled.code(), reference.code());
        assert_eq!(
            compiled.lowered_name("scale_hit<float>"),
            reference.lowered_name("scale_hit<float>")
        );
        assert_eq!(compiled.arch(), SM_90);
        assert_eq!(compiled.output(), Output::Cubin);
    }
    let entries = second.entries().unwrap();
    assert_eq!(entries.len(), 1);
    let lowered = reference.lowered_name("scale_hit<float>").unwrap();
    assert_eq!(entries[0].kernels, [lowered]);
    assert_eq!(entries[0].arch, "sm_90");
    assert_eq!(entries[0].kind, cudyn::ImageKind::Cubin);
    // Its path is the entry's file, inside the cache's folder, of the size listed.
    assert!(
        entries[0].path.starts_with(dir.path()),
        "{:?}",
        entries[0].path
    );
    assert_eq!(
        std::fs::metadata(&entries[0].path).unwrap().len(),
        entries[0].size
    );
}

#[test]
fn options_target_and_output_are_part_of_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path()).unwrap();
    let variants = [
        program("opts"),
        program("opts").define("X"),
        program("opts").arch(Arch::new(8, 0)),
        program("opts").output(Output::LtoIr),
        program("opts").output(Output::Ptx).allow_newer_ptx(true),
    ];
    for variant in &variants {
        let compiled = variant.compile_in(&cache).unwrap();
        let reference = variant.clone().cache(false).compile().unwrap();
        assert_eq!(compiled.code(), reference.code(), "{variant:?}");
    }
    assert_eq!(stats(&cache).entries, variants.len() as u64);
}

/// The folder of headers a child's program includes from, for the role `include-*`.
const INCLUDE_ENV: &str = "CUDYN_CACHE_TEST_INCLUDE";

/// A program that includes `value.h` from `folder`.
fn with_header(folder: &Path) -> Program {
    Program::new(
        "#include \"value.h\"\nextern \"C\" __global__ void header_value(int *p) { *p = VALUE; }\n",
    )
    .arch(SM_90)
    .include(folder)
}

#[test]
fn a_header_changed_on_disk_is_a_miss_for_a_new_process_too() {
    let (dir, includes) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let header = includes.path().join("value.h");
    let env = [(INCLUDE_ENV, includes.path().to_str().unwrap())];
    std::fs::write(&header, "#define VALUE 1234\n").unwrap();
    run_child("include-miss", dir.path(), &env);
    run_child("include-hit", dir.path(), &env);
    // The direct name is made of the program's inputs, the header's contents among them: the
    // changed header is another name, a miss, then a hit of its own.
    std::fs::write(&header, "#define VALUE 987654\n").unwrap();
    run_child("include-miss", dir.path(), &env);
    run_child("include-hit", dir.path(), &env);
    assert_eq!(direct_names(dir.path()).len(), 2);
}

#[test]
fn after_a_direct_hit_the_next_programs_are_keyed_by_the_compiler_its_entry_named() {
    let (dir, includes) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(includes.path().join("value.h"), "#define VALUE 7\n").unwrap();
    let env = [(INCLUDE_ENV, includes.path().to_str().unwrap())];
    run_child("three-cold", dir.path(), &env);
    // The first program is a direct hit, which keeps its entry's toolchain undecoded; the two
    // after it need the compiler (one with CUDA's headers checked too) and hit by key.
    run_child("three-warm", dir.path(), &env);
    // A header of CUDA's changed meanwhile would have failed the check; here only the
    // program's own header changes: a miss for that program alone, NVRTC opened for it.
    std::fs::write(includes.path().join("value.h"), "#define VALUE 8\n").unwrap();
    run_child("three-warm-header-changed", dir.path(), &env);
}

#[test]
fn without_a_direct_folder_a_new_process_still_hits_by_key() {
    let dir = tempfile::tempdir().unwrap();
    // A file where the folder of direct names would be: no name can be filed or found.
    std::fs::write(dir.path().join("direct"), "not a folder").unwrap();
    run_child("cold", dir.path(), &[]);
    run_child("warm", dir.path(), &[]);
    assert_eq!(entry_files(dir.path()).len(), 1);
}

#[test]
fn a_header_changed_on_disk_is_a_miss() {
    let dir = tempfile::tempdir().unwrap();
    let includes = tempfile::tempdir().unwrap();
    let header = includes.path().join("value.h");
    let with_header = || {
        Program::new(
            "#include \"value.h\"\nextern \"C\" __global__ void header_value(int *p) { *p = VALUE; }\n",
        )
        .arch(SM_90)
        .include(includes.path())
    };
    std::fs::write(&header, "#define VALUE 1234\n").unwrap();
    let cache = Cache::open(dir.path()).unwrap();
    let before = with_header().compile_in(&cache).unwrap();
    assert_eq!(with_header().compile_in(&cache).unwrap(), before);

    std::fs::write(&header, "#define VALUE 987654\n").unwrap();
    let after = with_header().compile_in(&cache).unwrap();
    assert_ne!(after.code(), before.code());
    assert_eq!(
        after.code(),
        with_header().cache(false).compile().unwrap().code()
    );
    let s = stats(&cache);
    assert_eq!((s.misses, s.memory_hits, s.entries), (2, 1, 2));
}

#[test]
fn truncated_and_flipped_entries_are_recompiled_and_rewritten_never_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let reference = program("damage").cache(false).compile().unwrap();
    program("damage")
        .compile_in(&Cache::open(dir.path()).unwrap())
        .unwrap();
    let [path] = entry_files(dir.path()).try_into().unwrap();
    let intact = std::fs::read(&path).unwrap();
    let len = intact.len();
    let mut damages: Vec<(String, Vec<u8>)> =
        [0, 1, 8, 16, 40, len / 3, len / 2, len - 40, len - 1]
            .into_iter()
            .map(|offset| {
                let mut bytes = intact.clone();
                bytes[offset] ^= 0x10;
                (format!("bit flipped at {offset}"), bytes)
            })
            .collect();
    damages.extend(
        [0, 7, 100, len / 2, len - 32, len - 1]
            .into_iter()
            .map(|keep| (format!("truncated to {keep}"), intact[..keep].to_vec())),
    );
    // What a crash of the machine may leave of an entry renamed before its data reached the
    // disk (entries are not flushed): its length with nothing written.
    damages.push(("zeroed".to_owned(), vec![0; len]));
    for (damage, bytes) in damages {
        std::fs::write(&path, &bytes).unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let compiled = program("damage").compile_in(&cache).unwrap();
        assert_eq!(compiled.code(), reference.code(), "{damage}");
        let s = stats(&cache);
        assert_eq!((s.disk_hits, s.misses, s.writes), (0, 1, 1), "{damage}");
        assert_eq!(std::fs::read(&path).unwrap().len(), len, "{damage}");
        let report = Cache::open(dir.path()).unwrap().verify().unwrap();
        assert_eq!((report.checked, report.removed.len()), (1, 0), "{damage}");
    }
}

#[test]
fn verify_removes_an_older_format_s_entry_as_outdated_not_damaged() {
    let dir = tempfile::tempdir().unwrap();
    program("outdated")
        .compile_in(&Cache::open(dir.path()).unwrap())
        .unwrap();
    let [path] = entry_files(dir.path()).try_into().unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(bytes.starts_with(b"CUDYNKC"), "the entry's magic moved");
    bytes[7] = b'1';
    std::fs::write(&path, &bytes).unwrap();
    let cache = Cache::open(dir.path()).unwrap();
    let report = cache.verify().unwrap();
    let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
    assert_eq!(report.checked, 1);
    assert_eq!(report.removed, Vec::<String>::new());
    assert_eq!(report.outdated, vec![stem]);
    assert_eq!(stats(&cache).corrupt, 0);
    assert!(entry_files(dir.path()).is_empty());
}

#[test]
fn threads_compiling_one_key_at_once_leave_one_valid_entry() {
    const THREADS: usize = 8;
    let dir = tempfile::tempdir().unwrap();
    let barrier = Arc::new(Barrier::new(THREADS));
    let results: Vec<Vec<u8>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let barrier = Arc::clone(&barrier);
                let dir = dir.path();
                scope.spawn(move || {
                    // A cache of its own per thread: no shared memory, as between processes.
                    let cache = Cache::open(dir).unwrap();
                    barrier.wait();
                    program("race").compile_in(&cache).unwrap().into_code()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(results.windows(2).all(|pair| pair[0] == pair[1]));
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .filter(|name| {
            !["compilers", "direct", "ledger"]
                .map(OsString::from)
                .contains(name)
        })
        .collect();
    assert_eq!(leftovers.len(), 1, "{leftovers:?}");
    let cache = Cache::open(dir.path()).unwrap();
    assert_eq!(cache.verify().unwrap().removed, Vec::<String>::new());
    let again = program("race").compile_in(&cache).unwrap();
    assert_eq!(again.code(), results[0].as_slice());
    assert_eq!(stats(&cache).disk_hits, 1);
}

#[test]
fn a_folder_others_may_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let error = Cache::open(dir.path()).unwrap_err();
    assert!(matches!(error, Error::CacheRefused { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("chmod 700"), "{message}");
    // The process-wide cache in such a folder: refused with a warning, compiles still work.
    let output = run_child("refused", dir.path(), &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.matches("compiling without a cache").count(),
        1,
        "{stderr}"
    );
}

#[test]
fn a_warm_process_never_opens_nvrtc() {
    let dir = tempfile::tempdir().unwrap();
    run_child("cold", dir.path(), &[]);
    run_child("warm", dir.path(), &[]);
    run_child("warm-then-search-path", dir.path(), &[]);
}

/// The direct names of the entries in the cache folder `dir` (a folder per environment).
fn direct_names(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(environments) = std::fs::read_dir(dir.join("direct")) else {
        return Vec::new();
    };
    environments
        .flat_map(|environment| entry_files(&environment.unwrap().path()))
        .collect()
}

#[test]
fn a_first_lookup_takes_the_direct_name_without_the_remembered_toolchain() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    run_child("cold", dir.path(), &[]);
    let names = direct_names(dir.path());
    assert_eq!(
        names.len(),
        1,
        "the miss filed its entry under a direct name"
    );
    let entries = entry_files(dir.path());
    assert_eq!(entries.len(), 1);
    let inode = |path: &Path| std::fs::metadata(path).unwrap().ino();
    assert_eq!(inode(&names[0]), inode(&entries[0]), "one file, two names");
    // Without the remembered toolchain and NVRTC's remembered version, only the direct name can
    // make this a hit without opening NVRTC.
    std::fs::remove_dir_all(dir.path().join("compilers")).unwrap();
    run_child("warm", dir.path(), &[]);
    assert!(!dir.path().join("compilers").exists());

    // A damaged entry (written in place, so both names see it) is a miss by both names,
    // compiled again; the new entry gets the direct name back.
    let mut bytes = std::fs::read(&entries[0]).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    std::fs::write(&entries[0], bytes).unwrap();
    run_child("cold", dir.path(), &[]);
    let names = direct_names(dir.path());
    assert_eq!(names.len(), 1);
    assert_eq!(inode(&names[0]), inode(&entries[0]));
    // Another environment has another direct name: its first lookup goes by key, then files it.
    let elsewhere = [("CUDA_PATH", dir.path().to_str().unwrap())];
    run_child("warm", dir.path(), &elsewhere);
    assert_eq!(direct_names(dir.path()).len(), 2);
    std::fs::remove_dir_all(dir.path().join("compilers")).unwrap();
    run_child("warm", dir.path(), &[]);
    run_child("warm", dir.path(), &elsewhere);
    // Evicting the entry frees its space: its direct names go with it.
    let cache = Cache::open(dir.path()).unwrap();
    assert_eq!(cache.clear().unwrap().removed, 1);
    assert_eq!(direct_names(dir.path()), Vec::<std::path::PathBuf>::new());
}

/// A copy of NVRTC (and its builtins) in a folder of its own, dated an hour ago.
fn nvrtc_copy(folder: &Path) -> std::path::PathBuf {
    let nvrtc = cudyn::sys::library_file(Component::Nvrtc)
        .expect("NVRTC is installed (the pinned wheel)")
        .path;
    let source = nvrtc.parent().unwrap();
    for item in std::fs::read_dir(source).unwrap() {
        let name = item.unwrap().file_name();
        if name.to_string_lossy().starts_with("libnvrtc") {
            std::fs::copy(source.join(&name), folder.join(&name)).unwrap();
        }
    }
    let copy = folder.join(nvrtc.file_name().unwrap());
    set_age(&copy, 3600);
    copy
}

fn set_age(path: &Path, seconds: u64) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(seconds))
        .unwrap();
}

#[test]
fn a_changed_nvrtc_is_noticed_by_the_next_process() {
    let (dir, nvrtc) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let copy = nvrtc_copy(nvrtc.path());
    let only_the_copy = [(
        cudyn::locate::LIBRARY_PATH_ENV,
        nvrtc.path().to_str().unwrap(),
    )];
    run_child("cold", dir.path(), &only_the_copy);
    let remembered = dir.path().join("compilers");
    let toolchains = || {
        std::fs::read_dir(&remembered)
            .unwrap()
            .filter(|item| {
                let name = item.as_ref().unwrap().file_name();
                name.to_string_lossy().starts_with("toolchain-")
            })
            .count()
    };
    assert_eq!(toolchains(), 1, "the toolchain is remembered");
    run_child("warm", dir.path(), &only_the_copy);
    // Modified (as by an upgrade in place): a new compiler, a miss that opens it.
    set_age(&copy, 7200);
    run_child("cold-again", dir.path(), &only_the_copy);
    run_child("warm", dir.path(), &only_the_copy);
    // Another environment is another search: walked, remembered apart, the same compiler found.
    // CUDA_PATH (searched first) names a folder with no CUDA in it, so the search finds what it
    // found before; CUDA_HOME would not do, since on a machine with a toolkit it may be what
    // the headers were found through.
    let elsewhere = [
        only_the_copy[0],
        ("CUDA_PATH", dir.path().to_str().unwrap()),
    ];
    run_child("warm", dir.path(), &elsewhere);
    assert_eq!(toolchains(), 2);
}

#[test]
fn a_result_of_another_nvrtc_than_the_remembered_one_is_not_stored() {
    let (dir, first, earlier) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    nvrtc_copy(first.path());
    let order = std::env::join_paths([earlier.path(), first.path()]).unwrap();
    let order = [(cudyn::locate::LIBRARY_PATH_ENV, order.to_str().unwrap())];
    run_child("cold", dir.path(), &order);
    // An NVRTC appears in a folder searched earlier, nothing else changes: a hit still trusts
    // the remembered one, a miss finds the new one and does not store what it made under the
    // remembered one's key.
    nvrtc_copy(earlier.path());
    run_child("warm", dir.path(), &order);
    assert_eq!(direct_names(dir.path()).len(), 1);
    run_child("miss-not-stored", dir.path(), &order);
    // The miss replaced the remembered toolchain: the direct names filed under the one before
    // went with it, so the program first compiled by the NVRTC found then is compiled again.
    assert_eq!(direct_names(dir.path()), Vec::<std::path::PathBuf>::new());
    run_child("cold-again", dir.path(), &order);
    run_child("miss-stored", dir.path(), &order);
}

#[test]
#[ignore = "gpu: loads the cached cubin with cudaLibraryLoadData and looks its kernel up"]
fn a_warm_load_finds_the_kernel_by_its_name_expression_without_nvrtc() {
    let dir = tempfile::tempdir().unwrap();
    run_child("load-cold", dir.path(), &[]);
    run_child("load-warm", dir.path(), &[]);
}

#[test]
fn the_switches_turn_the_process_wide_cache_off() {
    let dir = tempfile::tempdir().unwrap();
    run_child("off", dir.path(), &[("CUDYN_CACHE", "off")]);
    run_child("set-enabled", dir.path(), &[]);
    assert!(entry_files(dir.path()).is_empty());
}

#[test]
fn the_size_cap_comes_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    run_child("tiny-cap", dir.path(), &[(cache::MAX_BYTES_ENV, "100")]);
    assert_eq!(
        direct_names(dir.path()),
        Vec::<std::path::PathBuf>::new(),
        "the evicted entry's direct name is gone"
    );
    assert!(entry_files(dir.path()).is_empty());
}

#[test]
fn set_dir_moves_the_cache_until_its_first_use() {
    let (dir, moved) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let moved_text = moved.path().to_str().unwrap();
    run_child(
        "set-dir",
        dir.path(),
        &[("CUDYN_CACHE_TEST_MOVED", moved_text)],
    );
    assert_eq!(entry_files(moved.path()).len(), 1);
    assert!(entry_files(dir.path()).is_empty());
}

#[test]
fn a_link_is_cached_on_its_inputs_and_options() {
    let dir = tempfile::tempdir().unwrap();
    run_child("link-cold", dir.path(), &[]);
    run_child("link-warm", dir.path(), &[]);
}

/// Runs the test `child` of this binary as role `role`, with the process-wide cache in `dir`;
/// fails unless it succeeds.
fn run_child(role: &str, dir: &Path, env: &[(&str, &str)]) -> std::process::Output {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["child", "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(cache::DIR_ENV, dir)
        .env_remove(cache::SWITCH_ENV)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "child {role} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn lto_piece(source: &str) -> Vec<u8> {
    Program::new(source)
        .arch(SM_90)
        .output(Output::LtoIr)
        .relocatable(true)
        .compile()
        .unwrap()
        .into_code()
}

fn link_twice() -> (Vec<u8>, CacheStats) {
    let kernel = lto_piece(
        "__device__ float twice(float); extern \"C\" __global__ void k(float *p) { *p = twice(*p); }",
    );
    let helper = lto_piece("__device__ float twice(float x) { return 2 * x; }");
    let link = |options: LinkOptions| {
        let mut linker = options.arch(SM_90).lto(true).linker().unwrap();
        linker
            .add(InputKind::LtoIr, &kernel, "kernel.ltoir")
            .unwrap();
        linker
            .add(InputKind::LtoIr, &helper, "helper.ltoir")
            .unwrap();
        linker.finish().unwrap().into_code()
    };
    let (first, second) = (link(LinkOptions::new()), link(LinkOptions::new()));
    assert_eq!(first, second);
    assert_eq!(first, link(LinkOptions::new().cache(false)));
    (first, Cache::global().unwrap().stats().unwrap())
}

/// What a child process does; nothing when run as an ordinary test.
#[test]
fn child() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let nvrtc_open = || cudyn::sys::is_open(Component::Nvrtc);
    match role.as_str() {
        "cold" => {
            let compiled = program("process").compile().unwrap();
            assert!(compiled.lowered_name("scale_process<float>").is_some());
            assert!(nvrtc_open());
            let s = stats(Cache::global().unwrap());
            assert_eq!((s.misses, s.writes), (1, 1));
        }
        "miss-not-stored" | "miss-stored" => {
            program("moved").compile().unwrap();
            assert!(nvrtc_open());
            let s = stats(Cache::global().unwrap());
            let writes = u64::from(role == "miss-stored");
            assert_eq!((s.misses, s.writes), (1, writes), "{role}");
        }
        "cold-again" => {
            program("process").compile().unwrap();
            assert!(nvrtc_open(), "a changed NVRTC was not opened");
            let s = stats(Cache::global().unwrap());
            assert_eq!((s.misses, s.writes, s.disk_hits), (1, 1, 0));
        }
        "warm" => {
            let compiled = program("process").compile().unwrap();
            assert!(!nvrtc_open(), "a warm hit opened NVRTC");
            assert!(compiled.lowered_name("scale_process<float>").is_some());
            let again = program("process").compile().unwrap();
            assert_eq!(again, compiled);
            assert!(!nvrtc_open());
            let s = stats(Cache::global().unwrap());
            assert_eq!((s.misses, s.disk_hits, s.memory_hits), (0, 1, 1));
        }
        "warm-then-search-path" => {
            // The cache identified NVRTC from the search order: changing the order now would
            // compile with another NVRTC under this one's keys.
            program("process").compile().unwrap();
            assert!(!nvrtc_open());
            let error = cudyn::set_library_path(["/nowhere"]).unwrap_err();
            assert!(
                matches!(
                    error,
                    Error::SearchPathFrozen {
                        opened: Component::Nvrtc
                    }
                ),
                "{error:?}"
            );
        }
        "include-miss" | "include-hit" => {
            let folder = std::env::var(INCLUDE_ENV).unwrap();
            with_header(Path::new(&folder)).compile().unwrap();
            let s = stats(Cache::global().unwrap());
            if role == "include-hit" {
                assert!(!nvrtc_open(), "a warm hit opened NVRTC");
                assert_eq!((s.misses, s.disk_hits), (0, 1));
            } else {
                assert_eq!((s.misses, s.writes, s.disk_hits), (1, 1, 0));
            }
        }
        "three-cold" | "three-warm" | "three-warm-header-changed" => {
            let folder = std::env::var(INCLUDE_ENV).unwrap();
            program("process").compile().unwrap();
            let direct_hit = !nvrtc_open();
            program("second").compile().unwrap();
            with_header(Path::new(&folder)).compile().unwrap();
            let s = stats(Cache::global().unwrap());
            match role.as_str() {
                "three-cold" => assert_eq!((s.misses, s.writes), (3, 3)),
                "three-warm" => {
                    assert!(direct_hit && !nvrtc_open(), "a warm process opened NVRTC");
                    assert_eq!((s.misses, s.disk_hits), (0, 3));
                }
                _ => {
                    assert!(direct_hit && nvrtc_open());
                    assert_eq!((s.misses, s.disk_hits, s.writes), (1, 2, 1));
                }
            }
        }
        "tiny-cap" => {
            program("tiny_cap").compile().unwrap();
            let s = stats(Cache::global().unwrap());
            assert_eq!(
                (s.writes, s.evictions, s.entries, s.max_bytes),
                (1, 1, 0, 100)
            );
        }
        "set-dir" => {
            let moved = std::env::var("CUDYN_CACHE_TEST_MOVED").unwrap();
            cache::set_dir(&moved).unwrap();
            program("set_dir").compile().unwrap();
            assert_eq!(Cache::global().unwrap().path(), Path::new(&moved));
            assert_eq!(cache::dir().unwrap(), Path::new(&moved));
            let error = cache::set_dir("/elsewhere").unwrap_err();
            assert!(matches!(error, Error::CacheDirFrozen { .. }), "{error:?}");
        }
        "refused" => {
            assert!(Cache::global().is_none());
            assert!(Cache::global().is_none());
            program("refused").compile().unwrap();
        }
        "off" => {
            assert!(Cache::global().is_none());
            program("off").compile().unwrap();
        }
        "set-enabled" => {
            cache::set_enabled(false);
            assert!(Cache::global().is_none());
            program("set_enabled").compile().unwrap();
        }
        "link-cold" => {
            let (_, s) = link_twice();
            // Two LTO-IR pieces compiled and one link: three misses, then one link hit.
            assert_eq!((s.misses, s.writes, s.memory_hits), (3, 3, 1));
        }
        "link-warm" => {
            let (_, s) = link_twice();
            assert_eq!((s.misses, s.disk_hits, s.memory_hits), (0, 3, 1));
        }
        "load-cold" | "load-warm" => {
            // For the current device, as a user's program would compile.
            let library = Program::new(source("load"))
                .name_expression("scale_load<float>")
                .load()
                .unwrap();
            library.kernel("scale_load<float>").unwrap();
            assert_eq!(nvrtc_open(), role == "load-cold");
        }
        other => panic!("unknown role {other}"),
    }
}
