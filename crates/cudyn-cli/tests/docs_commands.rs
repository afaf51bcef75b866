//! Every command line of the documentation, run: the shell blocks of README.md and docs/*.md, and
//! the examples that end every `cudyn` subcommand's `--help`.
//!
//! Each `cudyn` line runs as written, with `bash`, in a folder holding the files the lines name
//! (made by `cudyn` itself, or by nvcc for the host objects and programs), HOME and the compile
//! cache in scratch folders. It must end with status 0, or with the status this file expects and
//! says why (a launch with no GPU here, a toolkit folder that does not exist), and never panic.
//! The lines that are not `cudyn` commands are run by the scripts and tests this file names,
//! which must hold them. Needs NVRTC, nvJitLink and nvcc (scripts/cuda-wheels installs all three;
//! activate its venv, or set CUDA_HOME to a toolkit).

mod common;
mod hostile;

use std::path::{Path, PathBuf};
use std::process::Command;

use hostile::assert_no_panic;

/// The repository's root.
fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A command line of the documentation and where it is written.
#[derive(Debug)]
struct Line {
    from: String,
    text: String,
}

/// The command lines of `text`'s `sh` blocks: continuations joined, comments and blank lines
/// left out.
fn shell_lines(from: &str, text: &str) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut in_block = false;
    let mut pending = String::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_block = line == "```sh";
            continue;
        }
        if in_block {
            join(from, line, &mut pending, &mut lines);
        }
    }
    lines
}

/// Adds `line` to `pending`, a command that may continue over several lines (`\`), and moves it
/// into `lines` once it ends.
fn join(from: &str, line: &str, pending: &mut String, lines: &mut Vec<Line>) {
    let code = match line.find(" #") {
        Some(at) if !line[..at].contains('\'') => &line[..at],
        _ => line,
    };
    let code = code.trim();
    if code.is_empty() || code.starts_with('#') {
        return;
    }
    match code.strip_suffix('\\') {
        Some(start) => {
            pending.push_str(start.trim_end());
            pending.push(' ');
        }
        None => {
            pending.push_str(code);
            lines.push(Line {
                from: from.to_owned(),
                text: std::mem::take(pending),
            });
        }
    }
}

/// The examples of `cudyn ARGS... --help`.
fn help_lines(args: &[&str]) -> Vec<Line> {
    let output = common::cudyn().args(args).arg("--help").output().unwrap();
    let help = String::from_utf8(output.stdout).unwrap();
    let examples = help
        .rsplit_once("\nExamples:\n")
        .map_or("", |(_, examples)| examples);
    let from = format!("cudyn {} --help", args.join(" "));
    let mut lines = Vec::new();
    let mut pending = String::new();
    for line in examples.lines() {
        join(&from, line, &mut pending, &mut lines);
    }
    lines
}

/// The documentation, embedded so that the test runs where the sources are not (its binary
/// carried to another machine).
const DOCUMENTS: [(&str, &str); 7] = [
    ("README.md", include_str!("../../../README.md")),
    (
        "docs/ARCHITECTURE.md",
        include_str!("../../../docs/ARCHITECTURE.md"),
    ),
    (
        "docs/BENCHMARKS.md",
        include_str!("../../../docs/BENCHMARKS.md"),
    ),
    ("docs/CLI.md", include_str!("../../../docs/CLI.md")),
    ("docs/CUDARC.md", include_str!("../../../docs/CUDARC.md")),
    ("docs/C_API.md", include_str!("../../../docs/C_API.md")),
    ("docs/SHARING.md", include_str!("../../../docs/SHARING.md")),
];

/// Every command line of the documentation, in order.
fn documented() -> Vec<Line> {
    let mut lines = Vec::new();
    for (name, text) in DOCUMENTS {
        lines.extend(shell_lines(name, text));
    }
    for args in [
        &[][..],
        &["doctor"],
        &["demo"],
        &["compile"],
        &["link"],
        &["inspect"],
        &["run"],
        &["cache"],
        &["completions"],
    ] {
        lines.extend(help_lines(args));
    }
    lines
}

#[test]
fn every_document_is_read() {
    let docs = repository().join("docs");
    let Ok(read) = std::fs::read_dir(&docs) else {
        // The binary runs away from its sources: the list was checked where it was built.
        return;
    };
    for entry in read {
        let name = format!("docs/{}", entry.unwrap().file_name().to_string_lossy());
        assert!(
            !name.ends_with(".md") || DOCUMENTS.iter().any(|(known, _)| *known == name),
            "{name} is not in DOCUMENTS of tests/docs_commands.rs: add it"
        );
    }
}

/// The scripts and tests that run the lines that are not `cudyn` commands.
const QUICK_START: &str = include_str!("../../../scripts/quick-start");
const CI: &str = include_str!("../../../.ci/run");
const C_API_BUILD: &str = include_str!("../../cudyn-capi/tests/docs_build.rs");

