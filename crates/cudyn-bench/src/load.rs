//! Load of an image with the lookup of one kernel: a cubin, a PTX and a fatbin (the cubin and the
//! PTX), each loaded, its `saxpy` looked up, and unloaded again (the unload untimed).
//!
//! cudyn loads with `Sharing::Never`, so that every load is a real one (a shared load of an image
//! already loaded costs a lookup in cudyn's registry, no driver call); the raw side is
//! `cudaLibraryLoadData` + `cudaLibraryGetKernel`; cudarc's is `cuModuleLoadData` +
//! `cuModuleGetFunction` (`CudaContext::load_module`, `CudaModule::load_function`), given an owned
//! copy of the image made before the clock starts.
//!
//! The order is fair to both sides: raw and cudyn swap places every round, and an untimed raw
//! load of the image separates them from cudarc's. Whichever load comes right after cudarc's
//! eager module load and unload takes about 1 µs longer (`load_parts order` shows it), so a
//! fixed order that put raw there flattered cudyn by about 0.05-0.07x.
//!
//! These loads load one image over and over, as a program that loads a library per context,
//! thread or plugin does: from its third load in the process, cudyn recalls its check by
//! comparing the bytes with a copy (see `Image::validate`). The `new.cubin` row loads cubins new
//! to the process, each of its own (the same source with an empty kernel of its own), so that
//! cudyn's check walks every one: the first load of an image.
//!
//! PTX is compared doing the same work: cudyn's load of PTX loads it into the current context at
//! once (`cuLibraryGetModule`), which runs the JIT (or finds its result in the driver's JIT
//! cache), so that PTX the JIT refuses fails at the load with the JIT's log; cudarc's module load
//! is eager too. The raw side of the PTX row therefore adds `cuLibraryGetModule`, and the note
//! gives the lazy raw load (`cudaLibraryLoadData` + `cudaLibraryGetKernel` alone, no JIT yet)
//! beside it.

use std::time::Instant;

use cudarc::driver::CudaContext;
use cudarc::nvrtc::Ptx;
use cudyn::compile::FatbinBuilder;
use cudyn::library::LibraryLoader;
use cudyn::{Library, Output, Program, Sharing};

use crate::in_turn::in_turn;
use crate::raw_runtime::RawLibrary;
use crate::report::{median, Row};
use crate::Bench;

/// Loads of each image by each path, interleaved.
const LOADS: usize = 101;

/// Loads of cubins new to the process by each path, interleaved.
const NEW_LOADS: usize = 51;

/// The images of kernels/peers.cu the `load` rows load: (file name, bytes).
pub fn images(bench: &Bench) -> Result<Vec<(&'static str, Vec<u8>)>, String> {
    let compile = |output| compile(crate::SOURCE.into(), bench, output);
    let (cubin, ptx) = (compile(Output::Cubin)?, compile(Output::Ptx)?);
    let mut fatbin = FatbinBuilder::new().map_err(|e| e.to_string())?;
    fatbin
        .add_cubin(&cubin, bench.arch, "peers.cu")
        .and_then(|fatbin| fatbin.add_ptx(&ptx, bench.arch, "peers.cu"))
        .map_err(|e| e.to_string())?;
    let fatbin = fatbin.finish().map_err(|e| e.to_string())?;
    Ok(vec![
        ("peers.cubin", cubin),
        ("peers.ptx", ptx),
        ("peers.fatbin", fatbin),
    ])
}

