//! The generated bindings agree with the real CUDA headers.
//!
//! Every constant of `src/sys/generated/*.rs` and the size, alignment and field offsets of every C
//! struct there are turned into C11 `_Static_assert`s and compiled by the C compiler against the
//! headers of the pinned wheels (`scripts/cuda-wheels`), or of a CUDA toolkit's. A
//! constant edited by hand, or bindings generated from other headers, fail this test with the
//! names of the values that disagree.

use std::mem::{align_of, size_of};
use std::path::PathBuf;
use std::process::Command;

use cudyn::sys::{driver, runtime};

/// The Rust view of one C struct or union.
#[derive(Debug)]
pub struct Layout {
    c_type: String,
    size: usize,
    align: usize,
    fields: Vec<(&'static str, usize)>,
}

macro_rules! layout {
    ($keyword:ident $api:ident :: $name:ident [ $( $field:ident => $c_field:literal ),* ]) => {
        Layout {
            c_type: concat!(stringify!($keyword), " ", stringify!($name)).to_owned(),
            size: size_of::<$api::$name>(),
            align: align_of::<$api::$name>(),
            fields: vec![$( ($c_field, std::mem::offset_of!($api::$name, $field)) ),*],
        }
    };
}

#[path = "header_check/layouts.rs"]
mod layouts;

const BINDINGS: [(&str, &str, &str); 5] = [
    (
        "driver",
        "cuda.h",
        include_str!("../src/sys/generated/driver.rs"),
    ),
    (
        "runtime",
        "cuda_runtime_api.h",
        include_str!("../src/sys/generated/runtime.rs"),
    ),
    (
        "nvrtc",
        "nvrtc.h",
        include_str!("../src/sys/generated/nvrtc.rs"),
    ),
    (
        "nvjitlink",
        "nvJitLink.h",
        include_str!("../src/sys/generated/nvjitlink.rs"),
    ),
    (
        "nvfatbin",
        "nvFatbin.h",
        include_str!("../src/sys/generated/nvfatbin.rs"),
    ),
];

/// The CUDA 13.0 headers: the pinned wheels' (as `scripts/cuda-wheels` installs them), else a
/// toolkit's (`$CUDA_HOME/include`).
fn cuda_include_dir() -> PathBuf {
    let venvs = [
        std::env::var_os("VIRTUAL_ENV").map(PathBuf::from),
        std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/cudyn/venv-cu13.0")),
    ];
    let wheel_includes = venvs.into_iter().flatten().flat_map(|venv| {
        std::fs::read_dir(venv.join("lib"))
            .into_iter()
            .flatten()
            .filter_map(|entry| entry.ok())
            .map(|entry| entry.path().join("site-packages/nvidia/cu13/include"))
    });
    let toolkit_includes = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(|prefix| PathBuf::from(prefix).join("include"));
    wheel_includes
        .chain(toolkit_includes)
        .find(|dir| dir.join("cuda.h").is_file() && dir.join("nvFatbin.h").is_file())
        .expect(
            "no CUDA 13.0 headers: run scripts/cuda-wheels (scripts/test does) or set CUDA_HOME",
        )
}

/// `(name, value)` of every `pub const NAME: TYPE = VALUE;` in a generated file (rustfmt may
/// break a long one over two lines).
fn constants(bindings: &str) -> Vec<(&str, &str)> {
    bindings
        .split(';')
        .filter_map(|statement| {
            let rest = statement.trim().strip_prefix("pub const ")?;
            let (name, rest) = rest.split_once(':')?;
            let value = rest.split_once('=')?.1.trim();
            Some((name.trim(), value))
        })
        .collect()
}

/// The C program asserting every constant and layout.
fn c_checks() -> String {
    let mut c = String::from("#include <stddef.h>\n");
    for (_, header, _) in BINDINGS {
        c.push_str(&format!("#include <{header}>\n"));
    }
    let mut count = 0;
    for (api, _, bindings) in BINDINGS {
        for (name, value) in constants(bindings) {
            c.push_str(&format!(
                "_Static_assert((long long)({name}) == {value}LL, \"{api}: {name} is not {value}\");\n"
            ));
            count += 1;
        }
    }
    assert!(
        count > 600,
        "only {count} constants parsed: has the generated format changed?"
    );
    for layout in layouts::all() {
        let t = &layout.c_type;
        c.push_str(&format!(
            "_Static_assert(sizeof({t}) == {}, \"sizeof({t}) is not {}\");\n",
            layout.size, layout.size
        ));
        c.push_str(&format!(
            "_Static_assert(_Alignof({t}) == {}, \"_Alignof({t}) is not {}\");\n",
            layout.align, layout.align
        ));
        for (field, offset) in &layout.fields {
            c.push_str(&format!(
                "_Static_assert(offsetof({t}, {field}) == {offset}, \"offsetof({t}, {field}) is not {offset}\");\n"
            ));
        }
    }
    c
}

/// Compiles `source` against the wheel headers; `Err` holds the compiler's complaints.
fn compile(source: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("check.c");
    std::fs::write(&file, source).unwrap();
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let output = Command::new(&compiler)
        .args(["-std=c11", "-fsyntax-only", "-Wno-deprecated-declarations"])
        .arg("-I")
        .arg(cuda_include_dir())
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{compiler}`: {e}"));
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

#[test]
fn constants_and_layouts_match_the_cuda_headers() {
    if let Err(complaints) = compile(&c_checks()) {
        panic!("the bindings disagree with the CUDA headers:\n{complaints}");
    }
}

#[test]
fn the_check_catches_a_wrong_constant() {
    let right = c_checks();
    let wrong = right.replacen(
        "(long long)(CUDA_ERROR_INVALID_PTX) == 218LL",
        "(long long)(CUDA_ERROR_INVALID_PTX) == 219LL",
        1,
    );
    assert_ne!(
        right, wrong,
        "CUDA_ERROR_INVALID_PTX = 218 should be among the checks"
    );
    let complaints = compile(&wrong).expect_err("a wrong constant must fail the check");
    assert!(
        complaints.contains("CUDA_ERROR_INVALID_PTX"),
        "{complaints}"
    );
}

#[test]
fn the_check_catches_a_wrong_layout() {
    let right = c_checks();
    let offset = std::mem::offset_of!(driver::CUlaunchConfig_st, hStream);
    let wrong = right.replacen(
        &format!("offsetof(struct CUlaunchConfig_st, hStream) == {offset}"),
        &format!(
            "offsetof(struct CUlaunchConfig_st, hStream) == {}",
            offset + 8
        ),
        1,
    );
    assert_ne!(right, wrong);
    let complaints = compile(&wrong).expect_err("a wrong offset must fail the check");
    assert!(complaints.contains("hStream"), "{complaints}");
}

#[test]
fn every_api_has_its_key_entry_points() {
    // The tables are generated from an allow-list; these are the calls cudyn's loading,
    // compiling and linking rest on.
    let driver_names = include_str!("../src/sys/generated/driver.rs");
    let runtime_names = include_str!("../src/sys/generated/runtime.rs");
    for name in [
        "cuLibraryLoadData",
        "cuKernelGetParamInfo",
        "cuLaunchKernelEx",
    ] {
        assert!(driver_names.contains(&format!("fn {name}(")), "{name}");
    }
    for name in [
        "cudaLibraryLoadData",
        "cudaGetKernel",
        "cudaLaunchKernel",
        "cudaKernelSetAttributeForDevice",
    ] {
        assert!(runtime_names.contains(&format!("fn {name}(")), "{name}");
    }
}
