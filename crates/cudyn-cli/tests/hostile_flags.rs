//! Command lines that contradict themselves or carry malformed values: each is a usage error
//! (exit status 2), said on standard error in one place whatever `--json` asks, before anything
//! runs or is written. And reports that say what was built. Needs NVRTC and nvJitLink
//! (scripts/cuda-wheels, then activate the venv).

mod common;
mod hostile;

use hostile::{stderr, Fixture};

/// Usage errors, each with a piece of what standard error must say.
const USAGE: &[(&[&str], &str)] = &[
    (
        &[
            "compile",
            "k.cu",
            "--emit",
            "cubin",
            "--arch",
            "sm_80,sm_90",
        ],
        "--emit cubin makes code for one architecture",
    ),
    (
        &["compile", "k.cu", "--emit", "ptx", "--arch", "sm_80,sm_90"],
        "--emit ptx makes code for one architecture",
    ),
    (
        &["compile", "k.cu", "--emit", "ltoir", "--arch", "compute_90"],
        "compute_90 is a virtual one",
    ),
    (
        &["compile", "k.cu", "--arch", "sm_90,sm_90"],
        "--arch names sm_90 twice",
    ),
    (
        &["compile", "k.cu", "--arch", "90,sm_90"],
        "--arch names sm_90 twice",
    ),
    (
        &["compile", "k.cu", "--arch", "sm_90", "--arch", "9.0"],
        "--arch names sm_90 twice",
    ),
    (
        &["compile", "k.cu", "--arch", "sm_90", "-D", ""],
        "`` is not a macro definition",
    ),
    (
        &["compile", "k.cu", "--arch", "sm_90", "-D", "=1"],
        "`=1` is not a macro definition",
    ),
    (
        &["compile", "k.cu", "--arch", "sm_90", "-D", "1X"],
        "`1X` is not a macro definition",
    ),
    (
        &["compile", "k.cu", "--arch", "sm_90", "-D", "A B"],
        "`A B` is not a macro definition",
    ),
    (
        &[
            "compile",
            "k.cu",
            "--arch",
            "sm_90",
            "-X=--gpu-architecture=sm_80",
        ],
        "--gpu-architecture is set by cudyn compile's --arch",
    ),
    (
        &["compile", "k.cu", "--arch", "sm_90", "-X=-arch=sm_80"],
        "-arch is set by cudyn compile's --arch",
    ),
    (
        &["compile", "k.cu", "--arch", "sm_90", "-X=-arch"],
        "-arch is set by cudyn compile's --arch",
    ),
    (
        &["compile", "k.cu", "--arch", "sm_90", "-X=-rdc=true"],
        "-rdc is set by cudyn compile's --rdc",
    ),
    (
        &[
            "compile",
            "k.cu",
            "--arch",
            "sm_90",
            "-X=--relocatable-device-code=true",
        ],
        "use --rdc instead",
    ),
    (
        &["compile", "k.cu", "--arch", "sm_90", "-X=-dlto"],
        "use --emit ltoir instead",
    ),
    (
        &["compile", "k.cu", "--arch", "sm_90", "--json", "-o", "-"],
        "--json and -o - both want standard output",
    ),
    (
        &["compile", "k.cu", "kernel.cu", "--arch", "sm_90", "-o", "-"],
        "-o - writes one output",
    ),
    (
        &[
            "compile",
            "k.cu",
            "kernel.cu",
            "--arch",
            "sm_90",
            "-o",
            "one.cubin",
        ],
        "is not a folder",
    ),
    (
        &["compile", "k.cu", "--arch", "sm_90", "-o", "k.cu"],
        "the output k.cu is the input k.cu",
    ),
    (
        &["compile", "k.cu", "k.cu", "--arch", "sm_90", "-o", "out/"],
        "two inputs would both be written",
    ),
    (
        &["compile", "k.cu", "--arch", "sm_90", "--emit", "elf"],
        "invalid value 'elf'",
    ),
    (&["compile", "k.cu", "--arch", "sm_9x"], "sm_9x"),
    (&["compile", "k.cu", "--arch", ""], "--arch"),
    (&["compile", "--arch", "sm_90"], "required"),
    (
        &[
            "link",
            "kernel.ltoir",
            "step.ltoir",
            "--lto",
            "--arch",
            "sm_90",
            "--json",
            "-o",
            "-",
        ],
        "--json and -o - both want standard output",
    ),
    (
        &[
            "link",
            "kernel.ltoir",
            "--lto",
            "--arch",
            "sm_90",
            "-o",
            "kernel.ltoir",
        ],
        "the output kernel.ltoir is the input kernel.ltoir",
    ),
    (
        &["link", "-", "-", "--lto", "--arch", "sm_90"],
        "standard input (-) is named twice",
    ),
    (&["link", "kernel.ltoir", "--lto", "-O", "4"], "-O"),
    (
        &["link", "kernel.ltoir", "--lto", "--time-limit", "0"],
        "is not a positive number of seconds",
    ),
    (
        &["link", "kernel.ltoir", "--lto", "--time-limit", "inf"],
        "is not a positive number of seconds",
    ),
    (&["inspect", "-", "-"], "standard input (-) is named twice"),
    (&["inspect", "--json", "--json", "k.cubin"], "--json"),
    (&["cache", "prune", "--max-bytes", "lots"], "is not a size"),
    (
        &["cache", "prune", "--max-bytes", "99999999999G"],
        "is too large",
    ),
    (&["cache", "clean"], "unrecognized subcommand"),
    (&["cache"], "Usage"),
    (&["completions", "tcsh"], "invalid value 'tcsh'"),
    (&["demo", "--elements", "-1"], "unexpected argument '-1'"),
    (
        &["demo", "--elements", "many"],
        "`many` is not a count of elements",
    ),
    (
        &["demo", "--elements", "0"],
        "`0` is not a count of elements from 1 to 1073741824",
    ),
    (
        &["demo", "--elements", "99999999999999999999"],
        "is not a count of elements",
    ),
    (&["doctor", "--gpu"], "unexpected argument"),
    (&["--arch", "sm_90"], "unexpected argument"),
];

