//! `cudyn compile`, run as a user would. Needs NVRTC and nvFatbin (scripts/cuda-wheels, then
//! activate the venv).

mod common;

use std::path::Path;

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
    compile_ok(
        &["--emit", "ptx", "--arch", "90", "-D", "FACTOR=2.0f"],
        &source,
    );
    let ptx = std::fs::read_to_string(folder.path().join("scale.ptx")).unwrap();
    assert!(ptx.contains(".target sm_90"), "{ptx}");

    compile_ok(
        &["--emit", "ltoir", "--arch", "sm_90", "-D", "FACTOR=2.0f"],
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
    // NVRTC and its builtins and nothing else: no driver.
    let only_nvrtc = common::only_libraries_beside(&nvrtc.library.path, "libnvrtc");
    let (_folder, source) = scale_source();
    let run = cudyn()
        .env("CUDYN_LIBRARY_PATH", only_nvrtc.path())
        .args(["compile", "-D", "FACTOR=2.0f"])
        .arg(&source)
        .output()
        .unwrap();
    let stderr = common::assert_arch_fix_first(&run, "compile");
    assert!(stderr.contains("no CUDA driver was found"), "{stderr}");
    assert!(stderr.contains("cudyn doctor"), "{stderr}");
}

/// Runs `cudyn ARGS...` in `folder`; returns the exit code, standard output and standard error.
fn run_in(folder: &Path, args: &[&str]) -> (Option<i32>, Vec<u8>, String) {
    let run = cudyn().current_dir(folder).args(args).output().unwrap();
    (
        run.status.code(),
        run.stdout,
        String::from_utf8_lossy(&run.stderr).into_owned(),
    )
}

/// A folder holding CUDA sources by name.
fn sources(files: &[(&str, &str)]) -> tempfile::TempDir {
    let folder = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(folder.path().join(name), text).unwrap();
    }
    folder
}

const FILL: &str = "extern \"C\" __global__ void fill(float *p) { p[threadIdx.x] = 1; }\n";

