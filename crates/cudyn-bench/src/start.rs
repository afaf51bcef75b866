//! Source to first completed launch, each in a new process (this program run again): cold, from
//! a warm disk cache, and a repeat of the same source in one process.
//!
//! Every measuring process first creates the CUDA context, untimed and the same way whatever it
//! measures (cudyn's `set_device(0)` and a synchronize, a synchronize through the runtime, cudarc's
//! `CudaContext::new(0)`: the one primary context), and allocates the SAXPY's buffers. Then, timed:
//! from the source text to the completed `saxpy` launch on 4096 elements, checked afterwards.
//!
//! - cudyn: `Program::new(source).load()?.kernel("saxpy")`, the checked launch, a synchronize;
//!   cold with an empty `CUDYN_CACHE_DIR`, warm with one holding the compile (the process checks
//!   which it was).
//! - raw, cold: `nvrtcCreateProgram` ... `nvrtcGetCUBIN`, `cudaLibraryLoadData`,
//!   `cudaLibraryGetKernel`, `cudaLaunchKernel`, `cudaDeviceSynchronize`; warm: the cubin read
//!   from a file instead of compiled, the least any loader of cached code can do.
//! - cudarc: `compile_ptx_with_opts` (NVRTC to PTX for the GPU's architecture), `load_module`,
//!   `load_function`, its launch builder, a synchronize. It has no disk cache: no warm figure.
//!
//! The repeat: after one untimed first launch, the same source again, and again, in one process.

use std::ffi::OsStr;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaContext, PushKernelArg};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use cudyn::{Arch, Cache, DeviceBuffer, LaunchConfig, Program};

use crate::child::{self, CUBIN_ENV, SOURCE_ENV};
use crate::raw_runtime::{self, RawLibrary};
use crate::report::{median, Row};
use crate::Bench;

/// Elements of the SAXPY.
const N: usize = 4096;
/// Threads per block.
const BLOCK: u32 = 128;
/// Timed repeats in the repeat process.
const REPEATS: usize = 21;
/// What `saxpy` computes here: 2 * 1 + 1.
const EXPECTED: f32 = 3.0;

/// Who goes from source to launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framework {
    Cudyn,
    Raw,
    Cudarc,
}

impl Framework {
    const ALL: [Framework; 3] = [Framework::Raw, Framework::Cudyn, Framework::Cudarc];

    fn name(self) -> &'static str {
        match self {
            Framework::Cudyn => "cudyn",
            Framework::Raw => "raw",
            Framework::Cudarc => "cudarc",
        }
    }
}

impl FromStr for Framework {
    type Err = String;

    fn from_str(name: &str) -> Result<Framework, String> {
        Framework::ALL
            .into_iter()
            .find(|framework| framework.name() == name)
            .ok_or(format!("no framework {name}"))
    }
}

/// The measuring process's context, buffers and source.
struct Setup {
    context: Arc<CudaContext>,
    source: String,
    arch: Arch,
    x: DeviceBuffer<f32>,
    y: DeviceBuffer<f32>,
    out: DeviceBuffer<f32>,
}

impl Setup {
    /// The context (every library opened that a launch needs) and the buffers.
    fn new() -> Result<Setup, String> {
        let source = std::fs::read_to_string(child::env(SOURCE_ENV)?).map_err(|e| e.to_string())?;
        cudyn::set_device(0).map_err(|e| e.to_string())?;
        cudyn::synchronize().map_err(|e| e.to_string())?;
        raw_runtime::synchronize().map_err(|e| e.to_string())?;
        let context = CudaContext::new(0).map_err(|e| format!("cudarc: {e:?}"))?;
        Ok(Setup {
            context,
            source,
            arch: Arch::current().map_err(|e| e.to_string())?,
            x: DeviceBuffer::from_slice(&[1.0f32; N]).map_err(|e| e.to_string())?,
            y: DeviceBuffer::from_slice(&[1.0f32; N]).map_err(|e| e.to_string())?,
            out: DeviceBuffer::zeroed(N).map_err(|e| e.to_string())?,
        })
    }

