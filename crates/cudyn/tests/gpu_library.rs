//! Loading device code on a GPU: the article's helloWorld ("Dynamic Loading in the CUDA
//! Runtime", NVIDIA), kernel lookup, JIT logs, variables.
//! Run with `cargo test -p cudyn --test gpu_library -- --include-ignored` on a machine with a GPU.

mod common;

use common::{compile, Output, SAXPY};
use cudyn::{Backend, DeviceBuffer, Error, JitOptions, LaunchConfig, Library, LibraryOptions};

/// The article's first runtime example, kernel text unchanged (C++ linkage, so its symbol is
/// `_Z10helloWorldv`).
const HELLO: &str = r#"
#include <cstdio>
__global__ void helloWorld() { printf("Hello from the GPU!\n"); }
"#;

#[test]
#[ignore = "gpu: runs the article's helloWorld from a fatbin built by nvcc"]
fn hello_world_fatbin_loads_launches_and_synchronizes() {
    let fatbin = compile(HELLO, Output::Fatbin);
    let library = Library::from_file(&fatbin.path).unwrap();
    // With a CUDA 13 runtime, loading goes through the runtime (cudaLibraryLoadData).
    assert_eq!(library.backend(), Backend::Runtime);
    let hello = library.kernel("helloWorld").unwrap();
    assert_eq!(hello.name().unwrap(), "_Z10helloWorldv");
    assert!(hello.params().unwrap().is_empty());
    // SAFETY: helloWorld takes no parameters and touches no memory of this program.
    unsafe { hello.launch(&LaunchConfig::new(1, 1), ()) }.unwrap();
    cudyn::synchronize().unwrap();
}

#[test]
#[ignore = "gpu: loads a cubin through both backends"]
fn kernels_are_counted_listed_and_an_unknown_name_lists_the_nearest_first() {
    let cubin = compile(SAXPY, Output::Cubin);
    for backend in [Backend::Runtime, Backend::Driver] {
        let library = Library::loader()
            .backend(backend)
            .from_file(&cubin.path)
            .unwrap();
        assert_eq!(library.backend(), backend);
        assert_eq!(library.kernel_count().unwrap(), 3);
        let mut names = library.kernel_names().unwrap();
        names.sort();
        assert_eq!(names, ["fill", "increment", "saxpy"]);
        match library.kernel("saxpi") {
            Err(Error::KernelNotFound {
                name, available, ..
            }) => {
                assert_eq!(name, "saxpi");
                assert_eq!(available[0], "saxpy");
                assert_eq!(available.len(), 3);
            }
            other => panic!("expected KernelNotFound, got {other:?}"),
        }
        let saxpy = library.kernel("saxpy").unwrap();
        let offsets: Vec<(usize, usize)> = saxpy
            .params()
            .unwrap()
            .iter()
            .map(|p| (p.offset, p.size))
            .collect();
        assert_eq!(offsets, [(0, 4), (8, 8), (16, 8), (24, 8), (32, 8)]);
    }
}

#[test]
#[ignore = "gpu: JIT-compiles PTX with a verbose log"]
fn ptx_is_compiled_by_the_jit_with_options_and_its_log_is_kept() {
    // A comment unique to this run and backend keeps the driver's JIT cache (~/.nv/ComputeCache)
    // from answering instead of ptxas, which would leave the verbose log empty: the first load
    // of the same PTX fills the cache for the second.
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let nvcc_ptx = compile(SAXPY, Output::Ptx).bytes();
    let jit = JitOptions::default()
        .verbose_log(true)
        .optimization_level(3)
        .max_registers(32)
        .line_info(true);
    let mut seen = Vec::new();
    for backend in [Backend::Driver, Backend::Runtime] {
        let mut ptx = nvcc_ptx.clone();
        ptx.extend_from_slice(format!("\n// cudyn test run {nonce} {backend:?}\n").as_bytes());
        // From bytes without a terminating NUL: cudyn adds it.
        let library = Library::loader()
            .jit(jit.clone())
            .backend(backend)
            .load(&ptx)
            .unwrap();
        let log = library.jit_log();
        assert!(
            log.error.is_empty(),
            "{backend:?}: JIT error log: {}",
            log.error
        );
        assert!(library.kernel("saxpy").is_ok());
        seen.push((backend, log.info.clone()));
    }
    // ptxas' verbose report, which also shows that the register limit reached it.
    assert!(
        seen.iter().all(
            |(_, info)| info.contains("Compiling entry function 'saxpy'")
                && info.contains("with  32 of maxrregcount option")
        ),
        "a verbose JIT leaves ptxas' report with either backend: {seen:?}"
    );
}

