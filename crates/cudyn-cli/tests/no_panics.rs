//! No subcommand can print a Rust panic message: the command's code (its tests aside) calls
//! nothing that panics on a failed write or on a value it did not expect. `println!` and its
//! kin panic when standard output is a closed pipe or a full disk; `unwrap`, `expect` and the
//! panicking macros stop the command with a backtrace instead of an error that says what to do.
//! The hostile-environment tests check the same from the outside, case by case.

use std::path::Path;

/// What may not appear in the command's code.
const PANICKING: [&str; 14] = [
    "println!",
    "print!(",
    "eprintln!",
    "eprint!(",
    "dbg!",
    ".unwrap()",
    ".expect(",
    "panic!",
    "unreachable!",
    "todo!",
    "unimplemented!",
    "assert!",
    "assert_eq!",
    "std::process::abort",
];

/// The command's source files, embedded so that the test runs where the sources are not (its
/// binary carried to another machine).
macro_rules! sources {
    ($($path:literal),* $(,)?) => {
        [$(($path, include_str!(concat!("../src/", $path)))),*]
    };
}

const SOURCES: [(&str, &str); 22] = sources!(
    "cache.rs",
    "compile.rs",
    "completions.rs",
    "demo.rs",
    "doctor.rs",
    "input.rs",
    "inspect.rs",
    "link/inputs.rs",
    "link/mod.rs",
    "main.rs",
    "output.rs",
    "remote.rs",
    "run/arguments.rs",
    "run/gpu.rs",
    "run/limits.rs",
    "run/mod.rs",
    "run/output.rs",
    "run/spec.rs",
    "run/values.rs",
    "streams.rs",
    "terminal.rs",
    "worker.rs",
);

/// Every `.rs` file under `folder`, as a path relative to `root`.
fn files_under(root: &Path, folder: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(files_under(root, &path));
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            let relative = path.strip_prefix(root).unwrap();
            files.push(relative.to_string_lossy().into_owned());
        }
    }
    files
}

#[test]
fn every_source_file_is_checked() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    if !src.is_dir() {
        // The binary runs away from its sources: the list was checked where it was built.
        return;
    }
    for file in files_under(&src, &src) {
        assert!(
            SOURCES.iter().any(|(name, _)| *name == file),
            "src/{file} is not in SOURCES of tests/no_panics.rs: add it"
        );
    }
}

#[test]
fn the_commands_code_calls_nothing_that_panics() {
    let mut found = Vec::new();
    for (file, text) in SOURCES {
        // A module's tests come last, after `#[cfg(test)]`.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (number, line) in code.lines().enumerate() {
            let line = line.split("//").next().unwrap_or_default();
            for word in PANICKING {
                // `outln!`/`errln!` are the checked streams' own macros.
                if line.contains(word) && !line.contains("outln!") && !line.contains("errln!") {
                    found.push(format!("src/{file}:{}: {}", number + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "code that can panic:\n{}",
        found.join("\n")
    );
}
