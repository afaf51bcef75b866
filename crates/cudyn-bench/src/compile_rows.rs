//! Compiling: link-time optimization against a single source, and a batch of sources compiled in
//! parallel against one after another. Every timed compile gets a source new to NVRTC (which
//! answers a program it has seen in the same process from memory) and to every cache.

use std::ffi::OsStr;
use std::time::Instant;

use cudyn::compile;
use cudyn::{Arch, Event, LaunchConfig, Library, Program};

use crate::child::{self, ARCH_ENV};
use crate::raw_runtime::raw_nvrtc_cubin;
use crate::report::{median, ms, Row};
use crate::Bench;

const ITERATE_KERNEL: &str = include_str!("../../cudyn/tests/kernels/iterate_kernel.cu");
const ITERATE_STEP: &str = include_str!("../../cudyn/tests/kernels/iterate_step.cu");

/// Builds of each kind, interleaved.
const BUILDS: usize = 5;
/// Timed kernel runs of each build.
const KERNEL_RUNS: usize = 21;
/// Calls of `step` per element in the kernel-time row.
const STEPS: i32 = 4096;
/// The batch sizes of the parallel rows.
const BATCHES: [usize; 2] = [32, 128];

/// The two pieces, compiled to LTO-IR (at the same time) and linked with link-time optimization,
/// in the library's one call. Each piece is new to every cache (see [`tagged`]), the link too.
fn lto_build(arch: Arch, tag: &str) -> cudyn::Result<compile::Linked> {
    let pieces = [(ITERATE_KERNEL, "kernel"), (ITERATE_STEP, "step")]
        .map(|(source, piece)| Program::new(tagged(source, tag, piece)));
    compile::link_lto_programs(&pieces, Some(arch))
}

/// `source` made new with `tag`, in its code as well as in a comment: LTO-IR keeps no comments,
/// so pieces differing only there would be the same to the link's cache, and the link of every
/// build after the first would be a cache hit. A variable named after `piece` (each piece needs
/// a name of its own), whose value is the tag's hash, makes the LTO-IR new too.
fn tagged(source: &str, tag: &str, piece: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    tag.hash(&mut hasher);
    let id = hasher.finish();
    format!("{source}\n{tag}\n__device__ unsigned long long cudyn_bench_{piece} = {id}ull;\n")
}

/// The same code as one source.
fn single_source(tag: &str) -> String {
    tagged(&format!("{ITERATE_STEP}\n{ITERATE_KERNEL}"), tag, "single")
}

/// The same build one step after another, each step timed: the pieces' compiles (through the
/// compile cache, as `Program::compile`) and the link; milliseconds of each.
fn lto_steps(arch: Arch, tag: &str) -> Result<[f64; 3], String> {
    let piece = |source: &str, name: &str| {
        let start = Instant::now();
        let compiled = Program::new(tagged(source, tag, name))
            .arch(arch)
            .output(cudyn::Output::LtoIr)
            .relocatable(true)
            .compile()
            .map_err(|e| e.to_string())?;
        Ok::<_, String>((compiled, ms(start.elapsed())))
    };
    let ((kernel, kernel_ms), (step, step_ms)) = (
        piece(ITERATE_KERNEL, "kernel")?,
        piece(ITERATE_STEP, "step")?,
    );
    let start = Instant::now();
    compile::link_lto(&[kernel.code(), step.code()], Some(arch)).map_err(|e| e.to_string())?;
    Ok([kernel_ms, step_ms, ms(start.elapsed())])
}

