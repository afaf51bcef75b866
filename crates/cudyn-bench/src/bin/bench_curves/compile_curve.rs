//! The curves of parallel compilation: `compile_all`'s speed-up over NVRTC one after another,
//! against the number of sources and against the cores. Each figure is a new process with an
//! empty cache (this program again), everything counted: the workers' start-up, NVRTC's opening.

use std::ffi::OsStr;
use std::time::Instant;

use serde_json::{json, Value};

use cudyn::compile::compile_all;
use cudyn::{Arch, Program};

use crate::batch_sources;
use crate::raw_runtime::raw_nvrtc_cubin;
use crate::Run;

/// The architecture the measuring process compiles for.
const ARCH_ENV: &str = "CUDYN_BENCH_CURVES_ARCH";
/// The cores the measuring process may run on (its CPU affinity, which its workers inherit and
/// `available_parallelism` reports).
const CORES_ENV: &str = "CUDYN_BENCH_CURVES_CORES";

/// Both curves: speed-up against sources (all cores) and against cores (a fixed batch).
pub fn curves(run: &Run) -> Result<Value, String> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let (sources, batch): (Vec<usize>, usize) = if run.quick {
        (vec![1, 2, 4, 8], 8)
    } else {
        ((0..=8).map(|power| 1 << power).collect(), 128) // 1 .. 256
    };
    let core_counts: Vec<usize> = [1, 2, 4, 8, 16]
        .into_iter()
        .filter(|&count| count <= cores)
        .collect();
    // One source after another costs each source the same: its mean over a sample of them is
    // the reference for every count (measured for the smaller counts too, as a check).
    let sample = if run.quick { 2 } else { 16 };
    let per_source = measure(run, "sequential", sample, cores, "sample")? / sample as f64;
    let mut by_sources = Vec::new();
    for &count in &sources {
        let batch_ms = measure(run, "batch", count, cores, "sources")?;
        let sequential_ms = per_source * count as f64;
        by_sources.push(json!({
            "sources": count,
            "sequential_ms": sequential_ms,
            "batch_ms": batch_ms,
            "speed_up": sequential_ms / batch_ms,
        }));
    }
    let mut by_cores = Vec::new();
    for &count in &core_counts {
        let batch_ms = measure(run, "batch", batch, count, "cores")?;
        let sequential_ms = per_source * batch as f64;
        by_cores.push(json!({
            "cores": count,
            "sequential_ms": sequential_ms,
            "batch_ms": batch_ms,
            "speed_up": sequential_ms / batch_ms,
        }));
    }
    Ok(json!({
        "what": "compile_all against NVRTC one after another; each figure one new process with \
                 an empty cache, everything counted",
        "cores": cores,
        "sequential_ms_per_source": per_source,
        "sequential_sample": sample,
        "links": batch_sources::links(),
        "by_sources": by_sources,
        "by_cores": {"sources": batch, "points": by_cores},
    }))
}

/// Milliseconds of one measuring process compiling `count` new sources `how`, on `cores` cores.
fn measure(run: &Run, how: &str, count: usize, cores: usize, what: &str) -> Result<f64, String> {
    let cache = run
        .scratch
        .path()
        .join(format!("compile-{what}-{how}-{count}-{cores}"));
    let (arch, cores) = (run.arch.to_string(), cores.to_string());
    let envs: [(&str, &OsStr); 3] = [
        (ARCH_ENV, OsStr::new(&arch)),
        (CORES_ENV, OsStr::new(&cores)),
        (cudyn::cache::DIR_ENV, cache.as_os_str()),
    ];
    let figures = crate::spawn(&format!("compile:{how}:{count}"), &envs)?;
    figures
        .first()
        .copied()
        .ok_or_else(|| "no figure".to_owned())
}

/// A measuring process (`compile:HOW:COUNT`): the milliseconds of compiling COUNT new sources.
pub fn child(mode: &str) -> Result<Vec<f64>, String> {
    let parts: Vec<&str> = mode.split(':').collect();
    let ["compile", how, count] = parts[..] else {
        return Err(format!("unknown measurement {mode}"));
    };
    let count: usize = count.parse().map_err(|_| format!("not a count: {count}"))?;
    let env = |name| std::env::var(name).map_err(|_| format!("{name} is not set"));
    let arch: Arch = env(ARCH_ENV)?
        .parse()
        .map_err(|e: cudyn::Error| e.to_string())?;
    let cores: usize = env(CORES_ENV)?
        .parse()
        .map_err(|_| format!("{CORES_ENV} is not a number"))?;
    limit_cores(cores)?;
    let tag = format!(
        "process {} at {:?}",
        std::process::id(),
        std::time::SystemTime::now()
    );
    let links = batch_sources::links();
    let sources: Vec<String> = (0..count)
        .map(|k| batch_sources::batch_source(k, &tag, links))
        .collect();
    let start = Instant::now();
    match how {
        "sequential" => {
            for source in &sources {
                raw_nvrtc_cubin(source, &arch.sm()).map_err(|e| e.to_string())?;
            }
        }
        "batch" => {
            let programs: Vec<Program> = sources
                .into_iter()
                .enumerate()
                .map(|(k, source)| Program::new(source).name(format!("poly_{k}.cu")).arch(arch))
                .collect();
            for result in compile_all(&programs) {
                result.map_err(|e| e.to_string())?;
            }
        }
        _ => return Err(format!("no way to compile called {how}")),
    }
    Ok(vec![start.elapsed().as_secs_f64() * 1e3])
}

/// Restricts this process, and the processes it starts, to its first `cores` allowed cores.
fn limit_cores(cores: usize) -> Result<(), String> {
    // SAFETY: `set` is a plain bit set, zeroed, then filled and read by the libc calls alone.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(format!(
                "sched_getaffinity: {}",
                std::io::Error::last_os_error()
            ));
        }
        let allowed: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
            .collect();
        if allowed.len() <= cores {
            return Ok(());
        }
        let mut limited: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in &allowed[..cores] {
            libc::CPU_SET(cpu, &mut limited);
        }
        if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &limited) != 0 {
            return Err(format!(
                "sched_setaffinity: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}