    /// From the source text to a completed launch of `saxpy`; the raw side reads `cubin` instead
    /// of compiling when given one.
    fn source_to_launch(
        &mut self,
        framework: Framework,
        cubin: Option<&Path>,
    ) -> Result<(), String> {
        let a = 2.0f32;
        let n = N as u64;
        let grid = N.div_ceil(BLOCK as usize) as u32;
        match framework {
            Framework::Cudyn => {
                let library = Program::new(self.source.as_str())
                    .load()
                    .map_err(|e| e.to_string())?;
                let saxpy = library.kernel("saxpy").map_err(|e| e.to_string())?;
                // SAFETY: saxpy reads x[i], y[i] and writes out[i] for i < n, and the buffers
                // hold n floats; the synchronize below waits for it.
                unsafe {
                    saxpy.launch(
                        &LaunchConfig::new(grid, BLOCK),
                        (a, &self.x, &self.y, &mut self.out, n),
                    )
                }
                .map_err(|e| e.to_string())?;
                cudyn::synchronize().map_err(|e| e.to_string())
            }
            Framework::Raw => {
                let image = match cubin {
                    Some(path) => {
                        std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?
                    }
                    None => raw_runtime::raw_nvrtc_cubin(&self.source, &self.arch.sm())
                        .map_err(|e| e.to_string())?,
                };
                let library = RawLibrary::load(&image).map_err(|e| e.to_string())?;
                let kernel = library.kernel("saxpy").map_err(|e| e.to_string())?;
                let mut values = (a, self.x.as_raw(), self.y.as_raw(), self.out.as_raw(), n);
                let mut args = crate::launch::saxpy_params(&mut values);
                raw_runtime::launch(kernel, grid, BLOCK, &mut args).map_err(|e| e.to_string())?;
                raw_runtime::synchronize().map_err(|e| e.to_string())
            }
            Framework::Cudarc => {
                // cudarc takes the architecture as a `&'static str`; one per process.
                let arch: &'static str = Box::leak(self.arch.sm().into_boxed_str());
                let options = CompileOptions {
                    arch: Some(arch),
                    ..Default::default()
                };
                let ptx = compile_ptx_with_opts(&self.source, options)
                    .map_err(|e| format!("cudarc: {e:?}"))?;
                let module = self
                    .context
                    .load_module(ptx)
                    .map_err(|e| format!("cudarc: {e:?}"))?;
                let saxpy = module
                    .load_function("saxpy")
                    .map_err(|e| format!("cudarc: {e:?}"))?;
                let stream = self.context.default_stream();
                let (x, y, out) = (self.x.as_raw(), self.y.as_raw(), self.out.as_raw());
                let mut builder = stream.launch_builder(&saxpy);
                builder.arg(&a).arg(&x).arg(&y).arg(&out).arg(&n);
                let config = cudarc::driver::LaunchConfig {
                    grid_dim: (grid, 1, 1),
                    block_dim: (BLOCK, 1, 1),
                    shared_mem_bytes: 0,
                };
                // SAFETY: as for cudyn's launch; the pointers are those of the same buffers.
                unsafe { builder.launch(config) }.map_err(|e| format!("cudarc: {e:?}"))?;
                stream.synchronize().map_err(|e| format!("cudarc: {e:?}"))
            }
        }
    }

    /// Checks the launch computed what it should, and empties `out` for the next one.
    fn check(&mut self) -> Result<(), String> {
        let out = self.out.to_vec().map_err(|e| e.to_string())?;
        if out.iter().any(|&v| v != EXPECTED) {
            return Err("saxpy computed a wrong result".to_owned());
        }
        self.out.fill_bytes(0).map_err(|e| e.to_string())
    }
}

/// A measuring process: one first launch by `framework`, from a warm cache or cold.
pub fn first_launch_child(framework: Framework, warm: bool) -> Result<Vec<f64>, String> {
    let mut setup = Setup::new()?;
    let cubin = std::env::var_os(CUBIN_ENV).filter(|_| warm && framework == Framework::Raw);
    let start = Instant::now();
    setup.source_to_launch(framework, cubin.as_deref().map(Path::new))?;
    let elapsed = start.elapsed();
    setup.check()?;
    // A cold start with the cache switched off (`CUDYN_CACHE=off`, as
    // scripts/bench_cold_starts.py asks for one) compiles by definition: what the cache costs a
    // cold start is its difference from the cold start with the cache on.
    let cache_off = std::env::var_os(cudyn::cache::SWITCH_ENV).is_some_and(|value| value == "off");
    if framework == Framework::Cudyn && (warm || !cache_off) {
        let cache = Cache::global().ok_or("the cache is off: CUDYN_CACHE_DIR is not usable")?;
        let stats = cache.stats().map_err(|e| e.to_string())?;
        let served = match warm {
            true => stats.misses == 0 && stats.disk_hits >= 1,
            false => stats.misses >= 1 && stats.disk_hits == 0,
        };
        if !served {
            return Err(format!("not the start it claims to time: {stats:?}"));
        }
    }
    Ok(vec![crate::report::ms(elapsed)])
}

/// A measuring process: the median of [`REPEATS`] repeats of the same source after a first one.
pub fn repeat_child(framework: Framework) -> Result<Vec<f64>, String> {
    let mut setup = Setup::new()?;
    setup.source_to_launch(framework, None)?;
    setup.check()?;
    let mut times = Vec::with_capacity(REPEATS);
    for _ in 0..REPEATS {
        let start = Instant::now();
        setup.source_to_launch(framework, None)?;
        times.push(start.elapsed().as_secs_f64() * 1e6);
        setup.check()?;
    }
    Ok(vec![median(times).unwrap_or(f64::NAN)])
}

