//! `cudyn compile`, run as a user would. Needs NVRTC (scripts/cuda-wheels, then activate the venv).

mod common;

use common::cudyn;

/// Runs `cudyn compile ARGS... SOURCE` and requires success; returns its standard output.
fn compile_ok(args: &[&str], source: &std::path::Path) -> String {
    let run = cudyn()
        .arg("compile")
        .args(args)
        .arg(source)
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");
    String::from_utf8_lossy(&run.stdout).into_owned()
}

/// A folder holding scale.cu, whose kernel scales by the macro FACTOR.
fn scale_source() -> (tempfile::TempDir, std::path::PathBuf) {
    let folder = tempfile::tempdir().unwrap();
    let source = folder.path().join("scale.cu");
    std::fs::write(
        &source,
        "extern \"C\" __global__ void scale(float *p) { p[0] *= FACTOR; }\n",
    )
    .unwrap();
    (folder, source)
}

#[test]
fn compiles_a_file_to_each_output_kind() {
    if let Err(error) = cudyn::sys::nvrtc() {
        panic!("NVRTC is missing ({error}); run scripts/cuda-wheels and activate its venv");
    }
    let (folder, source) = scale_source();

    let cubin = folder.path().join("out.cubin");
    let stdout = compile_ok(
        &[
            "--arch",
            "sm_80",
            "-D",
            "FACTOR=2.0f",
            "-o",
            cubin.to_str().unwrap(),
        ],
        &source,
    );
    let bytes = std::fs::read(&cubin).unwrap();
    assert_eq!(&bytes[..4], b"\x7fELF");
    assert_eq!(u16::from_le_bytes([bytes[18], bytes[19]]), 190, "EM_CUDA");
    assert!(
        stdout.contains(&format!("{} bytes", bytes.len())),
        "{stdout}"
    );
    assert!(stdout.contains("sm_80"), "{stdout}");

    // Without -o the output lands beside the source, named by its kind.
    compile_ok(&["--ptx", "--arch", "90", "-D", "FACTOR=2.0f"], &source);
    let ptx = std::fs::read_to_string(folder.path().join("scale.ptx")).unwrap();
    assert!(ptx.contains(".target sm_90"), "{ptx}");

    compile_ok(
        &["--ltoir", "--arch", "sm_90", "-D", "FACTOR=2.0f"],
        &source,
    );
    let ltoir = std::fs::read(folder.path().join("scale.ltoir")).unwrap();
    assert_eq!(
        u32::from_le_bytes(ltoir[..4].try_into().unwrap()),
        0x7F4E_43ED
    );
}

#[test]
fn a_file_that_does_not_compile_fails_with_the_log_and_the_line() {
    let (_folder, source) = scale_source();
    // FACTOR is not defined this time.
    let run = cudyn()
        .args(["compile", "--arch", "sm_90"])
        .arg(&source)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1), "{run:?}");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("scale.cu(1)"), "{stderr}");
    assert!(stderr.contains("FACTOR"), "{stderr}");
    assert!(stderr.contains("scale.cu:1 | extern"), "{stderr}");
}

#[test]
fn without_a_driver_or_arch_the_error_is_one_line_that_says_the_fix_first() {
    let nvrtc = match cudyn::sys::nvrtc() {
        Ok(nvrtc) => nvrtc,
        Err(error) => panic!("NVRTC is missing ({error}); run scripts/cuda-wheels"),
    };
    // A folder holding NVRTC and its builtins and nothing else: as the only place searched, it
    // hides the CUDA driver even on a machine that has one.
    let only_nvrtc = tempfile::tempdir().unwrap();
    let nvrtc_folder = nvrtc.library.path.parent().unwrap();
    for entry in std::fs::read_dir(nvrtc_folder).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name().to_string_lossy().starts_with("libnvrtc") {
            std::os::unix::fs::symlink(entry.path(), only_nvrtc.path().join(entry.file_name()))
                .unwrap();
        }
    }
    let (_folder, source) = scale_source();
    let run = cudyn()
        .env("CUDYN_LIBRARY_PATH", only_nvrtc.path())
        .args(["compile", "-D", "FACTOR=2.0f"])
        .arg(&source)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1), "{run:?}");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.starts_with(
            "cudyn compile: no target architecture: pass one with --arch (e.g. --arch sm_90)."
        ),
        "{stderr}"
    );
    assert!(stderr.contains("no CUDA driver was found"), "{stderr}");
    assert!(stderr.contains("cudyn doctor"), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
}
