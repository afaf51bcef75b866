//! cudyn's include search agrees with NVRTC's: for project trees laid out as real programs lay
//! theirs out (headers beside the source, nested folders, `-I` folders that shadow each other,
//! `#pragma once`, `__has_include`, `#include_next`, options that add folders or pre-include a
//! file) and for the test kernels that include CUDA's own headers, the files
//! `Program::dependencies` names are exactly those `cudyn compile --no-cache` opens while NVRTC
//! compiles, as a library preloaded into it records them (`open_log/open_log.c`, built here with
//! the system's C compiler: it notes every file opened for reading through the C library, which
//! is how NVRTC opens files). No GPU is needed; NVRTC comes from the CUDA wheels.
//!
//! Its own test binary: it changes the process's working folder.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use cudyn::compile::Program;

/// A compile as the command line states it, and the same program for the library.
struct Case {
    what: &'static str,
    /// Files of the project, relative to its root.
    files: &'static [(&'static str, &'static str)],
    /// The working folder, relative to the root.
    cwd: &'static str,
    /// The source as named on the command line, relative to `cwd`.
    source: &'static str,
    /// `-I` folders, relative to `cwd`.
    include: &'static [&'static str],
    /// Raw NVRTC options (`-X`).
    options: &'static [&'static str],
}

const KERNEL: &str = "extern \"C\" __global__ void k(int *p) { *p = VALUE; }\n";

const CASES: &[Case] = &[
    Case {
        what: "a sample-like project named by its path from the project's root",
        files: &[
            (
                "src/scan.cu",
                "#include \"common/helper.h\"\n#include <util/math.h>\n#include \"common/helper.h\"\n\
                 #include <cuda_fp16.h>\n\
                 #if __has_include(\"optional.h\")\n#error not here\n#endif\n\
                 extern \"C\" __global__ void k(int *p) { *p = VALUE + twice(1); }\n",
            ),
            (
                "src/common/helper.h",
                "#pragma once\n#include \"detail.h\"\n#include \"../config.h\"\n",
            ),
            ("src/common/detail.h", "#define DETAIL 1\n"),
            ("src/config.h", "#define VALUE 3\n"),
            ("include/util/math.h", "__device__ int twice(int x) { return 2 * x; }\n"),
        ],
        cwd: "",
        source: "src/scan.cu",
        include: &["include"],
        options: &[],
    },
    Case {
        what: "a bare name compiled from its own folder",
        files: &[
            ("src/k.cu", "#include \"value.h\"\n#include \"sub/more.h\"\nKERNEL"),
            ("src/value.h", "#define VALUE 1\n"),
            ("src/sub/more.h", "#include \"inner.h\"\n"),
            ("src/sub/inner.h", "#define INNER 1\n"),
        ],
        cwd: "src",
        source: "k.cu",
        include: &[],
        options: &[],
    },
    Case {
        what: "-I folders that shadow each other, nested quoted names beside their includer",
        files: &[
            ("k.cu", "#include <a.h>\n#include \"b.h\"\nKERNEL"),
            ("first/a.h", "#include \"c.h\"\n"),
            ("first/c.h", "#define VALUE 2\n"),
            ("second/a.h", "#error shadowed\n"),
            ("second/b.h", "#define B 1\n"),
            ("second/c.h", "#error beside the includer comes first\n"),
        ],
        cwd: "",
        source: "k.cu",
        include: &["first", "second"],
        options: &[],
    },
    Case {
        what: "#include_next, a raw -I option and a pre-included file",
        files: &[
            ("app/k.cu", "#include <n.h>\n#include <raw.h>\nKERNEL"),
            ("wrap/n.h", "#include_next <n.h>\n#define VALUE N\n"),
            ("real/n.h", "#define N 5\n"),
            ("extra/raw.h", "#define RAW 1\n"),
            ("app/pre.h", "#define PRE 1\n"),
        ],
        cwd: "app",
        source: "k.cu",
        include: &["../wrap", "../real"],
        options: &["-I../extra", "--pre-include=pre.h"],
    },
];

/// Test kernels that include CUDA's headers, as real programs do.
const CUDA_KERNELS: &[(&str, &str)] = &[
    (
        "cub_block_sum.cu",
        include_str!("../../cudyn/tests/kernels/cub_block_sum.cu"),
    ),
    (
        "half_bf16_axpy.cu",
        include_str!("../../cudyn/tests/kernels/half_bf16_axpy.cu"),
    ),
    (
        "grid_sum_cooperative.cu",
        include_str!("../../cudyn/tests/kernels/grid_sum_cooperative.cu"),
    ),
    (
        "complex_multiply.cu",
        include_str!("../../cudyn/tests/kernels/complex_multiply.cu"),
    ),
];