pub fn rows(bench: &Bench) -> Result<Vec<Row>, String> {
    let folder = bench.scratch.path();
    let source = bench.fresh(crate::SOURCE, "start");
    let source_path = folder.join("start.cu");
    std::fs::write(&source_path, &source).map_err(|e| e.to_string())?;
    let reference = Program::new(source.as_str())
        .arch(bench.arch)
        .compile()
        .map_err(|e| e.to_string())?;
    let cubin_path = folder.join("start.cubin");
    std::fs::write(&cubin_path, reference.code()).map_err(|e| e.to_string())?;
    let warm_cache = folder.join("warm-cache");
    let spawn = |mode: &str, cache: &Path| -> Result<f64, String> {
        let envs: [(&str, &OsStr); 3] = [
            (SOURCE_ENV, source_path.as_os_str()),
            (CUBIN_ENV, cubin_path.as_os_str()),
            (cudyn::cache::DIR_ENV, cache.as_os_str()),
        ];
        Ok(child::spawn(mode, &envs)?
            .first()
            .copied()
            .unwrap_or(f64::NAN))
    };
    spawn("first-launch:cudyn:cold", &warm_cache)?; // fills the warm cache

    let mut cold = [Vec::new(), Vec::new(), Vec::new()];
    let mut warm = [Vec::new(), Vec::new()];
    // cudarc opens NVRTC by its own search (the dynamic linker's path): where that fails, its
    // figures are missing, with the reason, and the other columns stand.
    let mut cudarc_failure = None;
    for start in 0..bench.starts {
        for (i, framework) in Framework::ALL.into_iter().enumerate() {
            let empty = folder.join(format!("cold-{start}-{}", framework.name()));
            let mode = format!("first-launch:{}:cold", framework.name());
            match framework {
                Framework::Cudarc if cudarc_failure.is_some() => {}
                Framework::Cudarc => match spawn(&mode, &empty) {
                    Ok(figure) => cold[i].push(figure),
                    Err(error) => cudarc_failure = Some(error),
                },
                _ => {
                    cold[i].push(spawn(&mode, &empty)?);
                    let mode = format!("first-launch:{}:warm", framework.name());
                    warm[i].push(spawn(&mode, &warm_cache)?);
                }
            }
        }
    }
    let [raw_cold, cudyn_cold, cudarc_cold] = cold;
    let [raw_warm, cudyn_warm] = warm;
    // A process's repeats vary less than processes do (the core and memory it lands on): the
    // figure is the median of several processes' medians.
    let repeat = |framework: Framework| -> Result<f64, String> {
        let mode = format!("repeat:{}", framework.name());
        let medians = (0..bench.starts)
            .map(|_| spawn(&mode, &warm_cache))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(median(medians).unwrap_or(f64::NAN))
    };
    let cudarc_repeat = match cudarc_failure {
        None => repeat(Framework::Cudarc)
            .map_err(|error| cudarc_failure = Some(error))
            .ok(),
        Some(_) => None,
    };
    let cudarc_note = cudarc_failure.map_or(String::new(), |error| {
        let reason = error
            .lines()
            .rev()
            .find(|line| !line.trim().is_empty())
            .unwrap_or("");
        format!("; cudarc failed: {reason}")
    });
    let starts = bench.starts;
    Ok(vec![
        Row::new(
            "start.cold",
            "source to first launch, cold, new process",
            "ms",
        )
        .figures(median(raw_cold), median(cudyn_cold), median(cudarc_cold))
        .note(format!(
            "median of {starts} new processes, context creation apart; raw: NVRTC to a \
                 cubin + cudaLibraryLoadData; cudarc: NVRTC to PTX + cuModuleLoadData (JIT)\
                 {cudarc_note}"
        )),
        Row::new(
            "start.warm",
            "source to first launch, warm disk cache",
            "ms",
        )
        .figures(median(raw_warm), median(cudyn_warm), None)
        .note(format!(
            "median of {starts} new processes, context creation apart; raw: the cubin read \
                 from a file + cudaLibraryLoadData; cudarc has no disk cache"
        )),
        Row::new("start.repeat", "the same source again in one process", "µs")
            .figures(
                Some(repeat(Framework::Raw)?),
                Some(repeat(Framework::Cudyn)?),
                cudarc_repeat,
            )
            .note(format!(
                "source to completed launch, the median of {starts} new processes' medians of \
                 {REPEATS}; raw and cudarc have no cache and compile again"
            )),
    ])
}
