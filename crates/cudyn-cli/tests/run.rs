//! `cudyn run`, as a user runs it: offline checks and clean failures everywhere, launches on the
//! GPU. Needs NVRTC (scripts/cuda-wheels, then activate the venv).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::cudyn;
use serde_json::Value;

/// The SAXPY of "Dynamic Loading in the CUDA Runtime" (NVIDIA), as `cudyn demo` runs it.
const SAXPY: &str = include_str!("../src/kernels/saxpy.cu");

/// A folder holding `name` with `text`; the path of the file.
fn source(text: &str, name: &str) -> (tempfile::TempDir, PathBuf) {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join(name);
    std::fs::write(&path, text).unwrap();
    (folder, path)
}

/// `cudyn run FILE KERNEL ARGS...`: its exit status, standard output and standard error.
fn run(command: &mut Command, file: &Path, kernel: &str, args: &[&str]) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = command
        .arg("run")
        .arg(file)
        .arg(kernel)
        .args(args)
        .output()
        .expect("cudyn runs");
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

/// SAXPY's arguments over `n` elements with `count` as the type of `n`.
fn saxpy_args(n: usize, count: &str) -> Vec<String> {
    let n = n.to_string();
    vec![
        "--arg".into(),
        "f32:2.5".into(),
        "--arg".into(),
        format!("buf:f32:{n}=random"),
        "--arg".into(),
        format!("buf:f32:{n}=1"),
        "--arg".into(),
        format!("buf:f32:{n}"),
        "--arg".into(),
        format!("{count}:{n}"),
    ]
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

fn check_saxpy(count_type: &str, extra: &[&str]) -> (i32, String, String) {
    let (_folder, file) = source(SAXPY, "saxpy.cu");
    let mut args = vec![
        "--arch", "sm_90", "--check", "--grid", "4", "--block", "256",
    ];
    args.extend(extra);
    let saxpy = saxpy_args(1000, count_type);
    args.extend(strs(&saxpy));
    run(&mut cudyn(), &file, "saxpy", &args)
}

#[test]
fn check_matches_the_arguments_to_the_kernel_offline() {
    let (status, stdout, stderr) = check_saxpy("u64", &[]);
    assert_eq!(status, 0, "{stderr}");
    assert!(
        stdout.contains("the arguments match the 5 parameters of saxpy"),
        "{stdout}"
    );

    let (status, stdout, stderr) = check_saxpy("u64", &["--json"]);
    assert_eq!(status, 0, "{stderr}");
    let json: Value = serde_json::from_str(&stdout).expect("--json prints JSON");
    assert_eq!(json["kernel"], "saxpy");
    assert_eq!(json["matches"], true);
    let params: Vec<(u64, u64)> = json["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["offset"].as_u64().unwrap(), p["size"].as_u64().unwrap()))
        .collect();
    assert_eq!(params, [(0, 4), (8, 8), (16, 8), (24, 8), (32, 8)]);
}

#[test]
fn a_template_named_by_its_instance_is_instantiated_checked_and_found() {
    let (_folder, file) = source(
        "#include \"factor.h\"\n\
         template <typename T> __global__ void scale(T *v, T f) { v[threadIdx.x] *= f * FACTOR; }\n",
        "scale.cu",
    );
    // The header beside the source is found from any folder: the program is named by its path.
    std::fs::write(file.with_file_name("factor.h"), "#define FACTOR 2\n").unwrap();
    for kernel in ["scale<float>", "scale<float>(float*, float)"] {
        let args = [
            "--grid",
            "4",
            "--block",
            "256",
            "--arg",
            "buf:f32:1024=range",
            "--arg",
            "f32:0.5",
            "--check",
            "--arch",
            "sm_90",
        ];
        let (status, stdout, stderr) = run(&mut cudyn(), &file, kernel, &args);
        assert_eq!(status, 0, "{kernel}: {stderr}");
        assert!(
            stdout.contains("the arguments match the 2 parameters"),
            "{stdout}"
        );
    }
    // A size that differs from the instance's parameter is still refused.
    let args = [
        "--grid",
        "1",
        "--block",
        "1",
        "--arg",
        "buf:f64:4=range",
        "--arg",
        "f64:0.5",
        "--check",
        "--arch",
        "sm_90",
    ];
    let (status, _, stderr) = run(&mut cudyn(), &file, "scale<float>", &args);
    assert_eq!(status, 4, "{stderr}");
    // A template the source does not define is a missing kernel, named with those it has.
    let (status, _, stderr) = run(&mut cudyn(), &file, "shift<float>", &args);
    assert_eq!(status, 4, "{stderr}");
    assert!(
        stderr.contains("no kernel `shift<float>`") && stderr.contains("it defines none"),
        "{stderr}"
    );
}

#[test]
fn a_mismatch_exits_4_naming_the_parameter() {
    // A 32-bit count where the kernel takes a size_t.
    let (status, stdout, stderr) = check_saxpy("u32", &["--json"]);
    assert_eq!(status, 4, "{stderr}");
    assert!(stdout.is_empty(), "errors go to standard error: {stdout}");
    assert!(
        stderr.starts_with("error: cudyn run: kernel `saxpy`: parameter 4 is 8 bytes"),
        "{stderr}"
    );
    assert!(
        stderr.contains("  4  8 bytes at 32") && stderr.contains("4 bytes at 32 (scalar)"),
        "both layouts are shown: {stderr}"
    );

    let (_folder, file) = source(SAXPY, "saxpy.cu");
    let few = [
        "--arch", "90", "--check", "--grid", "1", "--block", "1", "--arg", "f32:1",
    ];
    let (status, _, stderr) = run(&mut cudyn(), &file, "saxpy", &few);
    assert_eq!(status, 4, "{stderr}");
    assert!(
        stderr.contains("the kernel takes 5 parameters but 1 arguments were given"),
        "{stderr}"
    );
}

#[test]
fn a_missing_kernel_exits_4_listing_the_kernels() {
    let template = "template <typename T> __global__ void scale(T *p, T f) { p[0] *= f; }\n\
                    template __global__ void scale<float>(float *, float);\n";
    let (_folder, file) = source(template, "scale.cu");
    let args = ["--arch", "sm_90", "--check", "--grid", "1", "--block", "1"];
    let (status, _, stderr) = run(&mut cudyn(), &file, "scale", &args);
    assert_eq!(status, 4, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "no kernel `scale` in {}: its kernels are _Z5scaleIfEvPT_S0_ \
             (void scale<float>(float*, float))",
            file.display()
        )),
        "{stderr}"
    );
    // By its symbol it is found.
    let mut args = args.to_vec();
    args.extend(["--arg", "buf:f32:1", "--arg", "f32:2"]);
    let (status, _, stderr) = run(&mut cudyn(), &file, "_Z5scaleIfEvPT_S0_", &args);
    assert_eq!(status, 0, "{stderr}");
}

