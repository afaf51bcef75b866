//! The regression checks of cudyn's overhead over the raw CUDA C API, on a GPU host: the
//! `cudyn-bench` program measures both in the same run and fails when cudyn's load (cubin, PTX,
//! fatbin, with a kernel lookup) takes more than 1.10x raw, its load of a cubin new to the
//! process (whose check walks it rather than recalls it) more than 1.25x, or its checked launch
//! more than 1.02x (`--max-ratio`). Not timed here: the program's own interleaved medians decide.
//!
//! The program is found beside this test's build (`cargo test`) or, where test binaries were
//! carried to another machine, in a `bin` folder beside their folder (`tests/../bin`), as a
//! build with `--bin cudyn-bench` stages it.

use std::path::PathBuf;
use std::process::Command;

/// The `cudyn-bench` program, or where it was looked for.
fn program() -> Result<PathBuf, String> {
    let built = PathBuf::from(env!("CARGO_BIN_EXE_cudyn-bench"));
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let staged = exe
        .parent()
        .and_then(|tests| tests.parent())
        .map(|root| root.join("bin").join("cudyn-bench"));
    [Some(built.clone()), staged.clone()]
        .into_iter()
        .flatten()
        .find(|path| path.is_file())
        .ok_or(format!(
            "no cudyn-bench program at {} nor {}: build it with the tests (--bin cudyn-bench)",
            built.display(),
            staged.map_or("?".into(), |path| path.display().to_string())
        ))
}

/// Runs `cudyn-bench --only GROUP --max-ratio LIMIT...`; fails with its output when it fails.
fn check(group: &str, limits: &[&str]) {
    let program = program().unwrap();
    let output = Command::new(&program)
        .args(["--only", group])
        .args(limits.iter().flat_map(|limit| ["--max-ratio", limit]))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    println!("{text}");
    assert!(
        output.status.success(),
        "{} failed:\n{text}",
        program.display()
    );
    assert!(text.contains("x raw"), "no table printed:\n{text}");
}

#[test]
#[ignore = "gpu: loads through cudyn and the raw runtime on a GPU"]
fn load_stays_within_1_10_of_raw_and_a_first_load_within_1_25() {
    check("load", &["load=1.10", "new=1.25"]);
}

#[test]
#[ignore = "gpu: launches through cudyn and the raw driver on a GPU"]
fn checked_launch_stays_within_1_02_of_raw() {
    check("launch", &["launch=1.02"]);
}
