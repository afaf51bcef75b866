//! `cudyn inspect` on what is not whole device code, or not device code at all: LTO-IR cut
//! short, host libraries and programs named for what they are. Needs NVRTC (scripts/cuda-wheels,
//! then activate the venv).

mod common;
mod hostile;

use hostile::{stderr, Fixture};

#[test]
fn lto_ir_cut_inside_its_header_is_damaged_not_read() {
    let fixture = Fixture::new();
    let whole = std::fs::read(fixture.path("kernel.ltoir")).unwrap();
    let read = fixture.output(&["inspect", "kernel.ltoir"]);
    assert!(read.status.success(), "{read:?}");
    for length in [4, 10, 26, 27, 39, 40] {
        std::fs::write(fixture.path("cut.ltoir"), &whole[..length]).unwrap();
        let output = fixture.output(&["inspect", "cut.ltoir"]);
        assert_eq!(output.status.code(), Some(1), "{length} bytes: {output:?}");
        let text = stderr(&output);
        assert!(
            text.contains("damaged LTO-IR") && text.contains("cut short"),
            "{length} bytes: {text}"
        );
    }
}

#[test]
fn a_shared_library_is_no_executable() {
    let runtime = cudyn::sys::runtime().expect("the CUDA runtime (scripts/cuda-wheels)");
    let library = runtime.library.path.clone();
    let output = common::cudyn()
        .arg("inspect")
        .arg(&library)
        .output()
        .unwrap();
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains("it is a host shared library (ELF, x86-64)"),
        "{text}"
    );
    let program = common::cudyn()
        .args(["inspect", "/bin/sh"])
        .output()
        .unwrap();
    assert!(
        stderr(&program).contains("it is a host executable (ELF"),
        "{program:?}"
    );
}