#[test]
fn several_targets_make_one_fatbin_with_sass_per_sm_and_ptx_per_compute() {
    let folder = sources(&[("fill.cu", FILL)]);
    let (code, stdout, stderr) = run_in(
        folder.path(),
        &["compile", "fill.cu", "--arch", "sm_80,sm_90,compute_90"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let stdout = String::from_utf8(stdout).unwrap();
    assert!(
        stdout.starts_with("wrote fill.fatbin (") && stdout.contains(", 1 kernel)"),
        "{stdout}"
    );
    let bytes = std::fs::read(folder.path().join("fill.fatbin")).unwrap();
    let inspection = cudyn::Image::new(bytes).unwrap().inspect().unwrap();
    let cudyn::inspect::Contents::Fatbin(fatbin) = inspection.contents else {
        panic!("not a fatbin: {:?}", inspection.kind);
    };
    let mut entries: Vec<String> = fatbin
        .entries
        .iter()
        .map(|entry| format!("{:?} {}", entry.kind, entry.arch))
        .collect();
    entries.sort();
    assert_eq!(entries, ["Ptx 90", "Sass 80", "Sass 90"]);
}

#[test]
fn several_files_compile_into_a_folder_named_by_their_stems() {
    let folder = sources(&[
        ("one.cu", FILL),
        ("two.cu", &FILL.replace("fill", "fill_two")),
    ]);
    std::fs::create_dir(folder.path().join("build")).unwrap();
    let (code, stdout, stderr) = run_in(
        folder.path(),
        &[
            "compile", "one.cu", "two.cu", "--arch", "sm_90", "-o", "build", "--json",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
    let reports = json.as_array().unwrap();
    assert_eq!(reports.len(), 2);
    for (report, stem) in reports.iter().zip(["one", "two"]) {
        let output = format!("build/{stem}.cubin");
        assert_eq!(report["file"], format!("{stem}.cu"));
        assert_eq!(report["output"], output.as_str());
        assert_eq!(report["emit"], "cubin");
        assert_eq!(report["targets"], serde_json::json!(["sm_90"]));
        assert_eq!(report["kernels"], 1);
        assert_eq!(report["warnings"], serde_json::json!([]));
        let written = std::fs::read(folder.path().join(&output)).unwrap();
        assert_eq!(report["bytes"], written.len());
        assert_eq!(&written[..4], b"\x7fELF");
    }

    // Several outputs cannot share one file, nor standard output.
    for output in ["one.cubin", "-"] {
        let (code, stdout, stderr) = run_in(
            folder.path(),
            &["compile", "one.cu", "two.cu", "--arch", "90", "-o", output],
        );
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stdout.is_empty());
        assert!(stderr.contains("name a folder"), "{stderr}");
    }
}

#[test]
fn an_output_that_is_the_input_is_refused_by_any_path() {
    let folder = sources(&[("fill.cu", FILL)]);
    std::os::unix::fs::symlink("fill.cu", folder.path().join("link.cu")).unwrap();
    std::fs::hard_link(folder.path().join("fill.cu"), folder.path().join("hard.cu")).unwrap();
    for output in ["fill.cu", "./fill.cu", "link.cu", "hard.cu"] {
        let (code, _, stderr) = run_in(
            folder.path(),
            &["compile", "fill.cu", "--arch", "sm_90", "-o", output],
        );
        assert_eq!(code, Some(2), "-o {output}: {stderr}");
        assert!(stderr.contains("would destroy the source"), "{stderr}");
        assert_eq!(
            std::fs::read_to_string(folder.path().join("fill.cu")).unwrap(),
            FILL,
            "-o {output} overwrote the source"
        );
    }
}

#[test]
fn dash_writes_the_code_to_standard_output_and_the_report_to_standard_error() {
    let folder = sources(&[("fill.cu", FILL)]);
    let (code, stdout, stderr) = run_in(
        folder.path(),
        &[
            "compile", "fill.cu", "--arch", "90", "--emit", "ptx", "-o", "-",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let ptx = String::from_utf8_lossy(&stdout);
    assert!(
        ptx.contains(".target sm_90") && ptx.contains(".entry fill"),
        "{ptx}"
    );
    assert!(stderr.contains("wrote standard output"), "{stderr}");
    assert!(
        !folder.path().join("-").exists(),
        "a file named - was written"
    );

    let (code, stdout, stderr) = run_in(
        folder.path(),
        &["compile", "fill.cu", "--arch", "90", "-o", "-"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        &stdout[..4],
        b"\x7fELF",
        "the cubin goes to standard output when asked"
    );
}

#[test]
fn a_source_without_kernels_compiles_with_a_warning() {
    let folder = sources(&[("empty.cu", "")]);
    let (code, stdout, stderr) = run_in(folder.path(), &["compile", "empty.cu", "--arch", "sm_90"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.starts_with("warning: cudyn compile: empty.cu defines no kernel"),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&stdout).contains(", 0 kernels)"));
    assert!(folder.path().join("empty.cubin").exists());
}

#[test]
fn contradictory_targets_are_refused_saying_what_to_pass() {
    let folder = sources(&[("fill.cu", FILL)]);
    for (args, expected) in [
        (
            &["--arch", "sm_80,sm_90", "--emit", "cubin"][..],
            "use --emit fatbin",
        ),
        (
            &["--arch", "compute_90", "--emit", "cubin"][..],
            "pass --arch sm_90",
        ),
        (&["--arch", "sm_9x"][..], "sm_9x"),
    ] {
        let (code, stdout, stderr) =
            run_in(folder.path(), &[&["compile", "fill.cu"], args].concat());
        assert_ne!(code, Some(0), "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    assert!(!folder.path().join("fill.cubin").exists());
}

#[test]
fn a_missing_file_is_an_error_with_its_cause() {
    let folder = sources(&[]);
    let (code, _, stderr) = run_in(folder.path(), &["compile", "gone.cu", "--arch", "90"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr.lines().collect::<Vec<_>>(),
        [
            "error: cudyn compile: cannot read gone.cu",
            "  caused by: No such file or directory (os error 2)"
        ]
    );
}

#[test]
fn help_documents_output_naming_and_exit_status() {
    let (code, stdout, _) = run_in(Path::new("."), &["compile", "--help"]);
    assert_eq!(code, Some(0));
    let help = String::from_utf8(stdout).unwrap();
    for section in [
        "Output naming:",
        "-o - writes the code to standard output",
        "Exit status:",
    ] {
        assert!(help.contains(section), "{help}");
    }
}

#[test]
fn json_reports_a_failure_with_its_error_and_the_others_still_compile() {
    let folder = sources(&[("fill.cu", FILL), ("broken.cu", "__global__ void k( {}\n")]);
    let (code, stdout, stderr) = run_in(
        folder.path(),
        &[
            "compile",
            "fill.cu",
            "broken.cu",
            "--arch",
            "sm_90",
            "--json",
        ],
    );
    assert_eq!(code, Some(1), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
    assert_eq!(json[0]["output"], "fill.cubin");
    assert!(json[0].get("error").is_none());
    let failed = &json[1];
    assert_eq!(failed["file"], "broken.cu");
    assert!(failed.get("output").is_none() && failed.get("bytes").is_none());
    let error = failed["error"].as_str().unwrap();
    assert!(
        error.contains("nvrtcCompileProgram") && error.contains("broken.cu(1)"),
        "{error}"
    );
    assert!(folder.path().join("fill.cubin").exists());
    assert!(!folder.path().join("broken.cubin").exists());
}

#[test]
fn a_folder_named_with_a_slash_is_made_and_reports_follow_the_files_order() {
    let names: Vec<String> = (0..6).map(|n| format!("k{n}.cu")).collect();
    let texts: Vec<String> = (0..6)
        .map(|n| FILL.replace("fill", &format!("fill{n}")))
        .collect();
    let files: Vec<(&str, &str)> = names
        .iter()
        .map(String::as_str)
        .zip(texts.iter().map(String::as_str))
        .collect();
    let folder = sources(&files);
    let mut args = vec!["compile", "--arch", "sm_90", "-o", "out/new/"];
    args.extend(names.iter().map(String::as_str));
    let (code, stdout, stderr) = run_in(folder.path(), &args);
    assert_eq!(code, Some(0), "{stderr}");
    let written: Vec<String> = String::from_utf8(stdout)
        .unwrap()
        .lines()
        .map(|line| line.split(' ').nth(1).unwrap().to_owned())
        .collect();
    let expected: Vec<String> = (0..6).map(|n| format!("out/new/k{n}.cubin")).collect();
    assert_eq!(written, expected);
    for output in &expected {
        assert!(folder.path().join(output).is_file(), "{output}");
    }
}

/// The kernels of cudyn's own tests that include CUDA's headers (cuda_fp16.h, cooperative groups,
/// cuda::std, CUB).
const HEADER_KERNELS: [(&str, &str); 4] = [
    (
        "half_bf16_axpy.cu",
        include_str!("kernels/half_bf16_axpy.cu"),
    ),
    (
        "grid_sum_cooperative.cu",
        include_str!("kernels/grid_sum_cooperative.cu"),
    ),
    (
        "complex_multiply.cu",
        include_str!("kernels/complex_multiply.cu"),
    ),
    ("cub_block_sum.cu", include_str!("kernels/cub_block_sum.cu")),
];

#[test]
fn cudas_own_headers_need_no_include_flag_and_the_opt_out_names_the_missing_one() {
    let folder = sources(&HEADER_KERNELS);
    let names: Vec<&str> = HEADER_KERNELS.iter().map(|(name, _)| *name).collect();
    let mut args = vec!["compile", "--arch", "sm_90", "--json"];
    args.extend(&names);
    let (code, stdout, stderr) = run_in(folder.path(), &args);
    assert_eq!(code, Some(0), "{stderr}");
    let reports: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
    for (report, name) in reports.as_array().unwrap().iter().zip(&names) {
        assert_eq!(report["file"], *name, "{report}");
        assert_eq!(report["kernels"], 1, "{report}");
        let stem = name.trim_end_matches(".cu");
        assert!(folder.path().join(format!("{stem}.cubin")).is_file());
    }

    let (code, _, stderr) = run_in(
        folder.path(),
        &[
            "compile",
            "--arch",
            "sm_90",
            "--no-default-includes",
            "complex_multiply.cu",
        ],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("the header `cuda/std/complex` was not found"),
        "{stderr}"
    );
    assert!(stderr.contains("nvidia-cuda-cccl"), "{stderr}");
}

/// The kernel names of a fatbin's SASS entries, sorted, each once.
fn fatbin_kernels(path: &Path) -> Vec<String> {
    let bytes = std::fs::read(path).unwrap();
    let inspection = cudyn::Image::new(bytes).unwrap().inspect().unwrap();
    let mut names = Vec::new();
    for module in inspection.modules() {
        if let cudyn::inspect::Module::Cubin(cubin) = module {
            names.extend(cubin.kernels.iter().map(|kernel| kernel.name.clone()));
        }
    }
    names.sort();
    names.dedup();
    names
}

/// Files and targets go to the compile workers as one batch: every file's fatbin must be made of
/// its own results, also after a file in the middle fails (its results still taken in order).
#[test]
fn a_batch_of_files_with_a_failure_in_the_middle_keeps_each_files_own_results() {
    let files = [
        ("first.cu", FILL.replace("fill", "first")),
        ("broken.cu", "__global__ void k( {}\n".to_owned()),
        ("second.cu", FILL.replace("fill", "second")),
        ("third.cu", FILL.replace("fill", "third")),
    ];
    let named: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let folder = sources(&named);
    let mut args = vec!["compile"];
    args.extend(files.iter().map(|(name, _)| *name));
    args.extend(["--arch", "sm_80,sm_90", "--no-cache"]);
    let (code, _, stderr) = run_in(folder.path(), &args);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("broken.cu(1)"), "{stderr}");
    assert!(!folder.path().join("broken.fatbin").exists());
    for name in ["first", "second", "third"] {
        let kernels = fatbin_kernels(&folder.path().join(format!("{name}.fatbin")));
        assert_eq!(kernels, [name], "{name}.fatbin");
    }
}