/// Build time: nvJitLink LTO of two LTO-IR pieces (cudyn) against one NVRTC compile of the same
/// code (raw), in one call, and one step after another with each step timed (where the build's
/// time goes). Needs no GPU.
pub fn lto_build_rows(bench: &Bench) -> Result<Vec<Row>, String> {
    let (mut raw, mut cudyn, mut steps) = (Vec::new(), Vec::new(), Vec::new());
    for build in 0..=BUILDS {
        let tag = bench.fresh("", format!("lto build {build}"));
        let start = Instant::now();
        raw_nvrtc_cubin(&single_source(&tag), &bench.arch.sm()).map_err(|e| e.to_string())?;
        let single = start.elapsed();
        let start = Instant::now();
        lto_build(bench.arch, &tag).map_err(|e| e.to_string())?;
        let lto = start.elapsed();
        let timed = lto_steps(bench.arch, &bench.fresh("", format!("lto steps {build}")))?;
        // The first build of each opens its libraries: not what the rows compare.
        if build > 0 {
            raw.push(ms(single));
            cudyn.push(ms(lto));
            steps.push(timed);
        }
    }
    let step = |index: usize| median(steps.iter().map(|timed| timed[index]).collect());
    let [kernel, step_piece, link] = [0, 1, 2].map(|index| step(index).unwrap_or(f64::NAN));
    let raw = median(raw);
    Ok(vec![
        Row::new("lto.build", "LTO of 2 pieces vs 1 source: build", "ms")
            .figures(raw, median(cudyn), None)
            .note(format!(
                "raw: NVRTC of the single source; cudyn: compile::link_lto_programs, NVRTC of \
                 the two pieces to LTO-IR at the same time + nvJitLink -lto, each new to the \
                 caches; median of {BUILDS} after one of each"
            )),
        Row::new(
            "lto.steps",
            "LTO of 2 pieces vs 1 source: step by step",
            "ms",
        )
        .figures(raw, Some(kernel + step_piece + link), None)
        .note(format!(
            "the same build one step after another: kernel piece {kernel:.2} ms, step \
                 piece {step_piece:.2} ms, link {link:.2} ms (medians of {BUILDS})"
        )),
    ])
}

/// Median kernel time of `iterate` in `library` on `data`, and what it computed.
fn time_iterate(library: &Library, data: &[f32]) -> Result<(f64, Vec<f32>), String> {
    let iterate = library.kernel("iterate").map_err(|e| e.to_string())?;
    let config = LaunchConfig::for_elements(data.len(), 256);
    let mut buffer = cudyn::DeviceBuffer::from_slice(data).map_err(|e| e.to_string())?;
    let (start, end) = (Event::new(), Event::new());
    let (start, end) = (
        start.map_err(|e| e.to_string())?,
        end.map_err(|e| e.to_string())?,
    );
    let mut times = Vec::with_capacity(KERNEL_RUNS);
    for _ in 0..KERNEL_RUNS {
        buffer.copy_from(data).map_err(|e| e.to_string())?;
        start.record(None).map_err(|e| e.to_string())?;
        // SAFETY: iterate reads and writes data[i] for i < n, and the buffer holds n floats; the
        // event synchronize below waits for it.
        unsafe { iterate.launch(&config, (&mut buffer, STEPS, data.len() as u64)) }
            .map_err(|e| e.to_string())?;
        end.record(None).map_err(|e| e.to_string())?;
        end.synchronize().map_err(|e| e.to_string())?;
        times.push(ms(end.elapsed_since(&start).map_err(|e| e.to_string())?));
    }
    let result = buffer.to_vec().map_err(|e| e.to_string())?;
    Ok((median(times).unwrap_or(f64::NAN), result))
}

