//! The driver calls of loading device code, counted by a fake driver (tests/fake_driver), on any
//! machine: a load of a cubin makes one, `cuLibraryLoadData` (the checks before it are cudyn's
//! own, on the host); a kernel's first lookup makes one, `cuLibraryGetKernel`, and a second
//! none; the library is unloaded (`cuLibraryUnload`) when its last user goes, kernels included.
//! A load that may share finds a library loaded from the same bytes and calls nothing, and a
//! shared library released by its last user is kept for a later load until released.
//!
//! The cubin is compiled by NVRTC in a child process: this process's search order is the fake
//! driver's folder alone. One test, as the library registry and its retention are the process's.

mod fake_driver;

use std::path::Path;
use std::process::Command;

use cudyn::compile::Arch;
use cudyn::library::{release_retained, set_retained, Retention};
use cudyn::{Library, Program, Sharing};
use fake_driver::FakeDriver;

/// Set in the child process: where to write the cubin.
const CUBIN_ENV: &str = "CUDYN_TEST_CUBIN_OUT";

const SOURCE: &str =
    "extern \"C\" __global__ void scale(float *p, float by) { p[threadIdx.x] *= by; }\n";

/// The library calls this thread made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Calls {
    load: u64,
    get_kernel: u64,
    unload: u64,
    total: u64,
}

impl Calls {
    fn now(fake: &FakeDriver) -> Calls {
        Calls {
            load: fake.calls("cuLibraryLoadData"),
            get_kernel: fake.calls("cuLibraryGetKernel"),
            unload: fake.calls("cuLibraryUnload"),
            total: fake.total_calls(),
        }
    }
}

/// The calls `step` makes: (loads, kernel lookups, unloads, all calls).
fn calls_of(fake: &FakeDriver, step: impl FnOnce()) -> (u64, u64, u64, u64) {
    let before = Calls::now(fake);
    step();
    let after = Calls::now(fake);
    (
        after.load - before.load,
        after.get_kernel - before.get_kernel,
        after.unload - before.unload,
        after.total - before.total,
    )
}

/// NVRTC's cubin of [`SOURCE`] for sm_90, made by this test binary run again as a child.
fn cubin(folder: &Path) -> Vec<u8> {
    let path = folder.join("scale.cubin");
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["compile_in_a_child", "--exact", "--nocapture"])
        .env(CUBIN_ENV, &path)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the child compile failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::read(&path).unwrap()
}

/// What the child process does; nothing when run as an ordinary test.
#[test]
fn compile_in_a_child() {
    let Some(path) = std::env::var_os(CUBIN_ENV) else {
        return;
    };
    let compiled = Program::new(SOURCE)
        .arch(Arch::new(9, 0))
        .cache(false)
        .compile()
        .expect("NVRTC compiles the kernel (run scripts/cuda-wheels and activate its venv)");
    std::fs::write(path, compiled.into_code()).unwrap();
}

#[test]
fn a_load_a_lookup_and_a_last_drop_make_one_driver_call_each() {
    let folder = tempfile::tempdir().unwrap();
    let cubin = cubin(folder.path());
    let fake = FakeDriver::install().expect("the fake driver installs");
    set_retained(Retention::new(4, 64 << 20));

    // A load of its own: one call; a kernel's first lookup one, its second none; the unload
    // waits for the kernels, which keep the library.
    let mut library = None;
    let loaded = calls_of(&fake, || {
        library = Some(
            Library::loader()
                .sharing(Sharing::Never)
                .load(&cubin)
                .unwrap(),
        )
    });
    assert_eq!(loaded, (1, 0, 0, 1));
    let library = library.unwrap();
    let mut kernels = Vec::new();
    let looked_up = calls_of(&fake, || kernels.push(library.kernel("scale").unwrap()));
    assert_eq!(looked_up, (0, 1, 0, 1));
    let again = calls_of(&fake, || kernels.push(library.kernel("scale").unwrap()));
    assert_eq!(again, (0, 0, 0, 0));
    assert_eq!(calls_of(&fake, || drop(library)), (0, 0, 0, 0));
    assert_eq!(calls_of(&fake, || drop(kernels)), (0, 0, 1, 1));

    // Loads that may share: the second finds the first; released, the library is kept for a
    // third, and unloaded when the kept libraries are released.
    let load = || Library::loader().load(&cubin).unwrap();
    let mut shared = Vec::new();
    assert_eq!(calls_of(&fake, || shared.push(load())), (1, 0, 0, 1));
    assert_eq!(calls_of(&fake, || shared.push(load())), (0, 0, 0, 0));
    assert_eq!(calls_of(&fake, || shared.clear()), (0, 0, 0, 0));
    assert_eq!(calls_of(&fake, || shared.push(load())), (0, 0, 0, 0));
    assert_eq!(calls_of(&fake, || shared.clear()), (0, 0, 0, 0));
    let mut released = 0;
    let unloaded = calls_of(&fake, || released = release_retained());
    assert_eq!((released, unloaded), (1, (0, 0, 1, 1)));
}
