//! Benchmarks of run-time compilation and linking, printing medians and ratios.
//!
//! 1. Source to first completed launch: cudyn (`Program::load`, `Library::kernel`, checked
//!    `Kernel::launch`) against raw NVRTC + `cudaLibraryLoadData` + `cudaLibraryGetKernel` +
//!    `cudaLaunchKernel`, each followed by synchronize and a check of the result. (GPU)
//! 2. A call-heavy kernel split over two sources: linked with LTO, built as one source, and linked
//!    without LTO; kernel time measured with events. (GPU)
//! 3. Compiling 8 sources in parallel (`compile_all`: the worker processes of cudyn's compile
//!    server) against one after another, both warm. (CPU only: runs anywhere;
//!    bench_parallel_compile.rs measures fresh, cold processes)
//!
//! Run: `source ~/.cache/cudyn/venv-cu13.0/bin/activate` (or have the CUDA toolkit), then
//! `cargo run --release -p cudyn-bench --bin bench_compile`. The GPU parts say why they are skipped
//! where there is no GPU.
//!
//! NVRTC answers a program it has compiled before in the same process from a cache (measured with
//! NVRTC 13.0 on an H200 host: 19 ms instead of 250 ms), so every timed compile here gets a source of its own
//! (a unique comment): the figures are of real compiles.

#[macro_use]
#[path = "../../../cudyn/tests/raw_runtime/mod.rs"]
mod raw_runtime;

#[path = "../durations.rs"]
mod durations;

use std::ffi::c_void;
use std::time::{Duration, Instant};

use durations::median;

use cudyn::compile::{
    self, compile_all, compile_all_on, Arch, InputKind, LinkOptions, Output, Program,
};
use cudyn::Result;
use raw_runtime::{launch, raw_nvrtc_cubin, synchronize, DeviceBuffer, Event, RawLibrary};

const SAXPY: &str = include_str!("../../../cudyn/tests/kernels/saxpy.cu");
const ITERATE_KERNEL: &str = include_str!("../../../cudyn/tests/kernels/iterate_kernel.cu");
const ITERATE_STEP: &str = include_str!("../../../cudyn/tests/kernels/iterate_step.cu");

fn main() {
    let gpu = match cudyn::Device::count() {
        Ok(0) => Err("the driver sees no GPU".to_owned()),
        Ok(_) => Arch::current().map_err(|error| error.to_string()),
        Err(error) => Err(error.to_string().lines().next().unwrap_or("").to_owned()),
    };
    match &gpu {
        Ok(arch) => {
            report("1. source to first completed launch", first_launch(*arch));
            report("2. call-heavy kernel over two sources", call_heavy(*arch));
        }
        Err(reason) => {
            println!("1. source to first completed launch: skipped, needs a GPU ({reason})");
            println!("2. call-heavy kernel over two sources: skipped, needs a GPU ({reason})");
        }
    }
    let arch = gpu.unwrap_or(Arch::new(9, 0));
    report("3. compiling 8 sources", parallel_compile(arch));
}

fn report(part: &str, outcome: Result<()>) {
    if let Err(error) = outcome {
        println!("{part}: failed: {error}");
    }
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// Loads `cubin`, launches its `saxpy` once on `n` elements and waits for it.
fn load_and_launch(cubin: &[u8], n: usize) -> Result<()> {
    let library = RawLibrary::load(cubin)?;
    let kernel = library.kernel("saxpy")?;
    let mut a = 2.0f32;
    let mut len = n;
    let mut x = DeviceBuffer::from_slice(&vec![1.0f32; n])?;
    let mut y = DeviceBuffer::from_slice(&vec![1.0f32; n])?;
    let mut out = DeviceBuffer::from_slice(&vec![0.0f32; n])?;
    let mut args: [*mut c_void; 5] = [
        (&mut a as *mut f32).cast(),
        (x.pointer() as *mut *mut c_void).cast(),
        (y.pointer() as *mut *mut c_void).cast(),
        (out.pointer() as *mut *mut c_void).cast(),
        (&mut len as *mut usize).cast(),
    ];
    launch(kernel, n.div_ceil(128) as u32, 128, &mut args)?;
    synchronize()?;
    assert_saxpy_result(&out.to_vec()?);
    Ok(())
}

/// A timing of wrong code means nothing: 2 * 1 + 1 everywhere, or the benchmark stops.
fn assert_saxpy_result(out: &[f32]) {
    assert!(
        out.iter().all(|&v| v == 3.0),
        "saxpy computed a wrong result"
    );
}

/// `source` with a comment making it unique in this run, so NVRTC compiles it for real.
fn fresh(source: &str, tag: impl std::fmt::Display) -> String {
    static RUN: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
    let run = RUN.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos())
    });
    format!("{source}\n// run {run}, {tag}\n")
}

