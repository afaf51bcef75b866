//! The compile cache never answers with code built from an older header: for every kind of file
//! a program reads (beside the source, in the current folder, in an `-I` folder, nested,
//! included through a macro, behind `#pragma once`, tested with `__has_include`, shadowed by a
//! folder searched earlier), a compile through the cache after an edit is exactly what a
//! compile without the cache makes. Checked in this process, in a new process, on compile
//! workers and through `cudyn compile`; before each edit, the cache is shown to answer (or, for
//! the program it cannot key, to say why not). No GPU is needed; NVRTC comes from the CUDA
//! wheels.
//!
//! The edits are the hardest kind for a cache that trusts time stamps: the same size, and the
//! file's modification time set back to what it was.
//!
//! Its own test binary: it changes the process's working folder and its cache folder.

mod common;
mod worker_programs;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use cudyn::compile::{compile_batch, set_workers, BatchRun, CacheUse, Program, WorkerSetting};
use worker_programs::{programs, ARCH};

/// A program, the files it reads, and an edit of one of them.
struct Case {
    what: &'static str,
    /// The project's files, relative to its root; `KERNEL` stands for the kernel's text.
    files: &'static [(&'static str, &'static str)],
    /// The working folder, relative to the root.
    cwd: &'static str,
    /// The source as the program is named, relative to `cwd`.
    source: &'static str,
    include: &'static [&'static str],
    options: &'static [&'static str],
    /// The file written by the edit (relative to the root) and its new text.
    edit: (&'static str, &'static str),
    /// Why the cache cannot answer, when it cannot.
    uncacheable: Option<&'static str>,
}

/// A kernel whose code shows the size of a table the headers decide.
const KERNEL: &str = "__device__ int table[SIZE];\n\
    extern \"C\" __global__ void k(int *p) { p[threadIdx.x] = table[threadIdx.x] + (int)sizeof(table); }\n";

const CASES: &[Case] = &[
    Case {
        what: "beside the source, named by its path",
        files: &[("src/k.cu", "#include \"size.h\"\nKERNEL"), ("src/size.h", "#define SIZE 1024\n")],
        cwd: "",
        source: "src/k.cu",
        include: &[],
        options: &[],
        edit: ("src/size.h", "#define SIZE 2048\n"),
        uncacheable: None,
    },
    Case {
        what: "beside the source, a bare name compiled from its own folder",
        files: &[("src/k.cu", "#include \"size.h\"\nKERNEL"), ("src/size.h", "#define SIZE 1024\n")],
        cwd: "src",
        source: "k.cu",
        include: &[],
        options: &[],
        edit: ("src/size.h", "#define SIZE 2048\n"),
        uncacheable: None,
    },
    Case {
        what: "in the current folder, pre-included",
        files: &[("src/k.cu", "KERNEL"), ("size.h", "#define SIZE 1024\n")],
        cwd: "",
        source: "src/k.cu",
        include: &[],
        options: &["--pre-include=size.h"],
        edit: ("size.h", "#define SIZE 2048\n"),
        uncacheable: None,
    },
    Case {
        what: "in an -I folder",
        files: &[("src/k.cu", "#include <size.h>\nKERNEL"), ("inc/size.h", "#define SIZE 1024\n")],
        cwd: "",
        source: "src/k.cu",
        include: &["inc"],
        options: &[],
        edit: ("inc/size.h", "#define SIZE 2048\n"),
        uncacheable: None,
    },
    Case {
        what: "nested, beside the header that includes it",
        files: &[
            ("src/k.cu", "#include \"a.h\"\nKERNEL"),
            ("src/a.h", "#include \"sub/b.h\"\n"),
            ("src/sub/b.h", "#include \"size.h\"\n"),
            ("src/sub/size.h", "#define SIZE 1024\n"),
        ],
        cwd: "",
        source: "src/k.cu",
        include: &[],
        options: &[],
        edit: ("src/sub/size.h", "#define SIZE 2048\n"),
        uncacheable: None,
    },
    Case {
        what: "included through a macro",
        files: &[
            ("src/k.cu", "#define SIZE_H \"size.h\"\n#include SIZE_H\nKERNEL"),
            ("src/size.h", "#define SIZE 1024\n"),
        ],
        cwd: "",
        source: "src/k.cu",
        include: &[],
        options: &[],
        edit: ("src/size.h", "#define SIZE 2048\n"),
        uncacheable: Some("#include SIZE_H"),
    },
    Case {
        what: "behind #pragma once, included twice",
        files: &[
            ("src/k.cu", "#include \"size.h\"\n#include \"a.h\"\nKERNEL"),
            ("src/a.h", "#include \"size.h\"\n"),
            ("src/size.h", "#pragma once\n#define SIZE 1024\n"),
        ],
        cwd: "",
        source: "src/k.cu",
        include: &[],
        options: &[],
        edit: ("src/size.h", "#pragma once\n#define SIZE 2048\n"),
        uncacheable: None,
    },
    Case {
        what: "tested with __has_include, then made",
        files: &[(
            "src/k.cu",
            "#if __has_include(\"size.h\")\n#include \"size.h\"\n#else\n#define SIZE 1024\n#endif\nKERNEL",
        )],
        cwd: "",
        source: "src/k.cu",
        include: &[],
        options: &[],
        edit: ("src/size.h", "#define SIZE 2048\n"),
        uncacheable: None,
    },
    Case {
        what: "shadowed by a new file in a folder searched earlier",
        files: &[
            ("src/k.cu", "#include <size.h>\nKERNEL"),
            ("second/size.h", "#define SIZE 1024\n"),
            ("first/.keep", ""),
        ],
        cwd: "",
        source: "src/k.cu",
        include: &["first", "second"],
        options: &[],
        edit: ("first/size.h", "#define SIZE 2048\n"),
        uncacheable: None,
    },
];