#[test]
fn malformed_input_is_a_usage_error() {
    let (folder, file) = source(SAXPY, "saxpy.cu");
    let odd = folder.path().join("odd.bin");
    std::fs::write(&odd, [0u8; 6]).unwrap();
    let odd_buffer = format!("buf:f32:@{}", odd.display());
    let cases: [(&[&str], &str); 8] = [
        (&["--arg", "f33:1"], "unknown type `f33`: use one of i8, u8"),
        (&["--arg", "u8:300"], "`300` is not a value of type u8"),
        (
            &["--arg", "buf:f32:4=lots"],
            "the fill is a value, range, random",
        ),
        (&["--grid", "0"], "`0` in `0` is not a dimension"),
        (
            &["--arg", "buf:f32:99999999999999999"],
            "99999999999999999 elements of 4 bytes do not fit in memory",
        ),
        (&["--repeat", "0"], "--repeat"),
        (
            &["--arg", "f32:1", "--out", "0=x.bin"],
            "argument 0 is a scalar",
        ),
        (
            &["--arg", odd_buffer.as_str()],
            "holds 6 bytes, which is not a whole number of f32",
        ),
    ];
    for (extra, message) in cases {
        let mut args = vec!["--arch", "sm_90", "--block", "1"];
        if !extra.contains(&"--grid") {
            args.extend(["--grid", "1"]);
        }
        args.extend(extra);
        let (status, stdout, stderr) = run(&mut cudyn(), &file, "saxpy", &args);
        assert_eq!(status, 2, "{extra:?}: {stderr}");
        assert!(stdout.is_empty(), "{extra:?}: {stdout}");
        assert!(stderr.contains(message), "{extra:?}: {stderr}");
    }
}

