//! A CUDA runtime without a driver: loading says the driver is missing and where it was looked
//! for, not the runtime's `cudaErrorInsufficientDriver`.
//!
//! One test in its own binary: the search path is process-wide and fixed at the first opening.
//! It is narrowed to the folder of the runtime (which holds NVRTC too, in the CUDA wheels and in
//! a toolkit's library folder) and no driver lives there, so this runs the same with or without
//! a GPU.

use cudyn::compile::Arch;
use cudyn::locate::SearchPath;
use cudyn::{Component, Error, Library, Program};

#[test]
fn loading_with_a_runtime_but_no_driver_reports_the_missing_driver() {
    let runtime = SearchPath::from_environment()
        .locate(Component::Runtime)
        .expect("this test needs the CUDA runtime: activate the CUDA wheels' venv");
    let folder = runtime.path.parent().unwrap().to_path_buf();
    cudyn::set_library_path([folder.clone()]).unwrap();
    assert!(
        cudyn::sys::driver().is_err(),
        "a driver was found in {}",
        folder.display()
    );
    assert!(
        cudyn::sys::runtime().is_ok_and(|runtime| runtime.has_library_api()),
        "the runtime in {} has the library API (CUDA 12.8 or newer)",
        folder.display()
    );

    let program = Program::new(r#"extern "C" __global__ void noop() {}"#).arch(Arch::new(9, 0));
    let cubin = program
        .compile()
        .expect("NVRTC beside the runtime compiles without a driver");
    let error = Library::load(cubin.code()).expect_err("no driver, no library");
    let Error::LibraryNotFound {
        component: Component::Driver,
        searched,
    } = &error
    else {
        panic!("expected the driver to be reported missing, got {error:?}");
    };
    assert!(
        searched
            .iter()
            .any(|place| place.contains(&folder.display().to_string())),
        "{error}"
    );
    assert!(
        error.to_string().contains("was not found"),
        "the message says the driver was not found: {error}"
    );
}