/// How a compile is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    ThisProcess,
    NewProcess,
    Workers,
    Command,
}

const MODES: [Mode; 4] = [
    Mode::ThisProcess,
    Mode::NewProcess,
    Mode::Workers,
    Mode::Command,
];

/// Tells a child of this binary which case to compile, and in which mode (`case,mode`).
const CHILD: &str = "CUDYN_HEADER_EDIT_CHILD";

/// What a compile gave: its code, and how the cache served it.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    code: Vec<u8>,
    cache: String,
}

/// A case's project, copied for one mode.
struct Project {
    root: PathBuf,
    case: &'static Case,
    mode: Mode,
}

impl Project {
    fn new(parent: &Path, index: usize, mode: Mode) -> Project {
        let case = &CASES[index];
        let root = parent.join(format!("case{index}-{mode:?}"));
        let project = Project { root, case, mode };
        for (path, text) in case.files {
            project.write(path, text);
        }
        project
    }

    fn write(&self, path: &str, text: &str) {
        let path = self.root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        // Each mode compiles a source of its own, so that no mode finds another's entries.
        let kernel = format!("{KERNEL}// compiled by {:?}\n", self.mode);
        std::fs::write(&path, text.replace("KERNEL", &kernel)).unwrap();
        // Settled: old enough for cudyn to remember what it read of the file.
        set_modified(&path, SystemTime::now() - Duration::from_secs(3600));
    }

    fn cwd(&self) -> PathBuf {
        self.root.join(self.case.cwd)
    }

    /// The case's program, as the library states it (relative to `cwd()`).
    fn program(&self) -> Program {
        program_of(self.case, &self.cwd())
    }

    /// The edit, of the same size, with the file's modification time (if it existed) as before.
    fn edit(&self) {
        let (path, text) = self.case.edit;
        let path = self.root.join(path);
        let before = std::fs::metadata(&path).ok();
        if let Some(before) = &before {
            assert_eq!(before.len(), text.len() as u64, "{}", self.case.what);
        }
        std::fs::write(&path, text).unwrap();
        if let Some(before) = before {
            set_modified(&path, before.modified().unwrap());
        }
    }

