//! `cudyn demo`, the README's first command, as a user runs it.

mod common;

use common::cudyn;

fn demo(elements: &str) -> (i32, String) {
    let output = cudyn()
        .args(["demo", "--elements", elements])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let errors = String::from_utf8_lossy(&output.stderr);
    (
        output.status.code().unwrap_or(-1),
        format!("{text}{errors}"),
    )
}

#[test]
fn compiles_inspects_and_links_everywhere() {
    let (status, text) = demo("4096");
    assert_eq!(status, 0, "{text}");
    assert!(text.contains("bytes of cubin in"), "{text}");
    assert!(
        text.contains("params: #0 @0+4 #1 @8+8 #2 @16+8 #3 @24+8 #4 @32+8"),
        "{text}"
    );
    assert!(
        text.contains("with kernel iterate (3 parameters)"),
        "{text}"
    );
    if text.contains("No GPU") {
        assert!(
            text.contains("skipped: "),
            "the GPU step says why it is skipped:\n{text}"
        );
    }
}

#[test]
#[ignore = "gpu: loads, launches and verifies on the GPU"]
fn verifies_every_element_on_the_gpu() {
    let (status, text) = demo("1000003");
    assert_eq!(status, 0, "{text}");
    assert!(
        text.contains("saxpy on 1000003 random elements") && text.contains("0 of 1000003 differ"),
        "{text}"
    );
    assert!(
        text.contains("LTO-linked iterate on 1000003 elements: 0 of 1000003 differ"),
        "{text}"
    );
    assert!(!text.contains("skipped"), "{text}");
}

#[test]
fn a_failed_step_is_an_error_on_stderr_with_the_fix() {
    let empty = tempfile::tempdir().unwrap();
    let output = cudyn()
        .args(["demo", "--elements", "16"])
        .env("CUDYN_LIBRARY_PATH", empty.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("1. Compile") && !stdout.contains("Done"),
        "{stdout}"
    );
    assert!(
        stderr.starts_with("error: cudyn demo: NVRTC was not found"),
        "{stderr}"
    );
    // Where it looked, so the user sees why.
    assert!(
        stderr.contains(&empty.path().display().to_string()),
        "{stderr}"
    );
}
