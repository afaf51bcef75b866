//! Command lines that contradict themselves or carry malformed values: each is a usage error
//! (exit status 2), said on standard error in one place whatever `--json` asks, before anything
//! runs or is written. And reports that say what was built. Needs NVRTC and nvJitLink
//! (scripts/cuda-wheels, then activate the venv).

mod common;
mod hostile;

use hostile::{stderr, words, Fixture};

/// Usage errors, each with a piece of what standard error must say.
const USAGE: &[(&str, &str)] = &[
    (
        "compile k.cu --emit cubin --arch sm_80,sm_90",
        "--emit cubin makes code for one architecture",
    ),
    (
        "compile k.cu --emit ptx --arch sm_80,sm_90",
        "--emit ptx makes code for one architecture",
    ),
    (
        "compile k.cu --emit ltoir --arch compute_90",
        "compute_90 is a virtual one",
    ),
    (
        "compile k.cu --arch sm_90,sm_90",
        "--arch names sm_90 twice",
    ),
    ("compile k.cu --arch 90,sm_90", "--arch names sm_90 twice"),
    (
        "compile k.cu --arch sm_90 --arch 9.0",
        "--arch names sm_90 twice",
    ),
    (
        "compile k.cu --arch sm_90 -D ''",
        "`` is not a macro definition",
    ),
    (
        "compile k.cu --arch sm_90 -D =1",
        "`=1` is not a macro definition",
    ),
    (
        "compile k.cu --arch sm_90 -D 1X",
        "`1X` is not a macro definition",
    ),
    (
        "compile k.cu --arch sm_90 -D 'A B'",
        "`A B` is not a macro definition",
    ),
    (
        "compile k.cu --arch sm_90 -X=--gpu-architecture=sm_80",
        "--gpu-architecture is set by cudyn compile's --arch",
    ),
    (
        "compile k.cu --arch sm_90 -X=-arch=sm_80",
        "-arch is set by cudyn compile's --arch",
    ),
    (
        "compile k.cu --arch sm_90 -X=-arch",
        "-arch is set by cudyn compile's --arch",
    ),
    (
        "compile k.cu --arch sm_90 -X=-rdc=true",
        "-rdc is set by cudyn compile's --rdc",
    ),
    (
        "compile k.cu --arch sm_90 -X=--relocatable-device-code=true",
        "use --rdc instead",
    ),
    (
        "compile k.cu --arch sm_90 -X=-dlto",
        "use --emit ltoir instead",
    ),
    (
        "compile k.cu --arch sm_90 --json -o -",
        "--json and -o - both want standard output",
    ),
    (
        "compile k.cu kernel.cu --arch sm_90 -o -",
        "-o - writes one output",
    ),
    (
        "compile k.cu kernel.cu --arch sm_90 -o one.cubin",
        "is not a folder",
    ),
    (
        "compile k.cu --arch sm_90 -o k.cu",
        "the output k.cu is the input k.cu",
    ),
    (
        "compile k.cu k.cu --arch sm_90 -o out/",
        "two inputs would both be written",
    ),
    (
        "compile k.cu --arch sm_90 --emit elf",
        "invalid value 'elf'",
    ),
    ("compile k.cu --arch sm_9x", "sm_9x"),
    ("compile k.cu --arch ''", "--arch"),
    ("compile --arch sm_90", "required"),
    (
        "link kernel.ltoir step.ltoir --lto --arch sm_90 --json -o -",
        "--json and -o - both want standard output",
    ),
    (
        "link kernel.ltoir --lto --arch sm_90 -o kernel.ltoir",
        "the output kernel.ltoir is the input kernel.ltoir",
    ),
    (
        "link - - --lto --arch sm_90",
        "standard input (-) is named twice",
    ),
    ("link kernel.ltoir --lto -O 4", "-O"),
    (
        "link kernel.ltoir --lto --time-limit 0",
        "is not a positive number of seconds",
    ),
    (
        "link kernel.ltoir --lto --time-limit inf",
        "is not a positive number of seconds",
    ),
    ("inspect - -", "standard input (-) is named twice"),
    ("inspect --json --json k.cubin", "--json"),
    ("cache prune --max-bytes lots", "is not a size"),
    ("cache prune --max-bytes 99999999999G", "is too large"),
    ("cache clean", "unrecognized subcommand"),
    ("cache", "Usage"),
    ("completions tcsh", "invalid value 'tcsh'"),
    ("demo --elements -1", "unexpected argument '-1'"),
    ("demo --elements many", "`many` is not a count of elements"),
    (
        "demo --elements 0",
        "`0` is not a count of elements from 1 to 1073741824",
    ),
    (
        "demo --elements 99999999999999999999",
        "is not a count of elements",
    ),
    ("doctor --gpu", "unexpected argument"),
    ("--arch sm_90", "unexpected argument"),
];