    /// Compiles the case's program through the cache, in the project's mode.
    fn compile(&self, cache: &Path) -> Outcome {
        match self.mode {
            Mode::ThisProcess => {
                std::env::set_current_dir(self.cwd()).unwrap();
                outcome(self.program().compile().unwrap())
            }
            Mode::NewProcess => self.child(cache),
            Mode::Workers => {
                std::env::set_current_dir(self.cwd()).unwrap();
                set_workers(WorkerSetting::Executable(common::cudyn_binary()));
                let mut batch = vec![self.program()];
                batch.extend(programs(&format!("filler_{}", self.root.display()), 3));
                let mut done = compile_batch(&batch);
                assert!(
                    matches!(done.run, BatchRun::Workers { .. }),
                    "{:?}",
                    done.run
                );
                outcome(done.results.swap_remove(0).unwrap())
            }
            Mode::Command => self.command(cache),
        }
    }

    /// What compiling without the cache gives, in this process.
    fn reference(&self) -> Vec<u8> {
        std::env::set_current_dir(self.cwd()).unwrap();
        self.program().cache(false).compile().unwrap().into_code()
    }

    fn child(&self, cache: &Path) -> Outcome {
        let index = CASES.iter().position(|case| std::ptr::eq(case, self.case));
        let code = self.root.join("child.cubin");
        let run = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child", "--nocapture", "--test-threads=1"])
            .env(CHILD, format!("{}", index.unwrap()))
            .env("CUDYN_CACHE_DIR", cache)
            .env("CUDYN_HEADER_EDIT_CODE", &code)
            .current_dir(self.cwd())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(
            run.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let cache_use = stdout
            .lines()
            .find_map(|line| line.split_once("cache use: ").map(|(_, used)| used))
            .unwrap_or_else(|| panic!("the child said nothing of the cache: {stdout}"));
        Outcome {
            code: std::fs::read(code).unwrap(),
            cache: cache_use.to_owned(),
        }
    }

    fn command(&self, cache: &Path) -> Outcome {
        let out = self.root.join("command.cubin");
        let mut command = common::cudyn();
        command
            .args([
                "compile",
                self.case.source,
                "--arch",
                "sm_90",
                "--json",
                "-o",
            ])
            .arg(&out)
            .args(self.case.include.iter().map(|folder| format!("-I{folder}")))
            .args(
                self.case
                    .options
                    .iter()
                    .map(|option| format!("-X={option}")),
            )
            .env("CUDYN_CACHE_DIR", cache)
            .current_dir(self.cwd());
        let run = command.output().unwrap();
        assert!(run.status.success(), "{run:?}");
        let report: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
        let file = &report[0];
        let mut cache_use = file["cache"][0].as_str().unwrap().to_owned();
        if cache_use == "uncacheable" {
            let warnings = file["warnings"].to_string();
            cache_use = format!("uncacheable: {warnings}");
        }
        Outcome {
            code: std::fs::read(out).unwrap(),
            cache: cache_use,
        }
    }
}

/// The program of `case`, its source read from `cwd` (paths in it are relative to that folder).
fn program_of(case: &Case, cwd: &Path) -> Program {
    let source = std::fs::read_to_string(cwd.join(case.source)).unwrap();
    let mut program = Program::new(source).name(case.source).arch(ARCH);
    for folder in case.include {
        program = program.include(folder);
    }
    for option in case.options {
        program = program.option(*option);
    }
    program
}

fn set_modified(path: &Path, time: SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(time)
        .unwrap();
}

/// How the command's reports name a compile's use of the cache, with the reason when it could
/// not be used.
fn outcome(compiled: cudyn::compile::Compiled) -> Outcome {
    let cache = match compiled.cache_use() {
        CacheUse::Hit => "hit".to_owned(),
        CacheUse::Miss => "miss".to_owned(),
        CacheUse::Uncacheable(why) => format!("uncacheable: {why}"),
        other => format!("{other:?}"),
    };
    Outcome {
        code: compiled.into_code(),
        cache,
    }
}

/// Asserts what the cache did for a case: `expected` ("hit", "miss"), or, for a case it cannot
/// key, that it said so and why.
fn assert_cache(case: &Case, mode: Mode, outcome: &Outcome, expected: &str) {
    match case.uncacheable {
        Some(why) => assert!(
            outcome.cache.starts_with("uncacheable") && outcome.cache.contains(why),
            "{} ({mode:?}): {}",
            case.what,
            outcome.cache
        ),
        None => assert_eq!(outcome.cache, expected, "{} ({mode:?})", case.what),
    }
}

/// The process's cache folder, set once; held while a test uses the working folder.
fn this_process() -> std::sync::MutexGuard<'static, PathBuf> {
    static CACHE: std::sync::OnceLock<std::sync::Mutex<PathBuf>> = std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(|| {
        let folder = tempfile::tempdir().unwrap().keep();
        cudyn::cache::set_dir(&folder).unwrap();
        std::sync::Mutex::new(folder)
    });
    cache.lock().unwrap_or_else(|poison| poison.into_inner())
}