/// Kernel time of the LTO build (cudyn) against the single source's (raw). Needs a GPU.
pub fn lto_kernel_rows(bench: &Bench) -> Result<Vec<Row>, String> {
    let tag = bench.fresh("", "lto kernel");
    let single = Program::new(single_source(&tag))
        .arch(bench.arch)
        .compile()
        .map_err(|e| e.to_string())?;
    let lto = lto_build(bench.arch, &tag).map_err(|e| e.to_string())?;
    let data: Vec<f32> = (0..1 << 20).map(|i| (i % 1000) as f32).collect();
    let (single_ms, single_out) = time_iterate(
        &Library::load(single.code()).map_err(|e| e.to_string())?,
        &data,
    )?;
    let (lto_ms, lto_out) = time_iterate(&lto.load().map_err(|e| e.to_string())?, &data)?;
    if single_out != lto_out {
        return Err("the LTO build and the single source computed different results".to_owned());
    }
    Ok(vec![Row::new(
        "lto.kernel",
        "LTO of 2 pieces vs 1 source: kernel",
        "ms",
    )
    .figures(Some(single_ms), Some(lto_ms), None)
    .note(format!(
        "{} elements x {STEPS} calls of a function of the other piece, events, median of \
             {KERNEL_RUNS}; identical results",
        data.len()
    ))])
}

/// A measuring process: compiles `count` new sources, `sequential`ly through NVRTC or as one
/// batch through `compile_all`; the milliseconds, everything counted.
pub fn compile_child(how: &str, count: usize) -> Result<Vec<f64>, String> {
    let arch: Arch = child::env(ARCH_ENV)?
        .parse()
        .map_err(|e: cudyn::Error| e.to_string())?;
    let elapsed = crate::new_sources::compile(how, count, arch)?;
    Ok(vec![ms(elapsed)])
}

/// `compile_all` of 32 and 128 sources against NVRTC one after another, each in a new process
/// with an empty cache. Needs no GPU.
pub fn parallel_rows(bench: &Bench) -> Result<Vec<Row>, String> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let arch = bench.arch.to_string();
    let mut rows = Vec::new();
    for count in BATCHES {
        let (mut sequential, mut batch) = (Vec::new(), Vec::new());
        for start in 0..bench.starts {
            for (how, times) in [("sequential", &mut sequential), ("batch", &mut batch)] {
                let cache = bench
                    .scratch
                    .path()
                    .join(format!("compile-{count}-{start}-{how}"));
                let envs: [(&str, &OsStr); 2] = [
                    (ARCH_ENV, OsStr::new(&arch)),
                    (cudyn::cache::DIR_ENV, cache.as_os_str()),
                ];
                let figures = child::spawn(&format!("compile:{how}:{count}"), &envs)?;
                times.push(figures.first().copied().unwrap_or(f64::NAN));
            }
        }
        let (sequential, batch) = (median(sequential), median(batch));
        let speed_up = sequential.zip(batch).map_or(f64::NAN, |(s, b)| s / b);
        rows.push(
            Row::new(
                if count == 32 {
                    "compile.32"
                } else {
                    "compile.128"
                },
                format!("compile {count} different sources"),
                "ms",
            )
            .figures(sequential, batch, None)
            .note(format!(
                "speed-up {speed_up:.2}x on {cores} cores; raw: NVRTC one after another; cudyn: \
                 compile_all; each a new process with an empty cache, everything counted, median \
                 of {}",
                bench.starts
            )),
        );
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch_sources;

    /// The batch is what the rows claim: different sources, each compiled by raw NVRTC and by
    /// cudyn alike into five kernels.
    #[test]
    fn batch_sources_differ_and_each_compiles_to_five_kernels() {
        cudyn::cache::set_enabled(false);
        let arch = Arch::new(9, 0);
        let sources: Vec<String> = (0..2)
            .map(|k| batch_sources::batch_source(k, "test", batch_sources::DEFAULT_LINKS))
            .collect();
        assert_ne!(sources[0], sources[1]);
        for source in &sources {
            let raw = raw_nvrtc_cubin(source, &arch.sm()).unwrap();
            let cudyn = Program::new(source.as_str()).arch(arch).compile().unwrap();
            for cubin in [raw.as_slice(), cudyn.code()] {
                let kernels = cudyn::inspect::cubin::parse(cubin).unwrap().kernels;
                assert_eq!(kernels.len(), 5, "{kernels:?}");
            }
        }
    }
}