/// The lines that are not `cudyn` commands: the file that runs each (which must hold it), and
/// that file's text. The C API's build lines are read from docs/C_API.md by the C API's test.
const RUN_ELSEWHERE: [(&str, &str, &str); 5] = [
    ("scripts/demo", "scripts/quick-start", QUICK_START),
    ("scripts/test", ".ci/run", CI),
    (
        "cargo install --locked --path crates/cudyn-cli",
        "scripts/quick-start",
        QUICK_START,
    ),
    (
        "cargo build --release -p cudyn-capi",
        "tests/docs_build.rs (C API)",
        C_API_BUILD,
    ),
    ("cc -std=c11 ", "tests/docs_build.rs (C API)", C_API_BUILD),
];

/// Exit statuses other than 0 that a line may end with, by a piece of it, with why; `gpu` says
/// whether this machine has one.
fn expected_status(line: &str, gpu: bool) -> (i32, &'static str) {
    if line.contains("CUDYN_LIBRARY_PATH=/opt/cuda/lib64") {
        return (1, "there is no toolkit in /opt/cuda here");
    }
    if gpu {
        return (0, "");
    }
    if line.contains("--require-gpu") {
        return (1, "no GPU here");
    }
    if line.contains("cudyn run ") && !line.contains("--check") {
        return (3, "no GPU here to launch on");
    }
    (0, "")
}

/// The folder of NVRTC, where the wheels (or a toolkit) keep the rest of CUDA too.
fn cuda_lib() -> PathBuf {
    let nvrtc = cudyn::sys::nvrtc().expect("NVRTC (scripts/cuda-wheels, then activate the venv)");
    nvrtc.library.path.parent().unwrap().to_owned()
}

/// nvcc: `$CUDA_HOME/bin/nvcc`, else the wheels' beside NVRTC's folder, with the CUDA_HOME it
/// needs.
fn nvcc() -> (PathBuf, PathBuf) {
    if let Some(home) = std::env::var_os("CUDA_HOME").map(PathBuf::from) {
        if home.join("bin/nvcc").is_file() {
            return (home.join("bin/nvcc"), home);
        }
    }
    let home = cuda_lib().parent().unwrap().to_owned();
    let nvcc = home.join("bin/nvcc");
    assert!(
        nvcc.is_file(),
        "no nvcc at {} (scripts/cuda-wheels installs it)",
        nvcc.display()
    );
    (nvcc, home)
}

/// Sources of the files the documented lines name.
const SOURCES: [(&str, &str); 12] = [
    ("saxpy.cu", include_str!("../src/kernels/saxpy.cu")),
    ("scale.cu", "template <typename T> __global__ void scale(T *v, T f) { v[threadIdx.x] *= f; }\n"),
    ("a.cu", "extern \"C\" __global__ void a(float *p) { p[0] = 1; }\n"),
    ("b.cu", "extern \"C\" __global__ void b(float *p) { p[0] = 2; }\n"),
    ("c.cu", "extern \"C\" __global__ void c(float *p) { p[0] = 3; }\n"),
    ("piece.cu", "__device__ float twice(float x) { return 2 * x; }\n"),
    ("half.cu", "#include <cuda_fp16.h>\nextern \"C\" __global__ void h(__half *p) { p[0] = __float2half(1.0f); }\n"),
    ("kernel.cu", include_str!("kernels/iterate_kernel.cu")),
    ("main.cu", include_str!("kernels/iterate_kernel.cu")),
    ("step.cu", include_str!("kernels/iterate_step.cu")),
    ("blur.cu", "extern \"C\" __global__ void blur(const float *in, float *out, int n) {\n  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;\n  if (x < n && y < n) out[y * n + x] = in[y * n + x];\n}\n"),
    ("helpers.cu", "__device__ float helper(float x) { return x + 1; }\n"),
];