#[test]
fn a_compile_after_any_header_edit_is_what_a_compile_without_the_cache_makes() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let cwd = this_process();
    let global = cwd.clone();
    let work = tempfile::tempdir().unwrap();
    for mode in MODES {
        let cache = work.path().join(format!("cache-{mode:?}"));
        let cache = match mode {
            Mode::ThisProcess | Mode::Workers => global.clone(),
            Mode::NewProcess | Mode::Command => cache,
        };
        for index in 0..CASES.len() {
            let project = Project::new(work.path(), index, mode);
            let case = project.case;
            let before = project.reference();
            let first = project.compile(&cache);
            assert_cache(case, mode, &first, "miss");
            let second = project.compile(&cache);
            assert_cache(case, mode, &second, "hit");
            assert_eq!(first.code, before, "{} ({mode:?})", case.what);
            assert_eq!(second.code, before, "{} ({mode:?})", case.what);

            project.edit();
            let after = project.reference();
            assert_ne!(after, before, "{}: the edit changes nothing", case.what);
            let edited = project.compile(&cache);
            assert_cache(case, mode, &edited, "miss");
            assert_eq!(
                edited.code, after,
                "{} ({mode:?}): the cache answered with code of the old header",
                case.what
            );
        }
    }
}

#[test]
fn a_compile_that_cannot_find_its_header_fails_though_one_like_it_was_cached() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let _cwd = this_process();
    let work = tempfile::tempdir().unwrap();
    let source = format!("#include \"size.h\"\n{KERNEL}");
    for folder in ["src", "elsewhere"] {
        std::fs::create_dir(work.path().join(folder)).unwrap();
        std::fs::write(work.path().join(folder).join("k.cu"), &source).unwrap();
    }
    std::fs::write(work.path().join("src/size.h"), "#define SIZE 1024\n").unwrap();
    let cache = work.path().join("cache");
    let compile = |folder: &str, cached: bool| {
        std::env::set_current_dir(work.path().join(folder)).unwrap();
        Program::new(&source)
            .name("k.cu")
            .arch(ARCH)
            .cache(cached)
            .compile()
    };
    let command = |folder: &str| {
        common::cudyn()
            .args(["compile", "k.cu", "--arch", "sm_90", "-o", "k.cubin"])
            .env("CUDYN_CACHE_DIR", &cache)
            .current_dir(work.path().join(folder))
            .output()
            .unwrap()
    };
    assert!(compile("src", true).is_ok());
    assert!(command("src").status.success());
    let uncached = compile("elsewhere", false).unwrap_err().to_string();
    assert!(uncached.contains("size.h"), "{uncached}");
    let cached = compile("elsewhere", true).unwrap_err().to_string();
    assert_eq!(cached, uncached);
    let run = command("elsewhere");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        !run.status.success() && stderr.contains("cannot open source file \"size.h\""),
        "{stderr}"
    );
}

/// A compile of the case `CHILD` names, in a new process, through the process's cache: writes
/// the code where asked and prints how the cache served it.
#[test]
fn child() {
    let Some(index) = std::env::var_os(CHILD) else {
        return;
    };
    let index: usize = index.to_str().unwrap().parse().unwrap();
    let program = program_of(&CASES[index], &std::env::current_dir().unwrap());
    let outcome = outcome(program.compile().unwrap());
    std::fs::write(
        std::env::var_os("CUDYN_HEADER_EDIT_CODE").unwrap(),
        &outcome.code,
    )
    .unwrap();
    println!("cache use: {}", outcome.cache);
}
