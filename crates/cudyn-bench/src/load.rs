//! Load of an image with the lookup of one kernel: a cubin, a PTX and a fatbin (the cubin and the
//! PTX), each loaded, its `saxpy` looked up, and unloaded again (the unload untimed).
//!
//! cudyn loads with `Sharing::Never`, so that every load is a real one (a shared load of an image
//! already loaded costs a lookup in cudyn's registry, no driver call); the raw side is
//! `cudaLibraryLoadData` + `cudaLibraryGetKernel`; cudarc's is `cuModuleLoadData` +
//! `cuModuleGetFunction` (`CudaContext::load_module`, `CudaModule::load_function`), given an owned
//! copy of the image made before the clock starts.

use std::time::Instant;

use cudarc::driver::CudaContext;
use cudarc::nvrtc::Ptx;
use cudyn::compile::FatbinBuilder;
use cudyn::{Library, Output, Program, Sharing};

use crate::raw_runtime::RawLibrary;
use crate::report::{median, Row};
use crate::Bench;

/// Loads of each image by each path, interleaved.
const LOADS: usize = 51;

/// The images of kernels/peers.cu the `load` rows load: (file name, bytes).
pub fn images(bench: &Bench) -> Result<Vec<(&'static str, Vec<u8>)>, String> {
    let compile = |output| {
        Program::new(crate::SOURCE)
            .arch(bench.arch)
            .output(output)
            .compile()
            .map(|compiled| compiled.code().to_vec())
            .map_err(|e| e.to_string())
    };
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
        let (mut raw, mut cudyn, mut cudarc) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..LOADS {
            let start = Instant::now();
            let library = RawLibrary::load(image).map_err(|e| e.to_string())?;
            library.kernel("saxpy").map_err(|e| e.to_string())?;
            raw.push(crate::report::ms(start.elapsed()));
            drop(library);

            let start = Instant::now();
            let library = loader.load(image).map_err(|e| e.to_string())?;
            library.kernel("saxpy").map_err(|e| e.to_string())?;
            cudyn.push(crate::report::ms(start.elapsed()));
            drop(library);

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
            .note(format!(
                "median of {LOADS} interleaved loads; cudyn unshared (a real load each time)"
            )),
        );
    }
    Ok(rows)
}