/// A folder holding every file the documented lines read, and a HOME with the folders they
/// write into.
fn fixtures(folder: &Path) {
    for (name, text) in SOURCES {
        std::fs::write(folder.join(name), text).unwrap();
    }
    // The README's device.cu, as its `cuda` block writes it.
    let readme = std::fs::read_to_string(repository().join("README.md")).unwrap();
    let device = readme
        .split("```cuda\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next());
    std::fs::write(
        folder.join("device.cu"),
        device.expect("the README's device.cu"),
    )
    .unwrap();
    for line in [
        "compile saxpy.cu --arch sm_90",
        "compile kernel.cu step.cu --arch sm_90 --rdc",
        "compile main.cu step.cu --arch sm_90 --rdc --emit ltoir",
        "compile piece.cu --arch sm_90 --rdc --emit ltoir",
        "compile a.cu --arch sm_80,sm_90 -o app.fatbin",
        "compile b.cu --arch compute_90 --emit ptx -o kernels.ptx",
        "compile blur.cu --arch sm_80,sm_90,compute_90",
    ] {
        let args = hostile::words(line);
        let output = common::cudyn()
            .current_dir(folder)
            .args(&args)
            .output()
            .unwrap();
        assert!(output.status.success(), "{line}: {output:?}");
    }
    std::fs::write(folder.join("image.bin"), vec![0u8; 4 << 20]).unwrap();
    std::fs::copy(
        cuda_lib().join("libcudadevrt.a"),
        folder.join("libcudadevrt.a"),
    )
    .unwrap();
    // nvcc's host object with relocatable device code calling into a static library, and a
    // host program with a fatbin.
    std::fs::write(
        folder.join("app.cu"),
        "extern __device__ float helper(float);\nextern \"C\" __global__ void k(float *p) { p[0] = helper(p[0]); }\n",
    )
    .unwrap();
    std::fs::write(
        folder.join("my_program.cu"),
        "extern \"C\" __global__ void k(float *p) { p[0] = 1; }\nint main() { return 0; }\n",
    )
    .unwrap();
    let (nvcc, home) = nvcc();
    for args in [
        &["-arch=sm_90", "-dc", "app.cu", "-o", "app.o"][..],
        &["-arch=sm_90", "-dc", "helpers.cu", "-o", "helpers.o"],
        &["-arch=sm_90", "my_program.cu", "-o", "my_program"],
    ] {
        let output = Command::new(&nvcc)
            .args(args)
            .current_dir(folder)
            .env("CUDA_HOME", &home)
            .output()
            .unwrap();
        assert!(output.status.success(), "nvcc {args:?}: {output:?}");
    }
    let archived = Command::new("ar")
        .args(["rcs", "libdevice_helpers.a", "helpers.o"])
        .current_dir(folder)
        .status()
        .unwrap();
    assert!(archived.success());
    for made in [
        ".local/share/bash-completion/completions",
        ".zfunc",
        ".config/fish/completions",
        ".cache/cudyn",
        "tmp",
    ] {
        std::fs::create_dir_all(folder.join("home").join(made)).unwrap();
    }
    // The scratch HOME has the wheels the set-up installed, as a user's has after it: recorded.
    let lib = cuda_lib();
    if let Some(venv) = lib
        .ancestors()
        .find(|folder| folder.join(".cudyn-pins").is_file())
    {
        let record = folder.join("home/.cache/cudyn/wheels-venv");
        std::fs::write(record, format!("{}\n", venv.display())).unwrap();
    }
}

#[test]
fn every_command_line_of_the_documentation_runs() {
    let lines = documented();
    let scratch = tempfile::tempdir().unwrap();
    let folder = scratch.path();
    fixtures(folder);
    // `cudyn` on the PATH, as a user has it after `cargo install`.
    let bin = folder.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(common::cudyn_binary(), bin.join("cudyn")).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let has_jq = Command::new("sh")
        .args(["-c", "command -v jq"])
        .output()
        .unwrap()
        .status
        .success();
    let gpu = common::cudyn()
        .args(["doctor", "--require-gpu"])
        .output()
        .unwrap()
        .status
        .success();

    let mut ran = 0;
    for line in &lines {
        if !line.text.starts_with("cudyn ")
            && !line.text.contains(" cudyn ")
            && !line.text.starts_with("source <(cudyn")
        {
            let (_, file, holder) = RUN_ELSEWHERE
                .into_iter()
                .find(|(start, _, _)| line.text.starts_with(start))
                .unwrap_or_else(|| panic!("{line:?} is run by no test: add it here"));
            let text = line.text.split(' ').take(3).collect::<Vec<_>>().join(" ");
            assert!(
                holder.contains(&text) || holder.contains("docs/C_API.md"),
                "{file} does not run `{}` ({})",
                line.text,
                line.from
            );
            continue;
        }
        // Files the lines write outside the current folder go into the scratch folder.
        let mut text = line
            .text
            .replace("/tmp/", &format!("{}/tmp/", folder.join("home").display()));
        if !has_jq {
            if let Some(at) = text.find("| jq") {
                text = format!("{} | python3 -m json.tool > /dev/null", &text[..at]);
            }
        }
        let output = Command::new("bash")
            .args(["-o", "pipefail", "-c", &text])
            .current_dir(folder)
            .env("PATH", &path)
            .env("HOME", folder.join("home"))
            .env("CUDYN_CACHE_DIR", folder.join("cache"))
            .env_remove("CUDYN_CACHE")
            .env_remove("CUDYN_WHEELS_VENV")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let case = format!("{} ({})", line.text, line.from);
        assert_no_panic(&output, &case);
        let (status, why) = expected_status(&line.text, gpu);
        assert_eq!(
            output.status.code(),
            Some(status),
            "{case}: {why}\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        ran += 1;
    }
    println!("{ran} documented command lines ran");
    assert!(ran >= 50, "only {ran} command lines found: {lines:#?}");
}