/// Compiles, loads and launches `source`'s saxpy on `n` elements through cudyn, and checks it.
fn cudyn_first_launch(source: String, n: usize) -> Result<()> {
    let library = Program::new(source).name("saxpy.cu").load()?;
    let saxpy = library.kernel("saxpy")?;
    let x = cudyn::DeviceBuffer::from_slice(&vec![1.0f32; n])?;
    let y = cudyn::DeviceBuffer::from_slice(&vec![1.0f32; n])?;
    let mut out = cudyn::DeviceBuffer::<f32>::zeroed(n)?;
    // SAFETY: saxpy reads x[i], y[i] and writes out[i] for i < n, and all three buffers hold n
    // floats; they outlive the kernel, which the synchronization below waits for.
    unsafe {
        saxpy.launch(
            &cudyn::LaunchConfig::for_elements(n, 128),
            (2.0f32, &x, &y, &mut out, n as u64),
        )
    }?;
    cudyn::synchronize()?;
    assert_saxpy_result(&out.to_vec()?);
    Ok(())
}

fn first_launch(arch: Arch) -> Result<()> {
    const ROUNDS: usize = 11;
    const N: usize = 4096;
    // Warm both paths once: library opening and context creation are not what is compared.
    load_and_launch(&raw_nvrtc_cubin(&fresh(SAXPY, "warm raw"), &arch.sm())?, N)?;
    cudyn_first_launch(fresh(SAXPY, "warm cudyn"), N)?;
    let (mut cudyn_times, mut raw_times) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let source = fresh(SAXPY, format!("cudyn {round}"));
        let start = Instant::now();
        cudyn_first_launch(source, N)?;
        cudyn_times.push(start.elapsed());

        let source = fresh(SAXPY, format!("raw {round}"));
        let start = Instant::now();
        load_and_launch(&raw_nvrtc_cubin(&source, &arch.sm())?, N)?;
        raw_times.push(start.elapsed());
    }
    let (cudyn, raw) = (median(cudyn_times), median(raw_times));
    println!(
        "1. source to first completed launch ({arch}, median of {ROUNDS}): cudyn {:.2} ms, raw \
         NVRTC + cudaLibraryLoadData {:.2} ms, ratio {:.3} (target <= 1.05)",
        ms(cudyn),
        ms(raw),
        cudyn.as_secs_f64() / raw.as_secs_f64()
    );
    Ok(())
}

/// Median kernel time (ms) of `iterate` in `cubin`, and what it computed.
fn time_iterate(cubin: &[u8], data: &[f32], steps: i32) -> Result<(f32, Vec<f32>)> {
    const ROUNDS: usize = 21;
    let library = RawLibrary::load(cubin)?;
    let kernel = library.kernel("iterate")?;
    let mut buffer = DeviceBuffer::from_slice(data)?;
    let mut steps = steps;
    let mut len = data.len();
    let mut args: [*mut c_void; 3] = [
        (buffer.pointer() as *mut *mut c_void).cast(),
        (&mut steps as *mut i32).cast(),
        (&mut len as *mut usize).cast(),
    ];
    let blocks = data.len().div_ceil(256) as u32;
    let (start, end) = (Event::new()?, Event::new()?);
    let mut times = Vec::new();
    for _ in 0..ROUNDS {
        start.record()?;
        launch(kernel, blocks, 256, &mut args)?;
        end.record()?;
        times.push(end.elapsed_since(&start)?);
    }
    // The first launch ran on `data`; the rest iterate further, so reload for the result.
    drop(buffer);
    let mut fresh = DeviceBuffer::from_slice(data)?;
    args[0] = (fresh.pointer() as *mut *mut c_void).cast();
    launch(kernel, blocks, 256, &mut args)?;
    synchronize()?;
    times.sort_by(f32::total_cmp);
    Ok((times[ROUNDS / 2], fresh.to_vec()?))
}

