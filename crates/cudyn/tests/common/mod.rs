//! Helpers of the GPU tests: device code compiled by nvcc inside the test, and random data.
//!
//! nvcc is found as cudyn-build finds it: `$CUDA_HOME/bin` (a CUDA toolkit has it there), then
//! `CUDA_PATH`, `PATH`, `/usr/local/cuda` and the CUDA wheels. A GPU test that finds no nvcc fails
//! with a message saying so: it never skips.

#![allow(dead_code)] // each test binary uses part of the helpers

use std::path::PathBuf;
use std::process::Command;

/// What nvcc produces.
#[derive(Debug, Clone, Copy)]
pub enum Output {
    Fatbin,
    Cubin,
    Ptx,
}

impl Output {
    fn flag(self) -> &'static str {
        match self {
            Output::Fatbin => "-fatbin",
            Output::Cubin => "-cubin",
            Output::Ptx => "-ptx",
        }
    }

    fn extension(self) -> &'static str {
        match self {
            Output::Fatbin => "fatbin",
            Output::Cubin => "cubin",
            Output::Ptx => "ptx",
        }
    }
}

/// nvcc, found as cudyn-build finds it (`$CUDA_HOME/bin` first, then `CUDA_PATH`, `PATH`,
/// `/usr/local/cuda` and the wheels); panics (fails the test) when there is none.
pub fn nvcc() -> PathBuf {
    any_nvcc().path
}

/// `sm_XY` for device 0.
pub fn device_arch() -> String {
    let (major, minor) = cudyn::Device::get(0)
        .and_then(|device| device.compute_capability())
        .expect("GPU tests need a GPU: device 0 is not usable");
    format!("sm_{major}{minor}")
}

/// Compiled device code in a temporary folder that lives as long as this value.
pub struct Compiled {
    pub path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Compiled {
    pub fn bytes(&self) -> Vec<u8> {
        std::fs::read(&self.path).expect("reading nvcc's output")
    }
}

/// Compiles `source` with nvcc for device 0 into `output`.
pub fn compile(source: &str, output: Output) -> Compiled {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let input = dir.path().join("kernels.cu");
    std::fs::write(&input, source).expect("writing the CUDA source");
    let path = dir.path().join(format!("kernels.{}", output.extension()));
    let mut command = Command::new(nvcc());
    command
        .arg(output.flag())
        .arg(format!("-arch={}", device_arch()))
        .arg("-o")
        .arg(&path)
        .arg(&input);
    run_nvcc(command, path, dir)
}

/// Runs an nvcc `command` that writes `path` inside `dir`; fails the test with nvcc's messages.
fn run_nvcc(mut command: Command, path: PathBuf, dir: tempfile::TempDir) -> Compiled {
    let result = command.output().expect("running nvcc");
    assert!(
        result.status.success(),
        "nvcc failed ({}):\n{}",
        result.status,
        String::from_utf8_lossy(&result.stderr)
    );
    Compiled { path, _dir: dir }
}

/// `len` random floats in [-1, 1) from a fixed seed.
pub fn random_floats(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..len).map(|_| rng.f32() * 2.0 - 1.0).collect()
}

/// Runs [`SAXPY`]'s `saxpy` (`kernel`) with `a` on `n` random elements (from `seed`) and
/// asserts that every element equals the CPU's, bit for bit; the output starts as NaN, so an
/// element the kernel misses cannot pass.
pub fn saxpy_matches_the_cpu(kernel: &cudyn::Kernel, a: f32, n: usize, seed: u64) {
    let (x, y) = (random_floats(n, seed), random_floats(n, seed + 1));
    let expected: Vec<f32> = x.iter().zip(&y).map(|(x, y)| a.mul_add(*x, *y)).collect();
    let dx = cudyn::DeviceBuffer::from_slice(&x).unwrap();
    let dy = cudyn::DeviceBuffer::from_slice(&y).unwrap();
    let mut out = cudyn::DeviceBuffer::<f32>::alloc(n).unwrap();
    out.fill_bytes(0xff).unwrap();
    // SAFETY: saxpy reads x[i], y[i] and writes out[i] for i < n, and the three buffers hold n
    // floats; the copy below waits for it.
    unsafe {
        kernel.launch(
            &cudyn::LaunchConfig::for_elements(n, 256),
            (a, &dx, &dy, &mut out, n as u64),
        )
    }
    .unwrap();
    let got = out.to_vec().unwrap();
    let wrong = got
        .iter()
        .zip(&expected)
        .filter(|(g, e)| g.to_bits() != e.to_bits())
        .count();
    assert_eq!(wrong, 0, "{wrong} of {n} elements differ from the CPU");
}

/// A SAXPY with five parameters, fused multiply-add written out so that the CPU reference
/// (`f32::mul_add`) is bit-for-bit the same.
pub const SAXPY: &str = r#"
extern "C" __global__ void saxpy(float a, const float* x, const float* y, float* out,
                                 unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = __fmaf_rn(a, x[i], y[i]);
}

extern "C" __global__ void fill(int* out, int value, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = value;
}

extern "C" __global__ void increment(int* data, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) data[i] += 1;
}
"#;

/// Which CUDA runtime a library built by nvcc links, and so registers its kernels with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CudaRuntime {
    /// `-cudart static`: a runtime instance of the library's own.
    Static,
    /// The toolkit's `libcudart.so`: the process's one shared runtime instance.
    Shared,
}

/// nvcc, found as cudyn-build finds it: `$CUDA_HOME/bin` first, then `PATH`, `/usr/local/cuda`
/// and the CUDA wheels of `scripts/cuda-wheels`. Fails the test when there is none.
pub fn any_nvcc() -> cudyn_build::Nvcc {
    cudyn_build::nvcc::find(cudyn_build::nvcc::candidates(|key| std::env::var_os(key)))
        .unwrap_or_else(|searched| {
            panic!(
                "this test needs nvcc: set CUDA_HOME or run scripts/cuda-wheels. Looked at:\n{}",
                searched.join("\n")
            )
        })
}

/// A shared library `lib<name>.so` built by `nvcc` from CUDA C++ `source` for `arch` (`sm_90`),
/// linked with `runtime`, in a temporary folder that lives as long as the value.
pub fn shared_library(
    nvcc: &cudyn_build::Nvcc,
    name: &str,
    source: &str,
    arch: &str,
    runtime: CudaRuntime,
) -> Compiled {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let input = dir.path().join(format!("{name}.cu"));
    std::fs::write(&input, source).expect("writing the CUDA source");
    let path = dir.path().join(format!("lib{name}.so"));
    let mut command = Command::new(&nvcc.path);
    command
        .args(["-shared", "-Xcompiler", "-fPIC"])
        .arg(format!("-arch={arch}"))
        .arg("-o")
        .arg(&path)
        .arg(&input);
    match runtime {
        CudaRuntime::Static => {
            command.args(["-cudart", "static"]);
        }
        CudaRuntime::Shared => {
            // The CUDA wheels ship libcudart.so.13 without the libcudart.so link that
            // `-cudart shared` links against: name the file itself.
            let folder = nvcc
                .static_runtime_dir()
                .expect("the toolkit of nvcc has a lib64 or lib folder with the CUDA runtime");
            let runtime = ["libcudart.so", "libcudart.so.13", "libcudart.so.12"]
                .into_iter()
                .find(|file| folder.join(file).exists())
                .expect("the toolkit of nvcc has libcudart.so");
            command
                .args(["-cudart", "none"])
                .arg(format!("-L{}", folder.display()))
                .arg(format!("-Xlinker=-l:{runtime}"));
        }
    }
    run_nvcc(command, path, dir)
}