pub fn rows(bench: &Bench) -> Result<Vec<Row>, String> {
    let images = images(bench)?;
    if let Some(folder) = &bench.images {
        std::fs::create_dir_all(folder).map_err(|e| format!("{}: {e}", folder.display()))?;
        for (name, bytes) in &images {
            let path = folder.join(name);
            std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    let context = CudaContext::new(0).map_err(|e| format!("cudarc: {e:?}"))?;
    let loader = Library::loader().sharing(Sharing::Never);
    let mut rows = Vec::new();
    for (name, image) in &images {
        let kind = name.rsplit('.').next().unwrap_or(name);
        let eager = kind == "ptx";
        let (mut raw, mut cudyn, mut cudarc) = (Vec::new(), Vec::new(), Vec::new());
        let mut lazy = Vec::new();
        let cudyn_load = || cudyn_load(&loader, image);
        for round in 0..LOADS {
            // Untimed: what follows cudarc's load and unload below is this, not a measured load.
            raw_load(image, false)?;
            if eager {
                lazy.push(raw_load(image, false)?);
            }
            let (raw_time, cudyn_time) = in_turn(round, || raw_load(image, eager), cudyn_load)?;
            raw.push(raw_time);
            cudyn.push(cudyn_time);

            let owned = Ptx::from_binary(image.clone());
            let start = Instant::now();
            let module = context
                .load_module(owned)
                .map_err(|e| format!("cudarc: {e:?}"))?;
            module
                .load_function("saxpy")
                .map_err(|e| format!("cudarc: {e:?}"))?;
            cudarc.push(crate::report::ms(start.elapsed()));
            drop(module);
        }
        rows.push(
            Row::new(
                match kind {
                    "cubin" => "load.cubin",
                    "ptx" => "load.ptx",
                    _ => "load.fatbin",
                },
                format!("load {kind} + kernel lookup ({} KiB)", image.len() / 1024),
                "ms",
            )
            .figures(median(raw), median(cudyn), median(cudarc))
            .note({
                let loads = format!(
                    "median of {LOADS} interleaved loads, raw and cudyn in turn first; cudyn \
                     unshared (a real load each time)"
                );
                match median(lazy) {
                    Some(lazy) => format!(
                        "{loads}; all three JIT into the context at the load, raw by \
                         cuLibraryGetModule (without it, lazy: {lazy:.4} ms)"
                    ),
                    None => loads,
                }
            }),
        );
    }
    rows.push(new_cubins(bench, &loader)?);
    Ok(rows)
}

/// The `new.cubin` row: loads of cubins new to the process, raw and cudyn each loading cubins
/// of their own, in turn first.
fn new_cubins(bench: &Bench, loader: &LibraryLoader) -> Result<Row, String> {
    let cubins = (0..2 * NEW_LOADS)
        .map(|index| {
            let source = format!(
                "{}\nextern \"C\" __global__ void new_cubin_{index}() {{}}\n",
                crate::SOURCE
            );
            compile(source, bench, Output::Cubin)
        })
        .collect::<Result<Vec<_>, String>>()?;
    let (mut raw, mut cudyn) = (Vec::new(), Vec::new());
    for (round, pair) in cubins.chunks_exact(2).enumerate() {
        let (raw_time, cudyn_time) = in_turn(
            round,
            || raw_load(&pair[0], false),
            || cudyn_load(loader, &pair[1]),
        )?;
        raw.push(raw_time);
        cudyn.push(cudyn_time);
    }
    Ok(Row::new(
        "new.cubin",
        format!(
            "load a cubin new to the process + kernel lookup ({} KiB)",
            cubins[0].len() / 1024
        ),
        "ms",
    )
    .figures(median(raw), median(cudyn), None)
    .note(format!(
        "median of {NEW_LOADS} interleaved loads, raw and cudyn in turn first, each of a cubin of \
         its own: cudyn's check walks every one"
    )))
}

/// `source` compiled by NVRTC to `output` for the bench's architecture.
fn compile(source: String, bench: &Bench, output: Output) -> Result<Vec<u8>, String> {
    Program::new(source)
        .arch(bench.arch)
        .output(output)
        .compile()
        .map(|compiled| compiled.code().to_vec())
        .map_err(|e| e.to_string())
}

/// One load of `image` by cudyn's `loader` and lookup of `saxpy`, in ms, the unload untimed.
fn cudyn_load(loader: &LibraryLoader, image: &[u8]) -> Result<f64, String> {
    let start = Instant::now();
    let library = loader.load(image).map_err(|e| e.to_string())?;
    library.kernel("saxpy").map_err(|e| e.to_string())?;
    let elapsed = crate::report::ms(start.elapsed());
    drop(library);
    Ok(elapsed)
}

/// One raw load of `image` and lookup of `saxpy`, in ms, the unload untimed; `eager` also loads
/// the library into the current context (`cuLibraryGetModule`, the JIT for PTX), as cudyn's load
/// of PTX does.
fn raw_load(image: &[u8], eager: bool) -> Result<f64, String> {
    let start = Instant::now();
    let library = RawLibrary::load(image).map_err(|e| e.to_string())?;
    if eager {
        let mut module = std::ptr::null_mut();
        // SAFETY: the library handle is live (a cudaLibrary_t is a CUlibrary) and the module
        // handle a local the driver writes.
        let status = unsafe {
            cudarc::driver::sys::cuLibraryGetModule(&mut module, library.as_raw().cast())
        };
        if status != cudarc::driver::sys::CUresult::CUDA_SUCCESS {
            return Err(format!("cuLibraryGetModule failed with {status:?}"));
        }
    }
    library.kernel("saxpy").map_err(|e| e.to_string())?;
    Ok(crate::report::ms(start.elapsed()))
}
