//! `cudyn link`, run as a user would, on pieces compiled by `cudyn compile` from the library's
//! test kernels. Needs NVRTC and nvJitLink (scripts/cuda-wheels, then activate the venv).

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::cudyn;

const ITERATE_KERNEL: &str = include_str!("kernels/iterate_kernel.cu");
const ITERATE_STEP: &str = include_str!("kernels/iterate_step.cu");

/// Runs `cudyn ARGS...` in `folder`; returns the exit code, standard output and standard error.
fn run_in(folder: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let run = cudyn().current_dir(folder).args(args).output().unwrap();
    (
        run.status.code(),
        String::from_utf8_lossy(&run.stdout).into_owned(),
        String::from_utf8_lossy(&run.stderr).into_owned(),
    )
}

/// `cudyn link` of the two iterate pieces as LTO-IR, with link-time optimization.
const LINK_ITERATE_LTO: [&str; 6] = [
    "link",
    "iterate_kernel.ltoir",
    "iterate_step.ltoir",
    "--lto",
    "--arch",
    "sm_90",
];

/// A folder with the two iterate pieces compiled by `cudyn compile` as `emit` (relocatable).
fn pieces(emit: &str) -> tempfile::TempDir {
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("iterate_kernel.cu"), ITERATE_KERNEL).unwrap();
    std::fs::write(folder.path().join("iterate_step.cu"), ITERATE_STEP).unwrap();
    let (code, _, stderr) = run_in(
        folder.path(),
        &[
            "compile",
            "iterate_kernel.cu",
            "iterate_step.cu",
            "--arch",
            "sm_90",
            "--rdc",
            "--emit",
            emit,
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    folder
}

/// The kernels `cudyn inspect --json` lists in a cubin.
fn kernels_in(cubin: &Path) -> Vec<String> {
    let (code, stdout, stderr) = run_in(
        Path::new("."),
        &["inspect", "--json", cubin.to_str().unwrap()],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let cubin = &json[0]["inspection"]["contents"]["cubin"];
    assert_eq!(cubin["relocatable"], false, "a linked cubin loads as it is");
    cubin["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|kernel| kernel["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn lto_ir_pieces_link_into_a_cubin_with_the_kernel() {
    let folder = pieces("ltoir");
    let (code, stdout, stderr) = run_in(
        folder.path(),
        &[&LINK_ITERATE_LTO[..], &["-o", "iterate.cubin"]].concat(),
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.starts_with("wrote iterate.cubin (") && stdout.contains("for sm_90, 1 kernel)"),
        "{stdout}"
    );
    assert_eq!(
        kernels_in(&folder.path().join("iterate.cubin")),
        ["iterate"]
    );
}

#[test]
fn relocatable_cubins_link_and_json_reports_inputs_and_output() {
    let folder = pieces("cubin");
    let (code, stdout, stderr) = run_in(
        folder.path(),
        &[
            "link",
            "iterate_kernel.cubin",
            "iterate_step.cubin",
            "--arch",
            "90",
            "--json",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        report["inputs"],
        serde_json::json!([
            {"file": "iterate_kernel.cubin", "kind": "cubin"},
            {"file": "iterate_step.cubin", "kind": "cubin"},
        ])
    );
    assert_eq!(report["output"], "linked.cubin");
    assert_eq!(report["arch"], "sm_90");
    assert_eq!(report["lto"], false);
    assert_eq!(report["kernels"], 1);
    assert!(report["info_log"].is_string());
    assert!(report.get("error").is_none(), "{report}");
    let linked = folder.path().join("linked.cubin");
    assert_eq!(report["bytes"], std::fs::metadata(&linked).unwrap().len());
    assert_eq!(kernels_in(&linked), ["iterate"]);
}

/// libcudadevrt.a, installed beside NVRTC by the nvidia-cuda-runtime wheel.
fn cudadevrt() -> PathBuf {
    let nvrtc = cudyn::sys::nvrtc().expect("NVRTC (scripts/cuda-wheels)");
    let archive = nvrtc.library.path.parent().unwrap().join("libcudadevrt.a");
    assert!(archive.exists(), "{} is missing", archive.display());
    archive
}

#[test]
fn a_static_library_links_as_an_archive() {
    let folder = pieces("cubin");
    let archive = cudadevrt();
    let (code, stdout, stderr) = run_in(
        folder.path(),
        &[
            "link",
            "iterate_kernel.cubin",
            "iterate_step.cubin",
            archive.to_str().unwrap(),
            "--arch",
            "sm_90",
            "--json",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["inputs"][2]["kind"], "library");
    assert!(
        kernels_in(&folder.path().join("linked.cubin")).contains(&"iterate".to_owned()),
        "{report}"
    );
}

#[test]
fn a_failed_link_shows_the_log_naming_the_input_on_standard_error() {
    let folder = pieces("cubin");
    let (code, stdout, stderr) = run_in(
        folder.path(),
        &["link", "iterate_kernel.cubin", "--arch", "sm_90"],
    );
    assert_eq!(code, Some(1));
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.starts_with("error: cudyn link: nvJitLinkComplete failed"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Undefined reference to '_Z4stepf' in 'iterate_kernel.cubin'"),
        "{stderr}"
    );
    assert!(!folder.path().join("linked.cubin").exists());
}

#[test]
fn bad_inputs_are_refused_with_the_fix() {
    let folder = pieces("ltoir");
    let step = std::fs::read(folder.path().join("iterate_step.ltoir")).unwrap();
    for (args, expected) in [
        (
            &["iterate_kernel.ltoir", "iterate_step.ltoir", "--arch", "90"][..],
            "error: cudyn link: pass --lto: iterate_kernel.ltoir is LTO-IR",
        ),
        (
            &["iterate_kernel.cu", "--arch", "90"][..],
            "error: cudyn link: iterate_kernel.cu is not an input nvJitLink links",
        ),
        (
            &[
                "iterate_step.ltoir",
                "--lto",
                "--arch",
                "90",
                "-o",
                "iterate_step.ltoir",
            ][..],
            "error: cudyn link: the output iterate_step.ltoir is the input iterate_step.ltoir",
        ),
        (
            &["missing.cubin", "--arch", "90"][..],
            "error: cudyn link: cannot read missing.cubin",
        ),
    ] {
        let (code, stdout, stderr) = run_in(folder.path(), &[&["link"], args].concat());
        // An output that is an input is a contradiction of the command line: a usage error.
        let usage = expected.contains("is the input");
        assert_eq!(code, Some(if usage { 2 } else { 1 }), "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}");
        assert!(stderr.starts_with(expected), "{args:?}: {stderr}");
    }
    let after = std::fs::read(folder.path().join("iterate_step.ltoir")).unwrap();
    assert_eq!(after, step, "-o equal to an input overwrote it");
}

#[test]
fn a_damaged_input_is_refused_before_nvjitlink_reads_it() {
    // nvJitLink trusts its inputs' headers: a cut fatbin made it loop forever, a cut cubin
    // crashed it.
    let folder = pieces("cubin");
    let step = std::fs::read(folder.path().join("iterate_step.cubin")).unwrap();
    std::fs::write(folder.path().join("cut.cubin"), &step[..step.len() / 2]).unwrap();
    let (code, stdout, stderr) = run_in(
        folder.path(),
        &["link", "iterate_kernel.cubin", "cut.cubin", "--arch", "90"],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stdout.is_empty());
    assert!(
        stderr.starts_with("error: cudyn link: cut.cubin is a damaged cubin: ")
            && stderr.contains("copied whole"),
        "{stderr}"
    );
}

/// Seconds a link of damaged LTO-IR may run here (one takes tens of milliseconds): nvJitLink has
/// run forever on some.
const LIMIT_SECONDS: u64 = 20;

/// How the link of damaged LTO-IR ended, run in the command's own process (as it ran before it
/// linked in a child).
enum Alone {
    Exited(i32),
    Signaled(i32),
    /// Still running after [`LIMIT_SECONDS`], and killed.
    Hung,
}

/// `cudyn link damaged.ltoir --lto --arch sm_90 --json` of `ltoir` in `folder`: how it ends in
/// the command's own process, and the output of the command as it runs (with `--time-limit`).
fn link_alone_and_supervised(folder: &Path, ltoir: &[u8]) -> (Alone, Output) {
    std::fs::write(folder.join("damaged.ltoir"), ltoir).unwrap();
    let args = [
        "link",
        "damaged.ltoir",
        "--lto",
        "--arch",
        "sm_90",
        "--json",
    ];
    let mut alone = cudyn()
        .current_dir(folder)
        .env("CUDYN_LINK_IN_PROCESS", "1")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(LIMIT_SECONDS);
    let alone = loop {
        if let Some(status) = alone.try_wait().unwrap() {
            break match (status.code(), status.signal()) {
                (Some(code), _) => Alone::Exited(code),
                (None, signal) => Alone::Signaled(signal.unwrap_or(0)),
            };
        }
        if Instant::now() > deadline {
            alone.kill().unwrap();
            alone.wait().unwrap();
            break Alone::Hung;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let supervised = cudyn()
        .current_dir(folder)
        .args(args)
        .args(["--time-limit", &LIMIT_SECONDS.to_string()])
        .output()
        .unwrap();
    (alone, supervised)
}

/// Checks that `supervised`, the command's output, reports what ended the link in its own
/// process (`alone`) as it should; returns its JSON report.
fn assert_reported(alone: &Alone, supervised: &Output) -> serde_json::Value {
    let report: serde_json::Value = serde_json::from_slice(&supervised.stdout)
        .unwrap_or_else(|_| panic!("{:?}: no report", supervised.status));
    let error = report["error"].as_str();
    match alone {
        Alone::Exited(code) => assert_eq!(supervised.status.code(), Some(*code), "{report}"),
        Alone::Signaled(signal) => {
            assert_eq!(supervised.status.code(), Some(1), "{report}");
            assert!(
                error.is_some_and(|error| error.starts_with("nvJitLink crashed (SIG")
                    && error.contains("while linking damaged.ltoir:")),
                "signal {signal}: {report}"
            );
            assert_eq!(report["inputs"][0]["kind"], "ltoir");
        }
        // Stopped at the limit, as a rule; a link that ends near the limit may end with its
        // error in one run and be stopped in the other.
        Alone::Hung => {
            assert_eq!(supervised.status.code(), Some(1), "{report}");
            assert!(error.is_some(), "{report}");
        }
    }
    report
}

#[test]
fn a_crash_of_nvjitlink_is_reported_with_status_1() {
    // NVRTC 13.0's LTO-IR of this kernel, with four bytes changed, ends nvJitLink 13.0 (the
    // CUDA wheels') with SIGSEGV. Another NVRTC or nvJitLink may make other bytes or survive
    // them: then the command must end as the link in its own process does.
    // (The LTO-IR holds the file's name.)
    let folder = tempfile::tempdir().unwrap();
    let source = "extern \"C\" __global__ void e(){}\n";
    std::fs::write(folder.path().join("a.cu"), source).unwrap();
    let (code, _, stderr) = run_in(
        folder.path(),
        &[
            "compile", "a.cu", "--emit", "ltoir", "--rdc", "--arch", "sm_90",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let mut ltoir = std::fs::read(folder.path().join("a.ltoir")).unwrap();
    for (offset, byte) in [(785, 66), (1062, 105), (1350, 2), (1863, 137)] {
        if let Some(slot) = ltoir.get_mut(offset) {
            *slot = byte;
        }
    }
    let (alone, supervised) = link_alone_and_supervised(folder.path(), &ltoir);
    let report = assert_reported(&alone, &supervised);
    assert!(!folder.path().join("linked.cubin").exists() || report["error"].is_null());
}

#[test]
fn a_link_past_its_time_limit_is_stopped_and_writes_nothing() {
    // No link finishes within a millisecond (the cache, which would answer at once, is off).
    let folder = pieces("ltoir");
    let args = [&LINK_ITERATE_LTO[..], &["-o", "out.cubin"]].concat();
    let run = cudyn()
        .current_dir(folder.path())
        .env("CUDYN_CACHE", "off")
        .args([&args[..], &["--time-limit", "0.001"]].concat())
        .output()
        .unwrap();
    let (code, stdout, stderr) = (
        run.status.code(),
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stdout.is_empty());
    assert!(
        stderr.starts_with(
            "error: cudyn link: the link of iterate_kernel.ltoir, iterate_step.ltoir did not \
             finish within its time limit of 0.001 s and was stopped"
        ),
        "{stderr}"
    );
    assert!(!folder.path().join("out.cubin").exists());
    // Within a limit it can keep, the same link is written.
    let (code, _, stderr) = run_in(
        folder.path(),
        &[&args[..], &["--time-limit", "60"]].concat(),
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(folder.path().join("out.cubin").exists());
    let (code, _, stderr) = run_in(folder.path(), &[&args[..], &["--time-limit", "0"]].concat());
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("is not a positive number of seconds"),
        "{stderr}"
    );
}

#[test]
fn damaged_lto_ir_never_ends_the_command_by_a_signal() {
    // LTO-IR is checked by its header alone: its damaged contents reach nvJitLink, which reports
    // most as errors, crashes on a few (one of these 40 with the CUDA wheels' 13.0), and on
    // others runs for many seconds while it takes gigabytes of memory (3.6 GB in 5 s for one).
    // The sweep stops at its second run that did not end in time, each costing twice the
    // time limit.
    let folder = pieces("ltoir");
    let ltoir = std::fs::read(folder.path().join("iterate_kernel.ltoir")).unwrap();
    let mut random = fastrand::Rng::with_seed(13);
    let (mut failures, mut hung) = (0, 0);
    for _ in 0..40 {
        let mut damaged = ltoir.clone();
        for _ in 0..random.usize(1..=4) {
            let at = random.usize(..damaged.len());
            damaged[at] = random.u8(..);
        }
        let (alone, supervised) = link_alone_and_supervised(folder.path(), &damaged);
        let report = assert_reported(&alone, &supervised);
        match supervised.status.code() {
            Some(0) => assert!(report["error"].is_null(), "{report}"),
            Some(1) => failures += 1,
            other => panic!("ended with {other:?} (a signal, if None): {report}"),
        }
        if matches!(alone, Alone::Hung) {
            hung += 1;
            if hung == 2 {
                break;
            }
        }
    }
    assert!(
        failures > 0,
        "no damage was refused: the sweep tested nothing"
    );
}

#[test]
fn code_compiled_without_rdc_is_refused_or_warned_of() {
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(
        folder.path().join("whole.cu"),
        "extern \"C\" __global__ void whole(float *p) { p[0] = 1; }",
    )
    .unwrap();
    for emit in ["cubin", "fatbin"] {
        let (code, _, stderr) = run_in(
            folder.path(),
            &["compile", "whole.cu", "--arch", "sm_90", "--emit", emit],
        );
        assert_eq!(code, Some(0), "{stderr}");
    }
    // A cubin alone: refused, with the fix.
    let (code, stdout, stderr) = run_in(folder.path(), &["link", "whole.cubin", "--arch", "90"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stdout.is_empty());
    assert!(
        stderr.starts_with("error: cudyn link: whole.cubin is an executable cubin")
            && stderr.contains("-rdc"),
        "{stderr}"
    );
    // Its sm_90 code in a fatbin: nvJitLink takes it and links nothing of it, which is said.
    let (code, stdout, stderr) = run_in(folder.path(), &["link", "whole.fatbin", "--arch", "90"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains(", 0 kernels)"), "{stdout}");
    assert!(
        stderr.contains("warning: cudyn link: the linked cubin holds no kernel")
            && stderr.contains("-rdc"),
        "{stderr}"
    );
}

#[test]
fn dash_writes_the_cubin_to_standard_output() {
    let folder = pieces("cubin");
    let run = cudyn()
        .current_dir(folder.path())
        .args([
            "link",
            "iterate_kernel.cubin",
            "iterate_step.cubin",
            "--arch",
            "90",
            "-o",
            "-",
        ])
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");
    assert_eq!(&run.stdout[..4], b"\x7fELF");
    let inspection = cudyn::Image::new(run.stdout).unwrap().inspect().unwrap();
    let cudyn::inspect::Contents::Cubin(cubin) = inspection.contents else {
        panic!("not a cubin: {:?}", inspection.kind);
    };
    assert_eq!(cubin.kernels.len(), 1);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("wrote standard output"), "{stderr}");
    assert!(!folder.path().join("-").exists());
}

/// nvcc under `$CUDA_HOME/bin` (default /usr/local/cuda); fails the test when it is missing.
fn nvcc() -> PathBuf {
    let home = std::env::var_os("CUDA_HOME").unwrap_or_else(|| "/usr/local/cuda".into());
    let nvcc = Path::new(&home).join("bin/nvcc");
    assert!(
        nvcc.is_file(),
        "this test needs nvcc: set CUDA_HOME to a CUDA toolkit ({} does not exist)",
        nvcc.display()
    );
    nvcc
}

/// Runs nvcc with `args` in `folder`, requiring success.
fn run_nvcc(folder: &Path, args: &[&str]) {
    let run = std::process::Command::new(nvcc())
        .current_dir(folder)
        .args(args)
        .output()
        .unwrap();
    assert!(run.status.success(), "nvcc {args:?}: {run:?}");
}

#[test]
#[ignore = "gpu: needs nvcc from the CUDA toolkit (no GPU used); about 5 s"]
fn nvcc_objects_and_static_libraries_link_and_inspect() {
    let folder = tempfile::tempdir().unwrap();
    let dir = folder.path();
    std::fs::write(dir.join("iterate_kernel.cu"), ITERATE_KERNEL).unwrap();
    std::fs::write(dir.join("iterate_step.cu"), ITERATE_STEP).unwrap();
    for name in ["iterate_kernel", "iterate_step"] {
        run_nvcc(
            dir,
            &[
                "-rdc=true",
                "-arch=sm_90",
                "-c",
                &format!("{name}.cu"),
                "-o",
                &format!("{name}.o"),
            ],
        );
    }
    run_nvcc(dir, &["-lib", "iterate_step.o", "-o", "libstep.a"]);

    // The static library nvcc made: its member is a host object with relocatable SASS.
    let (code, stdout, stderr) = run_in(dir, &["inspect", "--json", "libstep.a"]);
    assert_eq!(code, Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json[0]["inspection"]["kind"], "archive");
    let member = &json[0]["inspection"]["contents"]["archive"]["members"][0];
    assert_eq!(member["name"], "iterate_step.o");
    assert_eq!(member["inspection"]["kind"], "host_binary");

    // A host object and the library, linked.
    let (code, stdout, stderr) = run_in(
        dir,
        &[
            "link",
            "iterate_kernel.o",
            "libstep.a",
            "--arch",
            "sm_90",
            "--json",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["inputs"][0]["kind"], "object");
    assert_eq!(report["inputs"][1]["kind"], "library");
    assert_eq!(kernels_in(&dir.join("linked.cubin")), ["iterate"]);
}

#[test]
fn without_a_driver_or_arch_the_error_says_the_fix_first() {
    let nvjitlink = cudyn::sys::nvjitlink().expect("nvJitLink (scripts/cuda-wheels)");
    // nvJitLink and nothing else: no driver.
    let only_nvjitlink = common::only_libraries_beside(&nvjitlink.library.path, "libnvJitLink");
    let folder = pieces("cubin");
    let run = cudyn()
        .current_dir(folder.path())
        .env("CUDYN_LIBRARY_PATH", only_nvjitlink.path())
        .args(["link", "iterate_kernel.cubin", "iterate_step.cubin"])
        .output()
        .unwrap();
    let stderr = common::assert_arch_fix_first(&run, "link");
    assert!(
        stderr.contains("cudyn links for the current GPU"),
        "{stderr}"
    );
}
