//! The sources of the parallel-compile benchmarks (`bench_parallel_compile` and `cudyn-bench`'s
//! parallel rows): many different programs of the size the parallel targets assume, five
//! template instantiations each costing about 50-80 ms of NVRTC's time on a 16-core H200 host
//! once NVRTC is warm.
//!
//! Each instantiation chains `links` template recursions of 32 steps that inlining flattens, so
//! a source's size follows `links` whatever the compiler's unrolling heuristics decide (an
//! unrolled loop is not: its cost differed by a factor of ten between two machines).

/// The variable that sets the chain's length (default [`DEFAULT_LINKS`]): the knob that sizes
/// the sources.
pub const LINKS_ENV: &str = "CUDYN_BENCH_LINKS";

/// The chain length of the targets' source size: 3 links measured 40 ms a source on a 16-core
/// H200 host (NVRTC 13.0, warm), and the cost grows with the chain.
pub const DEFAULT_LINKS: usize = 5;

/// The five instantiations each source holds explicitly, as name expressions.
pub const INSTANTIATIONS: [&str; 5] = [
    "poly<1, float>",
    "poly<2, float>",
    "poly<3, double>",
    "poly<4, float>",
    "poly<5, double>",
];

/// The chain length: [`LINKS_ENV`] when set to a number, else [`DEFAULT_LINKS`].
pub fn links() -> usize {
    std::env::var(LINKS_ENV)
        .ok()
        .and_then(|links| links.parse().ok())
        .unwrap_or(DEFAULT_LINKS)
}

/// Source `k` of a batch, `tag` in a comment (to make it new to every cache): a constant of its
/// own changes the code of every instantiation. The instantiations are explicit, so a compile
/// without name expressions (raw NVRTC) makes the same five kernels.
pub fn batch_source(k: usize, tag: &str, links: usize) -> String {
    let chain: String = (0..links)
        .map(|link| format!("v = Step<32, {link}, T>::run(v); "))
        .collect();
    let instantiations: String = INSTANTIATIONS
        .iter()
        .map(|expression| {
            let element = if expression.contains("double") {
                "double"
            } else {
                "float"
            };
            format!("template __global__ void {expression}({element} *, int);\n")
        })
        .collect();
    format!(
        "// batch source {k}, {tag}\n\
         #define SALT {k}\n\
         template <int N, int L, typename T> struct Step {{\n\
             __device__ static T run(T v) {{\n\
                 return Step<N - 1, L, T>::run(v * T(N % 7 + L) + T(N + SALT) / (v + T(1)));\n\
             }}\n\
         }};\n\
         template <int L, typename T> struct Step<0, L, T> {{\n\
             __device__ static T run(T v) {{ return v; }}\n\
         }};\n\
         template <int K, typename T>\n\
         __global__ void poly(T *p, int n) {{\n\
             int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
             if (i >= n) return;\n\
             T v = p[i] * T(K);\n\
             {chain}\n\
             p[i] = v;\n\
         }}\n\
         {instantiations}"
    )
}
