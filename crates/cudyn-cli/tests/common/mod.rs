//! What the command-line tests share.

use std::path::PathBuf;
use std::process::Command;

/// The `cudyn` binary: Cargo's, or on the GPU machine the one staged beside the test binaries
/// (`../shared/gpu/pack --bin cudyn` puts tests in .gpu/tests and binaries in .gpu/bin), where
/// Cargo's build folder does not exist.
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