#[test]
fn the_files_cudyn_names_are_the_files_nvrtc_opens() {
    let root = tempfile::tempdir().unwrap();
    for case in CASES {
        let project = root.path().join(case.what.replace(' ', "_"));
        for (path, text) in case.files {
            let path = project.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text.replace("KERNEL", KERNEL)).unwrap();
        }
        let cwd = project.join(case.cwd);
        std::env::set_current_dir(&cwd).unwrap();
        let mut program =
            Program::new(std::fs::read_to_string(case.source).unwrap()).name(case.source);
        for folder in case.include {
            program = program.include(folder);
        }
        for option in case.options {
            program = program.option(*option);
        }
        let found = program.dependencies();
        assert_eq!(found.unknown, None, "{}", case.what);
        let ours: BTreeSet<PathBuf> = found
            .files
            .iter()
            .map(|file| std::fs::canonicalize(cwd.join(file)).unwrap())
            .collect();
        let mut args: Vec<String> = vec![case.source.into()];
        args.extend(case.include.iter().map(|folder| format!("-I{folder}")));
        args.extend(case.options.iter().map(|option| format!("-X={option}")));
        let opened = opened_by_nvrtc(&cwd, &args);
        let source = std::fs::canonicalize(cwd.join(case.source)).unwrap();
        let project = std::fs::canonicalize(&project).unwrap();
        let theirs: BTreeSet<PathBuf> = opened
            .iter()
            .filter(|path| path.starts_with(&project) && **path != source)
            .cloned()
            .collect();
        assert_eq!(ours, theirs, "{}", case.what);
        assert!(!ours.is_empty(), "{}", case.what);
    }
}

#[test]
fn programs_of_cudas_headers_name_the_headers_nvrtc_opens_first() {
    let work = tempfile::tempdir().unwrap();
    for (kernel, text) in CUDA_KERNELS {
        let source = work.path().join(kernel);
        std::fs::write(&source, text).unwrap();
        let found = Program::new(*text)
            .name(source.to_string_lossy())
            .dependencies();
        assert_eq!(found.unknown, None, "{kernel}");
        assert!(found.files.is_empty(), "{kernel}: {:?}", found.files);
        assert!(!found.cuda_headers.is_empty(), "{kernel}");
        let opened = opened_by_nvrtc(work.path(), &[source.to_string_lossy().into_owned()]);
        for header in &found.cuda_headers {
            let header = std::fs::canonicalize(header).unwrap();
            assert!(
                opened.contains(&header),
                "{kernel}: {} was not opened by NVRTC",
                header.display()
            );
        }
    }
}

/// The files opened for reading while `cudyn compile --no-cache ARGS` runs in `cwd`, as
/// absolute, canonical paths.
fn opened_by_nvrtc(cwd: &Path, args: &[String]) -> BTreeSet<PathBuf> {
    let log = cwd.join("opened.log");
    let run = common::cudyn()
        .args([
            "compile",
            "--no-cache",
            "--arch",
            "sm_90",
            "-o",
            "out.cubin",
        ])
        .args(args)
        .env("LD_PRELOAD", open_log())
        .env("OPEN_LOG", &log)
        .current_dir(cwd)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "cudyn compile {args:?}: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let text = std::fs::read_to_string(&log).unwrap();
    std::fs::remove_file(&log).unwrap();
    let opened: BTreeSet<PathBuf> = text
        .lines()
        .filter_map(|line| std::fs::canonicalize(cwd.join(line)).ok())
        .collect();
    let source = std::fs::canonicalize(cwd.join(&args[0])).unwrap();
    assert!(
        opened.contains(&source),
        "the preloaded library did not see the source read:\n{text}"
    );
    opened
}

/// The preloaded library that logs opened files, built once from `open_log/open_log.c`.
fn open_log() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let folder = tempfile::tempdir().unwrap().keep();
        let source = folder.join("open_log.c");
        std::fs::write(&source, include_str!("open_log/open_log.c")).unwrap();
        let library = folder.join("open_log.so");
        let built = Command::new("cc")
            .args(["-shared", "-fPIC", "-O1", "-o"])
            .arg(&library)
            .arg(&source)
            .arg("-ldl")
            .output()
            .unwrap_or_else(|error| panic!("no C compiler (cc) to build open_log.c: {error}"));
        assert!(built.status.success(), "{built:?}");
        library
    })
}
