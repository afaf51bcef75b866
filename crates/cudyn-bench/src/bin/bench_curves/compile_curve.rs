//! The curves of parallel compilation: `compile_all`'s speed-up over NVRTC one after another,
//! against the number of sources and against the cores. Each figure is a new process with an
//! empty cache (this program again), everything counted: the workers' start-up, NVRTC's opening.

use std::ffi::OsStr;

use serde_json::{json, Value};

use cudyn::Arch;

use crate::batch_sources;
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
    let point = |key: &str, value: usize, sources: usize, cores: usize, what| {
        let batch_ms = measure(run, "batch", sources, cores, what)?;
        let sequential_ms = per_source * sources as f64;
        Ok::<_, String>(json!({
            key: value,
            "sequential_ms": sequential_ms,
            "batch_ms": batch_ms,
            "speed_up": sequential_ms / batch_ms,
        }))
    };
    // A point that cannot be measured (a batch that fell back to this process's threads, say)
    // is listed with its reason, and the curve goes on.
    let mut failed = Vec::new();
    let mut measured = |key: &str, value: usize, figure: Result<Value, String>| match figure {
        Ok(point) => Some(point),
        Err(why) => {
            eprintln!("compile: the point {key} = {value} was not measured: {why}");
            failed.push(json!({ key: value, "why": why }));
            None
        }
    };
    let by_sources: Vec<Value> = (sources.iter())
        .filter_map(|&count| {
            measured(
                "sources",
                count,
                point("sources", count, count, cores, "sources"),
            )
        })
        .collect();
    let by_cores: Vec<Value> = (core_counts.iter())
        .filter_map(|&count| measured("cores", count, point("cores", count, batch, count, "cores")))
        .collect();
    Ok(json!({
        "what": "compile_all against NVRTC one after another; each figure one new process with \
                 an empty cache, everything counted",
        "cores": cores,
        "sequential_ms_per_source": per_source,
        "sequential_sample": sample,
        "links": batch_sources::links(),
        "by_sources": by_sources,
        "by_cores": {"sources": batch, "points": by_cores},
        "not_measured": failed,
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
    let elapsed = crate::new_sources::compile(how, count, arch)?;
    Ok(vec![elapsed.as_secs_f64() * 1e3])
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