#[test]
#[ignore = "gpu: PTX of an unsupported version, the failure and its log"]
fn a_failure_after_a_successful_load_carries_the_jit_error_log() {
    let ptx = String::from_utf8(compile(SAXPY, Output::Ptx).bytes()).unwrap();
    let start = ptx.find(".version ").expect("PTX has a .version directive");
    let end = start + ptx[start..].find('\n').unwrap();
    let future = format!("{}.version 99.0{}", &ptx[..start], &ptx[end..]);
    // The driver may refuse at load or only at the kernel lookup (as it does for PTX newer
    // than itself): either way the error carries the JIT's log.
    let error = Library::load(future.as_bytes())
        .and_then(|library| library.kernel("saxpy"))
        .expect_err("PTX 99.0 cannot be compiled");
    let log = error
        .log()
        .unwrap_or_else(|| panic!("no log attached to {error}"));
    assert!(log.contains("version"), "log: {log}");
}

/// A fatbin holding only the PTX of [`SAXPY`] for device 0, damaged so that the JIT rejects it
/// (an instruction that does not exist), which cudyn's check cannot know.
fn fatbin_of_rejected_ptx() -> Vec<u8> {
    let ptx = String::from_utf8(compile(SAXPY, Output::Ptx).bytes()).unwrap();
    let rejected = ptx.replacen("ret;", "no_such_instruction;", 1);
    assert_ne!(rejected, ptx, "the PTX has a ret");
    let (major, minor) = cudyn::Device::get(0)
        .and_then(|device| device.compute_capability())
        .unwrap();
    let mut fatbin = cudyn::compile::FatbinBuilder::new().unwrap();
    fatbin
        .add_ptx(
            rejected.as_bytes(),
            cudyn::Arch::new(major, minor),
            "rejected.cu",
        )
        .unwrap();
    fatbin.finish().unwrap()
}

/// Set in the child process of [`a_fatbin_the_jit_rejects_keeps_the_jit_log_when_loaded_eagerly`].
const EAGER_CHILD: &str = "CUDYN_TEST_EAGER_FATBIN_CHILD";

#[test]
#[ignore = "gpu: a fatbin whose PTX the JIT rejects, loaded lazily, then eagerly in a child"]
fn a_fatbin_the_jit_rejects_keeps_the_jit_log_when_loaded_eagerly() {
    // Lazily, the driver's default, the fatbin reaches a context at its first use: the load
    // may succeed, but no kernel comes of it.
    let lazily =
        Library::load(fatbin_of_rejected_ptx()).and_then(|library| library.kernel("saxpy"));
    assert!(
        lazily.is_err(),
        "a kernel of PTX the JIT rejects: {lazily:?}"
    );
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["eager_fatbin_child", "--exact", "--nocapture"])
        .env(EAGER_CHILD, "1")
        .env("CUDA_MODULE_LOADING", "EAGER")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success()
            && stdout.contains("eager fatbin: the JIT's log reached the caller"),
        "the child:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// What the child process does (the driver loading modules eagerly); nothing when run as an
/// ordinary test.
#[test]
fn eager_fatbin_child() {
    if std::env::var_os(EAGER_CHILD).is_none() {
        return;
    }
    // A context for the eager load to load the library into.
    DeviceBuffer::<f32>::alloc(1).unwrap();
    // Eagerly, the JIT runs during the load. The driver (CUDA 13.0) then returns the library
    // with the JIT's error log; it could as well fail the load: the log must reach the caller
    // either way.
    let log = match Library::load(fatbin_of_rejected_ptx()) {
        Err(error) => error.log().map(str::to_owned),
        Ok(library) => {
            let error = library
                .kernel("saxpy")
                .expect_err("no kernel comes of PTX the JIT rejected");
            assert_eq!(error.log(), library.jit_log().text().as_deref(), "{error}");
            Some(library.jit_log().error.clone())
        }
    };
    let log = log.expect("the JIT's log, with the load's or the lookup's error");
    assert!(log.contains("no_such_instruction"), "log: {log}");
    println!("eager fatbin: the JIT's log reached the caller: {log}");
}

#[test]
#[ignore = "gpu: loads bytes the driver may use in place"]
fn a_preserved_binary_loads_and_runs() {
    let cubin = compile(SAXPY, Output::Cubin).bytes();
    let options = LibraryOptions::default().preserve_binary(true);
    let library = Library::loader()
        .options(options.clone())
        .load(&cubin)
        .unwrap();
    drop(cubin);
    let fill = library.kernel("fill").unwrap();
    let mut out = DeviceBuffer::<i32>::zeroed(100).unwrap();
    // SAFETY: fill writes out[i] for i < 100, and out holds 100 ints; the copy below waits for it.
    unsafe {
        fill.launch(
            &LaunchConfig::for_elements(100, 64),
            (&mut out, 7i32, 100u64),
        )
    }
    .unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![7; 100]);
    // A file is read into memory and loaded from there, so it can be preserved too.
    let file = compile(SAXPY, Output::Cubin);
    let from_file = Library::loader()
        .options(options)
        .from_file(&file.path)
        .unwrap();
    drop(file);
    let mut out = DeviceBuffer::<i32>::zeroed(100).unwrap();
    let fill = from_file.kernel("fill").unwrap();
    // SAFETY: fill(int*, int, size_t) writes the 100 ints of `out`, which outlives the launch
    // (to_vec below synchronizes with it).
    unsafe {
        fill.launch(
            &LaunchConfig::for_elements(100, 64),
            (&mut out, 9i32, 100u64),
        )
    }
    .unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![9; 100]);
}

