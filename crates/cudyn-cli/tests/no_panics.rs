//! No subcommand can print a Rust panic message: the command's code (its tests aside) calls
//! nothing that panics on a failed write or on a value it did not expect. `println!` and its
//! kin panic when standard output is a closed pipe or a full disk; `unwrap`, `expect` and the
//! panicking macros stop the command with a backtrace instead of an error that says what to do.
//! The hostile-environment tests check the same from the outside, case by case.

use std::path::{Path, PathBuf};

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

fn sources(folder: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(sources(&path));
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
    files
}

#[test]
fn the_commands_code_calls_nothing_that_panics() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    for file in sources(&src) {
        let text = std::fs::read_to_string(&file).unwrap();
        // A module's tests come last, after `#[cfg(test)]`.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (number, line) in code.lines().enumerate() {
            let line = line.split("//").next().unwrap_or_default();
            for word in PANICKING {
                // `outln!`/`errln!` are the checked streams' own macros.
                if line.contains(word) && !line.contains("outln!") && !line.contains("errln!") {
                    found.push(format!(
                        "{}:{}: {}",
                        file.display(),
                        number + 1,
                        line.trim()
                    ));
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
