//! The program as a user runs it. On a GPU it prints that its results equal the CPU's. Without one
//! its kernel getter runs inside the linked code, finds no driver, and the program stops with
//! cudyn's error naming the driver. Built without nvcc, it says so. Never a panic.

use std::process::Command;

#[test]
fn the_program_verifies_its_results_or_says_what_is_missing() {
    let output = Command::new(env!("CARGO_BIN_EXE_linked-kernels"))
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