const GLOBALS: &str = r#"
__device__ float scale;
__device__ int results[4];
__managed__ int launches;

extern "C" __global__ void use_globals(float* out) {
    out[threadIdx.x] = scale * threadIdx.x;
    if (threadIdx.x < 4) results[threadIdx.x] = 100 + threadIdx.x;
    if (threadIdx.x == 0) launches += 1;
}
"#;

#[test]
#[ignore = "gpu: device and managed variables"]
fn globals_written_by_the_host_are_read_by_kernels_and_the_reverse() {
    let cubin = compile(GLOBALS, Output::Cubin);
    for backend in [Backend::Runtime, Backend::Driver] {
        let library = Library::loader()
            .backend(backend)
            .from_file(&cubin.path)
            .unwrap();
        let scale = library.global::<f32>("scale").unwrap();
        let results = library.global::<[i32; 4]>("results").unwrap();
        let launches = library.managed::<i32>("launches").unwrap();
        assert!(launches.is_managed() && !scale.is_managed());
        scale.write(&2.5).unwrap();
        results.write(&[0; 4]).unwrap();
        launches.write(&40).unwrap();
        assert_eq!(scale.read().unwrap(), 2.5);

        let kernel = library.kernel("use_globals").unwrap();
        let mut out = DeviceBuffer::<f32>::alloc(32).unwrap();
        out.fill_bytes(0xff).unwrap();
        for _ in 0..2 {
            // SAFETY: use_globals writes out[threadIdx.x] for 32 threads, and out holds 32
            // floats; it outlives both launches, which the synchronization below waits for.
            unsafe { kernel.launch(&LaunchConfig::new(1, 32), (&mut out,)) }.unwrap();
        }
        cudyn::synchronize().unwrap();

        let expected: Vec<f32> = (0..32).map(|i| 2.5 * i as f32).collect();
        assert_eq!(out.to_vec().unwrap(), expected);
        assert_eq!(results.read().unwrap(), [100, 101, 102, 103]);
        assert_eq!(launches.read().unwrap(), 42);

        match library.global::<f64>("scale") {
            Err(Error::VariableSize {
                device_bytes: 4,
                rust_bytes: 8,
                ..
            }) => {}
            other => panic!("expected a size mismatch, got {other:?}"),
        }
    }
}

#[test]
#[ignore = "gpu: kernels keep their library loaded"]
fn a_kernel_outlives_its_library_value() {
    let cubin = compile(SAXPY, Output::Cubin);
    let fill = Library::from_file(&cubin.path)
        .unwrap()
        .kernel("fill")
        .unwrap();
    // The Library value is gone; the kernel's clone of it keeps the code loaded.
    let mut out = DeviceBuffer::<i32>::zeroed(10).unwrap();
    // SAFETY: fill writes out[i] for i < 10, and out holds 10 ints; the copy below waits for it.
    unsafe { fill.launch(&LaunchConfig::new(1, 32), (&mut out, -3i32, 10u64)) }.unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![-3; 10]);
}

/// Templates, overloads, a namespace: kernels with C++ linkage as nvcc users write them.
const CPP_NAMES: &str = include_str!("kernels/cpp_names.cu");

