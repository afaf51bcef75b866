//! What the command-line tests share.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `cudyn` binary: Cargo's, or, when the test binaries were copied to a machine without
/// Cargo's build folder, the one staged beside them (tests in `tests/`, binaries in `bin/`).
#[allow(dead_code)]
pub fn cudyn() -> Command {
    Command::new(cudyn_binary())
}

/// The path of the `cudyn` binary [`cudyn`] runs.
#[allow(dead_code)]
pub fn cudyn_binary() -> PathBuf {
    let built = PathBuf::from(env!("CARGO_BIN_EXE_cudyn"));
    let staged = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("bin/cudyn")));
    match staged {
        Some(staged) if !built.exists() && staged.exists() => staged,
        _ => built,
    }
}

/// A folder holding links to the files beside `library` whose names start with `prefix`, and
/// nothing else: as the only place cudyn searches (`CUDYN_LIBRARY_PATH`), it hides the CUDA
/// driver even on a machine that has one.
#[allow(dead_code)]
pub fn only_libraries_beside(library: &Path, prefix: &str) -> tempfile::TempDir {
    let folder = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(library.parent().unwrap()).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name().to_string_lossy().starts_with(prefix) {
            std::os::unix::fs::symlink(entry.path(), folder.path().join(entry.file_name()))
                .unwrap();
        }
    }
    folder
}

/// Checks that `run` (a `cudyn COMMAND` without a GPU and without `--arch`) failed with one line
/// that says the fix first; returns its standard error for further checks.
#[allow(dead_code)]
pub fn assert_arch_fix_first(run: &std::process::Output, command: &str) -> String {
    assert_eq!(run.status.code(), Some(1), "{run:?}");
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    let expected = format!(
        "error: cudyn {command}: no target architecture: pass one with --arch (e.g. --arch sm_90)."
    );
    assert!(stderr.starts_with(&expected), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    stderr
}

/// `source` compiled by NVRTC (the CUDA wheels) as relocatable device code for `arch`, in the
/// form `output` (a relocatable cubin or LTO-IR), the compile cache left out: a link's input.
#[allow(dead_code)]
pub fn relocatable_piece(
    source: &str,
    arch: cudyn::compile::Arch,
    output: cudyn::compile::Output,
) -> Vec<u8> {
    cudyn::compile::Program::new(source)
        .arch(arch)
        .output(output)
        .relocatable(true)
        .cache(false)
        .compile()
        .expect("NVRTC (the CUDA wheels)")
        .into_code()
}
