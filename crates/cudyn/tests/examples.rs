//! Every program of `examples/` run as a user runs it.
//!
//! Without a GPU each says so first: exit status 1, `error: no GPU here (<why>)` on stderr with
//! the command that runs its offline part, the places the driver was looked for, and no panic;
//! with `--arch sm_90` it runs that part (compiling, linking) and says what it made, with exit
//! status 0. The driver is hidden from them (an exclusive `CUDYN_LIBRARY_PATH` holding only the
//! runtime's folder) so that this holds on any machine. On a GPU each must print its success
//! line: the GPU's result equals the CPU's.
//!
//! The example programs are Cargo's (`target/<profile>/examples/`, built by `cargo test` and
//! `cargo build --examples`), or, where the test binaries were copied to another machine, the
//! ones staged beside them (tests in `tests/`, programs in `bin/`).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Every example, by its program name.
const EXAMPLES: [&str; 8] = [
    "hello_world",
    "saxpy_nvrtc",
    "interop",
    "lto_link",
    "template_kernel",
    "struct_by_value",
    "globals",
    "typed_arguments",
];

/// The program of `example`: Cargo's, else the staged one; fails the test when neither exists.
fn example(example: &str) -> Command {
    let exe = std::env::current_exe().expect("the test's own path");
    let folder = exe.parent().expect("the test's folder");
    let candidates = [
        // target/<profile>/deps/examples-<hash> -> target/<profile>/examples/<example>
        folder
            .parent()
            .map(|profile| profile.join("examples").join(example)),
        // <staged>/tests/examples-<hash> -> <staged>/bin/<example>
        folder
            .parent()
            .map(|staged| staged.join("bin").join(example)),
    ];
    let program = candidates
        .into_iter()
        .flatten()
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!(
                "example program `{example}` not found beside {}: build it with \
                 `cargo build -p cudyn --examples` (plain `cargo test` builds it too)",
                exe.display()
            )
        });
    Command::new(program)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn describe(output: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}--- stderr\n{}",
        output.status,
        text(&output.stdout),
        text(&output.stderr)
    )
}

/// The folder of the CUDA runtime this test process finds: a CUDA install without a driver.
fn runtime_folder() -> PathBuf {
    let runtime = cudyn::sys::runtime().expect("the CUDA runtime (run scripts/cuda-wheels)");
    runtime
        .library
        .path
        .parent()
        .map(Path::to_path_buf)
        .expect("the runtime's folder")
}

#[test]
fn without_a_gpu_every_example_says_so_first_and_runs_its_offline_part_on_request() {
    let toolkit_only = runtime_folder();
    for name in EXAMPLES {
        let output = example(name)
            .env(cudyn::locate::LIBRARY_PATH_ENV, &toolkit_only)
            .output()
            .expect("running the example");
        let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
        let report = describe(&output);
        assert_eq!(output.status.code(), Some(1), "{name}: {report}");
        assert!(!stderr.contains("panicked"), "{name} panicked: {report}");
        let first = stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: no GPU here (")
                && first.contains("driver was not found")
                && first.ends_with(&format!(
                    "Its offline part (compiling) runs without one: cargo run -p cudyn \
                     --example {name} -- --arch sm_90"
                )),
            "{name}: the reason and the offline part first: {report}"
        );
        assert!(
            stderr.contains(&toolkit_only.display().to_string()),
            "{name}: the error lists where the driver was looked for: {report}"
        );
        assert!(
            !stdout.contains(": ok:"),
            "{name}: no success line: {report}"
        );

        let offline = example(name)
            .args(["--arch", "sm_90"])
            .env(cudyn::locate::LIBRARY_PATH_ENV, &toolkit_only)
            .output()
            .expect("running the example");
        let report = describe(&offline);
        assert_eq!(
            offline.status.code(),
            Some(0),
            "{name} --arch sm_90: {report}"
        );
        let stdout = text(&offline.stdout);
        assert!(
            stdout.starts_with(&format!("{name}: offline: "))
                && (stdout.contains("for sm_90") || stdout.contains("fatbin"))
                && stdout.trim_end().ends_with("loading and launching need a GPU, and there is none here (CUDA driver was not found (looked for libcuda.so.1))"),
            "{name} --arch sm_90: {report}"
        );
    }
}

#[test]
#[ignore = "gpu: runs every example program (NVRTC, nvJitLink, nvFatbin, launches; about 10 s)"]
fn on_a_gpu_every_example_matches_the_cpu() {
    for name in EXAMPLES {
        let output = example(name).output().expect("running the example");
        let report = describe(&output);
        assert!(output.status.success(), "{name}: {report}");
        let stdout = text(&output.stdout);
        assert!(
            stdout
                .lines()
                .any(|line| line.starts_with(&format!("{name}: ok: "))
                    && line.ends_with("equal to the CPU's")),
            "{name}: its success line: {report}"
        );
    }
}

#[test]
#[ignore = "gpu: hello_world loads a fatbin file that nvcc made (about 3 s)"]
fn hello_world_loads_a_fatbin_file_made_by_nvcc() {
    let fatbin = common::compile(
        include_str!("../examples/hello_world.cu"),
        common::Output::Fatbin,
    );
    let output = example("hello_world")
        .arg(&fatbin.path)
        .output()
        .expect("running the example");
    let report = describe(&output);
    assert!(output.status.success(), "{report}");
    let stdout = text(&output.stdout);
    for thread in 0..4 {
        assert!(
            stdout.contains(&format!("Hello from GPU thread {thread}")),
            "the device printf of thread {thread}: {report}"
        );
    }
    assert!(
        stdout.contains(&format!(
            "hello_world: ok: 4 GPU threads said hello from {}",
            fatbin.path.display()
        )),
        "{report}"
    );
}
