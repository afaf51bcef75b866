//! docs/C_API.md's build lines, run as written: `examples/c/saxpy.c` as `app.c`, built against
//! the shared and the static C library, and run (without a GPU it must say so and exit 3, as the
//! document says). The library is the one this test build made, in a folder that stands for
//! `target/release` (the document's `cargo build --release -p cudyn-capi` makes the same files
//! there).

use std::path::{Path, PathBuf};
use std::process::Command;

const SAXPY_C: &str = include_str!("../examples/c/saxpy.c");

/// The lines of the document's first `sh` block: its build lines.
fn build_lines() -> Vec<String> {
    let document = include_str!("../../../docs/C_API.md");
    let block = document
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/C_API.md begins with its build lines");
    block
        .lines()
        .map(|line| {
            line.split("   #")
                .next()
                .unwrap_or_default()
                .trim()
                .to_owned()
        })
        .filter(|line| !line.is_empty())
        .collect()
}

/// The folder holding this build's `libcudyn_capi.so` and `libcudyn_capi.a`.
fn library_folder() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().to_owned();
    // Cargo's deps/ or its profile folder; staged copies: tests/ beside lib/.
    let staged = deps.parent().unwrap();
    let folders = [deps.clone(), staged.to_owned(), staged.join("lib")];
    let found = folders.into_iter().find(|folder| {
        folder.join("libcudyn_capi.so").is_file() && folder.join("libcudyn_capi.a").is_file()
    });
    found.unwrap_or_else(|| {
        panic!(
            "libcudyn_capi.so and .a not found beside {}: build cudyn-capi",
            exe.display()
        )
    })
}

#[test]
fn the_documented_build_lines_build_and_link_the_c_example() {
    let lines = build_lines();
    assert_eq!(
        lines[0], "cargo build --release -p cudyn-capi",
        "the first line builds the library this test links"
    );
    let compile_lines: Vec<&String> = lines
        .iter()
        .filter(|line| line.starts_with("cc "))
        .collect();
    assert_eq!(compile_lines.len(), 2, "{lines:?}");

    // A folder laid out as the repository is where the lines run.
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path();
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("include");
    std::fs::create_dir_all(root.join("crates/cudyn-capi")).unwrap();
    std::os::unix::fs::symlink(include, root.join("crates/cudyn-capi/include")).unwrap();
    std::fs::create_dir(root.join("target")).unwrap();
    std::os::unix::fs::symlink(library_folder(), root.join("target/release")).unwrap();
    std::fs::write(root.join("app.c"), SAXPY_C).unwrap();

    for (number, line) in compile_lines.into_iter().enumerate() {
        let program = format!("app{number}");
        let built = Command::new("bash")
            .args(["-c", &format!("{line} -o {program}")])
            .current_dir(root)
            .env("PWD", root)
            .output()
            .unwrap();
        assert!(
            built.status.success(),
            "`{line}` failed:\n{}",
            String::from_utf8_lossy(&built.stderr)
        );
        let empty = tempfile::tempdir().unwrap();
        let ran = Command::new(root.join(&program))
            .env("CUDYN_LIBRARY_PATH", empty.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&ran.stdout);
        assert_eq!(ran.status.code(), Some(3), "`{line}`'s program: {stdout}");
        assert!(stdout.contains("no GPU"), "`{line}`'s program: {stdout}");
    }
}
