//! Real device code for the inspection tests, made with NVRTC and nvFatbin through cudyn's raw
//! bindings, and the path of NVIDIA's cuobjdump (the independent reference).
#![allow(dead_code)]

use std::ffi::{c_char, CString};
use std::path::{Path, PathBuf};
use std::process::Command;

use cudyn::sys::Api;

/// A template kernel, a kernel taking a struct by value, one with 23 parameters, launch bounds,
/// static shared memory, and `__constant__` and `__device__` globals.
pub const SOURCE: &str = r#"
struct Big { double a; int b; char c[20]; };
__constant__ float coeffs[16];
__device__ int counter;
__device__ double table[100];
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] * coeffs[i % 16] + y[i];
  atomicAdd(&counter, 1);
}
extern "C" __global__ void bystruct(Big s, double* out, char c, short h) {
  __shared__ double sh[64];
  sh[threadIdx.x % 64] = s.a + s.b + s.c[threadIdx.x % 20] + c + h;
  __syncthreads();
  out[threadIdx.x] = sh[(threadIdx.x + 1) % 64] + table[threadIdx.x % 100];
}
extern "C" __global__ void __launch_bounds__(128) many(int a0, int a1, int a2, int a3, int a4,
    int a5, int a6, int a7, int a8, int a9, float a10, float a11, double a12, double a13, char a14,
    short a15, long long a16, int* a17, float* a18, double* a19, int a20, int a21, float* out) {
  out[threadIdx.x] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11 + a12 + a13
      + a14 + a15 + a16 + *a17 + *a18 + *a19 + a20 + a21;
}
template <typename T> __global__ void tsum(const T* x, T* out, int n) {
  T s = 0;
  for (int i = 0; i < n; i++) s += x[i];
  *out = s;
}
"#;

/// Instantiations of the template, by name expression.
pub const TEMPLATES: [&str; 2] = ["tsum<float>", "tsum<int>"];

/// The SASS architectures compiled.
pub const ARCHS: [u32; 3] = [75, 80, 90];

/// What NVRTC should produce.
#[derive(Clone, Copy)]
pub enum Output {
    Ptx,
    Cubin,
    LtoIr,
}

/// Calls a raw entry point of an opened CUDA library, panicking with its error on failure.
macro_rules! ffi {
    ($library:expr, $name:ident ( $($arg:expr),* $(,)? )) => {{
        let library = $library;
        let function = library.api.$name.expect(stringify!($name));
        library.check(stringify!($name), function($($arg),*)).unwrap()
    }};
}

/// Compiles [`SOURCE`] with NVRTC.
pub fn compile(options: &[&str], output: Output) -> Vec<u8> {
    let nvrtc = cudyn::sys::nvrtc().expect("NVRTC (run scripts/cuda-wheels and activate its venv)");
    let source = CString::new(SOURCE).unwrap();
    let name = CString::new("kernels.cu").unwrap();
    let options: Vec<CString> = options.iter().map(|o| CString::new(*o).unwrap()).collect();
    let pointers: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
    let expressions: Vec<CString> = TEMPLATES
        .iter()
        .map(|e| CString::new(*e).unwrap())
        .collect();
    let mut program = std::ptr::null_mut();
    // SAFETY: every pointer is a live NUL-terminated string; the program is destroyed below.
    unsafe {
        ffi!(
            nvrtc,
            nvrtcCreateProgram(
                &mut program,
                source.as_ptr(),
                name.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null()
            )
        );
        for expression in &expressions {
            ffi!(nvrtc, nvrtcAddNameExpression(program, expression.as_ptr()));
        }
        let compiled = nvrtc.api.nvrtcCompileProgram.unwrap()(
            program,
            pointers.len() as i32,
            pointers.as_ptr(),
        );
        if nvrtc.check("nvrtcCompileProgram", compiled).is_err() {
            let mut size = 0;
            ffi!(nvrtc, nvrtcGetProgramLogSize(program, &mut size));
            let mut log = vec![0u8; size];
            ffi!(nvrtc, nvrtcGetProgramLog(program, log.as_mut_ptr().cast()));
            panic!("NVRTC failed: {}", String::from_utf8_lossy(&log));
        }
        let mut size = 0;
        let mut code;
        match output {
            Output::Ptx => {
                ffi!(nvrtc, nvrtcGetPTXSize(program, &mut size));
                code = vec![0u8; size];
                ffi!(nvrtc, nvrtcGetPTX(program, code.as_mut_ptr().cast()));
            }
            Output::Cubin => {
                ffi!(nvrtc, nvrtcGetCUBINSize(program, &mut size));
                code = vec![0u8; size];
                ffi!(nvrtc, nvrtcGetCUBIN(program, code.as_mut_ptr().cast()));
            }
            Output::LtoIr => {
                ffi!(nvrtc, nvrtcGetLTOIRSize(program, &mut size));
                code = vec![0u8; size];
                ffi!(nvrtc, nvrtcGetLTOIR(program, code.as_mut_ptr().cast()));
            }
        }
        ffi!(nvrtc, nvrtcDestroyProgram(&mut program));
        code
    }
}

