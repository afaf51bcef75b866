//! The curves of loading: load time against the image's size, and lookup time and memory against
//! the kernels in a library.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use cudyn::{Image, Library, Program, Sharing};

use crate::footprint::Footprint;
use crate::in_turn::in_turn;
use crate::raw_runtime::RawLibrary;
use crate::{median_us, Run};

/// A cubin of `table_bytes` of initialized device memory and one kernel, `first_byte`.
fn sized_cubin(run: &Run, table_bytes: usize) -> Result<Vec<u8>, String> {
    let source = format!(
        "__device__ unsigned char table[{}] = {{1}};\n\
         extern \"C\" __global__ void first_byte(unsigned int *out) {{ *out = table[0]; }}\n\
         // bench_curves {}\n",
        table_bytes.max(1),
        run.tag
    );
    let compiled = Program::new(source).arch(run.arch).compile();
    Ok(compiled.map_err(|e| e.to_string())?.code().to_vec())
}

/// Load + lookup of `first_byte`, raw and cudyn interleaved (each going first in turn), and
/// cudyn's check alone, per size.
pub fn load_size(run: &Run) -> Result<Value, String> {
    let sizes: Vec<usize> = if run.quick {
        vec![4 << 10, 64 << 10, 1 << 20]
    } else {
        (0..8).map(|step| (4 << 10) << (2 * step)).collect() // 4 KiB .. 64 MiB
    };
    let base = sized_cubin(run, 1)?.len();
    let loader = Library::loader().sharing(Sharing::Never);
    let mut points = Vec::new();
    for target in sizes {
        let image = sized_cubin(run, target.saturating_sub(base))?;
        // Fewer rounds for images whose load takes milliseconds.
        let rounds = if image.len() <= 1 << 20 { 51 } else { 9 };
        let (mut raw, mut cudyn, mut check) = (Vec::new(), Vec::new(), Vec::new());
        let raw_load = || -> Result<Duration, String> {
            let start = Instant::now();
            let library = RawLibrary::load(&image).map_err(|e| e.to_string())?;
            library.kernel("first_byte").map_err(|e| e.to_string())?;
            Ok(start.elapsed())
        };
        let cudyn_load = || -> Result<Duration, String> {
            let start = Instant::now();
            let library = loader.load(&image).map_err(|e| e.to_string())?;
            library.kernel("first_byte").map_err(|e| e.to_string())?;
            Ok(start.elapsed())
        };
        for round in 0..=rounds {
            let (raw_time, cudyn_time) = in_turn(round, raw_load, cudyn_load)?;
            let start = Instant::now();
            Image::new(&image[..])
                .and_then(|image| image.validate())
                .map_err(|e| e.to_string())?;
            let check_time = start.elapsed();
            // The first round of each size touches the new image's pages first: not counted.
            if round > 0 {
                raw.push(raw_time);
                cudyn.push(cudyn_time);
                check.push(check_time);
            }
        }
        points.push(json!({
            "bytes": image.len(),
            "raw_us": median_us(raw),
            "cudyn_us": median_us(cudyn),
            "check_us": median_us(check),
            "rounds": rounds,
        }));
    }
    Ok(json!({
        "what": "load of a cubin + lookup of one kernel against the image's size; cudyn \
                 unshared; its check of an image loaded again compares its headers and tables \
                 with a copy",
        "points": points,
    }))
}

/// A cubin of `kernels` kernels, `k0` to `k{kernels - 1}`.
fn many_kernels(run: &Run, kernels: usize) -> Result<Vec<u8>, String> {
    let mut source = format!("// bench_curves {}\n", run.tag);
    for k in 0..kernels {
        source.push_str(&format!(
            "extern \"C\" __global__ void k{k}(unsigned int *out) {{ *out = {k}u; }}\n"
        ));
    }
    let compiled = Program::new(source).arch(run.arch).compile();
    Ok(compiled.map_err(|e| e.to_string())?.code().to_vec())
}

