//! On a machine with the CUDA toolkit: a program built there by nvcc lists its embedded kernels.

use std::path::PathBuf;
use std::process::Command;

use cudyn::inspect::{Contents, Module};
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
#[ignore = "gpu: needs nvcc from the CUDA toolkit ($CUDA_HOME)"]
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
    // The static CUDA runtime linked in brings fatbins of its own, with no kernels.
    let mut archs = Vec::new();
    for module in inspection.modules() {
        let Module::Cubin(cubin) = module else {
            continue;
        };
        if cubin.kernels.is_empty() {
            continue;
        }
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
        let layout: Vec<(usize, usize)> = scale.params.iter().map(|p| (p.offset, p.size)).collect();
        assert_eq!(layout, [(0, 8), (8, 4), (12, 4)]);
        assert_eq!(
            scale.demangled.as_deref(),
            Some("scale(float*, float, int)")
        );
    }
    archs.sort_unstable();
    assert_eq!(archs, [80, 90]);
    assert_eq!(
        image.param_layout("_Z4fillIfEvPT_S0_").unwrap().len(),
        2,
        "offline layout of a template instance"
    );

    // Relocatable device code (-rdc) keeps its fatbin in __nv_relfatbin, in an object file.
    let object = dir.path().join("program.o");
    let status = Command::new(&nvcc)
        .args(["-rdc=true", "-c", "-arch=sm_90", "-o"])
        .arg(&object)
        .arg(&source)
        .status()
        .unwrap();
    assert!(status.success(), "nvcc -rdc failed");
    let inspection = Image::from_file(&object).unwrap().inspect().unwrap();
    let Contents::HostBinary(host) = &inspection.contents else {
        panic!("not a host binary: {inspection:?}");
    };
    assert_eq!(host.sections[0].name, "__nv_relfatbin");
    assert!(inspection.param_layout("_Z5scalePffi").unwrap().is_some());
}