/// A fatbin from nvFatbin holding the given cubins (by SM), PTX (compute_90) and LTO-IR (sm_90).
pub fn fatbin(cubins: &[(u32, &[u8])], ptx: &[u8], ltoir: &[u8], compress_mode: &str) -> Vec<u8> {
    let nvfatbin = cudyn::sys::nvfatbin().expect("nvFatbin (run scripts/cuda-wheels)");
    let option = CString::new(format!("-compress-mode={compress_mode}")).unwrap();
    let mut options = [option.as_ptr()];
    let id = CString::new("kernels").unwrap();
    let arch90 = CString::new("90").unwrap();
    let ptx = CString::new(ptx.strip_suffix(b"\0").unwrap_or(ptx)).unwrap();
    let mut handle = std::ptr::null_mut();
    // SAFETY: every pointer is live for the call; the handle is destroyed below.
    unsafe {
        ffi!(
            nvfatbin,
            nvFatbinCreate(&mut handle, options.as_mut_ptr(), 1)
        );
        for (sm, cubin) in cubins {
            let arch = CString::new(sm.to_string()).unwrap();
            ffi!(
                nvfatbin,
                nvFatbinAddCubin(
                    handle,
                    cubin.as_ptr().cast(),
                    cubin.len(),
                    arch.as_ptr(),
                    id.as_ptr()
                )
            );
        }
        ffi!(
            nvfatbin,
            nvFatbinAddPTX(
                handle,
                ptx.as_ptr(),
                ptx.as_bytes().len(),
                arch90.as_ptr(),
                id.as_ptr(),
                std::ptr::null()
            )
        );
        ffi!(
            nvfatbin,
            nvFatbinAddLTOIR(
                handle,
                ltoir.as_ptr().cast(),
                ltoir.len(),
                arch90.as_ptr(),
                id.as_ptr(),
                std::ptr::null()
            )
        );
        let mut size = 0;
        ffi!(nvfatbin, nvFatbinSize(handle, &mut size));
        let mut out = vec![0u8; size];
        ffi!(nvfatbin, nvFatbinGet(handle, out.as_mut_ptr().cast()));
        ffi!(nvfatbin, nvFatbinDestroy(&mut handle));
        out
    }
}

/// Every fixture, written into one folder.
pub struct Fixtures {
    pub dir: tempfile::TempDir,
    /// (SM, cubin file)
    pub cubins: Vec<(u32, PathBuf)>,
    /// An architecture-specific cubin (sm_90a).
    pub arch_specific: PathBuf,
    pub ptx: PathBuf,
    pub ltoir: PathBuf,
    /// Uncompressed (`-compress-mode=none`) and zstd (`size`) fatbins.
    pub fatbins: Vec<PathBuf>,
    /// A host object with both fatbins in its `.nv_fatbin` section.
    pub host_object: PathBuf,
}

