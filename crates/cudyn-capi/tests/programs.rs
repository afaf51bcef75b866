//! The C and C++ programs of this crate, built against the C library and run: the examples
//! (`examples/c/saxpy.c`, `examples/cpp/saxpy.cpp`), the null-argument checks and, on a GPU, a
//! kernel handle taken with `cudaGetKernel` by an nvcc-built program and launched by cudyn.
//!
//! The sources and headers are embedded, so only `libcudyn_capi.so` must be found at run time:
//! `$CUDYN_CAPI_LIB` (the file), else beside this test executable (Cargo's `target/<profile>/deps`
//! holds it), else in `lib/` beside the folder of the test executable (where a copy of the test
//! binaries on another machine stages it: `tests/` and `lib/` side by side).
//!
//! Without a GPU the examples stop with exit status 3 and a clear reason; those tests hide the
//! driver (an empty `CUDYN_LIBRARY_PATH`), so they check that path on any machine.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const HEADER: &str = include_str!("../include/cudyn.h");
const CPP_HEADER: &str = include_str!("../include/cudyn.hpp");
const SAXPY_C: &str = include_str!("../examples/c/saxpy.c");
const SAXPY_CPP: &str = include_str!("../examples/cpp/saxpy.cpp");
const NULL_ARGUMENTS_C: &str = include_str!("programs/null_arguments.c");
const FOREIGN_KERNEL_CU: &str = include_str!("programs/foreign_kernel.cu");

/// The exit status of the examples when there is no GPU.
const EXIT_NO_GPU: i32 = 3;

/// The C library to link, found as the module documentation says.
fn capi_library() -> PathBuf {
    if let Some(path) = std::env::var_os("CUDYN_CAPI_LIB") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "CUDYN_CAPI_LIB={} is no file",
            path.display()
        );
        return path;
    }
    let exe = std::env::current_exe().unwrap();
    let folder = exe.parent().unwrap();
    let candidates = [
        folder.join("libcudyn_capi.so"),
        folder.parent().unwrap().join("lib/libcudyn_capi.so"),
    ];
    candidates
        .iter()
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!(
                "libcudyn_capi.so was not found at {candidates:?}: build it with `cargo build -p \
                 cudyn-capi`, or set CUDYN_CAPI_LIB to it"
            )
        })
        .clone()
}

/// A program built from `source` (written as `file_name`) by `compiler` with `flags`, against
/// the C library, in its own folder holding the headers.
struct Program {
    path: PathBuf,
    _folder: tempfile::TempDir,
}

