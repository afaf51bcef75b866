//! The committed `include/cudyn.h` is what cbindgen generates from the Rust source now.
//!
//! The sources and the configuration are embedded in this test, so that it runs wherever the
//! test binary runs, with no Cargo and no source tree. Refresh the header with
//! `CUDYN_BLESS=1 cargo test -p cudyn-capi --test header`.

use std::path::Path;

/// Every source file of the crate, by its path under `src/`.
const SOURCES: &[(&str, &str)] = &[
    ("lib.rs", include_str!("../src/lib.rs")),
    ("handles.rs", include_str!("../src/handles.rs")),
    ("info.rs", include_str!("../src/info.rs")),
    ("kernel.rs", include_str!("../src/kernel.rs")),
    ("launch.rs", include_str!("../src/launch.rs")),
    ("library.rs", include_str!("../src/library.rs")),
    ("memory.rs", include_str!("../src/memory.rs")),
    ("status.rs", include_str!("../src/status.rs")),
    ("stream.rs", include_str!("../src/stream.rs")),
    ("types.rs", include_str!("../src/types.rs")),
];

const CONFIG: &str = include_str!("../cbindgen.toml");
const COMMITTED: &str = include_str!("../include/cudyn.h");

fn generate() -> String {
    let folder = tempfile::tempdir().unwrap();
    for (name, text) in SOURCES {
        std::fs::write(folder.path().join(name), text).unwrap();
    }
    let config_path = folder.path().join("cbindgen.toml");
    std::fs::write(&config_path, CONFIG).unwrap();
    let config = cbindgen::Config::from_file(&config_path).unwrap();
    let mut header = Vec::new();
    cbindgen::Builder::new()
        .with_config(config)
        .with_src(folder.path().join("lib.rs"))
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut header);
    String::from_utf8(header).unwrap()
}

#[test]
fn every_module_is_embedded() {
    let lib = SOURCES[0].1;
    for line in lib.lines() {
        let Some(module) = line
            .trim_start_matches("pub ")
            .strip_prefix("mod ")
            .and_then(|rest| rest.strip_suffix(';'))
        else {
            continue;
        };
        assert!(
            SOURCES
                .iter()
                .any(|(name, _)| *name == format!("{module}.rs")),
            "src/{module}.rs is not in SOURCES of tests/header.rs: add it, or the header misses \
             its declarations"
        );
    }
}

#[test]
fn the_committed_header_is_current() {
    let generated = generate();
    if std::env::var_os("CUDYN_BLESS").is_some() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/cudyn.h");
        std::fs::write(&path, &generated).unwrap();
        eprintln!("wrote {}", path.display());
        return;
    }
    if generated != COMMITTED {
        let first_difference = generated
            .lines()
            .zip(COMMITTED.lines())
            .position(|(new, old)| new != old)
            .unwrap_or(generated.lines().count().min(COMMITTED.lines().count()));
        panic!(
            "include/cudyn.h is stale: it differs from what the Rust source generates from line \
             {}. Refresh it with `CUDYN_BLESS=1 cargo test -p cudyn-capi --test header` and \
             commit it.\ngenerated:\n{}\ncommitted:\n{}",
            first_difference + 1,
            generated.lines().nth(first_difference).unwrap_or("(end)"),
            COMMITTED.lines().nth(first_difference).unwrap_or("(end)")
        );
    }
}

#[test]
fn the_header_compiles_as_c_and_as_cpp() {
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("cudyn.h"), COMMITTED).unwrap();
    let source = folder.path().join("use.c");
    std::fs::write(
        &source,
        "#include \"cudyn.h\"\nint main(void) { return cudyn_version() == 0; }\n",
    )
    .unwrap();
    for (compiler, language) in [("cc", "c"), ("g++", "c++")] {
        let output = std::process::Command::new(compiler)
            .args([
                "-Wall",
                "-Wextra",
                "-Werror",
                "-fsyntax-only",
                "-x",
                language,
            ])
            .arg(&source)
            .output()
            .unwrap_or_else(|error| panic!("running {compiler}: {error}"));
        assert!(
            output.status.success(),
            "{compiler} rejects cudyn.h:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