impl Fixtures {
    pub fn all_files(&self) -> Vec<&Path> {
        let mut files: Vec<&Path> = self.cubins.iter().map(|(_, p)| p.as_path()).collect();
        files.extend([
            self.ptx.as_path(),
            self.ltoir.as_path(),
            self.host_object.as_path(),
        ]);
        files.extend(self.fatbins.iter().map(PathBuf::as_path));
        files
    }
}

pub fn fixtures() -> Fixtures {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    };
    let cubin_bytes: Vec<(u32, Vec<u8>)> = ARCHS
        .iter()
        .map(|&sm| {
            (
                sm,
                compile(&[&format!("-arch=sm_{sm}"), "-std=c++17"], Output::Cubin),
            )
        })
        .collect();
    let ptx = compile(&["-arch=compute_90"], Output::Ptx);
    let ltoir = compile(&["-arch=sm_90", "-dlto"], Output::LtoIr);
    let cubin_refs: Vec<(u32, &[u8])> = cubin_bytes.iter().map(|(sm, c)| (*sm, &c[..])).collect();
    let plain = fatbin(&cubin_refs, &ptx, &ltoir, "none");
    let zstd = fatbin(&cubin_refs, &ptx, &ltoir, "size");
    let mut section = plain.clone();
    section.resize(plain.len().next_multiple_of(8), 0);
    section.extend_from_slice(&zstd);
    let fatbins = vec![write("plain.fatbin", &plain), write("zstd.fatbin", &zstd)];
    let host_object = host_object(dir.path(), &write("section.bin", &section));
    Fixtures {
        cubins: cubin_bytes
            .iter()
            .map(|(sm, cubin)| (*sm, write(&format!("sm_{sm}.cubin"), cubin)))
            .collect(),
        arch_specific: write(
            "sm_90a.cubin",
            &compile(&["-arch=sm_90a", "-std=c++17"], Output::Cubin),
        ),
        ptx: write("kernels.ptx", &ptx),
        ltoir: write("kernels.ltoir", &ltoir),
        fatbins,
        host_object,
        dir,
    }
}

/// A host object (gcc) with `section` as its `.nv_fatbin` section, the way nvcc embeds fatbins.
fn host_object(dir: &Path, section: &Path) -> PathBuf {
    let source = dir.join("host.c");
    std::fs::write(&source, "int host_function(void) { return 42; }\n").unwrap();
    let object = dir.join("host.o");
    run(Command::new("cc")
        .arg("-c")
        .arg(&source)
        .arg("-o")
        .arg(&object));
    run(Command::new("objcopy")
        .arg(format!("--add-section=.nv_fatbin={}", section.display()))
        .arg("--set-section-flags=.nv_fatbin=alloc,readonly")
        .arg(&object));
    object
}

/// Runs a command, panicking with its output when it fails; returns its standard output.
pub fn run(command: &mut Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("cannot run {command:?}: {error}"));
    assert!(
        output.status.success(),
        "{command:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// NVIDIA's cuobjdump from the nvidia-cuda-cuobjdump wheel in the active (or cudyn's default)
/// virtual environment.
pub fn cuobjdump() -> PathBuf {
    let venvs = std::env::var_os("VIRTUAL_ENV")
        .map(PathBuf::from)
        .into_iter()
        .chain(std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/cudyn/venv-cu13.0")));
    for venv in venvs {
        let Ok(libs) = std::fs::read_dir(venv.join("lib")) else {
            continue;
        };
        for python in libs.flatten() {
            let candidate = python
                .path()
                .join("site-packages/nvidia/cu13/bin/cuobjdump");
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!("cuobjdump not found: run scripts/cuda-wheels (it installs nvidia-cuda-cuobjdump) and activate its venv");
}