#[test]
fn unreadable_files_fail_with_the_system_error_as_cause() {
    let (status, _, stderr) = run(
        &mut cudyn(),
        Path::new("/nonexistent/saxpy.cubin"),
        "saxpy",
        &["--grid", "1", "--block", "1"],
    );
    assert_eq!(status, 1, "{stderr}");
    assert!(
        stderr.starts_with("error: cudyn run: cannot read /nonexistent/saxpy.cubin\n  caused by: "),
        "{stderr}"
    );
    let (_folder, text) = source("not device code\n", "notes.txt");
    let (status, _, stderr) = run(&mut cudyn(), &text, "k", &["--grid", "1", "--block", "1"]);
    assert_eq!(status, 1, "{stderr}");
    assert!(stderr.contains("is not device code"), "{stderr}");
}

/// The folder NVRTC was found in, which holds no driver (a wheel's or a toolkit's lib folder):
/// as the only place cudyn may search, it hides the driver and keeps the compiler.
fn nvrtc_without_driver() -> PathBuf {
    let nvrtc = cudyn::sys::nvrtc()
        .unwrap_or_else(|error| panic!("NVRTC is missing ({error}); activate the wheels' venv"));
    let folder = nvrtc.library.path.parent().unwrap().to_owned();
    assert!(
        !folder.join("libcuda.so.1").exists(),
        "{} holds a driver",
        folder.display()
    );
    folder
}