#[test]
fn contradictory_or_malformed_command_lines_are_usage_errors_before_anything_runs() {
    let fixture = Fixture::new();
    for (args, says) in USAGE {
        let case = format!("{args:?}");
        let output = fixture.output(args);
        assert_eq!(output.status.code(), Some(2), "{case}: {output:?}");
        let text = stderr(&output);
        assert!(text.contains(says), "{case}: {text}");
        assert!(
            output.stdout.is_empty(),
            "{case} printed on standard output: {output:?}"
        );
    }
    // Nothing was written or made by any of them.
    for name in ["out", "one.cubin", "linked.cubin"] {
        assert!(!fixture.path(name).exists(), "{name} was made");
    }
}

#[test]
fn a_refused_or_failed_compile_makes_no_output_folder() {
    let fixture = Fixture::new();
    std::fs::write(
        fixture.path("bad.cu"),
        "__global__ void k() { undefined(); }\n",
    )
    .unwrap();
    for args in [
        &["compile", "missing.cu", "--arch", "sm_90", "-o", "made/"][..],
        &["compile", "bad.cu", "--arch", "sm_90", "-o", "made/"],
        &[
            "compile",
            "bad.cu",
            "k.cu",
            "--arch",
            "sm_90,sm_90",
            "-o",
            "made/",
        ],
        &[
            "compile",
            "k.cu",
            "--arch",
            "sm_90",
            "-X=--no-such-option",
            "-o",
            "made/deeper/",
        ],
    ] {
        let output = fixture.output(args);
        assert!(!output.status.success(), "{args:?}");
        assert!(
            !fixture.path("made").exists(),
            "{args:?} made the output folder"
        );
    }
    let output = fixture.output(&["compile", "k.cu", "--arch", "sm_90", "-o", "made/deeper/"]);
    assert!(output.status.success(), "{output:?}");
    assert!(fixture.path("made/deeper/k.cubin").is_file());
}

#[test]
fn function_like_macros_and_values_stay_allowed() {
    let fixture = Fixture::new();
    // Before, `-D ""` reached NVRTC as a bare -D, which read the next option as the macro:
    // "invalid macro definition: -I.../cccl". Function-like macros and values stay allowed.
    let output = fixture.output(&[
        "compile",
        "k.cu",
        "--arch",
        "sm_90",
        "-D",
        "MAX(a,b)=((a)>(b)?(a):(b))",
        "-D",
        "N=4",
        "-D",
        "FLAG",
        "-o",
        "defined.cubin",
    ]);
    assert!(output.status.success(), "{output:?}");
}

#[test]
fn reports_name_what_was_built() {
    let fixture = Fixture::new();
    let written = |args: &[&str]| {
        let output = fixture.output(args);
        assert!(output.status.success(), "{args:?}: {output:?}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let ltoir = written(&[
        "compile", "k.cu", "--arch", "sm_90", "--emit", "ltoir", "-o", "k2.ltoir",
    ]);
    assert!(
        ltoir.starts_with("wrote k2.ltoir (") && ltoir.ends_with("bytes of ltoir for sm_90)\n"),
        "{ltoir}"
    );
    assert!(
        !ltoir.contains("unknown") && !ltoir.contains("kernel(s)"),
        "{ltoir}"
    );
    let one = written(&["compile", "k.cu", "--arch", "sm_90", "-o", "one.cubin"]);
    assert!(
        one.ends_with("bytes of cubin for sm_90, 1 kernel)\n"),
        "{one}"
    );
    let two = written(&[
        "compile",
        "kernel.cu",
        "--arch",
        "sm_80,sm_90",
        "-o",
        "two.fatbin",
        "--rdc",
    ]);
    assert!(
        two.ends_with("bytes of fatbin for sm_80, sm_90, 1 kernel)\n"),
        "{two}"
    );
    let none = written(&["compile", "step.cu", "--arch", "sm_90", "-o", "none.cubin"]);
    assert!(none.ends_with(", 0 kernels)\n"), "{none}");
}