/// The first lookup of kernels against the kernels in the library, raw and cudyn, and the memory
/// one loaded library takes (cudyn, each library with one kernel looked up).
pub fn lookup(run: &Run) -> Result<Value, String> {
    let counts: &[usize] = if run.quick {
        &[1, 10, 100]
    } else {
        &[1, 10, 100, 1000, 10_000]
    };
    let device = cudyn::Device::get(0).map_err(|e| e.to_string())?;
    let mut points = Vec::new();
    for &kernels in counts {
        let image = many_kernels(run, kernels)?;
        // Names spread over the library, each looked up once in each library.
        let names: Vec<String> = (0..kernels.min(101))
            .map(|i| format!("k{}", i * kernels / kernels.min(101)))
            .collect();
        let raw_library = RawLibrary::load(&image).map_err(|e| e.to_string())?;
        let cudyn_library = Library::loader()
            .sharing(Sharing::Never)
            .load(&image)
            .map_err(|e| e.to_string())?;
        let (mut raw, mut cudyn) = (Vec::new(), Vec::new());
        for name in &names {
            let start = Instant::now();
            raw_library.kernel(name).map_err(|e| e.to_string())?;
            raw.push(start.elapsed());
            let start = Instant::now();
            cudyn_library.kernel(name).map_err(|e| e.to_string())?;
            cudyn.push(start.elapsed());
        }
        drop((raw_library, cudyn_library));
        let (raw_memory, cudyn_memory) = memory_per_library(&image, device)?;
        points.push(json!({
            "kernels": kernels,
            "bytes": image.len(),
            "raw_lookup_us": median_us(raw),
            "cudyn_lookup_us": median_us(cudyn),
            "lookups": names.len(),
            "raw_device_bytes": raw_memory.device,
            "raw_host_bytes": raw_memory.host,
            "cudyn_device_bytes": cudyn_memory.device,
            "cudyn_host_bytes": cudyn_memory.host,
        }));
    }
    Ok(json!({
        "what": "first lookup of a kernel against the kernels per library; memory per loaded library",
        "points": points,
    }))
}

/// Libraries loaded at once to measure one's memory.
const LOADED: usize = 20;

/// The device and host memory one loaded library of `image` takes, raw and cudyn: `LOADED`
/// loads, each with a kernel looked up and launched (which makes a lazy load real), over
/// `LOADED`.
fn memory_per_library(
    image: &[u8],
    device: cudyn::Device,
) -> Result<(Footprint, Footprint), String> {
    let per_library = |total: Footprint| Footprint {
        device: total.device / LOADED as i64,
        host: total.host / LOADED as i64,
    };
    let mut out = cudyn::DeviceBuffer::<u32>::zeroed(1).map_err(|e| e.to_string())?;
    let config = cudyn::LaunchConfig::new(1, 1);
    let before = Footprint::now(device)?;
    let mut raw = Vec::new();
    for _ in 0..LOADED {
        let library = RawLibrary::load(image).map_err(|e| e.to_string())?;
        let kernel = library.kernel("k0").map_err(|e| e.to_string())?;
        let mut pointer = out.as_raw();
        let mut args = [std::ptr::addr_of_mut!(pointer).cast::<std::ffi::c_void>()];
        crate::raw_runtime::launch(kernel, 1, 1, &mut args).map_err(|e| e.to_string())?;
        raw.push(library);
    }
    crate::raw_runtime::synchronize().map_err(|e| e.to_string())?;
    let raw_total = Footprint::now(device)?.since(before);
    drop(raw);
    let before = Footprint::now(device)?;
    let mut cudyn = Vec::new();
    for _ in 0..LOADED {
        let library = Library::loader()
            .sharing(Sharing::Never)
            .load(image)
            .map_err(|e| e.to_string())?;
        let kernel = library.kernel("k0").map_err(|e| e.to_string())?;
        // SAFETY: k0 writes one unsigned int to out, which holds one; the synchronize below waits.
        unsafe { kernel.launch(&config, (&mut out,)) }.map_err(|e| e.to_string())?;
        cudyn.push(library);
    }
    crate::raw_runtime::synchronize().map_err(|e| e.to_string())?;
    let cudyn_total = Footprint::now(device)?.since(before);
    Ok((per_library(raw_total), per_library(cudyn_total)))
}
