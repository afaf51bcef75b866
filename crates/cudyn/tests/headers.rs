//! CUDA's own headers with no include flag: half and bfloat16, cooperative groups, `cuda::std`
//! and CUB compile through NVRTC as they are, and the opt-out makes a missing header an error
//! that names it, the folders searched and what provides it. Needs NVRTC and the pinned header
//! wheels of scripts/cuda-wheels (nvidia-cuda-runtime, nvidia-cuda-crt, nvidia-cuda-cccl); no GPU.

use cudyn::compile::{Arch, Output, Program};
use cudyn::locate::CudaHeaders;
use cudyn::Error;

const SM_90: Arch = Arch::new(9, 0);

/// A kernel of tests/kernels, its file name, the header that makes it need CUDA's headers and
/// the size of each of its parameters in order.
struct HeaderKernel {
    file: &'static str,
    source: &'static str,
    kernel: &'static str,
    header: &'static str,
    param_sizes: &'static [usize],
}

const KERNELS: [HeaderKernel; 4] = [
    HeaderKernel {
        file: "half_bf16_axpy.cu",
        source: include_str!("kernels/half_bf16_axpy.cu"),
        kernel: "half_bf16_axpy",
        header: "cuda_bf16.h",
        param_sizes: &[4, 8, 8, 8, 8, 8],
    },
    HeaderKernel {
        file: "grid_sum_cooperative.cu",
        source: include_str!("kernels/grid_sum_cooperative.cu"),
        kernel: "grid_sum",
        header: "cooperative_groups.h",
        param_sizes: &[8, 8, 8, 8],
    },
    HeaderKernel {
        file: "complex_multiply.cu",
        source: include_str!("kernels/complex_multiply.cu"),
        kernel: "complex_multiply",
        header: "cuda/std/complex",
        param_sizes: &[8, 8, 8, 8],
    },
    HeaderKernel {
        file: "cub_block_sum.cu",
        source: include_str!("kernels/cub_block_sum.cu"),
        kernel: "cub_block_sum",
        header: "cub/block/block_reduce.cuh",
        param_sizes: &[8, 8, 8],
    },
];

/// `source` as `file`, for sm_90.
fn program(file: &str, source: &str) -> Program {
    if let Err(error) = cudyn::sys::nvrtc() {
        panic!(
            "NVRTC is missing: {error}\nrun scripts/cuda-wheels, then `source \
             ~/.cache/cudyn/venv-cu13.0/bin/activate`"
        );
    }
    Program::new(source)
        .name(file)
        .arch(SM_90)
        .output(Output::Cubin)
}

#[test]
fn kernels_including_cudas_headers_compile_with_no_include_flag() {
    for kernel in &KERNELS {
        let program = program(kernel.file, kernel.source);
        let compiled = program
            .compile()
            .unwrap_or_else(|error| panic!("{}: {error}", kernel.file));
        let layout = cudyn::inspect::inspect(compiled.code())
            .unwrap()
            .param_layout(kernel.kernel)
            .unwrap_or_else(|error| panic!("{}: {error}", kernel.file))
            .unwrap_or_else(|| {
                panic!("{}: the cubin has no kernel {}", kernel.file, kernel.kernel)
            });
        let sizes: Vec<usize> = layout.iter().map(|param| param.size).collect();
        assert_eq!(sizes, kernel.param_sizes, "{}", kernel.file);
    }
}

#[test]
fn the_header_folders_are_cudas_and_cccls_after_the_programs_own() {
    let headers = CudaHeaders::for_this_process();
    let cuda = headers.cuda.as_ref().expect("CUDA's headers are found");
    let cccl = headers.cccl.as_ref().expect("CCCL is found");
    assert!(cuda.folder.join("cuda_fp16.h").is_file());
    assert!(cccl.folder.join("cub/block/block_reduce.cuh").is_file());
    assert_eq!(cuda.cuda_version, headers.nvrtc_version, "{cuda}");
    let options = Program::new("").include("/my/headers").nvrtc_options(SM_90);
    let includes: Vec<&str> = options
        .iter()
        .filter(|o| o.starts_with("-I"))
        .map(String::as_str)
        .collect();
    assert_eq!(
        includes,
        [
            "-I/my/headers".to_owned(),
            format!("-I{}", cccl.folder.display()),
            format!("-I{}", cuda.folder.display()),
        ]
    );
}

#[test]
fn without_the_default_includes_the_error_names_the_header_the_folders_and_the_fix() {
    for kernel in &KERNELS {
        let error = program(kernel.file, kernel.source)
            .default_includes(false)
            .include("/nonexistent/include")
            .compile()
            .unwrap_err();
        let Error::HeaderNotFound {
            header,
            searched,
            provider,
            log,
        } = &error
        else {
            panic!("{}: not a missing header: {error}", kernel.file);
        };
        assert_eq!(header, kernel.header, "{error}");
        assert_eq!(searched[0], "/nonexistent/include (Program::include)");
        assert!(
            searched[1].contains("default_includes(false)"),
            "{searched:?}"
        );
        let package = if kernel.header.contains('/') {
            "nvidia-cuda-cccl"
        } else {
            "nvidia-cuda-runtime"
        };
        assert!(provider.contains(package), "{provider}");
        assert!(
            log.contains(&format!("{}:", kernel.file)),
            "the source line is cited: {log}"
        );
        let text = error.to_string();
        assert!(
            text.starts_with(&format!("the header `{}` was not found", kernel.header)),
            "{text}"
        );
    }
}

#[test]
fn a_header_missing_from_cudas_folders_lists_them_and_names_its_package() {
    let headers = CudaHeaders::for_this_process();
    let cub = &KERNELS[3];
    let source = cub.source.replace(cub.header, "cub/no_such.cuh");
    let error = program(cub.file, &source).compile().unwrap_err();
    let Error::HeaderNotFound {
        header,
        searched,
        provider,
        ..
    } = &error
    else {
        panic!("not a missing header: {error}");
    };
    assert_eq!(header, "cub/no_such.cuh");
    let listed: Vec<String> = headers
        .include_folders()
        .iter()
        .map(|folder| format!("{} (CUDA's headers, found by cudyn)", folder.display()))
        .collect();
    assert_eq!(searched, &listed);
    assert!(provider.contains("nvidia-cuda-cccl"), "{provider}");
}