#[test]
#[ignore = "gpu: kernels of an nvcc-built fatbin found by their C++ names"]
fn templates_in_an_nvcc_fatbin_are_found_by_their_cpp_names() {
    let fatbin = compile(CPP_NAMES, Output::Fatbin);
    let library = Library::from_file(&fatbin.path).unwrap();
    let axpy = library.kernel("axpy<float>").unwrap();
    assert_eq!(axpy.name().unwrap(), "_Z4axpyIfEvT_PKS0_PS0_i");
    let n = 10_000usize;
    let x = common::random_floats(n, 1);
    let y = common::random_floats(n, 2);
    let a = 1.5f32;
    let x_device = DeviceBuffer::from_slice(&x).unwrap();
    let mut y_device = DeviceBuffer::from_slice(&y).unwrap();
    // SAFETY: axpy<float>(float, const float*, float*, int) reads n floats of x and writes n of
    // y; both buffers hold n and outlive the launch (to_vec synchronizes).
    unsafe {
        axpy.launch(
            &LaunchConfig::for_elements(n, 256),
            (a, &x_device, &mut y_device, n as i32),
        )
    }
    .unwrap();
    // nvcc contracts a * x + y into one fused multiply-add, as mul_add does.
    let expected: Vec<f32> = x.iter().zip(&y).map(|(x, y)| a.mul_add(*x, *y)).collect();
    assert_eq!(y_device.to_vec().unwrap(), expected);

    let double = library
        .kernel("void axpy<double>(double, double const*, double*, int)")
        .unwrap();
    assert_eq!(double.name().unwrap(), "_Z4axpyIdEvT_PKS0_PS0_i");

    match library.kernel("scale") {
        Err(Error::AmbiguousKernel { name, candidates }) => {
            assert_eq!(name, "scale");
            assert_eq!(candidates.len(), 2, "{candidates:?}");
            for symbol in ["_Z5scalePfi", "_Z5scalePdi"] {
                assert!(
                    candidates
                        .iter()
                        .any(|candidate| candidate.contains(symbol)),
                    "{symbol} is not among {candidates:?}"
                );
            }
        }
        other => panic!("an overload set is ambiguous, got {other:?}"),
    }
    let scale = library.kernel("scale(double*, int)").unwrap();
    assert_eq!(scale.name().unwrap(), "_Z5scalePdi");
}

#[test]
#[ignore = "gpu: NVRTC output saved to a file keeps its C++ kernel names"]
fn nvrtc_output_saved_to_a_file_is_found_by_its_name_expressions() {
    let source = r#"
template <typename T>
__global__ void saxpy(T a, const T* x, T* y, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"#;
    let compiled = cudyn::Program::new(source)
        .name_expression("saxpy<float>")
        .name_expression("saxpy<double>")
        .compile()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("saxpy.cubin");
    std::fs::write(&path, compiled.code()).unwrap();
    // Loaded from the file, the library knows nothing of NVRTC's name expressions.
    let library = Library::from_file(&path).unwrap();
    for (expression, lowered) in compiled.lowered_names() {
        let kernel = library.kernel(expression).unwrap();
        assert_eq!(kernel.name().unwrap(), lowered, "{expression}");
    }
    let n = 4096usize;
    let x: Vec<f64> = (0..n).map(|i| i as f64 * 0.25).collect();
    let y: Vec<f64> = (0..n).map(|i| 1.0 - i as f64).collect();
    let x_device = DeviceBuffer::from_slice(&x).unwrap();
    let mut y_device = DeviceBuffer::from_slice(&y).unwrap();
    let saxpy = library.kernel("saxpy<double>").unwrap();
    // SAFETY: saxpy<double>(double, const double*, double*, size_t) reads n doubles of x and
    // writes n of y; both buffers hold n and outlive the launch (to_vec synchronizes).
    unsafe {
        saxpy.launch(
            &LaunchConfig::for_elements(n, 128),
            (3.0f64, &x_device, &mut y_device, n as u64),
        )
    }
    .unwrap();
    let expected: Vec<f64> = x
        .iter()
        .zip(&y)
        .map(|(x, y)| 3.0f64.mul_add(*x, *y))
        .collect();
    assert_eq!(y_device.to_vec().unwrap(), expected);
}

/// Kernels in namespaces, templates, overloads and `extern "C"` kernels.
const KERNEL_LIST: &str = include_str!("kernels/kernel_list.cu");

#[test]
#[ignore = "gpu: a loaded library lists the kernels its image lists, each found by its signature"]
fn a_library_lists_the_kernels_of_its_image_each_found_by_its_signature() {
    use cudyn::compile::{Output as Emit, Program};
    use cudyn::Image;

    let nvrtc = |output| Program::new(KERNEL_LIST).output(output).compile().unwrap();
    let builds = [
        ("NVRTC cubin", nvrtc(Emit::Cubin).code().to_vec()),
        ("NVRTC PTX", nvrtc(Emit::Ptx).code().to_vec()),
        ("nvcc fatbin", compile(KERNEL_LIST, Output::Fatbin).bytes()),
    ];
    for (build, code) in builds {
        let offline = Image::new(&code[..]).unwrap().kernel_list().unwrap();
        let library = Library::load(&code).unwrap();
        let loaded = library.kernel_list().unwrap();
        assert_eq!(loaded, offline, "{build}");
        assert_eq!(loaded.len(), 7, "{build}: {loaded:?}");
        for listed in &loaded {
            // The signature (the symbol of an extern "C" kernel), overloads included.
            let kernel = library.kernel(&listed.to_string()).unwrap();
            assert_eq!(kernel.name().unwrap(), listed.symbol, "{build}");
        }
    }
}
