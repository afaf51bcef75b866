//! cudyn-build driving the real nvcc (a toolkit's, or the CUDA wheels' of scripts/cuda-wheels).

use cudyn_build::{nvcc, Build, Error, Kernel};

fn found_nvcc() -> cudyn_build::Nvcc {
    nvcc::find(nvcc::candidates(|key| std::env::var_os(key))).unwrap_or_else(|searched| {
        panic!(
            "these tests need nvcc: set CUDA_HOME or run scripts/cuda-wheels. Looked at:\n{}",
            searched.join("\n")
        )
    })
}

#[test]
fn kernels_compile_into_a_static_library_with_a_getter_each() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("ops.cu");
    std::fs::write(
        &source,
        "__global__ void vectorAdd(const float *a, const float *b, float *c, int n) {}\n\
         template <typename T> __global__ void scale(T *data, T factor, int n) {}\n\
         template __global__ void scale<float>(float *, float, int);\n",
    )
    .unwrap();
    let linked = Build::new()
        .file(
            &source,
            [
                Kernel::new("vectorAdd"),
                Kernel::instance("scale<float>", "scale_f32"),
            ],
        )
        .arch("sm_90")
        .out_dir(dir.path())
        .build("ops", found_nvcc())
        .unwrap();
    let archive = std::fs::read(&linked.library).unwrap();
    assert!(archive.starts_with(b"!<arch>\n"), "a static library");
    for getter in ["cudyn_kernel_ops_vectorAdd", "cudyn_kernel_ops_scale_f32"] {
        let defined = archive
            .windows(getter.len())
            .any(|window| window == getter.as_bytes());
        assert!(defined, "{getter} is in the archive's symbol table");
    }
    let rust = std::fs::read_to_string(&linked.rust).unwrap();
    assert!(rust.contains("pub fn vector_add()"), "{rust}");
    assert!(rust.contains("pub fn scale_f32()"), "{rust}");
    assert!(linked.nvcc.static_runtime_dir().is_some());
}

#[test]
fn an_nvcc_error_fails_the_build_with_nvcc_s_message() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("broken.cu");
    std::fs::write(&source, "__global__ void broken( { }\n").unwrap();
    let error = Build::new()
        .file(&source, ["broken"])
        .out_dir(dir.path())
        .build("broken", found_nvcc())
        .unwrap_err();
    let Error::NvccFailed { file, output, .. } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(file, &source);
    assert!(output.contains("broken.cu"), "{output}");
    assert!(
        error
            .to_string()
            .starts_with("fix the error nvcc reports for"),
        "{error}"
    );
}