fn call_heavy(arch: Arch) -> Result<()> {
    const STEPS: i32 = 4096;
    let data: Vec<f32> = (0..1 << 20).map(|i| (i % 1000) as f32).collect();

    let single = Program::new(format!("{ITERATE_STEP}\n{ITERATE_KERNEL}"))
        .arch(arch)
        .compile()?;

    let lto_piece = |source: &str| {
        Program::new(source)
            .arch(arch)
            .output(Output::LtoIr)
            .relocatable(true)
            .compile()
    };
    let lto = compile::link_lto(
        &[
            lto_piece(ITERATE_KERNEL)?.code(),
            lto_piece(ITERATE_STEP)?.code(),
        ],
        Some(arch),
    )?;

    let cubin_piece = |source: &str| Program::new(source).arch(arch).relocatable(true).compile();
    let (kernel, step) = (cubin_piece(ITERATE_KERNEL)?, cubin_piece(ITERATE_STEP)?);
    let mut linker = LinkOptions::new().arch(arch).linker()?;
    linker.add(InputKind::Cubin, kernel.code(), "iterate_kernel.cubin")?;
    linker.add(InputKind::Cubin, step.code(), "iterate_step.cubin")?;
    let no_lto = linker.finish()?;

    let (single_ms, single_out) = time_iterate(single.code(), &data, STEPS)?;
    let (lto_ms, lto_out) = time_iterate(lto.code(), &data, STEPS)?;
    let (no_lto_ms, no_lto_out) = time_iterate(no_lto.code(), &data, STEPS)?;
    let agree = single_out == lto_out && single_out == no_lto_out;
    println!(
        "2. call-heavy kernel ({} elements x {STEPS} calls, median of 21): single source {:.3} ms, \
         two pieces + LTO {:.3} ms (ratio {:.3}, target <= 1.03), two pieces without LTO {:.3} ms \
         (ratio {:.3}); results {}",
        data.len(),
        single_ms,
        lto_ms,
        lto_ms / single_ms,
        no_lto_ms,
        no_lto_ms / single_ms,
        if agree { "identical" } else { "DIFFER" }
    );
    Ok(())
}

/// Eight different sources (a comment and the instantiations differ), each heavy enough (five
/// instantiations of an unrolled loop) that compiling dominates thread start-up; `tag` makes
/// them new to NVRTC.
fn eight_programs(arch: Arch, tag: &str) -> Vec<Program> {
    (1..=8)
        .map(|k| {
            let source = fresh(
                "template <int K, typename T>\n\
                 __global__ void poly(T *p, int n) {\n\
                     int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
                     if (i >= n) return;\n\
                     T v = p[i];\n\
                     #pragma unroll\n\
                     for (int j = 0; j < 16; ++j) v = v * T(K) + T(j) / (v + T(1));\n\
                     p[i] = v;\n\
                 }\n",
                format!("{tag}, source {k}"),
            );
            Program::new(source)
                .name(format!("poly_{k}.cu"))
                .arch(arch)
                .name_expression("poly<1, float>")
                .name_expression(format!("poly<{k}, float>"))
                .name_expression(format!("poly<{}, double>", k + 10))
                .name_expression(format!("poly<{}, float>", k + 20))
                .name_expression(format!("poly<{}, double>", k + 30))
        })
        .collect()
}

fn parallel_compile(arch: Arch) -> Result<()> {
    const ROUNDS: usize = 5;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let check = |results: Vec<Result<compile::Compiled>>| -> Result<()> {
        for result in results {
            result?;
        }
        Ok(())
    };
    // Warm-up: opens NVRTC, gives this thread its first compiles (much slower than later ones:
    // see compile::workers) and starts the compile server of compile_all.
    check(compile_all_on(
        &eight_programs(arch, "warm-up sequential"),
        1,
    ))?;
    check(compile_all(&eight_programs(arch, "warm-up parallel")))?;
    let (mut sequential, mut parallel) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let programs = eight_programs(arch, &format!("sequential {round}"));
        let start = Instant::now();
        check(compile_all_on(&programs, 1))?;
        sequential.push(start.elapsed());
        let programs = eight_programs(arch, &format!("parallel {round}"));
        let start = Instant::now();
        check(compile_all(&programs))?;
        parallel.push(start.elapsed());
    }
    let (sequential, parallel) = (median(sequential), median(parallel));
    println!(
        "3. compiling 8 sources for {arch} (median of {ROUNDS}, {threads} cores): sequential {:.1} ms, \
         parallel {:.1} ms, speed-up {:.2}x (target >= 1.6x on 2 cores)",
        ms(sequential),
        ms(parallel),
        sequential.as_secs_f64() / parallel.as_secs_f64()
    );
    Ok(())
}
