//! Compiling new sources in a measuring process: one after another through NVRTC, or as one
//! batch through `compile_all`. Shared by `cudyn-bench`'s parallel rows and `bench_curves`'
//! compile curves (through `#[path]`).

use std::time::{Duration, Instant};

use cudyn::compile::compile_all;
use cudyn::{Arch, Program};

use crate::batch_sources;
use crate::raw_runtime::raw_nvrtc_cubin;

/// The time to compile `count` sources new to NVRTC and every cache for `arch`, `sequential`ly or
/// as a `batch` (`compile_all`, which compiles fewer than three programs, or on one core, on this
/// process's threads, and more in worker processes), everything counted (NVRTC's opening, the
/// workers' start-up).
pub fn compile(how: &str, count: usize, arch: Arch) -> Result<Duration, String> {
    let tag = format!(
        "process {} at {:?}",
        std::process::id(),
        std::time::SystemTime::now()
    );
    let links = batch_sources::links();
    let sources: Vec<String> = (0..count)
        .map(|k| batch_sources::batch_source(k, &tag, links))
        .collect();
    match how {
        "sequential" => {
            let start = Instant::now();
            for source in &sources {
                raw_nvrtc_cubin(source, &arch.sm()).map_err(|e| e.to_string())?;
            }
            Ok(start.elapsed())
        }
        "batch" => {
            let programs: Vec<Program> = sources
                .into_iter()
                .enumerate()
                .map(|(k, source)| Program::new(source).name(format!("poly_{k}.cu")).arch(arch))
                .collect();
            let start = Instant::now();
            let results = compile_all(&programs);
            let elapsed = start.elapsed();
            for result in results {
                result.map_err(|e| e.to_string())?;
            }
            Ok(elapsed)
        }
        _ => Err(format!("no way to compile called {how}")),
    }
}
