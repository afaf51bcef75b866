//! What an isolated link costs (`LinkOptions::isolated`: nvJitLink in a link worker process)
//! against the same link in the calling process, on the CPU (nvJitLink needs no GPU).
//!
//! Links, all from NVRTC for sm_90, with the compile cache off:
//!
//! - **small LTO**: two LTO-IR pieces, a kernel and the function it calls, linked with `-lto`
//!   (the 2-piece link of `cudyn::compile::link_lto`);
//! - **medium LTO**: two LTO-IR pieces of templated tiled matrix products, five instantiations,
//!   linked with `-lto`;
//! - **small cubin**: the small pieces as relocatable cubins, without `-lto`.
//!
//! Each round links every case once in the process and once isolated, interleaved, so that both
//! see the same machine; the medians and the ratio isolated / in-process are printed, and the
//! first isolated link of the process (which starts the worker) apart.
//!
//! Run: `source ~/.cache/cudyn/venv-cu13.0/bin/activate` (NVRTC and nvJitLink from the CUDA
//! wheels, or a CUDA toolkit), build the worker, `cargo build --release -p cudyn-cli`, then
//! `cargo run --release -p cudyn-bench --bin bench_link_isolated` (the worker is the `cudyn`
//! beside the benchmark, or the one `CUDYN_WORKER` names). An argument sets the rounds (41).

#[path = "../durations.rs"]
mod durations;

use std::time::{Duration, Instant};

use durations::median;

use cudyn::compile::{Arch, InputKind, LinkOptions, Output, Program};
use cudyn::Result;

const ARCH: Arch = Arch::new(9, 0);

const SMALL_KERNEL: &str = "__device__ float twice(float x);\n\
    extern \"C\" __global__ void k(float *p) { p[threadIdx.x] = twice(p[threadIdx.x]); }\n";
const SMALL_HELPER: &str = "__device__ float twice(float x) { return 2 * x; }\n";

const MEDIUM_KERNEL: &str = r#"
template <typename T> __device__ T combine(T a, T b);
template <typename T, int TILE>
__global__ void product(const T *a, const T *b, T *c, int n) {
    __shared__ T sa[TILE][TILE], sb[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    T sum = 0;
    for (int t = 0; t < n / TILE; ++t) {
        sa[threadIdx.y][threadIdx.x] = a[row * n + t * TILE + threadIdx.x];
        sb[threadIdx.y][threadIdx.x] = b[(t * TILE + threadIdx.y) * n + col];
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < TILE; ++k) sum = combine(sum, sa[threadIdx.y][k] * sb[k][threadIdx.x]);
        __syncthreads();
    }
    c[row * n + col] = sum;
}
template __global__ void product<float, 16>(const float *, const float *, float *, int);
template __global__ void product<float, 32>(const float *, const float *, float *, int);
template __global__ void product<double, 16>(const double *, const double *, double *, int);
template __global__ void product<int, 16>(const int *, const int *, int *, int);
template __global__ void product<long long, 8>(const long long *, const long long *, long long *, int);
"#;
const MEDIUM_HELPER: &str = r#"
template <typename T> __device__ T combine(T a, T b) { return a + b + (a > b ? a - b : b - a) / 1024; }
template __device__ float combine<float>(float, float);
template __device__ double combine<double>(double, double);
template __device__ int combine<int>(int, int);
template __device__ long long combine<long long>(long long, long long);
"#;

/// One link to time: its name, whether it uses `-lto`, and its two pieces.
struct Case {
    name: &'static str,
    lto: bool,
    kind: InputKind,
    pieces: [Vec<u8>; 2],
}

fn piece(source: &str, output: Output) -> Result<Vec<u8>> {
    Ok(Program::new(source)
        .arch(ARCH)
        .output(output)
        .relocatable(true)
        .cache(false)
        .compile()?
        .into_code())
}

fn link(case: &Case, isolated: bool) -> Result<Duration> {
    let started = Instant::now();
    let mut linker = LinkOptions::new()
        .arch(ARCH)
        .lto(case.lto)
        .cache(false)
        .isolated(isolated)
        .linker()?;
    for (index, bytes) in case.pieces.iter().enumerate() {
        linker.add(case.kind, bytes, &format!("piece{index}"))?;
    }
    std::hint::black_box(linker.finish()?);
    Ok(started.elapsed())
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|rounds| rounds.parse().ok())
        .unwrap_or(41);
    let cases = [
        Case {
            name: "small LTO",
            lto: true,
            kind: InputKind::LtoIr,
            pieces: [
                piece(SMALL_KERNEL, Output::LtoIr)?,
                piece(SMALL_HELPER, Output::LtoIr)?,
            ],
        },
        Case {
            name: "medium LTO",
            lto: true,
            kind: InputKind::LtoIr,
            pieces: [
                piece(MEDIUM_KERNEL, Output::LtoIr)?,
                piece(MEDIUM_HELPER, Output::LtoIr)?,
            ],
        },
        Case {
            name: "small cubin",
            lto: false,
            kind: InputKind::Cubin,
            pieces: [
                piece(SMALL_KERNEL, Output::Cubin)?,
                piece(SMALL_HELPER, Output::Cubin)?,
            ],
        },
    ];
    // nvJitLink's own start-up in this process, outside the figures.
    link(&cases[0], false)?;
    let first = link(&cases[0], true)?;
    println!(
        "first isolated link of the process (starts the worker): {:.2} ms",
        first.as_secs_f64() * 1e3
    );
    println!("{rounds} rounds, medians:");
    println!(
        "{:<12} {:>12} {:>12} {:>7}",
        "link", "in-process", "isolated", "ratio"
    );
    let mut samples: Vec<(Vec<Duration>, Vec<Duration>)> = vec![Default::default(); cases.len()];
    for _ in 0..rounds {
        for (case, (here, isolated)) in cases.iter().zip(&mut samples) {
            here.push(link(case, false)?);
            isolated.push(link(case, true)?);
        }
    }
    for (case, (here, isolated)) in cases.iter().zip(samples) {
        let (here, isolated) = (median(here), median(isolated));
        println!(
            "{:<12} {:>9.2} ms {:>9.2} ms {:>6.3}x",
            case.name,
            here.as_secs_f64() * 1e3,
            isolated.as_secs_f64() * 1e3,
            isolated.as_secs_f64() / here.as_secs_f64()
        );
    }
    Ok(())
}
