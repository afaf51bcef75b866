//! On the GPU machine: a program built there by nvcc lists its embedded kernels.

use std::path::PathBuf;
use std::process::Command;

use cudyn::inspect::Module;
use cudyn::{Image, ImageKind};

const PROGRAM: &str = r#"
#include <cstdio>
__global__ void scale(float* x, float a, int n) { int i = threadIdx.x; if (i < n) x[i] *= a; }
template <typename T> __global__ void fill(T* x, T v) { x[threadIdx.x] = v; }
int main() {
  float* x; cudaMalloc(&x, 256 * sizeof(float));
  scale<<<1, 256>>>(x, 2.0f, 256);
  fill<<<1, 256>>>(x, 1.0f);
  fill<<<1, 256>>>(reinterpret_cast<int*>(x), 1);
  printf("%d\n", (int)cudaDeviceSynchronize());
}
"#;

#[test]
#[ignore = "gpu: needs nvcc from the CUDA toolkit ($CUDA_HOME) on the GPU machine"]
fn nvcc_program_lists_its_embedded_kernels() {
    let cuda_home = std::env::var_os("CUDA_HOME")
        .map_or_else(|| PathBuf::from("/usr/local/cuda"), PathBuf::from);
    let nvcc = cuda_home.join("bin/nvcc");
    assert!(
        nvcc.is_file(),
        "nvcc not found at {} (set CUDA_HOME)",
        nvcc.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("program.cu");
    std::fs::write(&source, PROGRAM).unwrap();
    let program = dir.path().join("program");
    let status = Command::new(&nvcc)
        .args([
            "-arch=sm_90",
            "-gencode=arch=compute_80,code=[sm_80,compute_80]",
            "-gencode=arch=compute_90,code=sm_90",
            "-o",
        ])
        .arg(&program)
        .arg(&source)
        .status()
        .unwrap();
    assert!(status.success(), "nvcc failed");

    let image = Image::from_file(&program).unwrap();
    assert_eq!(image.kind(), ImageKind::HostBinary);
    assert!(!image.embedded_fatbins().unwrap().is_empty());
    let inspection = image.inspect().unwrap();
    let mut archs = Vec::new();
    for module in inspection.modules() {
        if let Module::Cubin(cubin) = module {
            archs.push(cubin.arch);
            let mut names: Vec<&str> = cubin.kernels.iter().map(|k| k.name.as_str()).collect();
            names.sort_unstable();
            assert_eq!(
                names,
                ["_Z4fillIfEvPT_S0_", "_Z4fillIiEvPT_S0_", "_Z5scalePffi"],
                "sm_{}",
                cubin.arch
            );
            let scale = cubin.kernel("_Z5scalePffi").unwrap();
            let sizes: Vec<u32> = scale.params.iter().map(|p| p.size).collect();
            assert_eq!(sizes, [8, 4, 4]);
            assert_eq!(
                scale.demangled.as_deref(),
                Some("scale(float*, float, int)")
            );
        }
    }
    archs.sort_unstable();
    assert_eq!(archs, [80, 90]);
}
