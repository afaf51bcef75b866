//! What the command-line tests share.

use std::path::PathBuf;
use std::process::Command;

/// The `cudyn` binary: Cargo's, or, when the test binaries were copied to a machine without
/// Cargo's build folder, the one staged beside them (tests in `tests/`, binaries in `bin/`).
pub fn cudyn() -> Command {
    let built = PathBuf::from(env!("CARGO_BIN_EXE_cudyn"));
    let staged = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("bin/cudyn")));
    let binary = match staged {
        Some(staged) if !built.exists() && staged.exists() => staged,
        _ => built,
    };
    Command::new(binary)
}
