//! Device and host memory of 100 loads of one image: cudyn sharing it (one load, 99 lookups in its
//! registry) against the raw `cudaLibraryLoadData` and cudarc's `load_module`, each loading it
//! every time. Measured in a new process (this program run again), so that nothing else allocates
//! meanwhile, with the crate `cudyn`'s tests/footprint (as its gpu_sharing_memory test measures).
//!
//! The image is a cubin with a 16 MiB initialized `__device__` table, so that a loaded library is
//! plain to see on the device and in the process's memory; every load is followed by a launch of
//! its kernel, which makes a lazy load real. Before the baseline, each path loads and launches
//! the image once and drops it (one-time costs of each path); each path's figure is against the
//! footprint right before its first load.

use std::ffi::c_void;
use std::ptr::addr_of_mut;

use cudarc::driver::{CudaContext, PushKernelArg};
use cudarc::nvrtc::Ptx;
use cudyn::{Device, DeviceBuffer, LaunchConfig, Library, Program, Sharing};

use crate::child;
use crate::footprint::{mib, Footprint};
use crate::raw_runtime::{self, RawLibrary};
use crate::report::Row;
use crate::Bench;

/// Loads of the image by each path.
const LOADS: usize = 100;

/// A table of 16 MiB whose first byte is 1 and the rest 0: initialized, so the cubin holds it.
const TABLE: &str = r#"
__device__ unsigned char table[16 << 20] = {1};
extern "C" __global__ void first_byte(unsigned int *out) { *out = table[0]; }
"#;

/// Something loaded, kept alive until dropped.
type Loaded = Box<dyn std::any::Any>;

/// The three ways to load the image and launch its kernel once.
struct Paths {
    image: Vec<u8>,
    device: Device,
    context: std::sync::Arc<CudaContext>,
    out: DeviceBuffer<u32>,
}

impl Paths {
    /// Checks that the last launch read the table, and clears `out`.
    fn check(&mut self) -> Result<(), String> {
        let out = self.out.to_vec().map_err(|e| e.to_string())?;
        if out != [1] {
            return Err(format!("first_byte read {out:?}, not [1]"));
        }
        self.out.fill_bytes(0).map_err(|e| e.to_string())
    }

    fn cudyn(&mut self, sharing: Sharing) -> Result<Loaded, String> {
        let library = Library::loader()
            .sharing(sharing)
            .load(&self.image)
            .map_err(|e| e.to_string())?;
        let kernel = library.kernel("first_byte").map_err(|e| e.to_string())?;
        // SAFETY: first_byte writes one unsigned int to out, which holds one; `check` waits.
        unsafe { kernel.launch(&LaunchConfig::new(1, 1), (&mut self.out,)) }
            .map_err(|e| e.to_string())?;
        self.check()?;
        Ok(Box::new(library))
    }

    fn raw(&mut self) -> Result<Loaded, String> {
        let library = RawLibrary::load(&self.image).map_err(|e| e.to_string())?;
        let kernel = library.kernel("first_byte").map_err(|e| e.to_string())?;
        let mut out = self.out.as_raw();
        let mut args: [*mut c_void; 1] = [addr_of_mut!(out).cast()];
        raw_runtime::launch(kernel, 1, 1, &mut args).map_err(|e| e.to_string())?;
        self.check()?;
        Ok(Box::new(library))
    }

    fn cudarc(&mut self) -> Result<Loaded, String> {
        let module = self
            .context
            .load_module(Ptx::from_binary(self.image.clone()))
            .map_err(|e| format!("cudarc: {e:?}"))?;
        let function = module
            .load_function("first_byte")
            .map_err(|e| format!("cudarc: {e:?}"))?;
        let stream = self.context.default_stream();
        let out = self.out.as_raw();
        let mut builder = stream.launch_builder(&function);
        builder.arg(&out);
        // SAFETY: as for cudyn's launch.
        unsafe { builder.launch(cudarc::driver::LaunchConfig::for_num_elems(1)) }
            .map_err(|e| format!("cudarc: {e:?}"))?;
        self.check()?;
        Ok(Box::new(module))
    }

    /// The growth of the footprint over `LOADS` loads by `load`, and over the first alone.
    fn measure(
        &mut self,
        mut load: impl FnMut(&mut Paths) -> Result<Loaded, String>,
    ) -> Result<(Footprint, Footprint), String> {
        let baseline = Footprint::now(self.device)?;
        let mut loaded = vec![load(self)?];
        let one = Footprint::now(self.device)?.since(baseline);
        for _ in 1..LOADS {
            loaded.push(load(self)?);
        }
        let all = Footprint::now(self.device)?.since(baseline);
        drop(loaded);
        cudyn::synchronize().map_err(|e| e.to_string())?;
        Ok((one, all))
    }
}

/// A measuring process: MiB of one cudyn load, then of 100 loads by cudyn (shared), raw and
/// cudarc, device and host.
pub fn child() -> Result<Vec<f64>, String> {
    cudyn::cache::set_enabled(false);
    let device = cudyn::set_device(0).map_err(|e| e.to_string())?;
    let image = Program::new(TABLE).compile().map_err(|e| e.to_string())?;
    let mut paths = Paths {
        image: image.code().to_vec(),
        device,
        context: CudaContext::new(0).map_err(|e| format!("cudarc: {e:?}"))?,
        out: DeviceBuffer::zeroed(1).map_err(|e| e.to_string())?,
    };
    drop((paths.cudyn(Sharing::Never)?, paths.raw()?, paths.cudarc()?));
    let (one, shared) = paths.measure(|paths| paths.cudyn(Sharing::Always))?;
    // The shared library is kept loaded after its last user: unloaded now, so that the raw and
    // cudarc figures start from the same footprint as the shared one.
    cudyn::library::release_retained();
    let (_, raw) = paths.measure(Paths::raw)?;
    let (_, cudarc) = paths.measure(Paths::cudarc)?;
    Ok([one, shared, raw, cudarc]
        .iter()
        .flat_map(|footprint| [mib(footprint.device), mib(footprint.host)])
        .collect())
}

pub fn rows(bench: &Bench) -> Result<Vec<Row>, String> {
    let cache = bench.scratch.path().join("sharing-cache");
    let figures = child::spawn("sharing", &[(cudyn::cache::DIR_ENV, cache.as_os_str())])?;
    let [one_device, one_host, shared_device, shared_host, raw_device, raw_host, cudarc_device, cudarc_host] =
        figures[..]
    else {
        return Err(format!("the sharing measurement gave {figures:?}"));
    };
    let note = |one: f64| {
        format!(
            "one load {one:.1} MiB; cudyn shares identical code (Sharing::Always), raw and cudarc \
             load it every time"
        )
    };
    Ok(vec![
        Row::new(
            "sharing.device",
            format!("{LOADS} loads of a 16 MiB image: device"),
            "MiB",
        )
        .figures(Some(raw_device), Some(shared_device), Some(cudarc_device))
        .note(note(one_device)),
        Row::new(
            "sharing.host",
            format!("{LOADS} loads of a 16 MiB image: host RSS"),
            "MiB",
        )
        .figures(Some(raw_host), Some(shared_host), Some(cudarc_host))
        .note(note(one_host)),
    ])
}
