//! The program as a user runs it. On a GPU it prints that its results equal the CPU's. Without one
//! its kernel getter runs inside the linked code, finds no driver, and the program stops with
//! cudyn's error naming the driver. Built without nvcc, it says so. Never a panic.

use std::path::PathBuf;
use std::process::Command;

/// Cargo's build of the program, else the copy staged beside this test's folder (tests in
/// `tests/`, programs in `bin/`) where the test binaries were copied to another machine.
fn program() -> PathBuf {
    let built = PathBuf::from(env!("CARGO_BIN_EXE_linked-kernels"));
    if built.exists() {
        return built;
    }
    let exe = std::env::current_exe().expect("the test's own path");
    let staged = exe
        .parent()
        .and_then(|tests| tests.parent())
        .map(|root| root.join("bin").join("linked-kernels"));
    match staged {
        Some(staged) if staged.exists() => staged,
        _ => panic!(
            "the linked-kernels program is neither at {} nor staged in bin/ beside the tests",
            built.display()
        ),
    }
}

#[test]
fn the_program_verifies_its_results_or_says_what_is_missing() {
    let output = Command::new(program())
        .output()
        .expect("the program starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    if output.status.success() {
        assert!(
            stdout.contains("on 1048576 elements: equal to the CPU's result"),
            "{stdout}"
        );
    } else {
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        let missing_driver = stderr.starts_with("error: CUDA driver was not found");
        let built_without_nvcc =
            stderr.contains("was not linked into this program: it was built without nvcc");
        assert!(missing_driver || built_without_nvcc, "{stderr}");
    }
}
