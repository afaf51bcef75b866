//! A kernel launched again after its device's primary context was reset, as `cudaDeviceReset`
//! does: the context keeps its handle but loses the code loaded into it, so a launch must not
//! reuse the function found there before the reset (cudyn keeps functions by the context's id,
//! which a reset changes). A test binary of its own: the reset frees every allocation of the
//! process on the device.
//! Run with `cargo test -p cudyn --test gpu_context_reset -- --include-ignored` on a machine with
//! a GPU.

mod common;

use common::{compile, saxpy_matches_the_cpu, Output, SAXPY};
use cudyn::sys::{self, call};
use cudyn::Library;

#[test]
#[ignore = "gpu: resets the primary context of device 0"]
fn a_kernel_launches_right_after_its_primary_context_is_reset() {
    let cubin = compile(SAXPY, Output::Cubin);
    let library = Library::load(cubin.bytes()).unwrap();
    let saxpy = library.kernel("saxpy").unwrap();
    saxpy_matches_the_cpu(&saxpy, -0.5, 1 << 20, 1);

    let driver = sys::driver().unwrap();
    let mut before = std::ptr::null_mut();
    // SAFETY: writes one pointer.
    unsafe { call!(driver, cuCtxGetCurrent(&mut before)) }.unwrap();
    // SAFETY: device 0 exists; nothing of this process uses it meanwhile (the buffers above are
    // freed). The driver's symbol has this signature (cuda.h).
    let status = unsafe {
        let library = libloading::Library::new(&driver.library.path).unwrap();
        let reset = library
            .get::<unsafe extern "C" fn(i32) -> i32>(b"cuDevicePrimaryCtxReset_v2\0")
            .unwrap();
        reset(0)
    };
    assert_eq!(status, 0, "cuDevicePrimaryCtxReset");
    // What the runtime does at its first call after cudaDeviceReset: retain the primary context
    // again and make it current.
    let mut after = std::ptr::null_mut();
    // SAFETY: writes one pointer; the context is then current while retained.
    unsafe {
        call!(driver, cuDevicePrimaryCtxRetain(&mut after, 0)).unwrap();
        call!(driver, cuCtxSetCurrent(after)).unwrap();
    }
    eprintln!(
        "primary context before the reset {before:?}, after {after:?} ({})",
        if before == after {
            "the same handle: only its id tells them apart"
        } else {
            "another handle"
        }
    );
    saxpy_matches_the_cpu(&saxpy, -0.5, 1 << 20, 3);
    saxpy_matches_the_cpu(&saxpy, -0.5, 4097, 5);
}