#[test]
fn contradictory_or_malformed_command_lines_are_usage_errors_before_anything_runs() {
    let fixture = Fixture::new();
    for (line, says) in USAGE {
        let case = format!("cudyn {line}");
        let output = fixture.output(&words(line));
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
    for line in [
        "compile missing.cu --arch sm_90 -o made/",
        "compile bad.cu --arch sm_90 -o made/",
        "compile bad.cu k.cu --arch sm_90,sm_90 -o made/",
        "compile k.cu --arch sm_90 -X=--no-such-option -o made/deeper/",
    ] {
        let output = fixture.output(&words(line));
        assert!(!output.status.success(), "{line}");
        assert!(
            !fixture.path("made").exists(),
            "{line} made the output folder"
        );
    }
    let output = fixture.output(&words("compile k.cu --arch sm_90 -o made/deeper/"));
    assert!(output.status.success(), "{output:?}");
    assert!(fixture.path("made/deeper/k.cubin").is_file());
}

#[test]
fn function_like_macros_and_values_stay_allowed() {
    let fixture = Fixture::new();
    // Before, `-D ""` reached NVRTC as a bare -D, which read the next option as the macro:
    // "invalid macro definition: -I.../cccl". Function-like macros and values stay allowed.
    let output = fixture.output(&words(
        "compile k.cu --arch sm_90 -D 'MAX(a,b)=((a)>(b)?(a):(b))' -D N=4 -D FLAG -o defined.cubin",
    ));
    assert!(output.status.success(), "{output:?}");
}

#[test]
fn reports_name_what_was_built() {
    let fixture = Fixture::new();
    let written = |line: &str| {
        let output = fixture.output(&words(line));
        assert!(output.status.success(), "{line}: {output:?}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let ltoir = written("compile k.cu --arch sm_90 --emit ltoir -o k2.ltoir");
    assert!(
        ltoir.starts_with("wrote k2.ltoir (") && ltoir.ends_with("bytes of ltoir for sm_90)\n"),
        "{ltoir}"
    );
    assert!(
        !ltoir.contains("unknown") && !ltoir.contains("kernel(s)"),
        "{ltoir}"
    );
    let one = written("compile k.cu --arch sm_90 -o one.cubin");
    assert!(
        one.ends_with("bytes of cubin for sm_90, 1 kernel)\n"),
        "{one}"
    );
    let two = written("compile kernel.cu --arch sm_80,sm_90 -o two.fatbin --rdc");
    assert!(
        two.ends_with("bytes of fatbin for sm_80, sm_90, 1 kernel)\n"),
        "{two}"
    );
    let none = written("compile step.cu --arch sm_90 -o none.cubin");
    assert!(none.ends_with(", 0 kernels)\n"), "{none}");
}

/// `run --check` cases on `k.cubin` (sm_90) and `bounded.cu`: the extra arguments, the status
/// and what standard error says.
const RUN_CHECKS: &[(&str, i32, &str)] = &[
    (
        "--block 5000",
        4,
        "a block of 5000 threads is too large: the device allows 1024",
    ),
    (
        "--block 1,1,100",
        4,
        "block dimension z = 100 exceeds the device's limit of 64",
    ),
    (
        "--block 2048,1,1",
        4,
        "a block of 2048 threads is too large",
    ),
    (
        "--block 1 --grid 2147483648",
        4,
        "grid dimension x = 2147483648 exceeds",
    ),
    (
        "--block 1 --grid 1,65536",
        4,
        "grid dimension y = 65536 exceeds the device's limit of 65535",
    ),
    (
        "--block 1 --shared 999999999",
        4,
        "999999999 bytes of dynamic shared memory exceed the device's limit of 232448",
    ),
    (
        "--block 1 --shared 232449",
        4,
        "(checked against sm_90's limits)",
    ),
    ("--block 1 --grid 0", 2, "`0` in `0` is not a dimension"),
    ("--block 1 --grid 4294967296", 2, "is not a dimension"),
    ("--block 1 --shared -1", 2, "unexpected argument '-1'"),
    ("--block 1 --repeat 0", 2, "--repeat"),
    (
        "--block 1 --arg f32:1e999",
        2,
        "`1e999` is too large for f32, whose largest finite value is 3.4028235e38; write inf",
    ),
    (
        "--block 1 --arg f64:-1e400",
        2,
        "`-1e400` is too large for f64",
    ),
    (
        "--block 1 --arg buf:f32:4=1e39",
        2,
        "`1e39` is too large for f32",
    ),
    (
        "--block 1 --arg u8:256",
        2,
        "`256` is not a value of type u8",
    ),
    ("--block 1 --arg i32:1.5", 2, "is not a value of type i32"),
    (
        "--block 1 --out 0=x.bin",
        2,
        "--out 0=x.bin: argument 0 is not given",
    ),
    (
        "--block 1 --arg buf:f32:1 --arg f32:1",
        4,
        "the kernel takes 1 parameters but 2 arguments were given",
    ),
];

#[test]
fn run_check_holds_the_grid_block_and_shared_memory_to_the_architectures_limits() {
    let fixture = Fixture::new();
    for (extra, status, says) in RUN_CHECKS {
        let mut line = "run k.cubin k --check".to_owned();
        if !extra.contains("--grid") {
            line.push_str(" --grid 1");
        }
        if !extra.contains("--arg") && !extra.contains("--out") {
            line.push_str(" --arg buf:f32:1");
        }
        let args = words(&format!("{line} {extra}"));
        let output = fixture.output(&args);
        assert_eq!(output.status.code(), Some(*status), "{extra:?}: {output:?}");
        assert!(
            stderr(&output).contains(says),
            "{extra:?}: {}",
            stderr(&output)
        );
        assert!(
            output.stdout.is_empty(),
            "{extra:?} said the arguments match"
        );
    }
    // Infinity written as one is a value like any other; the limits hold to the last unit.
    std::fs::write(
        fixture.path("scalar.cu"),
        "extern \"C\" __global__ void s(float v) {}\n",
    )
    .unwrap();
    for extra in [
        "--arg f32:inf --block 1024 --grid 1",
        "--arg f32:-Infinity --block 32,32 --grid 2147483647,65535,65535",
        "--arg f32:1 --block 1 --shared 232448 --grid 1",
    ] {
        let line = format!("run scalar.cu s --check --arch sm_90 {extra}");
        let output = fixture.output(&words(&line));
        assert!(output.status.success(), "{extra:?}: {output:?}");
        assert!(
            String::from_utf8_lossy(&output.stdout)
                .starts_with("the arguments match the 1 parameter of s in scalar.cu"),
            "{output:?}"
        );
    }
}

#[test]
fn run_check_holds_a_launch_to_the_kernels_own_limits_and_the_named_architecture() {
    let fixture = Fixture::new();
    std::fs::write(
        fixture.path("bounded.cu"),
        "extern \"C\" __global__ void __launch_bounds__(128) b(float *p) {\n\
         __shared__ float tile[10000]; tile[threadIdx.x] = p[threadIdx.x]; __syncthreads();\n\
         p[threadIdx.x] = tile[127 - threadIdx.x]; }\n",
    )
    .unwrap();
    let check = |arch: &str, extra: &[&str]| {
        let mut args = vec![
            "run",
            "bounded.cu",
            "b",
            "--check",
            "--arch",
            arch,
            "--grid",
            "1",
            "--arg",
            "buf:f32:128",
        ];
        args.extend_from_slice(extra);
        fixture.output(&args)
    };
    let bounded = check("sm_90", &["--block", "256"]);
    assert_eq!(bounded.status.code(), Some(4), "{bounded:?}");
    assert!(
        stderr(&bounded).contains("a block of 256 threads is too large for this kernel")
            && stderr(&bounded).contains("allows 128 per block"),
        "{bounded:?}"
    );
    assert!(check("sm_90", &["--block", "128"]).status.success());
    // The static shared memory (40000 bytes and what the compiler adds) leaves the rest of
    // 232448 bytes for the dynamic on sm_90, and of 166912 on sm_80.
    for (arch, limit) in [("sm_90", 232448), ("sm_80", 166912)] {
        let cubin = format!("bounded_{arch}.cubin");
        let compiled = fixture.output(&["compile", "bounded.cu", "--arch", arch, "-o", &cubin]);
        assert!(compiled.status.success(), "{compiled:?}");
        let inspected = fixture.output(&["inspect", "--json", &cubin]);
        let json: serde_json::Value = serde_json::from_slice(&inspected.stdout).unwrap();
        let fixed = json[0]["inspection"]["contents"]["cubin"]["kernels"][0]["shared_bytes"]
            .as_u64()
            .unwrap();
        assert!(fixed >= 40000, "{json}");
        let room = limit - fixed;
        let over = check(
            arch,
            &["--block", "128", "--shared", &(room + 1).to_string()],
        );
        assert_eq!(over.status.code(), Some(4), "{arch}: {over:?}");
        assert!(
            stderr(&over).contains(&format!("exceed the device's limit of {room} per block")),
            "{arch}: {over:?}"
        );
        let fits = check(arch, &["--block", "128", "--shared", &room.to_string()]);
        assert!(fits.status.success(), "{arch}: {fits:?}");
    }
}
