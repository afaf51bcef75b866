//! Compiles kernels/vector_ops.cu with nvcc into a static library linked into this program, with
//! a handle getter per kernel. Without nvcc the program still builds (a cargo warning says so)
//! and reports at run time that its kernels were left out: this crate is a workspace member, and
//! the workspace builds on machines without CUDA.

fn main() {
    cudyn_build::Build::new()
        .file(
            "kernels/vector_ops.cu",
            [
                cudyn_build::Kernel::new("vectorAdd"),
                cudyn_build::Kernel::instance("scale<float>", "scale_f32"),
            ],
        )
        // SASS for Hopper and PTX, which the driver compiles for any newer GPU.
        .arch("sm_90")
        .compile_or_stub("vector_ops")
        .unwrap_or_else(|error| panic!("{error}"));
}