#[test]
fn without_a_driver_it_fails_cleanly_saying_why() {
    let (folder, file) = source(SAXPY, "saxpy.cu");
    let only_nvrtc = nvrtc_without_driver();
    let saxpy = saxpy_args(1000, "u64");
    let mut args = vec!["--grid", "4", "--block", "256"];
    args.extend(strs(&saxpy));

    // A source is compiled for the GPU, so there is nothing to compile for.
    let mut hidden = cudyn();
    hidden.env("CUDYN_LIBRARY_PATH", &only_nvrtc);
    let (status, stdout, stderr) = run(&mut hidden, &file, "saxpy", &args);
    assert_eq!(status, 3, "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.starts_with(&format!(
            "error: cudyn run: cannot compile {} for the GPU: there is none here; pass --arch",
            file.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("caused by: CUDA driver was not found"),
        "{stderr}"
    );
    assert!(stderr.contains("libcuda.so.1"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // A cubin gets as far as the launch, which needs the driver.
    let cubin = folder.path().join("saxpy.cubin");
    let compiled = cudyn::Program::new(SAXPY)
        .arch(cudyn::compile::Arch::new(9, 0))
        .compile()
        .unwrap();
    std::fs::write(&cubin, compiled.code()).unwrap();
    let mut hidden = cudyn();
    hidden.env("CUDYN_LIBRARY_PATH", &only_nvrtc);
    let (status, _, stderr) = run(&mut hidden, &cubin, "saxpy", &args);
    assert_eq!(status, 3, "{stderr}");
    assert!(
        stderr.starts_with(
            "error: cudyn run: no GPU to launch on: `cudyn run` needs the NVIDIA driver"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("caused by: CUDA driver was not found"),
        "{stderr}"
    );
}

/// Little-endian f32s, as `buf:f32:@FILE` reads them on x86-64 and as `--out` writes them.
fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A JSON number written for an f32, read back as one: from its text, the f32's shortest form,
/// which reads back exactly (through an f64 it could round twice).
fn json_f32(value: &Value) -> f32 {
    assert!(value.is_number(), "{value}");
    value.to_string().parse().unwrap()
}

fn json_f32s(values: &Value) -> Vec<f32> {
    values.as_array().unwrap().iter().map(json_f32).collect()
}

fn buffer(json: &Value, argument: u64) -> &Value {
    json["buffers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["argument"] == argument)
        .unwrap_or_else(|| panic!("no buffer {argument} in {json}"))
}

#[test]
#[ignore = "gpu: compiles SAXPY for the GPU, launches it and checks the buffers against the CPU"]
fn saxpy_from_source_matches_the_cpu() {
    let (folder, file) = source(SAXPY, "saxpy.cu");
    let n = 1_000_003usize;
    // x from a file, with negative, fractional and large values; y = 1; out poisoned with NaN.
    let x: Vec<f32> = (0..n).map(|i| (i as f32 - 500_000.0) * 0.37).collect();
    let x_file = folder.path().join("x.bin");
    std::fs::write(
        &x_file,
        x.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>(),
    )
    .unwrap();
    let out_file = folder.path().join("out.bin");
    let a = 2.5f32;
    let grid = n.div_ceil(256).to_string();
    let args = [
        "--grid".to_owned(),
        grid,
        "--block".into(),
        "256".into(),
        "--repeat".into(),
        "5".into(),
        "--json".into(),
        "--arg".into(),
        format!("f32:{a}"),
        "--arg".into(),
        format!("buf:f32:@{}", x_file.display()),
        "--arg".into(),
        format!("buf:f32:{n}=1"),
        "--arg".into(),
        format!("buf:f32:{n}=NaN"),
        "--arg".into(),
        format!("u64:{n}"),
        "--out".into(),
        format!("3={}", out_file.display()),
    ];
    let (status, stdout, stderr) = run(&mut cudyn(), &file, "saxpy", &strs(&args));
    assert_eq!(status, 0, "{stderr}");
    let json: Value = serde_json::from_str(&stdout).expect("--json prints JSON");

    // NVRTC contracts a * x + y into one fused multiply-add, which the CPU does exactly too.
    let expected: Vec<f32> = x.iter().map(|&x| a.mul_add(x, 1.0)).collect();
    let out = buffer(&json, 3);
    assert_eq!(out["type"], "f32");
    assert_eq!(out["elements"], n as u64);
    assert_eq!(out["changed"], true);
    assert_eq!(out["nan"], 0, "every element was written");
    assert_eq!(json_f32s(&out["first"]), expected[..8]);
    let min = expected.iter().copied().fold(f32::INFINITY, f32::min);
    let max = expected.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    assert_eq!(json_f32(&out["min"]), min);
    assert_eq!(json_f32(&out["max"]), max);
    // The same f64 sum in the same order is the same number.
    let sum = expected.iter().fold(0.0f64, |sum, &v| sum + f64::from(v));
    assert_eq!(out["sum"].as_f64().unwrap(), sum);
    let written = floats(&std::fs::read(&out_file).unwrap());
    assert_eq!(written.len(), n);
    let wrong = written
        .iter()
        .zip(&expected)
        .filter(|(got, want)| got.to_bits() != want.to_bits())
        .count();
    assert_eq!(wrong, 0, "{wrong} of {n} elements differ from the CPU");

    // The inputs are unchanged, and summarized too.
    let x_summary = buffer(&json, 1);
    assert_eq!(x_summary["changed"], false);
    assert_eq!(json_f32s(&x_summary["first"]), x[..8]);
    assert_eq!(buffer(&json, 2)["sum"], n as u64);

    assert_eq!(json["kernel"], "saxpy");
    assert_eq!(json["launches"], 5);
    assert_eq!(json["grid"], serde_json::json!([n.div_ceil(256), 1, 1]));
    assert!(json["device"]["arch"].as_str().unwrap().starts_with("sm_"));
    let time = &json["time_us"];
    let (min, median, max) = (
        time["min"].as_f64().unwrap(),
        time["median"].as_f64().unwrap(),
        time["max"].as_f64().unwrap(),
    );
    assert!(0.0 < min && min <= median && median <= max, "{time}");
    assert_eq!(json["written"][0]["argument"], 3);
}

#[test]
#[ignore = "gpu: in-place updates over repeats, a C++ kernel name, large shared memory, refused launches"]
fn launches_in_place_by_cpp_name_and_with_large_shared_memory() {
    let kernels = "template <typename T> __global__ void add_one(T *p, int n)\n\
                   { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] += 1; }\n\
                   template __global__ void add_one<int>(int *, int);\n\
                   extern \"C\" __global__ void sum_shared(int *out, int n) {\n\
                     extern __shared__ int s[];\n\
                     for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = i;\n\
                     __syncthreads();\n\
                     if (threadIdx.x == 0) { int t = 0; for (int i = 0; i < n; ++i) t += s[i]; *out = t; }\n\
                   }\n";
    let (_folder, file) = source(kernels, "add_one.cu");
    let launch = |kernel: &str, count: &str| {
        let args = [
            "--grid",
            "2",
            "--block",
            "128",
            "--repeat",
            "3",
            "--arg",
            "buf:i32:256=range",
            "--arg",
            count,
        ];
        run(&mut cudyn(), &file, kernel, &args)
    };
    // By its C++ name, which only the loaded library resolves.
    let (status, stdout, stderr) = launch("add_one<int>", "i32:256");
    assert_eq!(status, 0, "{stderr}");
    // 1 + 2 + ... + 256, whatever the number of launches: each starts from 0, 1, ..., 255.
    assert!(
        stdout.contains("argument 0 i32[256] changed: [1, 2, 3, 4, 5, 6, 7, 8, ...] min 1 max 256 sum 32896 NaN 0"),
        "{stdout}"
    );
    assert!(stdout.contains("time over 3 launches: median "), "{stdout}");

    // The driver's parameter layout catches what the offline check could not look up.
    let (status, _, stderr) = launch("add_one<int>", "i64:256");
    assert_eq!(status, 4, "{stderr}");
    assert!(stderr.contains("parameter 1 is 4 bytes"), "{stderr}");

    let (status, _, stderr) = launch("add_two<int>", "i32:256");
    assert_eq!(status, 4, "{stderr}");
    assert!(
        stderr.contains("cannot find kernel `add_two<int>`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("add_one"),
        "the library's kernels are listed: {stderr}"
    );

    // More than the default 48 KiB of dynamic shared memory: run opts the kernel in.
    let ints = 25_000;
    let sum_shared = |shared: &str| {
        let n = format!("i32:{ints}");
        let args = ["--grid", "1", "--block", "256", "--shared", shared];
        let args = [&args[..], &["--arg", "buf:i32:1", "--arg", &n]].concat();
        run(&mut cudyn(), &file, "sum_shared", &args)
    };
    let (status, stdout, stderr) = sum_shared(&(4 * ints).to_string());
    assert_eq!(status, 0, "{stderr}");
    assert!(
        stdout.contains("100000 bytes of dynamic shared memory"),
        "{stdout}"
    );
    assert!(
        stdout.contains("argument 0 i32[1] changed: [312487500]"),
        "{stdout}"
    );
    // More than any block may have.
    let (status, _, stderr) = sum_shared("1000000");
    assert_eq!(status, 4, "{stderr}");

    // A block the device cannot run.
    let args = [
        "--grid",
        "1",
        "--block",
        "2048",
        "--arg",
        "buf:i32:1",
        "--arg",
        "i32:1",
    ];
    let (status, _, stderr) = run(&mut cudyn(), &file, "add_one<int>", &args);
    assert_eq!(status, 4, "{stderr}");
}