impl Program {
    fn build(compiler: &Path, file_name: &str, source: &str, flags: &[&str]) -> Program {
        let folder = tempfile::tempdir().unwrap();
        for (name, text) in [
            ("cudyn.h", HEADER),
            ("cudyn.hpp", CPP_HEADER),
            (file_name, source),
        ] {
            std::fs::write(folder.path().join(name), text).unwrap();
        }
        let library = capi_library();
        let library_folder = library.parent().unwrap();
        let path = folder.path().join("program");
        let output = Command::new(compiler)
            .args(flags)
            .arg("-I")
            .arg(folder.path())
            .arg(folder.path().join(file_name))
            .arg("-o")
            .arg(&path)
            .arg(format!("-L{}", library_folder.display()))
            .arg("-lcudyn_capi")
            .arg("-lm")
            // nvcc takes no -Wl; every compiler here takes -Xlinker.
            .args(["-Xlinker", "-rpath", "-Xlinker"])
            .arg(library_folder)
            .output()
            .unwrap_or_else(|error| panic!("running {}: {error}", compiler.display()));
        assert!(
            output.status.success(),
            "{} failed to build {file_name}:\n{}",
            compiler.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        Program {
            path,
            _folder: folder,
        }
    }

    fn c(file_name: &str, source: &str) -> Program {
        let flags = ["-std=c11", "-Wall", "-Wextra", "-Werror"];
        Program::build(Path::new("cc"), file_name, source, &flags)
    }

    fn cpp(file_name: &str, source: &str) -> Program {
        let flags = ["-std=c++17", "-Wall", "-Wextra", "-Werror"];
        Program::build(Path::new("g++"), file_name, source, &flags)
    }

    fn run(&self, configure: impl FnOnce(&mut Command)) -> Output {
        let mut command = Command::new(&self.path);
        configure(&mut command);
        command.output().unwrap()
    }

    /// Runs with the CUDA driver hidden: cudyn searches only an empty folder.
    fn run_without_driver(&self) -> Output {
        let empty = tempfile::tempdir().unwrap();
        self.run(|command| {
            command.env("CUDYN_LIBRARY_PATH", empty.path());
        })
    }
}

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Checks the examples' start and their stop without a GPU.
fn assert_stops_for_want_of_a_gpu(output: &Output) {
    let (stdout, stderr) = text(output);
    assert_eq!(
        output.status.code(),
        Some(EXIT_NO_GPU),
        "{stdout}\n{stderr}"
    );
    assert!(
        stdout.starts_with(&format!("cudyn {}\n", env!("CARGO_PKG_VERSION"))),
        "{stdout}"
    );
    assert!(
        stdout.contains("\nCUDA driver   CUDA driver was not found"),
        "the toolchain report names the missing driver: {stdout}"
    );
    assert!(
        stdout.contains("\nno GPU: CUDA driver was not found (looked for libcuda.so.1)"),
        "the reason to stop: {stdout}"
    );
}

#[test]
fn the_c_example_without_a_gpu_prints_the_toolchain_and_why_it_stops() {
    let saxpy = Program::c("saxpy.c", SAXPY_C);
    assert_stops_for_want_of_a_gpu(&saxpy.run_without_driver());
}

#[test]
fn the_cpp_example_without_a_gpu_prints_the_toolchain_and_why_it_stops() {
    let saxpy = Program::cpp("saxpy.cpp", SAXPY_CPP);
    assert_stops_for_want_of_a_gpu(&saxpy.run_without_driver());
}

#[test]
fn null_arguments_and_dead_handles_are_errors_not_crashes() {
    let program = Program::c("null_arguments.c", NULL_ARGUMENTS_C);
    let output = program.run(|_| {});
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout, "0 failures\n");
}

/// Checks a full example run: the launches and the comparison with the CPU.
fn assert_agrees_with_the_cpu(output: &Output, refused: &str) {
    let (stdout, stderr) = text(output);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("saxpy takes 5 parameters"), "{stdout}");
    assert!(stdout.contains(refused), "{stdout}");
    assert!(
        stdout.contains("1048576 of 1048576 elements agree with the CPU"),
        "{stdout}"
    );
}

#[test]
#[ignore = "gpu: the C example compiles SAXPY, launches it and compares with the CPU"]
fn gpu_the_c_example_agrees_with_the_cpu() {
    let output = Program::c("saxpy.c", SAXPY_C).run(|_| {});
    assert_agrees_with_the_cpu(
        &output,
        "a double for `float a`: CUDYN_ERROR_LAUNCH: kernel `saxpy`: parameter 0 is 4 bytes",
    );
    assert!(text(&output)
        .0
        .contains("saxpy takes 5 parameters: 4@0 8@8 8@16 8@24 8@32"));
}

#[test]
#[ignore = "gpu: the C++ example compiles SAXPY, launches it and compares with the CPU"]
fn gpu_the_cpp_example_agrees_with_the_cpu() {
    let output = Program::cpp("saxpy.cpp", SAXPY_CPP).run(|_| {});
    assert_agrees_with_the_cpu(
        &output,
        "an int for `size_t n`: CUDYN_ERROR_LAUNCH: kernel `saxpy`: parameter 4 is 8 bytes",
    );
}

#[test]
#[ignore = "gpu: a cudaGetKernel handle of an nvcc-built program, launched through the C API"]
fn gpu_a_kernel_from_cuda_get_kernel_is_launched_with_checked_arguments() {
    let home = std::env::var_os("CUDA_HOME")
        .expect("this test needs nvcc: set CUDA_HOME to the CUDA toolkit");
    let nvcc = Path::new(&home).join("bin/nvcc");
    let program = Program::build(
        &nvcc,
        "foreign_kernel.cu",
        FOREIGN_KERNEL_CU,
        &["-std=c++17", "-arch=native", "-cudart", "static"],
    );
    let output = program.run(|_| {});
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout, "0 failures\n");
}
