//! Running this program again as a measuring process, which prints one result line of numbers.
//! Shared by `cudyn-bench` and `bench_curves` (through `#[path]`).

use std::ffi::OsStr;
use std::process::Command;

/// Runs this program with `mode_env` set to `mode`, `envs` set and `CUDYN_CACHE` unset; the
/// numbers of its output line that starts with `marker`.
pub fn spawn(
    mode_env: &str,
    marker: &str,
    mode: &str,
    envs: &[(&str, &OsStr)],
) -> Result<Vec<f64>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let output = Command::new(exe)
        .env(mode_env, mode)
        .envs(envs.iter().copied())
        .env_remove(cudyn::cache::SWITCH_ENV)
        .output()
        .map_err(|e| format!("cannot start the {mode} measurement: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().find_map(|line| line.strip_prefix(marker));
    match (output.status.success(), line) {
        (true, Some(line)) => line
            .split_whitespace()
            .map(|n| n.parse().map_err(|e| format!("{mode}: {n}: {e}")))
            .collect(),
        _ => Err(format!(
            "the {mode} measurement failed ({}):\n{stdout}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )),
    }
}
